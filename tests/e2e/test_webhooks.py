"""The admission webhooks on the real kube-apiserver (issue 13; docs/operations.md,
"Admission webhooks").

Our server runs in cluster mode; the MutatingWebhookConfiguration and
ValidatingWebhookConfiguration of manifests/webhooks are applied as written, with only
the Service port (the ExternalName Service reaches the local process) and the caBundle
(this session's CA) changed, and deleted again when the module ends (later modules share
this kube-apiserver and must not depend on a server that is gone).

No kube-controller-manager runs here, so no Pod is ever created for a Job whatever its
`suspend`: the tests assert on the stored Job (`spec.suspend == true`).
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import yaml
from cryptography import x509

from tests.e2e.cluster import (
    ClusterModeServer,
    cpu_queue,
    delete_webhooks,
    flavor,
    wait_json,
    webhook_documents,
)
from tests.e2e.harness import ControlPlane, HarnessError, wait_for
from tests.e2e.pods import KUEUE_EXAMPLES
from tests.unit.test_webhook_rules import CASES, NS, SAYS, Case
from visibility_server.certs import check_live_webhooks, generate_cert_dir
from visibility_server.webhooks.registrations import WEBHOOK_CONFIGURATIONS

pytestmark = pytest.mark.realcluster

REPO = Path(__file__).resolve().parents[2]
SAMPLE_CRONJOB = KUEUE_EXAMPLES / "jobs" / "sample-cronjob.yaml"
JOBS_NS = "webhook-jobs"
DEFAULT_NS = "webhook-default"
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
SERVICE = "queuescope-visibility.queuescope-system.svc"
QUEUES = "\n---\n".join(
    [
        flavor("wh-pool", pool="a"),
        cpu_queue(JOBS_NS, "wh-pool", "cq-webhook", "lq", "4"),
        cpu_queue(DEFAULT_NS, "wh-pool", "cq-webhook-default", "default", "4"),
        json.dumps({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}}),
        json.dumps(
            {
                "apiVersion": "kueue.x-k8s.io/v1beta2",
                "kind": "WorkloadPriorityClass",
                "metadata": {"name": "high"},
                "value": 100,
            }
        ),
    ]
)
# Refused by kube-apiserver itself (object metadata, the CRD schema, the Job's own
# validation) before any webhook is asked, with the field as kube-apiserver names it;
# every other case must be OUR denial, naming the case's field.
REFUSED_EARLIER = {
    "meta-name": "metadata.name",
    "meta-annotations-size": "metadata.annotations",
    "meta-label-key": "metadata.labels",
    "meta-label-value": "metadata.labels",
    "meta-annotation-key": "metadata.annotations",
    "lq-namespace-name": "metadata.labels",
    "wpc-name": "metadata.name",
    "wl-pod-set-duplicate": "spec.podSets[1]",
    "wl-preemption-gate-duplicate": "spec.preemptionGates[1]",
    "wl-priority-ref-kind": "spec.priorityClassRef",
    # The Job controller's pod label carries the Job's name.
    "job-name-length": "spec.template.labels",
    "job-parallelism-negative": "spec.parallelism",
    "job-request-negative": "spec.template.spec.containers[0].resources.requests[cpu]",
}


@pytest.fixture(scope="module")
def cluster(
    control_plane: ControlPlane, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[ControlPlane, ClusterModeServer]]:
    root: Path = tmp_path_factory.mktemp("webhooks")
    server = ClusterModeServer(control_plane, root)
    server.prepare()
    control_plane.apply(QUEUES)
    server.start()
    try:
        control_plane.apply(
            "\n---\n".join(
                json.dumps(d)
                for d in webhook_documents(server.port, server.certs.ca_cert.read_bytes())
            )
        )
        # kube-apiserver picks the configurations up through its own watch: wait until a
        # bad object is refused by our webhook.
        bad = next(case for case in CASES if case.id == "job-queue-name")
        wait_for(
            lambda: (
                True
                if "vjob.queuescope.io" in apply(control_plane, bad.manifest, True).stderr
                else None
            ),
            timeout=60,
            what="the validating webhook in force",
        )
        yield control_plane, server
    finally:
        delete_webhooks(control_plane)
        server.stop()


def apply(plane: ControlPlane, obj: dict[str, Any], dry_run: bool = False) -> Any:
    args = ["apply", "-f", "-"] + (["--dry-run=server"] if dry_run else [])
    return plane.kubectl(*args, input=json.dumps(obj), check=False)


def job(
    name: str, namespace: str = JOBS_NS, queue: str | None = "lq", **spec: Any
) -> dict[str, Any]:
    metadata: dict[str, Any] = {"name": name, "namespace": namespace}
    if queue is not None:
        metadata["labels"] = {QUEUE_LABEL: queue}
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": metadata,
        "spec": {
            "parallelism": 1,
            "completions": 1,
            "template": {
                "spec": {
                    "restartPolicy": "Never",
                    "containers": [
                        {"name": "c", "image": "busybox", "resources": {"requests": {"cpu": "1"}}}
                    ],
                }
            },
            **spec,
        },
    }


def get(plane: ControlPlane, *args: str) -> dict[str, Any]:
    return dict(plane.get_json(*args))


# -- mutation ---------------------------------------------------------------------------


def test_an_unsuspended_job_with_a_queue_is_stored_suspended(
    cluster: tuple[ControlPlane, ClusterModeServer],
) -> None:
    plane, _ = cluster
    # Far more than the queue holds: it stays pending, so nothing unsuspends it.
    obj = job("too-big", suspend=False)
    obj["spec"]["template"]["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "100"
    result = apply(plane, obj)
    assert result.returncode == 0, result.stderr
    stored = get(plane, "job", "too-big", "-n", JOBS_NS)
    assert stored["spec"]["suspend"] is True
    assert stored["metadata"]["labels"][QUEUE_LABEL] == "lq"


def test_a_job_without_a_queue_elsewhere_is_left_alone(
    cluster: tuple[ControlPlane, ClusterModeServer],
) -> None:
    plane, _ = cluster
    result = apply(plane, job("unmanaged", queue=None, suspend=False))
    assert result.returncode == 0, result.stderr
    stored = get(plane, "job", "unmanaged", "-n", JOBS_NS)
    assert stored["spec"]["suspend"] is False
    assert QUEUE_LABEL not in (stored["metadata"].get("labels") or {})


def test_a_job_in_a_namespace_with_a_default_queue_gets_it(
    cluster: tuple[ControlPlane, ClusterModeServer],
) -> None:
    plane, _ = cluster
    obj = job("defaulted", DEFAULT_NS, queue=None, suspend=False)
    obj["spec"]["template"]["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "100"
    # The server learns of the LocalQueue through its watch: ask (dry run) until it knows.
    wait_for(
        lambda: True if QUEUE_LABEL in _dry_labels(plane, obj) else None,
        timeout=60,
        what="the default LocalQueue known to the server",
    )
    assert apply(plane, obj).returncode == 0
    stored = get(plane, "job", "defaulted", "-n", DEFAULT_NS)
    assert stored["metadata"]["labels"][QUEUE_LABEL] == "default"
    assert stored["spec"]["suspend"] is True


def test_kueues_cronjob_example_has_each_of_its_jobs_queued(
    cluster: tuple[ControlPlane, ClusterModeServer],
) -> None:
    """Kueue v0.19.2's `jobs/sample-cronjob.yaml`, unchanged but for its namespace: a Job
    the CronJob makes (here by `kubectl create job --from`, which makes it as the
    CronJob controller would, from the job template, owned by the CronJob) carries the
    template's queue label, so it is stored suspended and gets its Workload."""
    plane, _ = cluster
    [cronjob] = yaml.safe_load_all(SAMPLE_CRONJOB.read_text())
    cronjob["metadata"]["namespace"] = JOBS_NS
    assert apply(plane, cronjob).returncode == 0
    made = plane.kubectl(
        *("create", "job", "from-cronjob", "-n", JOBS_NS, "--from=cronjob/sample-cronjob"),
        check=False,
    )
    assert made.returncode == 0, made.stderr
    stored = get(plane, "job", "from-cronjob", "-n", JOBS_NS)
    assert stored["spec"]["suspend"] is True
    assert stored["metadata"]["labels"][QUEUE_LABEL] == "user-queue"
    [owner] = stored["metadata"]["ownerReferences"]
    assert (owner["kind"], owner["name"]) == ("CronJob", "sample-cronjob")
    doc = wait_json(
        plane,
        "the Workload of the CronJob's Job",
        lambda d: [
            w
            for w in d["items"]
            if any(r.get("name") == "from-cronjob" for r in w["metadata"]["ownerReferences"])
        ],
        "workloads.kueue.x-k8s.io",
        "-n",
        JOBS_NS,
    )
    [workload] = [
        w
        for w in doc["items"]
        if any(r.get("name") == "from-cronjob" for r in w["metadata"]["ownerReferences"])
    ]
    assert workload["spec"]["queueName"] == "user-queue"
    assert [ps["count"] for ps in workload["spec"]["podSets"]] == [3]


