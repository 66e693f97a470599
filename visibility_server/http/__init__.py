"""The visibility server's HTTP surface (docs/visibility-api.md): `create_app`."""

from __future__ import annotations

from scheduler.runtime.workload_records import NotPending, NotPendingReason
from visibility_server.http.app import create_app
from visibility_server.http.health import HealthCheck
from visibility_server.http.longpoll import ChangeNotifier
from visibility_server.http.position import NotPendingLookup

__all__ = [
    "ChangeNotifier",
    "HealthCheck",
    "NotPending",
    "NotPendingLookup",
    "NotPendingReason",
    "create_app",
]
