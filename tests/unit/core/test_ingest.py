"""API objects -> core records (scheduler.core.ingest): fields, defaults, updates, deletes."""

from __future__ import annotations

from typing import Any

import pytest

from scheduler.api.decode import Decoded, decode_object
from scheduler.core.config import SchedulerConfig
from scheduler.core.ingest import (
    apply_object,
    cluster_queue_info,
    cohort_info,
    delete_object,
    flavor_info,
    local_queue_info,
    scheduler_config,
    workload_state,
)
from scheduler.core.quota import ResourceQuota
from scheduler.sim.runner import Simulation
from tests.unit.core.builders import (
    SECOND,
    START,
    Cluster,
    Json,
    admitted_status,
    basic_cluster,
    cluster_queue,
    cohort,
    flavor,
    group,
    local_queue,
    namespace,
    pod_set,
    rfc3339,
    simple_cq,
    workload,
)

NS = "team-a"
CPU = "cpu"
MEM = "memory"


def decode(doc: Json) -> Any:
    return decode_object(doc, source="test", index=0)


# --------------------------------------------------------------------------- ClusterQueue


def test_cluster_queue_defaults() -> None:
    info = cluster_queue_info(decode(simple_cq("cq-a", 4, no_selector=True)))
    assert info.name == "cq-a"
    assert info.cohort is None
    assert info.strategy == "BestEffortFIFO"
    assert info.namespace_selector is None
    assert (info.when_can_borrow, info.when_can_preempt) == ("Borrow", "TryNextFlavor")
    p = info.preemption
    assert (p.within_cluster_queue, p.reclaim_within_cohort, p.borrow_within_cohort) == (
        "Never",
        "Never",
        "Never",
    )
    assert p.max_priority_threshold is None
    assert info.stop_policy == "None"
    assert info.weight == 1.0
    assert info.admission_checks == ()
    assert not info.covers_pods


def test_cluster_queue_fields_and_quotas_in_scheduler_units() -> None:
    doc = cluster_queue(
        "cq-a",
        [
            group([CPU, MEM], {"f0": {CPU: ("1.5", "500m", "1"), MEM: ("1Gi", None, "512Mi")}}),
            group(["pods"], {"p": {"pods": 10}}),
        ],
        cohort="co",
        strategy="StrictFIFO",
        selector={"matchLabels": {"team": "a"}},
        when_can_borrow="TryNextFlavor",
        when_can_preempt="Preempt",
        preemption={
            "withinClusterQueue": "LowerPriority",
            "reclaimWithinCohort": "Any",
            "borrowWithinCohort": {"policy": "LowerPriority", "maxPriorityThreshold": 5},
        },
        stop_policy="Hold",
    )
    info = cluster_queue_info(decode(doc))
    assert info.cohort == "co"
    assert info.strategy == "StrictFIFO"
    assert info.namespace_selector == {"matchLabels": {"team": "a"}}
    assert (info.when_can_borrow, info.when_can_preempt) == ("TryNextFlavor", "Preempt")
    assert info.preemption.within_cluster_queue == "LowerPriority"
    assert info.preemption.reclaim_within_cohort == "Any"
    assert info.preemption.borrow_within_cohort == "LowerPriority"
    assert info.preemption.max_priority_threshold == 5
    assert info.stop_policy == "Hold"
    assert [(g.covered, g.flavors) for g in info.groups] == [
        ((CPU, MEM), ("f0",)),
        (("pods",), ("p",)),
    ]
    assert info.quotas == {
        ("f0", CPU): ResourceQuota(1500, 500, 1000),
        ("f0", MEM): ResourceQuota(2**30, None, 2**29),
        ("p", "pods"): ResourceQuota(10),
    }
    assert info.covers_pods
    assert info.flavor_names() == ["f0", "p"]


def test_cluster_queue_admission_checks_are_recorded() -> None:
    info = cluster_queue_info(decode(simple_cq("cq-a", 1, admission_checks=["ac-1", "ac-2"])))
    assert info.admission_checks == ("ac-1", "ac-2")


# --------------------------------------------------------------------------- others


