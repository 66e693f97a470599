"""`serve --embedded` manifests written in kueue.x-k8s.io/v1beta2 (docs/api-versions.md)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from scheduler.api import ApiError
from scheduler.api.conversion import convert_document
from scheduler.api.versions import KUEUE_V1BETA2
from tests.unit.runtime.support import cluster_queue, flavor, local_queue, namespace, workload
from tests.unit.runtime.test_embedded import WPC, Harness


def v2(document: dict[str, Any]) -> dict[str, Any]:
    return convert_document(document, KUEUE_V1BETA2)


@pytest.fixture
def h(tmp_path: Path) -> Harness:
    return Harness(tmp_path)


def test_v1beta2_manifests_load_like_v1beta1(h: Harness) -> None:
    cq = v2(cluster_queue("cq", "4"))
    cq["spec"]["cohortName"] = "team"
    h.write("a-queues.yaml", v2(local_queue("team", "main", "cq")))
    h.write("b-cluster.yaml", namespace("team"), v2(flavor()), cq, v2(WPC))
    h.write("c-work.yaml", v2(workload("team", "w", "main")))
    h.load()
    s = h.scheduler
    assert h.engine.synced
    assert s.objects.cluster_queues["cq"].cohort == "team"
    assert s.queues.locate("team/w") == "cq"
    assert h.store.priority_classes() == {"high": 50}


def test_an_unsupported_kueue_kind_stops_start_up_naming_it(h: Harness) -> None:
    topology = {
        "apiVersion": KUEUE_V1BETA2,
        "kind": "Topology",
        "metadata": {"name": "default"},
        "spec": {"levels": [{"nodeLabel": "kubernetes.io/hostname"}]},
    }
    h.write("z-topology.yaml", namespace("ok"), topology)
    with pytest.raises(ApiError) as caught:
        h.store.load()
    message = str(caught.value)
    assert "z-topology.yaml: document 1 (Topology" in message
    assert "is not supported by queuescope" in message
