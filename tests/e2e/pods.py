"""What the `test_pods_*` modules share: Jobs whose Pods kwok runs, the sample flavors in
the API, and waits on Jobs, Pods and Workloads (docs/cluster.md#real-cluster-tests)."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.cluster import (
    KUEUE,
    ClusterModeServer,
    delete_webhooks,
    stored_version,
    wait_json,
    webhook_documents,
)
from tests.e2e.harness import ControlPlane, wait_for
from tests.e2e.nodes import SAMPLE_FLAVORS, NodeAgents

# Kueue v0.19.2's example manifests, beside the repository (never copied into it).
KUEUE_EXAMPLES = (
    Path(__file__).resolve().parents[2].parent
    / "shared"
    / "kueue-examples"
    / "v0.19.2"
    / "site"
    / "static"
    / "examples"
)
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
# What the `pod` integration's webhook puts on a Pod it holds (docs/cluster.md#plain-pods).
GATE = {"name": "kueue.x-k8s.io/admission"}
MANAGED = "kueue.x-k8s.io/managed"
PRIORITY_LABEL = "kueue.x-k8s.io/priority-class"
PARENT = "kueue.x-k8s.io/pod-suspending-parent"
WORKLOADS = "workloads.kueue.x-k8s.io"


def sample_flavors() -> str:
    """manifests/samples/10-flavors.yaml in the stored version: the flavors whose labels
    and taints the kwok Nodes carry."""
    return stored_version(SAMPLE_FLAVORS.read_text())


@contextmanager
def configured_server(
    nodes: NodeAgents, root: Path, config: str, namespace: str, queues: str
) -> Iterator[ClusterModeServer]:
    """A cluster-mode server on the nodes' control plane with `config` as its `--config`,
    the sample flavors and `queues` applied; afterwards the namespace's Jobs and Pods are
    cleared, the server stopped and the sample flavors deleted (a later module, Kueue's
    examples among them, may create flavors of the same names)."""
    path = root / "config.yaml"
    path.write_text(config)
    server = ClusterModeServer(nodes.plane, root, extra_args=["--config", str(path)])
    server.prepare()
    nodes.plane.apply(sample_flavors() + "\n---\n" + queues)
    server.start()
    try:
        yield server
    finally:
        nodes.clear_namespace(namespace)
        server.stop()
        nodes.plane.kubectl(
            "delete", "-f", "-", "--ignore-not-found", "--wait=false", input=sample_flavors()
        )


def integrations_config(*frameworks: str) -> str:
    """A Configuration (`serve --config`) that lists these `integrations.frameworks`."""
    return (
        "apiVersion: config.kueue.x-k8s.io/v1beta2\nkind: Configuration\n"
        f"integrations:\n  frameworks: [{', '.join(frameworks)}]\n"
    )


@dataclass(frozen=True)
class IntegrationSetup:
    """A module's server for one integration: its Configuration, namespace, queues, the
    kinds (comma-separated) that own its workloads there, and whether kube-apiserver
    calls our webhooks yet (`in_force(plane)`: True, or None to ask again)."""

    config: str
    namespace: str
    queues: str
    owners: str
    in_force: Callable[[ControlPlane], bool | None]


def integration_fixtures(setup: IntegrationSetup) -> tuple[Any, Any]:
    """A module's `server` fixture (`server_with_webhooks`, module scope) and its `plane`
    fixture (the control plane, once that server runs)."""

    @pytest.fixture(scope="module", name="server")
    def server_fixture(
        nodes: NodeAgents, tmp_path_factory: pytest.TempPathFactory
    ) -> Iterator[ClusterModeServer]:
        root = tmp_path_factory.mktemp(setup.namespace)
        with server_with_webhooks(nodes, root, setup) as running:
            yield running

    @pytest.fixture(name="plane")
    def plane_fixture(server: ClusterModeServer, nodes: NodeAgents) -> ControlPlane:
        return nodes.plane

    return server_fixture, plane_fixture


@contextmanager
def server_with_webhooks(
    nodes: NodeAgents, root: Path, setup: IntegrationSetup
) -> Iterator[ClusterModeServer]:
    """`configured_server` with manifests/webhooks applied, once kube-apiserver calls
    them (it picks the configurations up through its own watch). Afterwards the webhooks
    go, then the namespace's owners while the server still runs, so that it releases
    what it holds."""
    namespace = setup.namespace
    with configured_server(nodes, root, setup.config, namespace, setup.queues) as running:
        try:
            docs = webhook_documents(running.port, running.certs.ca_cert.read_bytes())
            nodes.plane.apply("\n---\n".join(json.dumps(d) for d in docs))
            wait_for(lambda: setup.in_force(nodes.plane), timeout=60, what="the webhooks in force")
            yield running
        finally:
            delete_webhooks(nodes.plane)
            nodes.plane.kubectl("delete", setup.owners, "--all", "-n", namespace, "--wait=false")


def priority_class(name: str, value: int) -> str:
    """A WorkloadPriorityClass document."""
    doc = {
        "apiVersion": KUEUE,
        "kind": "WorkloadPriorityClass",
        "metadata": {"name": name},
        "value": value,
    }
    return json.dumps(doc)


def flavor_queue(  # noqa: PLR0913 - the queue's names, its quota, and its spec's extras
    namespace: str,
    cq: str,
    lq: str,
    flavor: str,
    cpu: str,
    memory: str | None = None,
    **spec: Any,
) -> str:
    """A ClusterQueue with `cpu` (and `memory`, if given) of one sample flavor and its
    LocalQueue in `namespace`."""
    quotas = {"cpu": cpu} if memory is None else {"cpu": cpu, "memory": memory}
    docs = [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}},
        {
            "apiVersion": KUEUE,
            "kind": "ClusterQueue",
            "metadata": {"name": cq},
            "spec": {
                "namespaceSelector": {},
                **spec,
                "resourceGroups": [
                    {
                        "coveredResources": list(quotas),
                        "flavors": [
                            {
                                "name": flavor,
                                "resources": [
                                    {"name": name, "nominalQuota": quota}
                                    for name, quota in quotas.items()
                                ],
                            }
                        ],
                    }
                ],
            },
        },
        {
            "apiVersion": KUEUE,
            "kind": "LocalQueue",
            "metadata": {"name": lq, "namespace": namespace},
            "spec": {"clusterQueue": cq},
        },
    ]
    return "\n---\n".join(json.dumps(d) for d in docs)


def pod_test_queues(namespace: str, name: str, example_cpu: str, cpu: str) -> str:
    """A Pod module's queues: `cq-<name>-examples` with the LocalQueue `user-queue` that
    Kueue's Pod examples name, `cq-<name>` with `lq-<name>` (preemption of lower
    priorities within it) and the WorkloadPriorityClass `<name>-urgent` (1000)."""
    return "\n---\n".join(
        [
            flavor_queue(namespace, f"cq-{name}-examples", "user-queue", "on-demand", example_cpu),
            flavor_queue(
                namespace,
                f"cq-{name}",
                f"lq-{name}",
                "on-demand",
                cpu,
                preemption={"withinClusterQueue": "LowerPriority"},
            ),
            priority_class(f"{name}-urgent", 1000),
        ]
    )


@dataclass(frozen=True)
class PodJob:
    """A suspended Job for `queue` whose Pods kwok runs as their labels and annotations
    say (tests/e2e/nodes.py); its own nodeSelector says `type: kwok` (every kwok Node has it)."""

    name: str
    namespace: str
    queue: str
    cpu: str = "1"
    parallelism: int = 1
    priority_class: str | None = None
    pod_labels: dict[str, str] = field(default_factory=dict)
    pod_annotations: dict[str, str] = field(default_factory=dict)
    backoff_limit: int = 0

    def manifest(self) -> str:
        labels = {QUEUE_LABEL: self.queue}
        if self.priority_class:
            labels[PRIORITY_LABEL] = self.priority_class
        metadata: dict[str, Any] = {"labels": {"app": self.name, **self.pod_labels}}
        if self.pod_annotations:
            metadata["annotations"] = dict(self.pod_annotations)
        container = {
            "name": "main",
            "image": "busybox",
            "resources": {"requests": {"cpu": self.cpu}},
        }
        doc = {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "metadata": {"name": self.name, "namespace": self.namespace, "labels": labels},
            "spec": {
                "suspend": True,
                "parallelism": self.parallelism,
                "completions": self.parallelism,
                "backoffLimit": self.backoff_limit,
                "template": {
                    "metadata": metadata,
                    "spec": {
                        "restartPolicy": "Never",
                        "terminationGracePeriodSeconds": 0,
                        "nodeSelector": {"type": "kwok"},
                        "containers": [container],
                    },
                },
            },
        }
        return json.dumps(doc)


def condition(obj: dict[str, Any], type_: str, status: str = "True") -> dict[str, Any] | None:
    for c in (obj.get("status") or {}).get("conditions") or []:
        if c.get("type") == type_ and c.get("status") == status:
            return dict(c)
    return None


def evicted_for(reason: str) -> Any:
    """A predicate on a Workload: evicted, for `reason`."""

    def holds(workload: dict[str, Any]) -> bool:
        found = condition(workload, "Evicted")
        return found is not None and found["reason"] == reason

    return holds


def _owned_by(workload: dict[str, Any], job: str) -> bool:
    return any(r.get("name") == job for r in workload["metadata"].get("ownerReferences", []))


def workload_of(
    plane: ControlPlane, namespace: str, job: str, what: str = "exists", predicate: Any = None
) -> dict[str, Any]:
    """The Workload owned by Job `job`, once `predicate(workload)` holds (if given)."""

    def found(doc: dict[str, Any]) -> dict[str, Any] | None:
        for w in doc["items"]:
            if _owned_by(w, job) and (predicate is None or predicate(w)):
                return dict(w)
        return None

    doc = wait_json(
        plane,
        f"the Workload of job {job}: {what}",
        found,
        "workloads.kueue.x-k8s.io",
        "-n",
        namespace,
        timeout=120,
    )
    result = found(doc)
    assert result is not None
    return result


def wait_job(
    plane: ControlPlane, namespace: str, name: str, what: str, predicate: Any
) -> dict[str, Any]:
    doc = wait_json(
        plane, f"job {name}: {what}", predicate, "job", name, "-n", namespace, timeout=120
    )
    return dict(doc)


def job_pods(plane: ControlPlane, namespace: str, job: str) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = plane.get_json(
        "pods", "-n", namespace, "-l", f"batch.kubernetes.io/job-name={job}"
    )["items"]
    return items


def wait_pods(
    plane: ControlPlane, namespace: str, job: str, what: str, predicate: Any
) -> list[dict[str, Any]]:
    """The Pods of `job` once `predicate(pods)` holds."""

    def probe() -> list[dict[str, Any]] | None:
        pods = job_pods(plane, namespace, job)
        return pods if predicate(pods) else None

    return wait_for(probe, timeout=120, what=f"pods of {job}: {what}", interval=0.5)


def ready(pod: dict[str, Any]) -> bool:
    return condition(pod, "Ready") is not None


def unsuspended(job: dict[str, Any]) -> bool:
    return not job["spec"].get("suspend")


def suspended(job: dict[str, Any]) -> bool:
    return bool(job["spec"].get("suspend"))


def object_events(
    plane: ControlPlane, namespace: str, kind: str, name: str
) -> list[dict[str, Any]]:
    """The Events of one object as `kubectl describe` finds them (core/v1, by
    involvedObject), oldest first."""
    items: list[dict[str, Any]] = plane.get_json("events", "-n", namespace)["items"]
    mine = [
        e
        for e in items
        if e["involvedObject"].get("kind") == kind and e["involvedObject"].get("name") == name
    ]
    return sorted(mine, key=lambda e: e.get("eventTime") or e.get("firstTimestamp") or "")


def wait_events(
    plane: ControlPlane, namespace: str, kind: str, name: str, reasons: list[str]
) -> list[dict[str, Any]]:
    """The object's Events once each of `reasons` is among them."""

    def probe() -> list[dict[str, Any]] | None:
        found = object_events(plane, namespace, kind, name)
        return found if set(reasons) <= {e["reason"] for e in found} else None

    return wait_for(probe, timeout=60, what=f"events {reasons} of {kind} {name}")


