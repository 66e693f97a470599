"""Kueue's `kueue.x-k8s.io/max-exec-time-seconds` label on a Job or Pod
(docs/cluster.md#maximum-execution-time): the Workload's maximumExecutionTimeSeconds, its rules
on create and update, with Kueue's messages."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from scheduler.api import ApiError, Job, job_to_workload
from scheduler.api.decode import decode_object
from scheduler.api.plain_pod import Pod
from scheduler.api.pod_admission import pod_errors, pod_update_errors
from scheduler.api.pod_workload import pod_to_workload
from scheduler.api.validation.update import validate_update
from tests.unit.runtime.support import job
from tests.unit.visibility_server.webhooks.test_webhook_pods import pod

LABEL = "kueue.x-k8s.io/max-exec-time-seconds"
PATH = f"metadata.labels[{LABEL}]"


def labelled_job(value: str, *, suspend: bool = True) -> dict[str, Any]:
    raw = job("team", "j", "main")
    raw["metadata"]["labels"][LABEL] = value
    raw["spec"]["suspend"] = suspend
    return raw


def plain_pod(value: str) -> dict[str, Any]:
    return pod(**{LABEL: value})


def test_the_workloads_of_a_job_and_a_pod_carry_it() -> None:
    obj = decode_object(labelled_job("600"))
    assert isinstance(obj, Job)
    assert job_to_workload(obj, {}, {}).spec.maximum_execution_time_seconds == 600
    pod = decode_object(plain_pod("30"))
    assert isinstance(pod, Pod)
    assert pod_to_workload(pod, {}, {}).spec.maximum_execution_time_seconds == 30
    unlabelled = decode_object(job("team", "j", "main"))
    assert isinstance(unlabelled, Job)
    assert job_to_workload(unlabelled, {}, {}).spec.maximum_execution_time_seconds is None


@pytest.mark.parametrize(
    ("value", "detail"),
    [
        ("ten", 'Invalid value: "ten": strconv.Atoi: parsing "ten": invalid syntax'),
        ("1_0", 'Invalid value: "1_0": strconv.Atoi: parsing "1_0": invalid syntax'),
        ("0", "Invalid value: 0: should be greater than 0"),
        ("00", "Invalid value: 0: should be greater than 0"),
        (
            "99999999999999999999",
            'Invalid value: "99999999999999999999": strconv.Atoi: parsing '
            '"99999999999999999999": value out of range',
        ),
    ],
)
def test_a_bad_value_is_refused_in_kueues_words(value: str, detail: str) -> None:
    """Values a label may hold (kube-apiserver refuses " 10" or "-5" before any webhook)."""
    with pytest.raises(ApiError) as err:
        decode_object(labelled_job(value))
    assert [(e.path, e.detail) for e in err.value.errors] == [(PATH, detail)]
    assert [(e.path, e.detail) for e in pod_errors(plain_pod(value))] == [(PATH, detail)]


def test_it_changes_only_while_the_job_stays_suspended() -> None:
    old, new = labelled_job("600"), labelled_job("900")
    assert validate_update(decode_object(old), decode_object(new)) == []
    running_old, running_new = (
        labelled_job("600", suspend=False),
        labelled_job("900", suspend=False),
    )
    [error] = validate_update(decode_object(running_old), decode_object(running_new))
    assert (error.path, error.detail) == (PATH, 'Invalid value: "900": field is immutable')
    # Suspending it in the same update is not enough: it ran before.
    [error] = validate_update(decode_object(running_old), decode_object(new))
    assert error.path == PATH


def test_a_pods_changes_only_behind_its_gate() -> None:
    gated = plain_pod("600")
    gated["spec"]["schedulingGates"] = [{"name": "kueue.x-k8s.io/admission"}]
    moved = copy.deepcopy(gated)
    moved["metadata"]["labels"][LABEL] = "900"
    assert pod_update_errors(gated, moved) == []
    running, running_moved = plain_pod("600"), plain_pod("900")
    [error] = pod_update_errors(running, running_moved)
    assert (error.path, error.detail) == (PATH, 'Invalid value: "900": field is immutable')