def _dry_labels(plane: ControlPlane, obj: dict[str, Any]) -> str:
    result = plane.kubectl(
        "create", "-f", "-", "--dry-run=server", "-o", "json", input=json.dumps(obj), check=False
    )
    if result.returncode != 0:
        return ""
    return json.dumps(json.loads(result.stdout)["metadata"].get("labels") or {})


# -- one denial per rule ----------------------------------------------------------------


@pytest.mark.parametrize("dry_run", [False, True], ids=["apply", "dry-run-server"])
@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_every_rule_is_denied_by_kubectl_apply(
    cluster: tuple[ControlPlane, ClusterModeServer], case: Case, dry_run: bool
) -> None:
    plane, _ = cluster
    result = apply(plane, case.manifest, dry_run)
    assert result.returncode == 1, (result.stdout, result.stderr)
    if case.id in REFUSED_EARLIER:
        assert f" is invalid: {REFUSED_EARLIER[case.id]}" in result.stderr, result.stderr
        return
    assert case.field in result.stderr, result.stderr
    webhook = "vjob.queuescope.io" if case.kind == "Job" else "vkueue.queuescope.io"
    assert f'admission webhook "{webhook}" denied the request: ' in result.stderr, result.stderr
    assert SAYS.get(case.id, "") in result.stderr


