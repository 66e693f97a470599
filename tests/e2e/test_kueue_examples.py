"""Done means (issues 12 and 13): every ResourceFlavor, ClusterQueue, LocalQueue, Cohort,
WorkloadPriorityClass, AdmissionCheck, batch/v1 Job, and Topology,
ProvisioningRequestConfig, MultiKueueConfig and MultiKueueCluster document of Kueue
v0.19.2's example manifests applies unchanged to the real kube-apiserver with queuescope's
CRDs installed.

Each document is created with server-side dry run and strict field validation: the API
server runs its whole admission and validation chain, and a field our schema lacks is an
error rather than silently pruned. The examples are kueue.x-k8s.io/v1beta2, the stored
version, so no conversion is involved. The documents are counted, so an example that
disappears (or a kind that stops being selected) fails the test too.

The four files that define an AdmissionCheck (issue 13) are applied as a user would,
with `kubectl apply -f`, through our webhooks to our server in cluster mode: their
ClusterQueues are inactive until the check's controller (the test's, tests/e2e/checks.py)
reports the check Active, and Active after. So are the other files that use the kinds
queuescope stores but does not act on (docs/scheduling.md#kinds-stored-but-not-acted-on):
applied whole, every object stored as given and validated by our webhook, and their
ClusterQueues Active (a Topology gates nothing). Every test deletes what it applied, and
first deletes what an earlier module may have left under the same names.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from scheduler.api.conversion import STASH_ANNOTATION
from tests.e2e.checks import CheckController, active
from tests.e2e.cluster import (
    ClusterModeServer,
    crd_documents,
    delete_webhooks,
    install,
    subset,
    wait_json,
    webhook_documents,
)
from tests.e2e.harness import ControlPlane

pytestmark = pytest.mark.realcluster

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO.parent / "shared" / "kueue-examples" / "v0.19.2"
KUEUE_KINDS = {
    "ResourceFlavor",
    "ClusterQueue",
    "LocalQueue",
    "Cohort",
    "WorkloadPriorityClass",
    "AdmissionCheck",
    # Stored and validated, not acted on.
    "Topology",
    "ProvisioningRequestConfig",
    "MultiKueueConfig",
    "MultiKueueCluster",
}
# Counted in the v0.19.2 examples: 25 ResourceFlavors, 20 ClusterQueues, 19 LocalQueues,
# 5 Cohorts, 3 WorkloadPriorityClasses, 4 AdmissionChecks, 20 batch/v1 Jobs, 4 Topologies,
# 2 ProvisioningRequestConfigs, 2 MultiKueueConfigs, 3 MultiKueueClusters.
EXPECTED = {
    "ResourceFlavor": 25,
    "ClusterQueue": 20,
    "LocalQueue": 19,
    "Cohort": 5,
    "WorkloadPriorityClass": 3,
    "AdmissionCheck": 4,
    "Job": 20,
    "Topology": 4,
    "ProvisioningRequestConfig": 2,
    "MultiKueueConfig": 2,
    "MultiKueueCluster": 3,
}


def selected(doc: Any) -> bool:
    if not isinstance(doc, dict):
        return False
    api_version, kind = doc.get("apiVersion", ""), doc.get("kind")
    if api_version.startswith("kueue.x-k8s.io/"):
        return kind in KUEUE_KINDS
    return (api_version, kind) == ("batch/v1", "Job")


def example_documents() -> list[tuple[str, int, dict[str, Any]]]:
    found: list[tuple[str, int, dict[str, Any]]] = []
    for path in sorted(EXAMPLES.rglob("*.yaml")):
        for index, doc in enumerate(yaml.safe_load_all(path.read_text())):
            if selected(doc):
                found.append((str(path.relative_to(EXAMPLES)), index, doc))
    return found


def test_every_example_of_our_kinds_applies_unchanged(control_plane: ControlPlane) -> None:
    if not EXAMPLES.is_dir():
        pytest.fail(f"Kueue's examples are missing: {EXAMPLES}")
    plane = control_plane
    install(plane)
    documents = example_documents()
    counts: dict[str, int] = {}
    for _, _, doc in documents:
        counts[doc["kind"]] = counts.get(doc["kind"], 0) + 1
    assert counts == EXPECTED
    namespaces = {
        doc["metadata"].get("namespace", "default")
        for _, _, doc in documents
        if doc["kind"] in ("LocalQueue", "Job")
    }
    plane.apply(
        "\n---\n".join(
            json.dumps({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
            for ns in sorted(namespaces)
        )
    )
    refused: list[str] = []
    for source, index, doc in documents:
        result = plane.kubectl(
            "create",
            "--dry-run=server",
            "--validate=strict",
            "-o",
            "json",
            "-f",
            "-",
            input=json.dumps(doc),
            check=False,
        )
        if result.returncode != 0:
            refused.append(f"{source}: document {index} ({doc['kind']}): {result.stderr.strip()}")
            continue
        created = json.loads(result.stdout)
        # Unchanged: every field given is kept as given (defaults may only add fields).
        given = {k: v for k, v in doc.items() if k != "metadata"}
        assert subset(given, created), (source, index, created)
    assert refused == [], "\n".join(refused)


# -- the files applied whole, through our server -------------------------------------

# The kinds queuescope stores and validates but does not act on.
NOT_ACTED_ON = {"ProvisioningRequestConfig", "MultiKueueConfig", "MultiKueueCluster", "Topology"}
# The example files that hold an AdmissionCheck, with the ClusterQueues they define.
CHECK_EXAMPLES = {
    "site/static/examples/sample-admission-check.yaml": [],
    "site/static/examples/provisioning/provisioning-setup.yaml": ["cluster-queue"],
    "site/static/examples/multikueue/multikueue-setup.yaml": ["cluster-queue"],
    "site/static/examples/multikueue/tas/manager-setup.yaml": ["cluster-queue"],
}
# The other files that use a kind not acted on, with their ClusterQueues.
OTHER_EXAMPLES = {
    "site/static/examples/tas/sample-queues.yaml": ["tas-cluster-queue"],
    "site/static/examples/tas/sample-gpu-queues.yaml": ["tas-cluster-queue"],
    "site/static/examples/multikueue/tas/worker-setup.yaml": ["worker-cluster-queue"],
}
PLURALS = {doc["spec"]["names"]["kind"]: doc["spec"]["names"]["plural"] for doc in crd_documents()}


@pytest.fixture(scope="module")
def cluster(
    control_plane: ControlPlane, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ControlPlane]:
    """Our server in cluster mode, with its webhooks, for the examples to go through."""
    server = ClusterModeServer(control_plane, tmp_path_factory.mktemp("kueue-examples"))
    server.prepare()
    server.start()
    try:
        control_plane.apply(
            "\n---\n".join(
                json.dumps(d)
                for d in webhook_documents(server.port, server.certs.ca_cert.read_bytes())
            )
        )
        yield control_plane
    finally:
        delete_webhooks(control_plane)
        server.stop()


def _files_with(kinds: set[str]) -> list[str]:
    return sorted(
        str(path.relative_to(EXAMPLES))
        for path in EXAMPLES.rglob("*.yaml")
        if any(
            isinstance(d, dict) and d.get("kind") in kinds
            for d in yaml.safe_load_all(path.read_text())
        )
    )


def test_the_check_examples_and_the_others_are_all_counted() -> None:
    assert _files_with({"AdmissionCheck"}) == sorted(CHECK_EXAMPLES)
    # Every check example also uses one (its check's parameters, or a Topology).
    assert _files_with(NOT_ACTED_ON) == sorted({*CHECK_EXAMPLES, *OTHER_EXAMPLES})


def _delete(plane: ControlPlane, path: Path) -> None:
    plane.kubectl("delete", "-f", str(path), "--ignore-not-found", "--wait", check=False)


def _apply_whole(plane: ControlPlane, source: str) -> list[dict[str, Any]]:
    """`kubectl apply -f` of the file as a user runs it; every document stored as given."""
    path = EXAMPLES / source
    docs = [d for d in yaml.safe_load_all(path.read_text()) if isinstance(d, dict)]
    # Another module may have left objects of the same names (ResourceFlavors, queues).
    _delete(plane, path)
    result = plane.kubectl("apply", "-f", str(path), check=False)
    assert result.returncode == 0, result.stderr
    assert "denied" not in result.stderr and "Warning" not in result.stderr, result.stderr
    for doc in docs:
        resource = f"{PLURALS[doc['kind']]}.kueue.x-k8s.io"
        where = ["-n", doc["metadata"]["namespace"]] if "namespace" in doc["metadata"] else []
        stored = plane.get_json(resource, doc["metadata"]["name"], *where)
        assert stored["apiVersion"] == doc["apiVersion"]
        assert subset(doc.get("spec", {}), stored.get("spec", {})), (source, stored)
    return docs


def _check_not_acted_on_objects(plane: ControlPlane, docs: list[dict[str, Any]]) -> None:
    """What the CRDs add to the stored objects of the kinds not acted on: defaults, and
    the older version through our conversion webhook."""
    for doc in docs:
        name = doc["metadata"]["name"]
        if doc["kind"] == "ProvisioningRequestConfig":
            stored = plane.get_json("provisioningrequestconfigs.kueue.x-k8s.io", name)
            retry = {"backoffLimitCount": 3, "backoffBaseSeconds": 60, "backoffMaxSeconds": 1800}
            assert stored["spec"]["retryStrategy"] == {
                **retry,
                **doc["spec"].get("retryStrategy", {}),
            }
        if doc["kind"] == "MultiKueueCluster":
            old = plane.get_json("multikueueclusters.v1beta1.kueue.x-k8s.io", name)
            assert old["spec"] == {"kubeConfig": doc["spec"]["clusterSource"]["kubeConfig"]}
        if doc["kind"] == "MultiKueueConfig":
            old = plane.get_json("multikueueconfigs.v1beta1.kueue.x-k8s.io", name)
            assert old["spec"] == doc["spec"]


def _wait_active(plane: ControlPlane, source: str, queues: list[str]) -> None:
    for name in queues:
        wait_json(
            plane,
            f"{source}: {name} Active",
            lambda q: (active(q) or {}).get("status") == "True",
            "clusterqueues.kueue.x-k8s.io",
            name,
        )


@pytest.mark.parametrize("source", sorted(CHECK_EXAMPLES))
def test_a_check_example_applies_and_its_queue_turns_active_once_the_check_is(
    cluster: ControlPlane, source: str
) -> None:
    plane = cluster
    path = EXAMPLES / source
    try:
        docs = _apply_whole(plane, source)
        checks = [d["metadata"]["name"] for d in docs if d["kind"] == "AdmissionCheck"]
        queues = [d["metadata"]["name"] for d in docs if d["kind"] == "ClusterQueue"]
        assert queues == CHECK_EXAMPLES[source]
        assert {d["kind"] for d in docs} & NOT_ACTED_ON
        _check_not_acted_on_objects(plane, docs)

        # No controller has reported: every queue naming a check is inactive.
        for name in queues:
            gated = wait_json(
                plane,
                f"{source}: {name} inactive",
                lambda q: (active(q) or {}).get("reason") == "AdmissionCheckInactive",
                "clusterqueues.kueue.x-k8s.io",
                name,
            )
            assert active(gated)["message"] == (  # type: ignore[index]
                f"Can't admit new workloads: references inactive AdmissionCheck(s): "
                f"{','.join(sorted(checks))}."
            )
        controller = CheckController(plane)
        for check in checks:
            controller.report_active(check)
        stored_check = plane.get_json("admissionchecks.kueue.x-k8s.io", checks[0])
        assert (active(stored_check) or {}).get("status") == "True"
        _wait_active(plane, source, queues)
    finally:
        # The next file defines the same names: start it from nothing.
        _delete(plane, path)


@pytest.mark.parametrize("source", sorted(OTHER_EXAMPLES))
def test_an_example_with_a_kind_not_acted_on_applies_and_its_queue_is_active(
    cluster: ControlPlane, source: str
) -> None:
    plane = cluster
    try:
        docs = _apply_whole(plane, source)
        queues = [d["metadata"]["name"] for d in docs if d["kind"] == "ClusterQueue"]
        assert queues == OTHER_EXAMPLES[source]
        assert "Topology" in {d["kind"] for d in docs}
        _check_not_acted_on_objects(plane, docs)
        _wait_active(plane, source, queues)
    finally:
        _delete(plane, EXAMPLES / source)


def test_a_v1beta1_multikueue_cluster_converts_and_is_validated_as_stored(
    cluster: ControlPlane,
) -> None:
    """The older form goes through our conversion webhook into the stored one, and our
    validating webhook names the v1beta1 field of what the stored form would break."""
    plane = cluster
    name = "e2e-mkc-v1beta1"
    kube_config = {"location": "/etc/worker.kubeconfig", "locationType": "Path"}
    doc = {
        "apiVersion": "kueue.x-k8s.io/v1beta1",
        "kind": "MultiKueueCluster",
        "metadata": {"name": name},
        "spec": {"kubeConfig": kube_config},
    }
    try:
        plane.apply(json.dumps(doc))
        stored = plane.get_json("multikueueclusters.v1beta2.kueue.x-k8s.io", name)
        assert stored["spec"] == {"clusterSource": {"kubeConfig": kube_config}}
        # Nothing lacked a v1beta2 place: no conversion record.
        assert STASH_ANNOTATION not in stored["metadata"].get("annotations", {})
        empty = {
            **doc,
            "metadata": {"name": f"{name}-empty"},
            "spec": {"kubeConfig": {"location": ""}},
        }
        result = plane.kubectl("apply", "-f", "-", input=json.dumps(empty), check=False)
        assert result.returncode != 0
        assert 'admission webhook "vkueue.queuescope.io" denied the request' in result.stderr
        assert "exactly one of the fields in [kubeConfig clusterProfileRef]" in result.stderr
    finally:
        plane.kubectl("delete", "multikueueclusters.kueue.x-k8s.io", name, "--ignore-not-found")
