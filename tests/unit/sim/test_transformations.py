"""Resource transformations through the whole core, offline
(docs/scheduling.md#resource-transformations): the HAMi setup of Kueue's
`serving-workloads/sample-hami.yaml`, whose ClusterQueue has quota on the totals over a
Pod's virtual GPUs, which no container requests."""

from __future__ import annotations

from pathlib import Path

from scheduler.core.workload import QUOTA_RESERVED
from tests.unit.runtime import support
from tests.unit.runtime.support import Json, to_yaml
from tests.unit.sim.test_pods import configuration, simulate

GPU, CORES, MEM = "nvidia.com/gpu", "nvidia.com/gpucores", "nvidia.com/gpumem"
TOTAL_CORES, TOTAL_MEM = "nvidia.com/total-gpucores", "nvidia.com/total-gpumem"


def hami_configuration() -> Json:
    cfg = configuration("batch/job")
    cfg["resources"] = {
        "transformations": [
            {
                "input": CORES,
                "strategy": "Replace",
                "multiplyBy": GPU,
                "outputs": {TOTAL_CORES: "1"},
            },
            {"input": MEM, "strategy": "Replace", "multiplyBy": GPU, "outputs": {TOTAL_MEM: "1"}},
        ]
    }
    return cfg


def hami_queue() -> Json:
    """Kueue's example ClusterQueue but for its size: 100 total cores, 4 vGPUs."""
    cq = support.cluster_queue("cq")
    cq["spec"]["resourceGroups"] = [
        {
            "coveredResources": [GPU, TOTAL_CORES, TOTAL_MEM],
            "flavors": [
                {
                    "name": "default",
                    "resources": [
                        {"name": GPU, "nominalQuota": "4"},
                        {"name": TOTAL_CORES, "nominalQuota": "100"},
                        {"name": TOTAL_MEM, "nominalQuota": "20480"},
                    ],
                }
            ],
        }
    ]
    return cq


def burn(name: str) -> Json:
    """The example's container: limits only, per vGPU (2 vGPUs of 30 cores, 1024 MiB)."""
    job = support.job("team", name, "main")
    [container] = job["spec"]["template"]["spec"]["containers"]
    container["resources"] = {"limits": {GPU: "2", CORES: "30", MEM: "1024"}}
    return job


def test_the_totals_over_the_vgpus_are_charged_and_the_second_waits(tmp_path: Path) -> None:
    setup = to_yaml(
        hami_configuration(),
        support.namespace("team"),
        support.flavor(),
        hami_queue(),
        support.local_queue("team", "main", "cq"),
    )
    sim = simulate(tmp_path, setup, to_yaml(burn("first")), to_yaml(burn("second")))
    sim.run()
    workloads = sim.scheduler.objects.workloads
    [first] = [w for k, w in workloads.items() if "job-first-" in k]
    [second] = [w for k, w in workloads.items() if "job-second-" in k]
    assert first.pod_sets[0].per_pod == {GPU: 2, TOTAL_CORES: 60, TOTAL_MEM: 2048}
    assert first.admission is not None
    [assignment] = first.admission.pod_sets
    assert assignment.resource_usage == {GPU: 2, TOTAL_CORES: 60, TOTAL_MEM: 2048}
    # 60 + 60 total cores is more than the 100 of the queue, though 4 vGPUs would fit.
    assert second.admission is None
    reserved = second.conditions.get(QUOTA_RESERVED)
    assert reserved is not None and reserved.status == "False"
    assert TOTAL_CORES in reserved.message
