"""Effective pod requests (docs/scheduling.md#quantities) and the requests-over-limits check.

These are the numbers quota is charged with, so they follow Kubernetes' own
definition of a pod's request exactly, including sidecar (restartable init)
containers, and are computed in exact scheduler integers.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from scheduler.api.pod import Container, PodSpec
from scheduler.api.quantity import Quantity, scheduler_value

__all__ = ["container_requests", "limits_exceeded", "pod_requests"]


def container_requests(container: Container) -> dict[str, int]:
    """Per-resource request of one container; a limit stands in for a missing request."""
    resources = container.resources
    merged: dict[str, Quantity] = dict(resources.limits)
    merged.update(resources.requests)
    return {name: scheduler_value(name, quantity) for name, quantity in merged.items()}


def _add(target: dict[str, int], extra: Mapping[str, int]) -> None:
    for name, value in extra.items():
        target[name] = target.get(name, 0) + value


def _max_into(target: dict[str, int], other: Mapping[str, int]) -> None:
    for name, value in other.items():
        if value > target.get(name, 0):
            target[name] = value


def _excluded(name: str, prefixes: Iterable[str]) -> bool:
    return any(name.startswith(prefix) for prefix in prefixes)


def pod_requests(spec: PodSpec, exclude_prefixes: Sequence[str] = ()) -> dict[str, int]:
    """Kubernetes' effective request of one pod, in scheduler values, sorted by resource.

    max(regular containers + sidecars, max over plain init containers of its request +
    the sidecars declared before it), plus `overhead`; resources whose name starts with
    an excluded prefix are dropped at the end.
    """
    running: dict[str, int] = {}
    for container in spec.containers:
        _add(running, container_requests(container))

    sidecars_so_far: dict[str, int] = {}
    init_peak: dict[str, int] = {}
    for container in spec.init_containers:
        requests = container_requests(container)
        if container.is_sidecar:
            _add(sidecars_so_far, requests)
            # A sidecar keeps running next to the later init containers and the app.
            _add(running, requests)
            _max_into(init_peak, sidecars_so_far)
        else:
            during_init = dict(sidecars_so_far)
            _add(during_init, requests)
            _max_into(init_peak, during_init)

    total = dict(running)
    _max_into(total, init_peak)
    _add(total, {name: scheduler_value(name, q) for name, q in spec.overhead.items()})
    return {name: total[name] for name in sorted(total) if not _excluded(name, exclude_prefixes)}


def limits_exceeded(spec: PodSpec) -> list[str]:
    """One line per container resource whose request exceeds its limit, in spec order.

    Used for the nomination message `resources validation failed: {details}`
    (docs/scheduling.md#condition-messages), joined with "; ".
    """
    problems: list[str] = []
    containers = [("init container", c) for c in spec.init_containers]
    containers += [("container", c) for c in spec.containers]
    for label, container in containers:
        limits = container.resources.limits
        for name in sorted(container.resources.requests):
            request = container.resources.requests[name]
            limit = limits.get(name)
            if limit is not None and request > limit:
                problems.append(
                    f'{label} "{container.name}": {name} request ({request}) '
                    f"exceeds limit ({limit})"
                )
    return problems