@pytest.mark.parametrize(
    "doc",
    [
        cohort("team", "org", [group([CPU], {"f0": {CPU: (2, 1, 1)}})]),
        {
            "apiVersion": "kueue.x-k8s.io/v1alpha1",
            "kind": "Cohort",
            "metadata": {"name": "team"},
            "spec": {
                "parent": "org",
                "resourceGroups": [group([CPU], {"f0": {CPU: (2, 1, 1)}})],
            },
        },
    ],
)
def test_cohort_parent_from_either_version(doc: Json) -> None:
    info = cohort_info(decode(doc))
    assert (info.name, info.parent) == ("team", "org")
    assert info.quotas == {("f0", CPU): ResourceQuota(2000, 1000, 1000)}
    assert info.weight == 1.0


def test_root_cohort_has_no_parent() -> None:
    assert cohort_info(decode(cohort("org"))).parent is None


def test_flavor_fields() -> None:
    info = flavor_info(
        decode(
            flavor(
                "f0",
                labels={"zone": "a"},
                taints=[{"key": "k", "value": "v", "effect": "NoSchedule"}],
                tolerations=[{"key": "k", "operator": "Exists"}],
            )
        )
    )
    assert info.node_labels == {"zone": "a"}
    assert [t["key"] for t in info.taints] == ["k"]
    assert info.taints[0]["effect"] == "NoSchedule"
    assert info.tolerations[0]["operator"] == "Exists"


def test_local_queue_fields_and_default_namespace() -> None:
    doc = local_queue(NS, "lq", "cq-a", stop_policy="HoldAndDrain")
    del doc["metadata"]["namespace"]
    info = local_queue_info(decode(doc))
    assert (info.key, info.cluster_queue, info.stop_policy) == (
        "default/lq",
        "cq-a",
        "HoldAndDrain",
    )


def test_scheduler_config_defaults() -> None:
    assert scheduler_config(None) == SchedulerConfig()


# --------------------------------------------------------------------------- Workload


def test_workload_state_fields() -> None:
    doc = workload(
        NS,
        "w",
        "lq",
        pod_sets=[
            pod_set(
                {CPU: "500m", MEM: "1Gi"},
                name="main",
                count=4,
                min_count=2,
                tolerations=[{"key": "k", "operator": "Exists"}],
            ),
            pod_set({CPU: "2"}, name="extra", limits={CPU: "1"}),
        ],
        priority=7,
        created=3,
        labels={"kueue.x-k8s.io/job-uid": "job-1"},
    )
    wl = workload_state(decode(doc), SchedulerConfig(), default_time=0)
    assert (wl.key, wl.uid, wl.queue_name, wl.priority, wl.active) == (
        f"{NS}/w",
        f"uid-{NS}-w",
        "lq",
        7,
        True,
    )
    assert wl.creation == START + 3 * SECOND
    assert wl.job_uid == "job-1"
    main, extra = wl.pod_sets
    assert (main.name, main.count, main.min_count) == ("main", 4, 2)
    assert main.per_pod == {CPU: 500, MEM: 2**30}
    [toleration] = main.tolerations
    assert (toleration["key"], toleration["operator"]) == ("k", "Exists")
    assert main.limits_exceeded == []
    assert extra.per_pod == {CPU: 2000}
    assert extra.limits_exceeded and CPU in extra.limits_exceeded[0]
    assert wl.admission is None and not wl.holds_quota and not wl.finished


def test_workload_defaults() -> None:
    doc = workload(NS, "w", None, {CPU: "1"})
    del doc["metadata"]["creationTimestamp"]
    del doc["metadata"]["uid"]
    wl = workload_state(decode(doc), SchedulerConfig(), default_time=START + 42)
    assert wl.creation == START + 42
    assert wl.uid == ""
    assert wl.priority == 0
    assert wl.queue_name == ""
    assert wl.job_uid == "UNKNOWN"


def test_admitted_workload_input() -> None:
    status = admitted_status("cq-a", [("main", {CPU: "f0"}, {CPU: "3"}, 3)])
    status["admission"]["podSetAssignments"][0].pop("count")
    status["reclaimablePods"] = [{"name": "main", "count": 1}]
    doc = workload(NS, "w", "lq", {CPU: "1"}, count=3, status=status)
    wl = workload_state(decode(doc), SchedulerConfig(), default_time=0)
    assert wl.holds_quota and wl.is_admitted
    assert wl.admission is not None
    [psa] = wl.admission.pod_sets
    # a missing count defaults to the pod set's count
    assert (psa.name, psa.flavors, psa.resource_usage, psa.count) == (
        "main",
        {CPU: "f0"},
        {CPU: 3000},
        3,
    )
    assert wl.reclaimable == {"main": 1}


