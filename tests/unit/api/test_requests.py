"""Effective pod requests (docs/scheduling.md#quantities) and the requests-over-limits details."""

from __future__ import annotations

from typing import Any

from scheduler.api import PodSpec, limits_exceeded, pod_requests


def container(name: str, requests: dict[str, Any] | None = None, **extra: Any) -> dict[str, Any]:
    resources: dict[str, Any] = {}
    if requests is not None:
        resources["requests"] = requests
    if "limits" in extra:
        resources["limits"] = extra.pop("limits")
    return {"name": name, "resources": resources, **extra}


def spec(**fields: Any) -> PodSpec:
    return PodSpec.model_validate(fields, by_alias=True, by_name=False)


def test_regular_containers_add_up() -> None:
    pod = spec(
        containers=[container("a", {"cpu": "1", "memory": "1Gi"}), container("b", {"cpu": "500m"})]
    )
    assert pod_requests(pod) == {"cpu": 1500, "memory": 1024**3}


def test_cpu_is_milli_and_rounds_up() -> None:
    pod = spec(containers=[container("a", {"cpu": "0.0001", "memory": "0.1"})])
    assert pod_requests(pod) == {"cpu": 1, "memory": 1}


def test_init_container_peak_wins_when_larger() -> None:
    pod = spec(
        initContainers=[container("init", {"cpu": "4"})],
        containers=[container("app", {"cpu": "1", "memory": "1Gi"})],
    )
    assert pod_requests(pod) == {"cpu": 4000, "memory": 1024**3}


def test_sidecars_run_alongside_everything_after_them() -> None:
    # docs/scheduling.md#quantities worked case: max(app 1 + sidecars 0.5+0.25, init-2 2 + sidecar-1
    # 0.5)
    pod = spec(
        initContainers=[
            container("sidecar-1", {"cpu": "500m"}, restartPolicy="Always"),
            container("init-2", {"cpu": "2"}),
            container("sidecar-2", {"cpu": "250m"}, restartPolicy="Always"),
        ],
        containers=[container("app", {"cpu": "1"})],
    )
    assert pod_requests(pod) == {"cpu": 2500}
    smaller_init = spec(
        initContainers=[
            container("sidecar-1", {"cpu": "500m"}, restartPolicy="Always"),
            container("init-2", {"cpu": "1"}),
            container("sidecar-2", {"cpu": "250m"}, restartPolicy="Always"),
        ],
        containers=[container("app", {"cpu": "1"})],
    )
    # max(1 + 0.5 + 0.25 = 1.75, 1 + 0.5 = 1.5)
    assert pod_requests(smaller_init) == {"cpu": 1750}


def test_sidecar_declared_after_an_init_container_does_not_count_for_it() -> None:
    pod = spec(
        initContainers=[
            container("init", {"cpu": "3"}),
            container("sidecar", {"cpu": "1"}, restartPolicy="Always"),
        ],
        containers=[container("app", {"cpu": "1"})],
    )
    assert pod_requests(pod) == {"cpu": 3000}


def test_overhead_is_added_after_the_max() -> None:
    pod = spec(
        initContainers=[container("init", {"cpu": "2"})],
        containers=[container("app", {"cpu": "1"})],
        overhead={"cpu": "100m", "memory": "64Mi"},
    )
    assert pod_requests(pod) == {"cpu": 2100, "memory": 64 * 1024**2}


def test_limit_stands_in_for_a_missing_request() -> None:
    pod = spec(
        containers=[
            container(
                "a", {"cpu": "1"}, limits={"cpu": "2", "memory": "1Gi", "example.com/gpu": "1"}
            )
        ]
    )
    assert pod_requests(pod) == {"cpu": 1000, "example.com/gpu": 1, "memory": 1024**3}


def test_excluded_prefixes_are_dropped() -> None:
    pod = spec(
        containers=[
            container("a", {"cpu": "1", "example.com/nic": "2", "ephemeral-storage": "1Gi"})
        ]
    )
    assert pod_requests(pod, ["example.com/", "ephemeral"]) == {"cpu": 1000}


def test_no_requests() -> None:
    assert pod_requests(spec(containers=[{"name": "a"}])) == {}


def test_limits_exceeded_describes_each_problem() -> None:
    pod = spec(
        initContainers=[container("init", {"memory": "2Gi"}, limits={"memory": "1Gi"})],
        containers=[
            container("c1", {"cpu": "2", "memory": "1Gi"}, limits={"cpu": "1", "memory": "1Gi"}),
            container("c2", {"cpu": "1"}),
        ],
    )
    assert limits_exceeded(pod) == [
        'init container "init": memory request (2Gi) exceeds limit (1Gi)',
        'container "c1": cpu request (2) exceeds limit (1)',
    ]
    assert (
        limits_exceeded(spec(containers=[container("ok", {"cpu": "1"}, limits={"cpu": "1"})])) == []
    )
