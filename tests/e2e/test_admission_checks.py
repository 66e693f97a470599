"""AdmissionChecks on the real kube-apiserver (issue 13; docs/scheduling.md#admission-checks).

queuescope never evaluates a check: an external controller does. Here `CheckController`
plays that controller as upstream's do, with its own field manager and a forced
server-side apply on the status subresource: it sets the AdmissionCheck's `Active` condition and
writes its entry of a Workload's `status.admissionChecks` (a map keyed by the check's
name, so it owns only its own entry).

The Job controller, the scheduler and kwok's Nodes run beside kube-apiserver (the
`nodes` fixture) and our webhooks are installed, so Jobs are created the way users write
them (`suspend` unset) and the test can see that no Pod exists before admission.

* Inactive check: the ClusterQueue is `Active=False`/`AdmissionCheckInactive` and admits
  nothing until the controller reports `Active`.
* Ready: quota is reserved first (`QuotaReserved=True`, the check `Pending`), the Job
  stays suspended with no Pod; `Admitted` and the Pods come only once the check is Ready,
  with the labels, annotations and tolerations of the check's pod set update.
* Retry: evicted, quota given back, states reset to `Pending`, requeued after the
  controller's `requeueAfterSeconds`.
* Rejected: deactivated, quota given back, the Job never runs.
* No check at all: an unsuspended Job waiting for quota is stored suspended and gets
  no Pod (a watch would see one created and deleted) until it is admitted.
"""

from __future__ import annotations

import json
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.aggregated import Aggregated, aggregated_server
from tests.e2e.checks import CheckController, active
from tests.e2e.cluster import (
    KUEUE,
    ClusterModeServer,
    delete_webhooks,
    wait_json,
    webhook_documents,
)
from tests.e2e.harness import ControlPlane, wait_for
from tests.e2e.nodes import RUN_FOR_ANNOTATION, NodeAgents
from tests.e2e.pods import (
    PodJob,
    condition,
    flavor_queue,
    job_pods,
    ready,
    sample_flavors,
    suspended,
    unsuspended,
    wait_job,
    wait_pods,
    workload_of,
)

pytestmark = pytest.mark.realcluster

NS = "checks-e2e"
CONTROLLER = "e2e.queuescope.io/check-controller"
VISIBILITY = "/apis/visibility.kueue.x-k8s.io/v1beta2"
UPDATE_TOLERATION = {"key": "e2e.queuescope.io/provisioned", "operator": "Exists"}


def check_object(name: str) -> dict[str, Any]:
    return {
        "apiVersion": KUEUE,
        "kind": "AdmissionCheck",
        "metadata": {"name": name},
        "spec": {"controllerName": CONTROLLER},
    }


def checked_queue(cq: str, lq: str, checks: list[str], cpu: str = "2") -> str:
    """A ClusterQueue of the on-demand flavor naming `checks`, and its LocalQueue."""
    strategy = {"admissionChecks": [{"name": check} for check in checks]}
    return flavor_queue(NS, cq, lq, "on-demand", cpu, admissionChecksStrategy=strategy)


