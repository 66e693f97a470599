"""What the admission webhooks do to an apps/v1 Deployment when the `deployment`
integration is on (docs/cluster.md#deployments): the marks and rules every
pod-suspending parent shares (`scheduler.api.parent_admission`), and nothing more.

Kueue does not queue a Deployment as one workload: each of its Pods is one, through
the Pod path, so the Deployment's webhook only marks its pod template, and its rules
are those of its queue and priority labels.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from scheduler.api.errors import FieldError
from scheduler.api.integrations import DEPLOYMENT_FRAMEWORK
from scheduler.api.parent_admission import (
    PodParent,
    label_update_errors,
    names_queue,
    queue_name_errors,
)

DEPLOYMENT: Final = PodParent("apps/v1", "Deployment", DEPLOYMENT_FRAMEWORK)

__all__ = ["DEPLOYMENT", "deployment_errors", "deployment_update_errors", "names_queue"]


def deployment_errors(deployment: Mapping[str, Any]) -> list[FieldError]:
    return queue_name_errors(deployment)


def deployment_update_errors(old: Mapping[str, Any], new: Mapping[str, Any]) -> list[FieldError]:
    """The rules of replacing Deployment `old` by `new`."""
    return label_update_errors(old, new)