# -- update rules on live objects -------------------------------------------------------


def _admitted_job(plane: ControlPlane, name: str, **extra: Any) -> dict[str, Any]:
    obj = job(name, suspend=False, **extra)
    assert apply(plane, obj).returncode == 0
    return dict(
        wait_json(
            plane,
            f"job {name} admitted and unsuspended",
            lambda j: j["spec"].get("suspend") is False,
            "job",
            name,
            "-n",
            JOBS_NS,
        )
    )


def _workload_of(plane: ControlPlane, job_name: str) -> dict[str, Any]:
    doc = wait_json(
        plane,
        f"the admitted Workload of job {job_name}",
        lambda d: [
            w
            for w in d["items"]
            if any(r.get("name") == job_name for r in w["metadata"].get("ownerReferences", []))
            and w.get("status", {}).get("admission")
        ],
        "workloads.kueue.x-k8s.io",
        "-n",
        JOBS_NS,
    )
    return next(
        w
        for w in doc["items"]
        if any(r.get("name") == job_name for r in w["metadata"].get("ownerReferences", []))
    )


def _denied(result: Any, webhook: str, says: str) -> None:
    assert result.returncode == 1, result.stdout
    assert f'admission webhook "{webhook}" denied the request: ' in result.stderr, result.stderr
    assert says in result.stderr, result.stderr