class PodWatch:
    """Every Pod of Job `job` the API server ever holds while the watch is open (a Pod
    created and deleted between two polls is seen too): `kubectl get --watch`."""

    def __init__(self, plane: ControlPlane, job: str) -> None:
        self.seen: list[dict[str, Any]] = []
        self._process = subprocess.Popen(
            [
                str(plane.kubectl_binary),
                f"--kubeconfig={plane.admin.kubeconfig}",
                "get",
                "pods",
                "-n",
                NS,
                "-l",
                f"batch.kubernetes.io/job-name={job}",
                "--watch",
                "--output-watch-events",
                "-o",
                "json",
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        self._thread = threading.Thread(target=self._read, daemon=True)
        self._thread.start()

    def _read(self) -> None:
        assert self._process.stdout is not None
        decoder = json.JSONDecoder()
        buffer = ""
        for line in self._process.stdout:
            buffer += line
            try:
                event, end = decoder.raw_decode(buffer.strip())
            except json.JSONDecodeError:
                continue
            buffer = buffer.strip()[end:]
            self.seen.append(event["object"])

    def stop(self) -> list[dict[str, Any]]:
        self._process.terminate()
        self._process.wait(timeout=10)
        self._thread.join(timeout=10)
        return list(self.seen)


@pytest.fixture(scope="module")
def cluster(
    control_plane: ControlPlane, nodes: NodeAgents, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[Aggregated, CheckController]]:
    root: Path = tmp_path_factory.mktemp("admission-checks")
    with aggregated_server(control_plane, root, ClusterModeServer) as env:
        server = env.server
        control_plane.apply(
            "\n---\n".join(
                [
                    json.dumps({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}}),
                    sample_flavors(),
                    *(
                        json.dumps(d)
                        for d in webhook_documents(server.port, server.certs.ca_cert.read_bytes())
                    ),
                ]
            )
        )
        try:
            yield env, CheckController(control_plane)
        finally:
            nodes.clear_namespace(NS)
            delete_webhooks(control_plane)
            control_plane.kubectl(
                "delete",
                "clusterqueues.kueue.x-k8s.io,admissionchecks.kueue.x-k8s.io",
                "-l",
                "e2e.queuescope.io/admission-checks=true",
                "--ignore-not-found",
                check=False,
            )
            # The sample flavors too: later modules create flavors of the same names
            # (tests/e2e/test_kueue_examples.py creates Kueue's "spot" with a dry run).
            control_plane.kubectl(
                "delete", "-f", "-", "--ignore-not-found", input=sample_flavors(), check=False
            )


def create(plane: ControlPlane, manifest: str) -> None:
    """Apply, with the label the module's teardown deletes by."""
    docs = []
    for text in manifest.split("\n---\n"):
        doc = json.loads(text)
        if doc["kind"] in ("ClusterQueue", "AdmissionCheck"):
            doc["metadata"].setdefault("labels", {})["e2e.queuescope.io/admission-checks"] = "true"
        docs.append(json.dumps(doc))
    plane.apply("\n---\n".join(docs))


def unsuspended_job(name: str, queue: str) -> str:
    """A Job as users write it: `suspend` unset (our mutating webhook suspends it)."""
    doc = json.loads(PodJob(name, NS, queue).manifest())
    del doc["spec"]["suspend"]
    return json.dumps(doc)


def cluster_queue(plane: ControlPlane, name: str, what: str, predicate: Any) -> dict[str, Any]:
    return dict(
        wait_json(plane, f"{name}: {what}", predicate, "clusterqueues.kueue.x-k8s.io", name)
    )


def check_states(wl: dict[str, Any]) -> list[tuple[str, str]]:
    return [(c["name"], c["state"]) for c in (wl.get("status") or {}).get("admissionChecks", [])]


def reserving(cq: dict[str, Any]) -> tuple[int, int]:
    status = cq.get("status") or {}
    return status.get("reservingWorkloads", 0), status.get("admittedWorkloads", 0)


def position(env: Aggregated, wl: dict[str, Any], pending: bool) -> dict[str, Any]:
    """The `pendingposition` answer once it says `pending` (a Workload queued again is
    listed from the next published snapshot on: 404 until then)."""
    meta = wl["metadata"]
    path = f"{VISIBILITY}/namespaces/{meta['namespace']}/workloads/{meta['name']}/pendingposition"

    def probe() -> dict[str, Any] | None:
        response = env.get(path)
        if response.status != 200:
            return None
        body = dict(response.json())
        return body if body["pending"] is pending else None

    return wait_for(probe, timeout=60, what=f"pendingposition of {meta['name']}: {pending}")


def reserved_behind_an_active_check(
    env: Aggregated, controller: CheckController, name: str, job: str
) -> dict[str, Any]:
    """Check `ac-NAME` reported Active, queue `cq-NAME` naming it, and Job `job` in it:
    its Workload once it holds quota, the check Pending."""
    plane = env.plane
    create(plane, json.dumps(check_object(f"ac-{name}")))
    controller.report_active(f"ac-{name}")
    create(plane, checked_queue(f"cq-{name}", f"lq-{name}", [f"ac-{name}"]))
    cluster_queue(
        plane, f"cq-{name}", "Active", lambda q: (active(q) or {}).get("status") == "True"
    )
    plane.apply(unsuspended_job(job, f"lq-{name}"))
    wl = workload_of(plane, NS, job, "quota reserved", lambda w: condition(w, "QuotaReserved"))
    assert check_states(wl) == [(f"ac-{name}", "Pending")]
    assert condition(wl, "Admitted") is None
    cluster_queue(plane, f"cq-{name}", "reserving", lambda q: reserving(q) == (1, 0))
    return wl


# -- inactive check, then Ready ----------------------------------------------------------


def test_an_inactive_check_gates_the_queue_and_ready_admits_after_the_reservation(
    cluster: tuple[Aggregated, CheckController],
) -> None:
    env, controller = cluster
    plane = env.plane
    create(plane, json.dumps(check_object("ac-ready")))
    create(plane, checked_queue("cq-ready", "lq-ready", ["ac-ready"]))

    # No controller has reported yet: the ClusterQueue admits nothing.
    gated = cluster_queue(
        plane,
        "cq-ready",
        "inactive",
        lambda q: (active(q) or {}).get("reason") == "AdmissionCheckInactive",
    )
    assert active(gated) == {
        **active(gated),  # type: ignore[dict-item]
        "status": "False",
        "message": "Can't admit new workloads: references inactive AdmissionCheck(s): ac-ready.",
    }
    watch = PodWatch(plane, "waits-for-check")
    try:
        plane.apply(unsuspended_job("waits-for-check", "lq-ready"))
        stored = plane.get_json("job", "waits-for-check", "-n", NS)
        assert stored["spec"]["suspend"] is True  # our mutating webhook
        wl = workload_of(
            plane,
            NS,
            "waits-for-check",
            "pending",
            lambda w: condition(w, "QuotaReserved", "False"),
        )
        assert condition(wl, "QuotaReserved") is None
        pending = position(env, wl, pending=True)
        assert pending.get("message") == "ClusterQueue cq-ready is inactive", pending

        # The controller reports Active: the queue turns Active and reserves quota, but
        # the Workload is not admitted while the check is Pending.
        controller.report_active("ac-ready")
        cluster_queue(
            plane, "cq-ready", "Active", lambda q: (active(q) or {}).get("status") == "True"
        )
        wl = workload_of(
            plane, NS, "waits-for-check", "quota reserved", lambda w: condition(w, "QuotaReserved")
        )
        assert check_states(wl) == [("ac-ready", "Pending")]
        assert condition(wl, "Admitted") is None
        assert wl["status"]["admission"]["clusterQueue"] == "cq-ready"
        cluster_queue(
            plane, "cq-ready", "reserving, not admitted", lambda q: reserving(q) == (1, 0)
        )
        # What the visibility API says of it: not pending, holding quota, waiting for the check.
        standing = position(env, wl, pending=False)
        assert (standing["pending"], standing["reason"]) == (False, "QuotaReserved"), standing
        assert [
            (b["kind"], b["check"], b["state"]) for b in standing["whyPending"]["blockers"]
        ] == [("AdmissionCheck", "ac-ready", "Pending")], standing
        # The Job stays suspended and the Job controller made no Pod.
        assert suspended(plane.get_json("job", "waits-for-check", "-n", NS))
        assert job_pods(plane, NS, "waits-for-check") == []

        controller.set_state(
            wl,
            "ac-ready",
            "Ready",
            "capacity found",
            pod_set_updates=[
                {
                    "name": "main",
                    "labels": {"e2e.queuescope.io/checked": "yes"},
                    "annotations": {"e2e.queuescope.io/capacity": "found"},
                    "tolerations": [UPDATE_TOLERATION],
                }
            ],
        )
        admitted = workload_of(
            plane, NS, "waits-for-check", "admitted", lambda w: condition(w, "Admitted")
        )
        assert check_states(admitted) == [("ac-ready", "Ready")]
        wait_job(plane, NS, "waits-for-check", "unsuspended", unsuspended)
        pods = wait_pods(
            plane, NS, "waits-for-check", "Ready", lambda ps: ps and all(map(ready, ps))
        )
        assert len(pods) == 1
        # The Pod carries what the check's pod set update asked for (and the Job's own).
        (pod,) = pods
        assert pod["metadata"]["labels"]["e2e.queuescope.io/checked"] == "yes"
        assert pod["metadata"]["labels"]["app"] == "waits-for-check"
        assert pod["metadata"]["annotations"]["e2e.queuescope.io/capacity"] == "found"
        assert UPDATE_TOLERATION in pod["spec"]["tolerations"]
        cluster_queue(plane, "cq-ready", "admitted", lambda q: reserving(q) == (1, 1))
    finally:
        seen = watch.stop()
    # No Pod was ever created before the admission (a Pod made and deleted would show).
    admitted_at = condition(admitted, "Admitted")["lastTransitionTime"]  # type: ignore[index]
    assert seen, "the watch saw the Job's Pod"
    assert all(p["metadata"]["creationTimestamp"] >= admitted_at for p in seen), (admitted_at, seen)


# -- Retry ------------------------------------------------------------------------------


def test_retry_evicts_frees_the_quota_resets_the_states_and_requeues_after_the_delay(
    cluster: tuple[Aggregated, CheckController],
) -> None:
    env, controller = cluster
    plane = env.plane
    wl = reserved_behind_an_active_check(env, controller, "retry", "retried")

    controller.set_state(wl, "ac-retry", "Retry", "no capacity yet", requeue_after_seconds=20)
    evicted = workload_of(plane, NS, "retried", "evicted", lambda w: condition(w, "Evicted"))
    assert condition(evicted, "Evicted")["reason"] == "AdmissionCheck"  # type: ignore[index]
    assert condition(evicted, "Evicted")["message"] == (  # type: ignore[index]
        'Evicted due to AdmissionCheck in Retry state: "ac-retry" (no capacity yet)'
    )
    evicted = workload_of(
        plane, NS, "retried", "quota given back", lambda w: not w["status"].get("admission")
    )
    (state,) = evicted["status"]["admissionChecks"]
    assert (state["state"], state.get("retryCount")) == ("Pending", 1), state
    assert state["message"] == "Reset to Pending after eviction. Previously: Retry"
    assert condition(evicted, "Requeued", "False")["reason"] == "AdmissionCheck"  # type: ignore[index]
    assert evicted["status"]["requeueState"]["requeueAt"]
    cluster_queue(plane, "cq-retry", "quota freed", lambda q: reserving(q) == (0, 0))
    assert suspended(plane.get_json("job", "retried", "-n", NS))
    # Backing off, the Workload is pending and says which check sent it back, in which state.
    backing_off = position(env, evicted, pending=True)
    assert [(b["kind"], b["check"], b["state"]) for b in backing_off["whyPending"]["blockers"]] == [
        ("AdmissionCheck", "ac-retry", "Retry")
    ], backing_off

    # After the delay it is requeued and reserves again, the check Pending once more.
    again = workload_of(
        plane,
        NS,
        "retried",
        "requeued and reserved again",
        lambda w: condition(w, "QuotaReserved") and condition(w, "Requeued"),
    )
    assert condition(again, "Requeued")["reason"] == "BackoffFinished"  # type: ignore[index]
    assert check_states(again) == [("ac-retry", "Pending")]
    assert condition(again, "Admitted") is None
    controller.set_state(again, "ac-retry", "Ready")
    workload_of(plane, NS, "retried", "admitted", lambda w: condition(w, "Admitted"))
    wait_job(plane, NS, "retried", "unsuspended", unsuspended)


# -- Rejected ---------------------------------------------------------------------------


def test_rejected_deactivates_and_frees_the_quota(
    cluster: tuple[Aggregated, CheckController],
) -> None:
    env, controller = cluster
    plane = env.plane
    wl = reserved_behind_an_active_check(env, controller, "reject", "rejected")

    controller.set_state(wl, "ac-reject", "Rejected", "never fits")
    gone = workload_of(
        plane,
        NS,
        "rejected",
        "deactivated",
        lambda w: w["spec"].get("active") is False and not w["status"].get("admission"),
    )
    evicted = condition(gone, "Evicted")
    assert evicted is not None
    assert (evicted["reason"], evicted["message"]) == (
        "DeactivatedDueToAdmissionCheck",
        'The workload is deactivated due to AdmissionCheck in Rejected state: "ac-reject" '
        "(never fits)",
    )
    cluster_queue(plane, "cq-reject", "quota freed", lambda q: reserving(q) == (0, 0))
    standing = position(env, gone, pending=False)
    assert (standing["pending"], standing["reason"]) == (False, "Inactive"), standing
    assert suspended(plane.get_json("job", "rejected", "-n", NS))
    assert job_pods(plane, NS, "rejected") == []


# -- the check going inactive again -----------------------------------------------------


def test_a_check_reported_inactive_stops_new_admissions(
    cluster: tuple[Aggregated, CheckController],
) -> None:
    env, controller = cluster
    plane = env.plane
    create(plane, json.dumps(check_object("ac-pause")))
    controller.report_active("ac-pause")
    create(plane, checked_queue("cq-pause", "lq-pause", ["ac-pause"]))
    cluster_queue(plane, "cq-pause", "Active", lambda q: (active(q) or {}).get("status") == "True")
    controller.report_active("ac-pause", active=False)
    cluster_queue(
        plane,
        "cq-pause",
        "inactive again",
        lambda q: (active(q) or {}).get("reason") == "AdmissionCheckInactive",
    )
    plane.apply(unsuspended_job("paused", "lq-pause"))
    wl = workload_of(
        plane, NS, "paused", "pending", lambda w: condition(w, "QuotaReserved", "False")
    )
    assert not wl["status"].get("admission")
    controller.report_active("ac-pause")
    wl = workload_of(plane, NS, "paused", "reserved", lambda w: condition(w, "QuotaReserved"))
    controller.set_state(wl, "ac-pause", "Ready")
    workload_of(plane, NS, "paused", "admitted", lambda w: condition(w, "Admitted"))
    wait_for(
        lambda: True if job_pods(plane, NS, "paused") else None,
        timeout=120,
        what="the Pod of paused",
    )


# -- both API versions -------------------------------------------------------------------


def test_a_v1beta1_check_keeps_its_retry_delay_through_the_stored_version(
    cluster: tuple[Aggregated, CheckController],
) -> None:
    env, controller = cluster
    plane = env.plane
    old = {
        "apiVersion": "kueue.x-k8s.io/v1beta1",
        "kind": "AdmissionCheck",
        "metadata": {"name": "ac-v1beta1"},
        "spec": {"controllerName": CONTROLLER, "retryDelayMinutes": 5},
    }
    create(plane, json.dumps(old))  # through our conversion webhook: stored as v1beta2
    stored = plane.get_json("admissionchecks.v1beta2.kueue.x-k8s.io", "ac-v1beta1")
    assert "retryDelayMinutes" not in stored["spec"]
    assert stored["spec"]["controllerName"] == CONTROLLER
    back = plane.get_json("admissionchecks.v1beta1.kueue.x-k8s.io", "ac-v1beta1")
    assert back["spec"]["retryDelayMinutes"] == 5
    assert "queuescope.io/conversion-data" not in (back["metadata"].get("annotations") or {})
    # The controller's Active condition, written in v1beta2, reads the same in v1beta1.
    controller.report_active("ac-v1beta1")
    back = plane.get_json("admissionchecks.v1beta1.kueue.x-k8s.io", "ac-v1beta1")
    assert (active(back) or {}).get("status") == "True"


# -- the queue's checks change under a reservation ---------------------------------------


def test_a_reservation_waiting_on_a_check_the_queue_drops_is_admitted(
    cluster: tuple[Aggregated, CheckController],
) -> None:
    env, controller = cluster
    plane = env.plane
    reserved_behind_an_active_check(env, controller, "drop", "dropped")
    create(plane, checked_queue("cq-drop", "lq-drop", []))
    admitted = workload_of(plane, NS, "dropped", "admitted", lambda w: condition(w, "Admitted"))
    assert check_states(admitted) == []
    wait_job(plane, NS, "dropped", "unsuspended", unsuspended)


# -- no Pod before admission ------------------------------------------------------------


def test_an_unsuspended_job_gets_no_pod_until_it_is_admitted(
    cluster: tuple[Aggregated, CheckController],
) -> None:
    env, _ = cluster
    plane = env.plane
    # This module's cluster has our webhooks (kube-apiserver runs them, not a fake).
    mutating = plane.get_json("mutatingwebhookconfiguration", "queuescope-mutating")
    assert [w["name"] for w in mutating["webhooks"]] == [
        "mjob.queuescope.io",
        "mjob-default-queue.queuescope.io",
        "mpod.queuescope.io",
        "mdeployment.queuescope.io",
        "mdeployment-default-queue.queuescope.io",
        "mstatefulset.queuescope.io",
        "mstatefulset-default-queue.queuescope.io",
        "mjobset.queuescope.io",
        "mjobset-default-queue.queuescope.io",
    ]
    plane.apply(flavor_queue(NS, "cq-plain", "lq-plain", "on-demand", "1"))
    first = json.loads(
        PodJob("first", NS, "lq-plain", pod_annotations={RUN_FOR_ANNOTATION: "6s"}).manifest()
    )
    del first["spec"]["suspend"]
    plane.apply(json.dumps(first))
    wait_pods(plane, NS, "first", "running", lambda ps: ps and all(map(ready, ps)))

    watch = PodWatch(plane, "second")
    try:
        plane.apply(unsuspended_job("second", "lq-plain"))
        assert suspended(plane.get_json("job", "second", "-n", NS))  # stored suspended
        waiting = workload_of(
            plane,
            NS,
            "second",
            "waiting for quota",
            lambda w: condition(w, "QuotaReserved", "False"),
        )
        assert not waiting["status"].get("admission")
        # While it waits the Job controller sees a suspended Job and makes no Pod.
        assert job_pods(plane, NS, "second") == []
        # first's Pod succeeds after 6 s and frees the quota: second is admitted and runs.
        admitted = workload_of(plane, NS, "second", "admitted", lambda w: condition(w, "Admitted"))
        wait_job(plane, NS, "second", "unsuspended", unsuspended)
        wait_pods(plane, NS, "second", "Ready", lambda ps: ps and all(map(ready, ps)))
    finally:
        seen = watch.stop()
    admitted_at = condition(admitted, "Admitted")["lastTransitionTime"]  # type: ignore[index]
    assert seen, "the watch saw the Job's Pod"
    assert all(p["metadata"]["creationTimestamp"] >= admitted_at for p in seen), (admitted_at, seen)