def test_excluded_resource_prefixes_drop_requests() -> None:
    config = SchedulerConfig(exclude_resource_prefixes=("example.com/",))
    doc = workload(NS, "w", "lq", {CPU: "1", "example.com/nic": "2"})
    wl = workload_state(decode(doc), config, default_time=0)
    assert wl.pod_sets[0].per_pod == {CPU: 1000}


# --------------------------------------------------------------------------- apply


def test_update_without_status_keeps_the_status_written_by_the_core() -> None:
    c = basic_cluster(4)
    c.apply(workload(NS, "w", "lq-a", {CPU: "1"}))
    c.cycle()
    before = c.status(f"{NS}/w")
    c.apply(workload(NS, "w", "lq-a", {CPU: "1"}, labels={"x": "y"}))
    assert c.status(f"{NS}/w") == before
    assert c.usage("cq-a", ("default", CPU)) == 1000
    assert c.wl(f"{NS}/w").labels == {"x": "y"}


def test_update_with_status_replaces_it() -> None:
    c = basic_cluster(4)
    c.apply(workload(NS, "w", "lq-a", {CPU: "1"}))
    c.apply(
        workload(
            NS,
            "w",
            "lq-a",
            {CPU: "1"},
            status=admitted_status("cq-a", [("main", {CPU: "default"}, {CPU: "1"}, 1)]),
        )
    )
    assert c.admitted(f"{NS}/w")
    assert c.usage("cq-a", ("default", CPU)) == 1000
    assert c.pending("cq-a") == []


def test_admitted_input_on_a_resource_without_quota_is_counted() -> None:
    c = basic_cluster(4)
    doc = workload(
        NS,
        "w",
        "lq-a",
        {CPU: "1", MEM: "1Gi"},
        status=admitted_status(
            "cq-a", [("main", {CPU: "default", MEM: "other"}, {CPU: "1", MEM: "1Gi"}, 1)]
        ),
    )
    c.apply(doc)
    assert c.usage("cq-a", ("other", MEM)) == 2**30
    status = c.cq_status("cq-a")
    assert status["reservingWorkloads"] == 1
    assert status["flavorsReservation"] == [
        {"name": "default", "resources": [{"name": CPU, "total": "1", "borrowed": "0"}]}
    ]


def test_namespace_labels_are_recorded() -> None:
    c = Cluster()
    apply_object(c.s, decode(namespace(NS, {"team": "a"})))
    assert c.s.namespace_labels(NS) == {"team": "a"}
    assert c.s.namespace_labels("undeclared") == {}


# --------------------------------------------------------------------------- delete


def test_delete_object_for_every_kind() -> None:
    c = basic_cluster(4)
    c.apply(cohort("co"), workload(NS, "w", "lq-a", {CPU: "1"}))
    assert not delete_object(c.s, "Workload", NS, "nope")
    assert delete_object(c.s, "Workload", NS, "w")
    assert delete_object(c.s, "LocalQueue", NS, "lq-a")
    assert not delete_object(c.s, "LocalQueue", NS, "lq-a")
    assert delete_object(c.s, "ClusterQueue", None, "cq-a")
    assert not delete_object(c.s, "ClusterQueue", None, "cq-a")
    assert delete_object(c.s, "Cohort", None, "co")
    assert delete_object(c.s, "ResourceFlavor", None, "default")
    assert not delete_object(c.s, "ResourceFlavor", None, "default")
    assert delete_object(c.s, "Namespace", None, NS)
    assert not delete_object(c.s, "Unknown", None, "x")
    assert (
        not c.s.objects.workloads
        and not c.s.objects.local_queues
        and not c.s.objects.cluster_queues
    )


def test_delete_without_namespace_means_default() -> None:
    c = Cluster()
    c.apply(flavor("default"), simple_cq("cq-a", 4), local_queue("default", "lq", "cq-a"))
    assert delete_object(c.s, "LocalQueue", None, "lq")


def test_deleting_a_flavor_makes_its_cluster_queues_inactive() -> None:
    c = basic_cluster(4)
    delete_object(c.s, "ResourceFlavor", None, "default")
    assert c.s.inactive_reasons("cq-a") == ["FlavorNotFound"]
    c.apply(workload(NS, "w", "lq-a", {CPU: "1"}))
    assert not c.cycle().ran


# --------------------------------------------------------- docs/scheduling.md#invalid-input updates