def test_a_running_job_keeps_its_queue_and_its_workload_its_spec(
    cluster: tuple[ControlPlane, ClusterModeServer],
) -> None:
    plane, _ = cluster
    _admitted_job(plane, "runner")
    moved = plane.kubectl(
        "label", "job", "runner", "-n", JOBS_NS, f"{QUEUE_LABEL}=other", "--overwrite", check=False
    )
    _denied(
        moved,
        "vjob.queuescope.io",
        f'metadata.labels[{QUEUE_LABEL}]: Invalid value: "other": field is immutable',
    )
    priority = plane.kubectl(
        "label", "job", "runner", "-n", JOBS_NS, "kueue.x-k8s.io/priority-class=high", check=False
    )
    _denied(priority, "vjob.queuescope.io", "WorkloadPriorityClass cannot be added")
    workload = _workload_of(plane, "runner")
    requeued = plane.kubectl(
        "patch",
        "workloads.kueue.x-k8s.io",
        workload["metadata"]["name"],
        "-n",
        JOBS_NS,
        "--type=merge",
        "-p",
        json.dumps({"spec": {"queueName": "elsewhere"}}),
        check=False,
    )
    _denied(requeued, "vkueue.queuescope.io", "spec.queueName: field is immutable")


def test_a_priority_class_label_is_never_removed(
    cluster: tuple[ControlPlane, ClusterModeServer],
) -> None:
    plane, _ = cluster
    obj = job("classy", suspend=True)
    obj["metadata"]["labels"]["kueue.x-k8s.io/priority-class"] = "high"
    obj["spec"]["template"]["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "100"
    assert apply(plane, obj).returncode == 0
    result = plane.kubectl(
        "label", "job", "classy", "-n", JOBS_NS, "kueue.x-k8s.io/priority-class-", check=False
    )
    _denied(result, "vjob.queuescope.io", "WorkloadPriorityClass cannot be removed from a workload")


def test_partial_admission_fixes_a_running_jobs_parallelism(
    cluster: tuple[ControlPlane, ClusterModeServer],
) -> None:
    plane, _ = cluster
    obj = job("partial", suspend=False, parallelism=3, completions=3)
    obj["metadata"]["annotations"] = {"kueue.x-k8s.io/job-min-parallelism": "1"}
    assert apply(plane, obj).returncode == 0
    wait_json(
        plane,
        "job partial admitted and unsuspended",
        lambda j: j["spec"].get("suspend") is False,
        "job",
        "partial",
        "-n",
        JOBS_NS,
    )
    result = plane.kubectl(
        "patch",
        "job",
        "partial",
        "-n",
        JOBS_NS,
        "--type=merge",
        "-p",
        json.dumps({"spec": {"parallelism": 2}}),
        check=False,
    )
    _denied(
        result,
        "vjob.queuescope.io",
        "spec.parallelism: Forbidden: cannot change when partial admission is enabled",
    )


def test_a_local_queue_keeps_its_cluster_queue(
    cluster: tuple[ControlPlane, ClusterModeServer],
) -> None:
    plane, _ = cluster
    result = plane.kubectl(
        "patch",
        "localqueues.kueue.x-k8s.io",
        "lq",
        "-n",
        JOBS_NS,
        "--type=merge",
        "-p",
        json.dumps({"spec": {"clusterQueue": "cq-webhook-default"}}),
        check=False,
    )
    _denied(result, "vkueue.queuescope.io", "spec.clusterQueue: field is immutable")


def test_a_flavor_with_a_topology_keeps_its_spec(
    cluster: tuple[ControlPlane, ClusterModeServer],
) -> None:
    plane, _ = cluster
    rf = {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "ResourceFlavor",
        "metadata": {"name": "wh-topology"},
        "spec": {"topologyName": "racks", "nodeLabels": {"pool": "t"}},
    }
    assert apply(plane, rf).returncode == 0
    changed = copy.deepcopy(rf)
    changed["spec"]["nodeLabels"] = {"pool": "u"}
    _denied(
        apply(plane, changed),
        "vkueue.queuescope.io",
        "spec: resourceFlavorSpec are immutable when topologyName is set",
    )


def test_the_queue_label_stays_where_a_default_queue_exists(
    cluster: tuple[ControlPlane, ClusterModeServer],
) -> None:
    plane, _ = cluster
    obj = job("keeps-default", DEFAULT_NS, queue="default", suspend=True)
    obj["spec"]["template"]["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "100"
    assert apply(plane, obj).returncode == 0
    result = plane.kubectl(
        "label", "job", "keeps-default", "-n", DEFAULT_NS, f"{QUEUE_LABEL}-", check=False
    )
    _denied(
        result, "vjob.queuescope.io", "queue-name must not be empty in namespace with default queue"
    )


# -- certificates ------------------------------------------------------------------------


def test_certs_verify_finds_the_live_webhooks_trusting_the_serving_certificate(
    cluster: tuple[ControlPlane, ClusterModeServer],
) -> None:
    plane, server = cluster
    leaf = x509.load_pem_x509_certificate(server.certs.tls_cert.read_bytes())
    configs = {name: get(plane, kind.lower(), name) for kind, name, _ in WEBHOOK_CONFIGURATIONS}
    found = check_live_webhooks(leaf, configs, now=datetime.now(UTC))
    assert (found.errors, found.warnings) == ([], [])
    other = generate_cert_dir(server.root / "other-certs", now=datetime.now(UTC))
    stranger = x509.load_pem_x509_certificate(other.tls_cert.read_bytes())
    refused = check_live_webhooks(stranger, configs, now=datetime.now(UTC))
    assert len(refused.errors) == sum(len(names) for _, _, names in WEBHOOK_CONFIGURATIONS)


# -- fail closed: our server down --------------------------------------------------------


def test_with_the_server_down_only_our_objects_are_refused(
    cluster: tuple[ControlPlane, ClusterModeServer],
) -> None:
    plane, server = cluster
    server.stop()
    try:
        lq = {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "LocalQueue",
            "metadata": {"name": "while-down", "namespace": JOBS_NS},
            "spec": {"clusterQueue": "cq-webhook"},
        }
        refused = apply(plane, lq)
        assert refused.returncode == 1
        assert 'failed calling webhook "vkueue.queuescope.io"' in refused.stderr, refused.stderr
        assert SERVICE in refused.stderr
        labelled = apply(plane, job("while-down", suspend=False))
        assert labelled.returncode == 1
        assert 'failed calling webhook "mjob.queuescope.io"' in labelled.stderr, labelled.stderr
        with pytest.raises(HarnessError):
            get(plane, "job", "while-down", "-n", JOBS_NS)

        # Everything that is not ours goes through.
        plane.apply(
            json.dumps({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "wh-down"}})
        )
        plane.apply(
            json.dumps(
                {
                    "apiVersion": "v1",
                    "kind": "ConfigMap",
                    "metadata": {"name": "cm", "namespace": "wh-down"},
                    "data": {"k": "v"},
                }
            )
        )
        plane.apply(
            json.dumps(
                {
                    "apiVersion": "v1",
                    "kind": "Pod",
                    "metadata": {"name": "pod", "namespace": "wh-down"},
                    "spec": {"containers": [{"name": "c", "image": "busybox"}]},
                }
            )
        )
        # A Job without the label: the defaulting webhook is Ignore, so it is created as written.
        plain = apply(plane, job("plain", "wh-down", queue=None, suspend=False))
        assert plain.returncode == 0, plain.stderr
        assert get(plane, "job", "plain", "-n", "wh-down")["spec"]["suspend"] is False
        for kind, name in (("configmap", "cm"), ("pod", "pod")):
            assert get(plane, kind, name, "-n", "wh-down")["metadata"]["name"] == name
    finally:
        server.start()
    # Back up: our objects are accepted again.
    assert apply(plane, lq).returncode == 0
