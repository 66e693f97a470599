"""Objects as a live API server returns them: fields the models do not know are pruned
through the model's JSON schema, everything else is validated as strictly as a manifest."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from scheduler.api import ClusterQueue, Job, Workload
from scheduler.api.decode import ApiError, decode_object
from scheduler.runtime.kube.decode import decode_live, prune
from tests.unit.runtime.support import cluster_queue, job, workload

Json = dict[str, Any]


def server_workload() -> Json:
    """A Workload with what a server and other controllers add."""
    data = workload("team", "w1", "main", "2")
    data["metadata"].update(
        {
            "uid": "u-1",
            "resourceVersion": "17",
            "generation": 3,
            "creationTimestamp": "2025-01-01T00:00:00Z",
            "managedFields": [{"manager": "kubectl", "operation": "Update"}],
        }
    )
    data["spec"]["maximumExecutionTimeSecondsFromTheFuture"] = 5
    data["spec"]["podSets"][0]["futurePodSetField"] = {"x": 1}
    data["status"] = {
        "conditions": [
            {
                "type": "Finished",
                "status": "True",
                "reason": "Failed",
                "message": "job failed",
                "lastTransitionTime": "2025-01-01T00:01:00Z",
                "observedGeneration": 3,
                "futureConditionField": "x",
            }
        ],
        "someOtherControllersStatus": {"a": 1},
    }
    return data


def test_a_manifest_with_unknown_fields_is_rejected_but_a_live_object_is_pruned() -> None:
    data = server_workload()
    with pytest.raises(ApiError):
        decode_object(copy.deepcopy(data))
    obj = decode_live(copy.deepcopy(data), source="kueue.x-k8s.io/v1beta1/workloads")
    assert isinstance(obj, Workload)
    assert obj.metadata.name == "w1"
    assert obj.metadata.uid == "u-1"
    assert obj.metadata.resource_version == "17"
    assert obj.spec.queue_name == "main"
    [condition] = obj.status.conditions
    assert (condition.type, condition.reason, condition.observed_generation) == (
        "Finished",
        "Failed",
        3,
    )


def test_invalid_known_fields_are_still_rejected() -> None:
    data = server_workload()
    data["spec"]["podSets"][0]["count"] = "many"
    with pytest.raises(ApiError):
        decode_live(data, source="workloads")
    broken_cq = cluster_queue("cq")
    broken_cq["spec"]["queueingStrategy"] = "Random"
    broken_cq["spec"]["newKnob"] = True
    with pytest.raises(ApiError):
        decode_live(broken_cq, source="clusterqueues")


def test_other_kinds_decode_too() -> None:
    cq = cluster_queue("cq")
    cq["metadata"]["resourceVersion"] = "4"
    cq["status"] = {"pendingWorkloads": 3, "conditions": [], "brandNew": 1}
    assert isinstance(decode_live(cq, source="clusterqueues"), ClusterQueue)
    raw_job = job("team", "j", "main")
    raw_job["metadata"]["uid"] = "job-uid"
    raw_job["spec"].update({"suspend": True, "parallelism": 2, "fancyNewJobField": "on"})
    raw_job["status"] = {"ready": 1, "uncountedTerminatedPods": {}}
    decoded = decode_live(raw_job, source="jobs")
    assert isinstance(decoded, Job)
    assert decoded.spec.suspend is True
    assert decoded.spec.parallelism == 2


def test_decode_live_does_not_modify_its_input() -> None:
    data = server_workload()
    before = copy.deepcopy(data)
    decode_live(data, source="workloads")
    assert data == before


DEFS: Json = {
    "Leaf": {
        "type": "object",
        "properties": {"keep": {"type": "string"}},
        "additionalProperties": False,
    },
    "Node": {
        "type": "object",
        "properties": {
            "leaf": {"anyOf": [{"$ref": "#/$defs/Leaf"}, {"type": "null"}]},
            "leaves": {
                "anyOf": [{"type": "array", "items": {"$ref": "#/$defs/Leaf"}}, {"type": "null"}]
            },
            "byName": {"type": "object", "additionalProperties": {"$ref": "#/$defs/Leaf"}},
            "labels": {"type": "object", "additionalProperties": {"type": "string"}},
            "free": {},
            "anything": {"type": "object", "additionalProperties": True},
            "mixed": {"allOf": [{"$ref": "#/$defs/Leaf"}]},
        },
    },
}


def test_prune_walks_refs_unions_arrays_and_maps() -> None:
    value = {
        "leaf": {"keep": "a", "drop": 1},
        "leaves": [{"keep": "b", "drop": 2}, {"drop": 3}],
        "byName": {"x": {"keep": "c", "drop": 4}},
        "labels": {"any": "label"},
        "free": {"whatever": {"nested": 1}},
        "anything": {"k": [1]},
        "mixed": {"keep": "d", "drop": 5},
        "unknown": 6,
    }
    assert prune(value, {"$ref": "#/$defs/Node"}, DEFS) == {
        "leaf": {"keep": "a"},
        "leaves": [{"keep": "b"}, {}],
        "byName": {"x": {"keep": "c"}},
        "labels": {"any": "label"},
        "free": {"whatever": {"nested": 1}},
        "anything": {"k": [1]},
        "mixed": {"keep": "d"},
    }


def test_prune_leaves_values_of_the_wrong_shape_for_validation() -> None:
    # A string where an object belongs is not pruning's business: validation rejects it.
    assert prune({"leaf": "text", "leaves": "x"}, {"$ref": "#/$defs/Node"}, DEFS) == {
        "leaf": "text",
        "leaves": "x",
    }
    assert prune([1, 2], {"type": "string"}, DEFS) == [1, 2]
    assert prune(None, {"$ref": "#/$defs/Leaf"}, DEFS) is None
