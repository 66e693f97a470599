"""A Pod's role hash, as Kueue v0.19.2 names the pod sets of a pod group
(docs/cluster.md#pod-groups).

Pods of a group that would be admitted alike (same containers' requests and ports,
node selector, affinity, tolerations, runtime class, priority, spread constraints,
overhead, resource claims, pod-level requests) share a role, and each role is one pod
set of the group's Workload, named by the first 8 hex digits of a SHA-256 over the
JSON of that shape. The webhook stores it on every Pod it manages in the annotation
`kueue.x-k8s.io/role-hash`, so the names are Kueue's own: the JSON is written as Go's
`encoding/json` writes it (map keys sorted, compact, `<`, `>`, `&` and the two line
separators escaped), over the Pod as the API server sent it (its fields already in
the order of their Go structs, its quantities canonical, absent values `null`).
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from typing import Any, Final

from scheduler.api.go_json import go_json

ROLE_HASH_ANNOTATION: Final = "kueue.x-k8s.io/role-hash"

# The fields of a pod spec that make its shape, each encoded as it stands (None: null).
_SHAPE_FIELDS: Final = (
    "nodeSelector",
    "affinity",
    "tolerations",
    "runtimeClassName",
    "priority",
    "topologySpreadConstraints",
    "overhead",
    "resourceClaims",
)


def _containers_shape(containers: object) -> list[dict[str, Any]] | None:
    """Each container's requests and ports; None (Go's nil slice) for none."""
    if not isinstance(containers, Sequence) or not containers:
        return None
    shape: list[dict[str, Any]] = []
    for container in containers:
        c = container if isinstance(container, Mapping) else {}
        resources = c.get("resources")
        requests = resources.get("requests") if isinstance(resources, Mapping) else None
        shape.append({"ports": c.get("ports"), "resources": {"requests": _sorted(requests)}})
    return shape


def spec_shape(spec: Mapping[str, Any]) -> dict[str, Any]:
    """What of a pod spec decides its role."""
    shape: dict[str, Any] = {
        "initContainers": _containers_shape(spec.get("initContainers")),
        "containers": _containers_shape(spec.get("containers")),
    }
    for field in _SHAPE_FIELDS:
        shape[field] = spec.get(field)
    # Go maps (the node selector, the resource lists) are written sorted; the server
    # sends them so, but a hand-made dict may not be.
    shape["nodeSelector"] = _sorted(shape["nodeSelector"])
    shape["overhead"] = _sorted(shape["overhead"])
    resources = spec.get("resources")
    if isinstance(resources, Mapping):
        # Pod-level requests count only when the pod sets them (Kueue keeps the hashes
        # of pods without them as they were).
        shape["resources"] = _sorted(resources.get("requests"))
    return shape


def _sorted(value: Any) -> Any:
    """A Go map's keys in Go's order (byte order); anything else as it is."""
    if isinstance(value, Mapping):
        return {k: value[k] for k in sorted(value)}
    return value


def role_hash(spec: Mapping[str, Any]) -> str:
    """Kueue's role hash of a pod spec (the JSON dict the API server sent). The maps
    Kueue builds (the shape, each container's) are written with sorted keys; the
    structs in them (affinity, tolerations, ports, ...) keep the server's field order,
    which is their Go declaration order."""
    shape = spec_shape(spec)
    payload = go_json({"spec": {key: shape[key] for key in sorted(shape)}})
    return hashlib.sha256(payload.encode()).hexdigest()[:8]
