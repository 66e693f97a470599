"""The JobSet harness itself (tests/e2e/jobsets.py): JobSet's own controller and webhooks
on the real control plane, with no queuescope and no Kueue label involved, so that the
tests of the `jobset` integration can rely on them.

kwok completes each Pod a second after it runs (the `run-for` annotation of
tests/e2e/nodes.py); the waits below are bounds, not measurements.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.e2e.harness import ControlPlane, wait_for
from tests.e2e.jobsets import (
    JOBSET_NAME_LABEL,
    VALIDATING_JOBSET_WEBHOOK,
    JobSetController,
    condition,
    jobset_manifest,
)
from tests.e2e.nodes import NodeAgents

pytestmark = pytest.mark.realcluster

NAMESPACE = "jobset-harness"
COMPLETED_SECONDS = 120.0


@pytest.fixture(scope="module")
def plane(jobset_controller: JobSetController, nodes: NodeAgents) -> ControlPlane:
    nodes.plane.apply(
        json.dumps({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}})
    )
    return nodes.plane


def _jobs(plane: ControlPlane, name: str) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = plane.get_json(
        "jobs", "-n", NAMESPACE, "-l", f"{JOBSET_NAME_LABEL}={name}"
    )["items"]
    return items


def test_a_jobset_runs_its_jobs_pods_to_completion(plane: ControlPlane, nodes: NodeAgents) -> None:
    plane.apply(json.dumps(jobset_manifest("two-workers", NAMESPACE, replicas=2)))

    def completed() -> dict[str, Any] | None:
        doc: dict[str, Any] = plane.get_json("jobset", "two-workers", "-n", NAMESPACE)
        found = condition(doc, "Completed")
        return doc if found is not None and found["status"] == "True" else None

    done = wait_for(
        completed,
        timeout=COMPLETED_SECONDS,
        what="JobSet two-workers Completed",
        interval=0.5,
    )
    jobs = _jobs(plane, "two-workers")
    assert sorted(j["metadata"]["name"] for j in jobs) == [
        "two-workers-workers-0",
        "two-workers-workers-1",
    ]
    for job in jobs:
        owner = job["metadata"]["ownerReferences"][0]
        assert (owner["kind"], owner["name"], owner["controller"]) == (
            "JobSet",
            "two-workers",
            True,
        )
        assert (job["status"].get("succeeded"), condition(job, "Complete") is not None) == (1, True)
    pods = nodes.pods(NAMESPACE, f"{JOBSET_NAME_LABEL}=two-workers")
    assert len(pods) == 2
    # Each ran on a kwok Node (scheduled and bound) before kwok completed it.
    assert all(p["spec"].get("nodeName", "").startswith("kwok-") for p in pods)
    assert {p["status"]["phase"] for p in pods} == {"Succeeded"}
    assert done["status"].get("terminalState") == "Completed"
    replicated = {r["name"]: r for r in done["status"]["replicatedJobsStatus"]}
    assert replicated["workers"]["succeeded"] == 2


@pytest.mark.usefixtures("plane")
def test_jobsets_own_webhooks_default_and_validate(jobset_controller: JobSetController) -> None:
    status, defaulted = jobset_controller.dry_run(jobset_manifest("defaults", NAMESPACE))
    assert status == 201, defaulted
    spec = defaulted["spec"]
    # What JobSet's mutating webhook (not the CRD's schema) sets.
    assert spec["successPolicy"]["operator"] == "All"
    assert spec["startupPolicy"]["startupPolicyOrder"] == "AnyOrder"
    assert spec["network"] == {"enableDNSHostnames": True, "publishNotReadyAddresses": True}
    job_spec = spec["replicatedJobs"][0]["template"]["spec"]
    assert job_spec["completionMode"] == "Indexed"
    assert job_spec["template"]["spec"]["restartPolicy"] == "OnFailure"

    status, refused = jobset_controller.dry_run(
        jobset_manifest("bad", NAMESPACE, replicated_job="Not_A_Label")
    )
    assert status == 422, refused
    message = refused["message"]
    # JobSet's validating webhook, in its own words: the name of the Job it would create
    # for the last replica is not a DNS-1035 label.
    assert f'admission webhook "{VALIDATING_JOBSET_WEBHOOK}" denied the request' in message
    assert 'spec.replicatedJobs[0].name: Invalid value: "bad-Not_A_Label-1"' in message
    assert "a DNS-1035 label must consist of lower case alphanumeric characters" in message


@pytest.mark.usefixtures("jobset_controller")
def test_jobsets_pod_webhooks_see_only_jobset_pods(plane: ControlPlane) -> None:
    """Registered as JobSet's own install registers them: the Pod webhooks carry the
    objectSelector of its kustomization, so other modules' Pods never reach them."""
    selectors: dict[str, Any] = {}
    for kind in ("mutatingwebhookconfigurations", "validatingwebhookconfigurations"):
        for config in plane.get_json(kind)["items"]:
            for webhook in config["webhooks"]:
                if "pods" in webhook["rules"][0]["resources"]:
                    selectors[webhook["name"]] = webhook["objectSelector"]
    wanted = {"matchExpressions": [{"key": JOBSET_NAME_LABEL, "operator": "Exists"}]}
    assert selectors == {"mpod.kb.io": wanted, "vpod.kb.io": wanted}
