"""The delegated-auth metric (docs/cluster.md#self-check): `queuescope_delegated_auth_permitted`.

One gauge per `resource`: `subjectaccessreviews` and `tokenreviews` are 1 when the identity
that makes those calls (the authorization and the authentication client) may create that
review; `configmaps` is 1 when the authentication client may get, list and watch
`kube-system/extension-apiserver-authentication`; 0 when kube-apiserver said it may not.
The self-check sets them every 5 minutes, and every review call updates its gauge at once
(a 403 drops it to 0, a success raises it to 1), so a deleted `system:auth-delegator`
binding shows within one request.

Registered once per registry (`visibility_server/metrics_registry.py`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Final

from prometheus_client import CollectorRegistry, Gauge

from visibility_server.metrics_registry import OncePerRegistry

PERMITTED_METRIC: Final = "queuescope_delegated_auth_permitted"
SUBJECT_ACCESS_REVIEWS: Final = "subjectaccessreviews"
TOKEN_REVIEWS: Final = "tokenreviews"
CONFIGMAPS: Final = "configmaps"


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


def _make_delegated_auth_metrics(registry: CollectorRegistry) -> DelegatedAuthMetrics:
    return DelegatedAuthMetrics(
        Gauge(
            PERMITTED_METRIC,
            "1 when the queuescope client that makes the delegated-auth calls named by "
            "`resource` may make them (subjectaccessreviews, tokenreviews: "
            "system:auth-delegator; configmaps: extension-apiserver-authentication-reader), "
            "0 when kube-apiserver refused it.",
            ("resource",),
            registry=registry,
        )
    )


delegated_auth_metrics = OncePerRegistry(_make_delegated_auth_metrics)


__all__ = [
    "CONFIGMAPS",
    "PERMITTED_METRIC",
    "SUBJECT_ACCESS_REVIEWS",
    "TOKEN_REVIEWS",
    "DelegatedAuthMetrics",
    "delegated_auth_metrics",
]
