"""queuescope in cluster mode against the real control plane (docs/cluster.md#real-cluster-tests
bootstrap).

`install` applies what a cluster install applies, minus the Deployment: the CRDs (and
waits for them to be Established), the namespace, and the RBAC of `manifests/rbac`. Given
a server's port and CA, the CRDs' conversion webhook points at that server (through the
ExternalName Service, as the APIServices do); without, only v1beta2 requests (the stored
version, which needs no conversion) work until a server is installed that way.
`controller_kubeconfig` mints a token for our ServiceAccount with the TokenRequest
API (`kubectl create token`, no controller needed) and writes the kubeconfig the
server runs with, so every call it makes is checked by real RBAC.
`ClusterModeServer` is `VisibilityServer` running `queuescope serve --kubeconfig`.
"""

from __future__ import annotations

import base64
import json
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from scheduler.api.conversion import convert_document
from tests.e2e.aggregated import NAMESPACE, SERVICE, VisibilityServer
from tests.e2e.harness import ControlPlane, wait_for
from visibility_server.certs import SECRET_MODE, write_atomic
from visibility_server.webhooks.registrations import WEBHOOK_CONFIGURATIONS

REPO = Path(__file__).resolve().parents[2]
# Objects the tests create before a server runs are written in the stored version: a
# v1beta1 write needs the conversion webhook, which is our server.
KUEUE = "kueue.x-k8s.io/v1beta2"
KUEUE_V1BETA1 = "kueue.x-k8s.io/v1beta1"
SERVICE_ACCOUNT = "queuescope-controller"
EXTERNAL_SERVICE = {
    "apiVersion": "v1",
    "kind": "Service",
    "metadata": {"name": SERVICE, "namespace": NAMESPACE},
    "spec": {"type": "ExternalName", "externalName": "localhost"},
}
CRD_NAMES = (
    "admissionchecks",
    "clusterqueues",
    "cohorts",
    "localqueues",
    "resourceflavors",
    "workloadpriorityclasses",
    "workloads",
    # Stored and validated, not acted on (docs/scheduling.md#kinds-stored-but-not-acted-on).
    "multikueueclusters",
    "multikueueconfigs",
    "provisioningrequestconfigs",
    "topologies",
)


def crd_documents(port: int | None = None, ca_pem: bytes | None = None) -> list[dict[str, Any]]:
    """Our CRDs; with `port` and `ca_pem`, their conversion webhook reaches that server."""
    docs: list[dict[str, Any]] = []
    for path in sorted((REPO / "manifests" / "crds").glob("kueue.x-k8s.io_*.yaml")):
        doc = yaml.safe_load(path.read_text())
        webhook = doc["spec"].get("conversion", {}).get("webhook")
        if webhook is not None and port is not None and ca_pem is not None:
            webhook["clientConfig"]["service"]["port"] = port
            webhook["clientConfig"]["caBundle"] = base64.b64encode(ca_pem).decode()
        docs.append(doc)
    return docs


def install_crds(plane: ControlPlane, port: int | None = None, ca_pem: bytes | None = None) -> None:
    plane.kubectl(
        "apply",
        "--server-side",
        "--force-conflicts",
        "--field-manager=queuescope-e2e",
        "-f",
        "-",
        input="\n---\n".join(json.dumps(d) for d in crd_documents(port, ca_pem)),
    )
    for name in CRD_NAMES:
        plane.kubectl(
            "wait",
            "--for=condition=Established",
            f"crd/{name}.kueue.x-k8s.io",
            "--timeout=60s",
        )


def stored_version(manifest: str) -> str:
    """`manifest` with every kueue.x-k8s.io/v1beta1 object converted to v1beta2."""
    docs = [d for d in yaml.safe_load_all(manifest) if d]
    return "\n---\n".join(
        json.dumps(convert_document(d, KUEUE) if d.get("apiVersion") == KUEUE_V1BETA1 else d)
        for d in docs
    )


def install(plane: ControlPlane, port: int | None = None, ca_pem: bytes | None = None) -> None:
    """CRDs, namespace and RBAC; idempotent (kubectl apply)."""
    install_crds(plane, port, ca_pem)
    plane.kubectl("apply", "-f", str(REPO / "manifests" / "deploy" / "namespace.yaml"))
    plane.kubectl("apply", "-k", str(REPO / "manifests" / "rbac"))


def controller_kubeconfig(
    plane: ControlPlane,
    path: Path,
    account: str = SERVICE_ACCOUNT,
    namespace: str = NAMESPACE,
) -> Path:
    """A kubeconfig with a fresh token of `namespace/account` (default: our controller)."""
    token = plane.kubectl(
        "create", "token", account, "-n", namespace, "--duration=2h"
    ).stdout.strip()
    ca = plane.cluster_ca_file.read_text()
    doc = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {
                "name": "e2e",
                "cluster": {
                    "server": plane.url,
                    "certificate-authority-data": base64.b64encode(ca.encode()).decode(),
                },
            }
        ],
        "users": [{"name": account, "user": {"token": token}}],
        "contexts": [{"name": "e2e", "context": {"cluster": "e2e", "user": account}}],
        "current-context": "e2e",
    }
    write_atomic(path, json.dumps(doc).encode(), mode=SECRET_MODE)
    return path


