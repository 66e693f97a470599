"""The delegated-auth metric (cluster.md §4.3): `queuescope_delegated_auth_permitted`.

One gauge per `resource` (`subjectaccessreviews`, `tokenreviews`): 1 when our identity may
create that review, 0 when kube-apiserver said it may not. The self-check sets it every
5 minutes, and every review call updates it at once (a 403 drops it to 0, a success raises
it to 1), so a deleted `system:auth-delegator` binding shows within one request.

Registered once per registry, as `visibility_server.http.metrics` does.
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass, field
from typing import Final

from prometheus_client import CollectorRegistry, Gauge

PERMITTED_METRIC: Final = "queuescope_delegated_auth_permitted"
SUBJECT_ACCESS_REVIEWS: Final = "subjectaccessreviews"
TOKEN_REVIEWS: Final = "tokenreviews"


@dataclass(slots=True)
class DelegatedAuthMetrics:
    permitted: Gauge
    _known: dict[str, bool] = field(default_factory=dict)

    def set_permitted(self, resource: str, permitted: bool) -> bool:
        """Record what kube-apiserver said; True when this changes the known value
        (unknown counts as a change), so callers log transitions and not every call."""
        changed = self._known.get(resource) is not permitted
        self._known[resource] = permitted
        self.permitted.labels(resource).set(1 if permitted else 0)
        return changed

    def known(self, resource: str) -> bool | None:
        return self._known.get(resource)


_PER_REGISTRY: weakref.WeakKeyDictionary[CollectorRegistry, DelegatedAuthMetrics] = (
    weakref.WeakKeyDictionary()
)


def delegated_auth_metrics(registry: CollectorRegistry) -> DelegatedAuthMetrics:
    existing = _PER_REGISTRY.get(registry)
    if existing is not None:
        return existing
    metrics = DelegatedAuthMetrics(
        Gauge(
            PERMITTED_METRIC,
            "1 when queuescope's identity may create the delegated-auth review named by "
            "`resource` (system:auth-delegator), 0 when kube-apiserver refused it.",
            ("resource",),
            registry=registry,
        )
    )
    _PER_REGISTRY[registry] = metrics
    return metrics


__all__ = [
    "PERMITTED_METRIC",
    "SUBJECT_ACCESS_REVIEWS",
    "TOKEN_REVIEWS",
    "DelegatedAuthMetrics",
    "delegated_auth_metrics",
]