def create_pod(plane: ControlPlane, obj: dict[str, Any], *, dry_run: bool = False) -> Any:
    """`kubectl create` of one object as JSON, the result not checked (`-o json` out)."""
    args = ["create", "-f", "-", "-o", "json"] + (["--dry-run=server"] if dry_run else [])
    return plane.kubectl(*args, input=json.dumps(obj), check=False)


@dataclass(frozen=True)
class ObjectRef:
    """One namespaced object, by the kind kubectl knows it as."""

    kind: str
    namespace: str
    name: str


def stored(plane: ControlPlane, ref: ObjectRef) -> dict[str, Any] | None:
    """The object as the API server holds it, None when it does not."""
    result = plane.kubectl(
        "get", ref.kind, ref.name, "-n", ref.namespace, "-o", "json", check=False
    )
    return json.loads(result.stdout) if result.returncode == 0 else None


def wait_object(plane: ControlPlane, ref: ObjectRef, what: str, test: Any) -> dict[str, Any]:
    """The object once it exists and passes `test`."""

    def probe() -> dict[str, Any] | None:
        found = stored(plane, ref)
        return found if found is not None and test(found) else None

    result: dict[str, Any] = wait_for(
        probe, timeout=90, what=f"{ref.kind} {ref.name} {what}", interval=0.3
    )
    return result


