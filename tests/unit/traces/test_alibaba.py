"""Alibaba GPU v2023 pods and nodes read into trace jobs and capacity."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from scheduler.traces.alibaba import (
    GPU_MODEL_LABEL,
    ORIGIN,
    AlibabaOptions,
    read_nodes,
    read_pods,
)
from scheduler.traces.records import QOS_LABEL, Flavor, PodGroup, Skips

MIB = 1024 * 1024
HEAD = (
    "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,"
    "creation_time,deletion_time,scheduled_time\n"
)
PODS = HEAD + (
    "openb-pod-0000,12000,16384,1,1000,,LS,Running,0,12537496,0\n"
    "openb-pod-0001,6000,12288,1,460,,BE,Running,100,500,160\n"
    "openb-pod-0002,8000,4096,2,1000,V100M16|V100M32,Guaranteed,Succeeded,200,900,200\n"
    "openb-pod-0003,4000,1024,0,0,,Burstable,Failed,300,400,310\n"
    "openb-pod-0004,11908,47104,1,1000,,BE,Pending,400,500,\n"
    "openb-pod-0005,1000,1024,0,0,,BE,Failed,500,500,500\n"
)
NODES = (
    "sn,cpu_milli,memory_mib,gpu,model\n"
    "n0,32000,262144,0,\n"
    "n1,96000,786432,8,V100M16\n"
    "n2,96000,786432,8,V100M16\n"
    "n3,64000,524288,2,T4\n"
)


def test_pods_map_to_jobs() -> None:
    trace = read_pods(PODS.splitlines(), "p.csv", AlibabaOptions("ali"))
    assert trace.origin == ORIGIN
    jobs = {j.name: j for j in trace.jobs}
    assert list(jobs) == ["openb-pod-0000", "openb-pod-0001", "openb-pod-0002", "openb-pod-0003"]
    whole = jobs["openb-pod-0000"]
    assert (whole.submit, whole.runtime) == (0, 12537496)
    assert whole.pods == (
        PodGroup(1, {"cpu": 12000, "memory": 16384 * MIB, "alibaba.com/gpu-milli": 1000}),
    )
    assert (whole.tenant, whole.queue, whole.priority_class) == ("ali", "ls", "qos-ls")
    assert whole.labels == {QOS_LABEL: "ls"}
    shared = jobs["openb-pod-0001"]
    assert shared.runtime == 340  # deletion - scheduled, not deletion - creation
    assert shared.pods[0].requests["alibaba.com/gpu-milli"] == 460
    two = jobs["openb-pod-0002"]
    assert two.pods[0].requests["alibaba.com/gpu-milli"] == 2000
    assert two.node_labels == {GPU_MODEL_LABEL: ("V100M16", "V100M32")}
    assert "alibaba.com/gpu-milli" not in jobs["openb-pod-0003"].pods[0].requests
    assert dict(trace.skips.reasons) == {
        "never scheduled": 1,
        "never ran: deleted when scheduled": 1,
    }


def test_whole_gpus_round_a_shared_gpu_up() -> None:
    trace = read_pods(PODS.splitlines(), "p.csv", AlibabaOptions("ali", gpu_unit="gpu"))
    requests = [j.pods[0].requests.get("nvidia.com/gpu") for j in trace.jobs]
    assert requests == [1, 1, 2, None]


def test_nodes_give_a_flavor_per_model_cpu_only_first() -> None:
    skips = Skips()
    capacity = read_nodes(NODES.splitlines(), "n.csv", AlibabaOptions("ali"), skips)
    assert [f.name for f in capacity.flavors] == ["cpu-only", "t4", "v100m16"]
    assert capacity.flavors[2] == Flavor(
        "v100m16",
        {"cpu": 192000, "memory": 2 * 786432 * MIB, "alibaba.com/gpu-milli": 16000},
        {GPU_MODEL_LABEL: "V100M16"},
    )
    assert capacity.flavors[0].quota["alibaba.com/gpu-milli"] == 0
    assert capacity.priorities == {
        "qos-guaranteed": 1000,
        "qos-ls": 1000,
        "qos-burstable": 500,
        "qos-be": 0,
    }
    assert capacity.preempt_lower_priority
    assert skips.total == 0


def test_malformed_rows_name_file_and_line() -> None:
    text = HEAD + (
        "openb-pod-0000,12000,16384,1,1000,,LS,Running,0,12537496,0\n"
        "openb-pod-0001,6000,12288\n"
        "openb-pod-0002,six,12288,1,460,,BE,Running,100,500,160\n"
        "openb-pod-0003,6000,12288,1,460,,BE,Running,100,500,50\n"
        "openb-pod-0000,12000,16384,1,1000,,LS,Running,0,12537496,0\n"
    )
    trace = read_pods(text.splitlines(), "p.csv", AlibabaOptions("ali"))
    assert [j.name for j in trace.jobs] == ["openb-pod-0000"]
    assert trace.skips.malformed == [
        "p.csv:3: expected 11 columns, found 3",
        "p.csv:4: cpu_milli 'six' is not an integer",
        "p.csv:5: scheduled_time 50 before creation_time 100",
        "p.csv:6: pod 'openb-pod-0000' repeats",
    ]


def test_a_file_without_the_columns_is_one_malformed_line() -> None:
    trace = read_pods(["name,cpu\n", "a,1\n"], "p.csv", AlibabaOptions("ali"))
    assert trace.jobs == []
    assert trace.skips.malformed[0].startswith(
        "p.csv:1: header lacks column(s) cpu_milli, memory_mib"
    )
    empty = read_pods([], "e.csv", AlibabaOptions("ali"))
    assert empty.skips.malformed == ["e.csv:1: empty file: expected a header line"]
    skips = Skips()
    read_nodes(["sn,cpu_milli\n"], "n.csv", AlibabaOptions("ali"), skips)
    assert skips.malformed == ["n.csv:1: header lacks column(s) memory_mib, gpu, model"]


_cell = st.one_of(
    st.integers(min_value=-5, max_value=10**8).map(str),
    st.sampled_from(["", "LS", "BE", "T4|P100", "x", "1.5", '"a,b"']),
)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.lists(_cell, min_size=0, max_size=12).map(",".join), max_size=30))
def test_any_rows_are_read_without_a_crash_and_every_row_is_accounted_for(
    rows: list[str],
) -> None:
    lines = [HEAD, *(row + "\n" for row in rows)]
    trace = read_pods(lines, "p.csv", AlibabaOptions("ali"))
    records = [row for row in rows if row]
    assert len(trace.jobs) + trace.skips.total == len(records)
    for job in trace.jobs:
        assert job.runtime > 0
        assert job.submit >= 0