def _scenario(*events: Json) -> Json:
    return {
        "apiVersion": "simulation.queuescope.io/v1alpha1",
        "kind": "Scenario",
        "metadata": {"name": "s"},
        "spec": {"startTime": "2026-01-01T00:00:00Z", "untilIdle": True, "events": list(events)},
    }


def _run(*docs: Json) -> Any:
    decoded = [
        Decoded(obj=decode_object(d, source="test", index=i), source="test", index=i)
        for i, d in enumerate(docs)
    ]
    return Simulation(decoded).run()


def test_local_queue_cluster_queue_is_immutable() -> None:
    base = [
        namespace(NS),
        flavor("default"),
        simple_cq("cq-a", 1),
        simple_cq("cq-b", 4),
        local_queue(NS, "lq", "cq-a"),
        workload(NS, "w", "lq", {CPU: "2"}),
    ]
    result = _run(*base, _scenario({"at": "1m", "apply": local_queue(NS, "lq", "cq-b")}))
    s = result.scheduler
    assert s.objects.local_queues[f"{NS}/lq"].cluster_queue == "cq-a"
    assert not s.objects.workloads[f"{NS}/w"].holds_quota


def test_pod_sets_of_a_reserved_workload_are_immutable() -> None:
    base = [
        namespace(NS),
        flavor("default"),
        simple_cq("cq-a", 4),
        local_queue(NS, "lq", "cq-a"),
        workload(NS, "w", "lq", {CPU: "1"}),
    ]
    changed = workload(NS, "w", "lq", {CPU: "1"}, count=3)
    result = _run(*base, _scenario({"at": "1m", "apply": changed}))
    wl = result.scheduler.objects.workloads[f"{NS}/w"]
    assert wl.pod_sets[0].count == 1
    assert wl.admission is not None and wl.admission.pod_sets[0].count == 1
    assert result.scheduler.quota.usage("cq-a", ("default", CPU)) == 1000


def test_simulation_fills_uid_and_creation_time() -> None:
    w = workload(NS, "w", "lq", {CPU: "1"})
    del w["metadata"]["uid"]
    del w["metadata"]["creationTimestamp"]
    result = _run(
        namespace(NS), flavor("default"), simple_cq("cq-a", 4), local_queue(NS, "lq", "cq-a"), w
    )
    wl = result.scheduler.objects.workloads[f"{NS}/w"]
    assert wl.uid  # deterministic UUID from namespace/name
    assert wl.creation == START + 4 * 1000  # document index 4, in milliseconds
    assert wl.holds_quota
    assert rfc3339(wl.creation).startswith("2026-01-01T00:00:00.004")


def test_update_without_status_keeps_accumulated_execution_time() -> None:
    c = basic_cluster(4)
    doc = workload(
        NS,
        "w",
        "lq-a",
        {CPU: "1"},
        status=admitted_status("cq-a", [("main", {CPU: "default"}, {CPU: "1"}, 1)]),
    )
    doc["spec"]["maximumExecutionTimeSeconds"] = 100
    doc["status"]["accumulatedPastExexcutionTimeSeconds"] = 60
    c.apply(doc)
    c.advance(10)
    update = workload(NS, "w", "lq-a", {CPU: "1"}, labels={"touched": "yes"})
    update["spec"]["maximumExecutionTimeSeconds"] = 100
    c.apply(update)
    c.advance(31)  # 41 s after admission: 60 + 41 > 100
    evicted = c.cond(f"{NS}/w", "Evicted")
    assert evicted is not None
    assert evicted[:2] == ("True", "DeactivatedDueToMaximumExecutionTimeExceeded")
    assert not c.admitted(f"{NS}/w")


def test_maximum_execution_time_counts_the_accumulated_time() -> None:
    c = basic_cluster(4)
    doc = workload(
        NS,
        "w",
        "lq-a",
        {CPU: "1"},
        status=admitted_status("cq-a", [("main", {CPU: "default"}, {CPU: "1"}, 1)]),
    )
    doc["spec"]["maximumExecutionTimeSeconds"] = 100
    doc["status"]["accumulatedPastExexcutionTimeSeconds"] = 60
    c.apply(doc)
    c.advance(39)
    assert c.admitted(f"{NS}/w")
    c.advance(2)
    assert c.cond(f"{NS}/w", "Evicted") == (
        "True",
        "DeactivatedDueToMaximumExecutionTimeExceeded",
        "The workload is deactivated due to exceeding the maximum execution time",
    )