def template_marked(
    sample: Path, namespace: str, framework: str
) -> Callable[[ControlPlane], bool | None]:
    """An `in_force` probe: is Kueue's example `sample` (a Deployment, a StatefulSet)
    stored with its pod template marked for `framework` (our webhook in force)?"""

    def probe(plane: ControlPlane) -> bool | None:
        created = created_dry_run(plane, sample, namespace)
        if created is None:
            return None
        template = created["spec"]["template"]["metadata"]
        return True if (template.get("annotations") or {}).get(PARENT) == framework else None

    return probe


def created_dry_run(plane: ControlPlane, sample: Path, namespace: str) -> Any:
    """Kueue's example `sample` as kube-apiserver would store it in `namespace` (a
    server-side dry run, every webhook called), None if it was refused."""
    result = plane.kubectl(
        "create",
        *("-n", namespace, "-f", "-", "--dry-run=server", "-o", "json"),
        input=sample.read_text(),
        check=False,
    )
    return json.loads(result.stdout) if result.returncode == 0 else None


def refused_by(plane: ControlPlane, webhook: str, args: list[str], namespace: str) -> str:
    """`kubectl <args> -n <namespace>` refused by our validating webhook `webhook`; what
    kubectl printed."""
    result = plane.kubectl(*args, "-n", namespace, check=False)
    assert result.returncode != 0
    assert f'admission webhook "{webhook}" denied the request' in result.stderr, result.stderr
    stderr: str = result.stderr
    return stderr


