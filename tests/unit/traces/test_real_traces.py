"""The real traces (the folder beside the checkout, docs/simulate.md "Importing traces")
imported whole, checked against the statistics of
its README (the figures below are quoted from it)."""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

import pytest

from queuescope.trace_cli import open_text
from scheduler.traces.alibaba import AlibabaOptions, read_nodes, read_pods
from scheduler.traces.records import USER_LABEL, Skips
from scheduler.traces.scenario import ImportOptions, build, cluster_from_capacity
from scheduler.traces.swf import SwfOptions, machines_capacity, read_machines, read_swf

PROJECT_ROOT = Path(__file__).resolve().parents[3]
TRACES = PROJECT_ROOT.parent / "shared" / "traces"
pytestmark = pytest.mark.skipif(
    not TRACES.is_dir(), reason=f"the shared traces folder {TRACES} is absent"
)
KTH = TRACES / "pwa-kth-sp2" / "KTH-SP2-1996-2.1-cln.swf.gz"
WAGAP = TRACES / "metacentrum-wagap-2013" / "wagap-2013.swf.gz"
ALIBABA = TRACES / "alibaba-gpu-v2023"


def test_kth_sp2() -> None:
    with open_text(str(KTH)) as lines:
        trace = read_swf(lines, str(KTH), SwfOptions("kth"))
    assert trace.skips.malformed == []
    assert len(trace.jobs) + trace.skips.total == 28_476  # MaxRecords
    assert len({j.labels[USER_LABEL] for j in trace.jobs}) == 214
    assert trace.origin == 843_480_031
    assert trace.capacity is not None
    assert trace.capacity.totals() == {"cpu": 100_000}  # MaxProcs 100
    # the user's limit is known for every job
    assert all(j.requested_seconds is not None for j in trace.jobs)
    imported = build(trace, cluster_from_capacity(trace.capacity, "kth"), ImportOptions())
    assert imported.workloads + imported.skips.total == 28_476
    assert imported.skips.total < 20  # only jobs that never ran or have no size
    spec = imported.scenario["spec"]
    # first submission 599,850 s after UnixStartTime 1996-09-23 12:00:31 UTC
    assert spec["startTime"] == "1996-09-30T10:38:01Z"
    last = int(spec["events"][-1]["at"].removesuffix("s"))
    assert 332 * 86400 < last < 334 * 86400  # 333 days of submits


def test_wagap_2013() -> None:
    machines_file = WAGAP.parent / "wagap-2013.swf.machines"
    skips = Skips()
    with open_text(str(machines_file)) as lines:
        machines = read_machines(lines, str(machines_file), skips)
    capacity = machines_capacity(machines, "machines")
    assert capacity is not None
    assert capacity.totals()["cpu"] == 2_176_000  # 20 x 80 + 48 x 12 CPUs
    options = SwfOptions("wagap", clusters=tuple(m.name for m in machines))
    with open_text(str(WAGAP)) as lines:
        trace = read_swf(lines, str(WAGAP), options)
    assert trace.skips.malformed == []
    assert len(trace.jobs) + trace.skips.total == 17_900
    assert len({j.tenant for j in trace.jobs}) == 75
    readme = {
        "q-1d": 5301, "q-2h": 4392, "q-1w": 3414, "q-2d": 1435, "q-4h": 1267, "q-4d": 1060,
        "q-2w": 844, "backfill": 104, "q-2w-plus": 68, "ops": 11, "priority-long": 4,
    }  # fmt: skip
    queues = Counter(j.queue for j in trace.jobs)
    assert set(queues) == set(readme)
    assert all(queues[q] <= n for q, n in readme.items())
    assert sum(readme.values()) - sum(queues.values()) == trace.skips.total
    # a cluster named in the node spec: cl_zewura, ^cl_zegox, a host zewura12.cerit-sc.cz
    with open_text(str(WAGAP)) as lines:
        named = {f"job-{f[0]}" for f in map(str.split, lines) if re.search("zewura|zegox", f[20])}
    assert {j.name for j in trace.jobs if j.node_labels} == named & {j.name for j in trace.jobs}
    imported = build(trace, cluster_from_capacity(capacity, "wagap"), ImportOptions())
    assert imported.workloads + imported.skips.total == 17_900
    assert imported.scenario["spec"]["startTime"] == "2012-12-31T23:22:27Z"


@pytest.mark.parametrize("variant", ["default", "gpuspec33"])
def test_alibaba_gpu_v2023(variant: str) -> None:
    pods = ALIBABA / f"openb_pod_list_{variant}.csv"
    nodes = ALIBABA / "openb_node_list_all_node.csv"
    options = AlibabaOptions("alibaba", gpu_unit="gpu")
    skips = Skips()
    with open_text(str(nodes)) as lines:
        capacity = read_nodes(lines, str(nodes), options, skips)
    assert skips.total == 0
    totals = capacity.totals()
    assert totals["nvidia.com/gpu"] == 6_212
    assert totals["cpu"] == 125_514_000
    assert len(capacity.flavors) == 8  # 7 GPU models and the CPU-only nodes
    with open_text(str(pods)) as lines:
        trace = read_pods(lines, str(pods), options)
    assert trace.skips.malformed == []
    assert trace.skips.reasons["never scheduled"] == 897
    assert len(trace.jobs) + trace.skips.total == 8_152
    assert len(trace.jobs) == 7_255  # the scheduled pods
    gpu_pods = [j for j in trace.jobs if "nvidia.com/gpu" in j.pods[0].requests]
    constrained = [j for j in gpu_pods if j.node_labels]
    if variant == "default":
        assert constrained == []
    else:
        assert constrained  # gpu_spec set for about a third of the GPU pods
    imported = build(trace, cluster_from_capacity(capacity, "alibaba"), ImportOptions())
    assert imported.workloads + imported.skips.total == 8_152
