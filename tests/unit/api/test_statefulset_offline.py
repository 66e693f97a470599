"""An apps/v1 StatefulSet read offline (docs/simulate.md#statefulsets): decoded with
every field a real manifest carries, checked (replicas, the pod template as a Job's,
the queue name), and made into Kueue's prebuilt Workload when the `statefulset`
integration is on, with a name that is the same on every run."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
import yaml

from scheduler.api import ApiError, load_yaml
from scheduler.api.integrations import NO_INTEGRATIONS, PLAIN_PODS, Integrations
from scheduler.api.priority import WorkloadPriorityClass
from scheduler.api.statefulset_model import StatefulSet
from scheduler.api.workload import WORKLOAD_PRIORITY_CLASS_SOURCE, Workload
from scheduler.api.workload_names import workload_name
from scheduler.api.workload_sources import source_workload
from tests.unit.runtime.support import KUEUE, Json, statefulset

STATEFULSETS = Integrations(statefulsets=True)
QUEUE = "kueue.x-k8s.io/queue-name"
# What a real manifest carries beside the replicas and the template (accepted, not read).
MANIFEST_FIELDS: Json = {
    "podManagementPolicy": "Parallel",
    "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"partition": 0}},
    "volumeClaimTemplates": [
        {
            "metadata": {"name": "data"},
            "spec": {
                "accessModes": ["ReadWriteOnce"],
                "resources": {"requests": {"storage": "1Gi"}},
            },
        }
    ],
    "minReadySeconds": 5,
    "revisionHistoryLimit": 10,
    "persistentVolumeClaimRetentionPolicy": {"whenDeleted": "Retain", "whenScaled": "Delete"},
    "ordinals": {"start": 0},
}


def load(*docs: Json) -> list[Any]:
    return [d.obj for d in load_yaml(yaml.safe_dump_all(list(docs)), "sts.yaml")]


def rejected(doc: Json) -> str:
    with pytest.raises(ApiError) as err:
        load(doc)
    return str(err.value)


def decoded(doc: Json) -> StatefulSet:
    [obj] = load(doc)
    assert isinstance(obj, StatefulSet)
    return obj


def made(sts: StatefulSet, **classes: WorkloadPriorityClass) -> Workload:
    wl = source_workload(sts, classes, {}, integrations=STATEFULSETS)
    assert wl is not None
    return wl


def test_a_manifest_with_every_field_decodes() -> None:
    doc = statefulset("team", "web", "main")
    doc["spec"].update(MANIFEST_FIELDS)
    sts = decoded(doc)
    assert sts.spec.replicas == 3
    assert sts.spec.service_name == "web"
    assert sts.spec.volume_claim_templates is not None
    assert sts.queue_name == "main"
    # An empty queue name is none, as for a Pod.
    assert decoded(statefulset("team", "web", "")).queue_name is None
    # A status is no part of a manifest, as for a Pod.
    doc["status"] = {"replicas": 3}
    assert 'status: unknown field "status"' in rejected(doc)


def test_a_typo_is_refused_naming_file_document_and_field() -> None:
    doc = statefulset("team", "web", "main")
    doc["spec"]["replica"] = 2
    text = rejected(doc)
    assert 'sts.yaml: document 0 (StatefulSet "team/web")' in text
    assert 'spec.replica: unknown field "replica"' in text


def test_replicas_template_and_queue_name_are_checked() -> None:
    text = rejected(statefulset("team", "web", "Not_A_Name", "-1", replicas=-1))
    assert text.startswith('sts.yaml: document 0 (StatefulSet "team/web"): ')
    assert "spec.replicas: Invalid value: -1: must be greater than or equal to 0" in text
    # The pod template as a Job's is checked: same rule, same words, its own path.
    assert (
        'spec.template.spec.containers[0].resources.requests[cpu]: Invalid value: "-1": '
        "must be greater than or equal to 0"
    ) in text
    # The queue name as Kueue's StatefulSet webhook checks it.
    assert (
        'metadata.labels[kueue.x-k8s.io/queue-name]: Invalid value: "Not_A_Name": '
        "a lowercase RFC 1123 subdomain"
    ) in text


def test_the_workload_is_kueues_prebuilt_one_with_a_reproducible_name() -> None:
    sts = decoded(statefulset("team", "web", "main", "250m", replicas=4))
    wl = made(sts)
    # Without a uid, the stand-in Jobs get: the same name on every run.
    uid = str(uuid.uuid5(uuid.NAMESPACE_URL, "apps/v1/StatefulSet/team/web"))
    assert wl.metadata.name == workload_name("StatefulSet", "apps", "web", uid)
    assert wl.metadata.name.startswith("statefulset-web-")
    assert made(decoded(statefulset("team", "web", "main"))).metadata.name == wl.metadata.name
    assert wl.metadata.namespace == "team"
    assert wl.metadata.labels == {"kueue.x-k8s.io/job-uid": uid}
    assert wl.metadata.owner_references == [
        {"apiVersion": "apps/v1", "kind": "StatefulSet", "name": "web", "uid": uid}
    ]
    assert wl.metadata.annotations["kueue.x-k8s.io/job-owner-name"] == "web"
    assert wl.spec.queue_name == "main"
    [pod_set] = wl.spec.pod_sets
    assert (pod_set.name, pod_set.count) == ("main", 4)
    assert pod_set.template.spec == sts.spec.template.spec
    # A uid in the manifest is the StatefulSet's own.
    own = statefulset("team", "web", "main")
    own["metadata"]["uid"] = "5b1c0c4e-sts"
    named = made(decoded(own)).metadata.name
    assert named == workload_name("StatefulSet", "apps", "web", "5b1c0c4e-sts")


def test_the_priority_is_the_workload_priority_class_of_its_label() -> None:
    [wpc] = load(
        {
            "apiVersion": KUEUE,
            "kind": "WorkloadPriorityClass",
            "metadata": {"name": "high"},
            "value": 500,
        }
    )
    doc = statefulset("team", "web", "main")
    doc["metadata"]["labels"]["kueue.x-k8s.io/priority-class"] = "high"
    sts = decoded(doc)
    wl = made(sts, high=wpc)
    assert (wl.spec.priority, wl.spec.priority_class_name) == (500, "high")
    assert wl.spec.priority_class_source == WORKLOAD_PRIORITY_CLASS_SOURCE
    with pytest.raises(ApiError) as err:
        made(sts)
    missing = 'WorkloadPriorityClass "high" not found'
    assert f"metadata.labels[kueue.x-k8s.io/priority-class]: {missing}" in str(err.value)


@pytest.mark.parametrize("integrations", [NO_INTEGRATIONS, PLAIN_PODS])
def test_a_queued_statefulset_needs_the_integration(integrations: Integrations) -> None:
    sts = decoded(statefulset("team", "web", "main"))
    with pytest.raises(ApiError) as err:
        source_workload(sts, {}, {}, integrations=integrations)
    assert err.value.kind == "StatefulSet"
    assert err.value.name == "web"
    assert str(err.value) == (
        'StatefulSet "web": metadata.labels[kueue.x-k8s.io/queue-name]: names the LocalQueue '
        '"main" but the Configuration does not list `statefulset` in integrations.frameworks, '
        "so Kueue would not queue it"
    )


@pytest.mark.parametrize("integrations", [NO_INTEGRATIONS, STATEFULSETS])
def test_no_replicas_or_no_queue_make_no_workload(integrations: Integrations) -> None:
    """Scaled to zero there is nothing to admit (the cluster holds its Workload), with the
    integration on or off; unqueued, Kueue does not manage it."""
    for doc in (statefulset("team", "web", "main", replicas=0), statefulset("team", "web", None)):
        assert source_workload(decoded(doc), {}, {}, integrations=integrations) is None