def kueue_workload_name(kind: str, group: str, owner: dict[str, Any]) -> str:
    """Kueue's name for the Workload of `owner` (of `kind` in API `group`), written out
    here as Kueue's GetWorkloadNameForOwnerWithGVK computes it: an oracle independent of
    the server's own `workload_names`."""
    meta = owner["metadata"]
    digest = hashlib.sha1(
        f"{kind}\n{group}\n{meta['name']}\n{meta['uid']}".encode(), usedforsecurity=False
    ).hexdigest()
    return f"{kind.lower()}-{meta['name']}-{digest[:5]}"


def gated(pod: dict[str, Any]) -> bool:
    """Held behind the admission gate."""
    return GATE in (pod["spec"].get("schedulingGates") or [])


def running_pod(pod: dict[str, Any]) -> bool:
    """Past its gate and Running."""
    return not gated(pod) and pod.get("status", {}).get("phase") == "Running"


def create_marked(plane: ControlPlane, sample: Path, namespace: str, framework: str) -> Any:
    """Create Kueue's example `sample` (a Deployment, a StatefulSet) in `namespace`; the
    object as stored, once its pod template is checked marked for `framework`."""
    result = plane.kubectl(
        "create", "-n", namespace, "-f", "-", "-o", "json", input=sample.read_text(), check=False
    )
    assert result.returncode == 0, result.stderr
    stored = json.loads(result.stdout)
    template = stored["spec"]["template"]["metadata"]
    assert template["labels"] == {"app": "nginx", MANAGED: "true", QUEUE_LABEL: "user-queue"}
    assert template["annotations"] == {PARENT: framework}
    return stored