@dataclass
class ClusterModeServer(VisibilityServer):
    """Our server in cluster mode: its objects live in kube-apiserver."""

    leader_elect: bool = False
    extra_args: list[str] = field(default_factory=list)
    kubeconfig: Path | None = None
    pod_name: str = "queuescope-e2e"

    def environment(self) -> dict[str, str]:
        # The Lease holder identity starts with the pod name (docs/cluster.md#high-availability).
        return {**super().environment(), "POD_NAME": self.pod_name}

    def prepare(self) -> None:
        install(self.plane)
        self.root.mkdir(parents=True, exist_ok=True)
        self.kubeconfig = controller_kubeconfig(self.plane, self.root / "controller.kubeconfig")
        # The fixture objects live in these namespaces; kube-apiserver needs them first.
        self.plane.apply(
            "\n---\n".join(
                json.dumps({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": n}})
                for n in ("team-a", "team-b")
            )
        )
        super().prepare()
        # The certificates exist now: the CRDs convert through this server from here on.
        self.install_crds()

    def install_crds(self) -> None:
        # The webhook is reached as the APIServices are: the ExternalName Service, this port.
        self.plane.apply(json.dumps(EXTERNAL_SERVICE))
        install_crds(self.plane, self.port, self.certs.ca_cert.read_bytes())

    def apply_objects(self, name: str, manifest: str) -> None:
        self.plane.apply(stored_version(manifest))

    def apply_workloads(self, manifests: list[str]) -> None:
        # kube-apiserver sets creationTimestamp itself, to the second: create one per
        # second so that creation order, the FIFO tie-breaker, is the fixture's order.
        for index, manifest in enumerate(manifests):
            if index:
                time.sleep(1.1)
            self.plane.apply(stored_version(manifest))

    def command(self) -> list[str]:
        assert self.kubeconfig is not None, "prepare() first"
        args = [
            sys.executable,
            "-m",
            "queuescope.cli",
            "serve",
            "--kubeconfig",
            str(self.kubeconfig),
            "--cert-dir",
            str(self.certs.root),
            "--listen",
            f"127.0.0.1:{self.port}",
            "--queue-status-interval",
            "1s",
        ]
        if self.leader_elect:
            args.append("--leader-elect")
        return args + self.extra_args


def wait_json(
    plane: ControlPlane, what: str, predicate: Any, *args: str, timeout: float = 60
) -> Any:
    """Poll `kubectl get ARGS -o json` until `predicate(doc)` is truthy; returns it."""

    def probe() -> Any:
        result = plane.kubectl("get", *args, "-o", "json", check=False)
        if result.returncode != 0:
            return None
        doc = json.loads(result.stdout)
        return doc if predicate(doc) else None

    return wait_for(probe, timeout=timeout, what=what)


def cpu_queue(namespace: str, flavor: str, cq: str, lq: str, cpu: str, **extra_spec: Any) -> str:
    """A ClusterQueue with `cpu` of one flavor, and a LocalQueue for it in `namespace`
    (the namespace itself too: applying it again is harmless)."""
    spec: dict[str, Any] = {
        "namespaceSelector": {},
        **extra_spec,
        "resourceGroups": [
            {
                "coveredResources": ["cpu"],
                "flavors": [{"name": flavor, "resources": [{"name": "cpu", "nominalQuota": cpu}]}],
            }
        ],
    }
    docs = [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}},
        {"apiVersion": KUEUE, "kind": "ClusterQueue", "metadata": {"name": cq}, "spec": spec},
        {
            "apiVersion": KUEUE,
            "kind": "LocalQueue",
            "metadata": {"name": lq, "namespace": namespace},
            "spec": {"clusterQueue": cq},
        },
    ]
    return "\n---\n".join(json.dumps(doc) for doc in docs)


def flavor(name: str, **node_labels: str) -> str:
    spec = {"nodeLabels": node_labels} if node_labels else {}
    return json.dumps(
        {"apiVersion": KUEUE, "kind": "ResourceFlavor", "metadata": {"name": name}, "spec": spec}
    )


def subset(given: Any, stored: Any) -> bool:
    """Whether everything `given` says is in `stored` (which may add defaults; quantities
    compared as text)."""
    if isinstance(given, dict):
        return isinstance(stored, dict) and all(
            subset(value, stored.get(key)) for key, value in given.items()
        )
    if isinstance(given, list):
        return (
            isinstance(stored, list)
            and len(given) == len(stored)
            and all(subset(a, b) for a, b in zip(given, stored, strict=True))
        )
    return bool(given == stored or str(given) == str(stored))


WEBHOOKS = REPO / "manifests" / "webhooks"


def webhook_documents(port: int, ca_pem: bytes) -> list[dict[str, Any]]:
    """manifests/webhooks as written, aimed at this session's server."""
    bundle = base64.b64encode(ca_pem).decode()
    docs: list[dict[str, Any]] = []
    for name in ("mutating.yaml", "validating.yaml"):
        for doc in yaml.safe_load_all((WEBHOOKS / name).read_text()):
            for webhook in doc["webhooks"]:
                webhook["clientConfig"]["service"]["port"] = port
                webhook["clientConfig"]["caBundle"] = bundle
            docs.append(doc)
    return docs


def delete_webhooks(plane: ControlPlane) -> None:
    plane.kubectl(
        "delete",
        *(f"{kind.lower()}/{name}" for kind, name, _ in WEBHOOK_CONFIGURATIONS),
        "--ignore-not-found",
        check=False,
    )
