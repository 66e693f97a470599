"""The JobSet controller for the e2e tests of the `jobset` integration
(docs/cluster.md#real-cluster-tests).

`JobSetController` adds to a running `ControlPlane` (with `NodeAgents`, so that the child
Jobs get Pods) what a JobSet install adds to a cluster, taken from JobSet's own module in
Go's module cache (`build.jobset_module_dir()`), never copied into the repository:

* the JobSet CRD (`config/components/crd/bases`), applied server-side;
* the manager built by `build.py --jobset`, run as a local process with a kubeconfig of
  its own (a system:masters user: the tests check queuescope's RBAC, not JobSet's), leader
  election off, metrics and health probes on free loopback ports;
* its admission webhooks, without which its controller does not work (the mutating one
  sets the defaults the controller relies on: completionMode Indexed, the success and
  startup policies, the network). Its internal certificate management (a Secret it
  rotates and caBundles it patches, inside a Deployment's namespace) is off through its
  Configuration file; it serves on 127.0.0.1 with a certificate of a CA made here, and
  kube-apiserver reaches it as it reaches queuescope's webhooks in this suite: through an
  ExternalName Service (`jobset-webhook-service.jobset-system` -> localhost, the port in
  the webhook's clientConfig). The Mutating- and ValidatingWebhookConfiguration are
  `config/components/webhook/manifests.yaml` with the patches of its kustomization (which
  scope the Pod webhooks to Pods labelled `jobset.sigs.k8s.io/jobset-name`, so the Pods of
  other tests never reach them) and the names `config/default` gives them.

Stopping deletes the webhook configurations first (a dead webhook with failurePolicy Fail
would refuse every later JobSet and JobSet Pod), then stops the process, deletes every
JobSet and waits, while the garbage collector still runs, until their Jobs and Pods are
gone, then deletes the Service and the CRD.
"""

from __future__ import annotations

import base64
import contextlib
import functools
import json
import re
import time
import urllib.error
import urllib.request
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import yaml

from tests.e2e.harness import ControlPlane, HarnessError, ManagedProcess, free_port, wait_for
from tests.e2e.nodes import RUN_FOR_ANNOTATION
from visibility_server.certs import (
    CertifiedKey,
    create_ca,
    issue_serving_cert,
    write_certified_key,
)

API_VERSION = "jobset.x-k8s.io/v1alpha2"
CRD_NAME = "jobsets.jobset.x-k8s.io"
# The label JobSet puts on its Jobs and their Pods (and the Pod webhooks' objectSelector).
JOBSET_NAME_LABEL = "jobset.sigs.k8s.io/jobset-name"
CONTROLLER_USER = "jobset-controller"
CONTROLLER_GROUPS = ("system:masters",)
FIELD_MANAGER = "queuescope-e2e"
# The names JobSet's webhooks are registered under in `manifests.yaml`.
MUTATING_JOBSET_WEBHOOK = "mjobset.kb.io"
VALIDATING_JOBSET_WEBHOOK = "vjobset.kb.io"

READY_SECONDS = 120.0
WEBHOOKS_SECONDS = 60.0
GONE_SECONDS = 120.0
CRD_DELETE_SECONDS = 120
CRD_ESTABLISHED_SECONDS = 60.0


@dataclass(frozen=True)
class JobSetSources:
    """The files of JobSet's module that an install reads."""

    module_dir: Path

    @property
    def crd(self) -> Path:
        return self.module_dir / "config/components/crd/bases/jobset.x-k8s.io_jobsets.yaml"

    @property
    def webhook_dir(self) -> Path:
        return self.module_dir / "config/components/webhook"

    @property
    def default_kustomization(self) -> Path:
        return self.module_dir / "config/default/kustomization.yaml"

    def install_names(self) -> tuple[str, str]:
        """(namespace, name prefix) that `config/default` gives every object."""
        doc = yaml.safe_load(self.default_kustomization.read_text())
        namespace, prefix = doc.get("namespace"), doc.get("namePrefix")
        if not isinstance(namespace, str) or not isinstance(prefix, str):
            raise HarnessError(f"{self.default_kustomization} names no namespace and namePrefix")
        return namespace, prefix

    def crd_document(self) -> dict[str, Any]:
        # The base only: the kustomization also patches in a conversion webhook, but
        # JobSet serves one version (v1alpha2), so kube-apiserver would never call it.
        doc: dict[str, Any] = yaml.safe_load(self.crd.read_text())
        return doc

    def webhook_documents(self, port: int, ca_pem: bytes) -> list[dict[str, Any]]:
        """manifests.yaml as `config/default` installs it (the kustomization's patches,
        the name prefix), each webhook aimed at `port` of the ExternalName Service and
        trusting `ca_pem`."""
        namespace, prefix = self.install_names()
        docs = [
            d for d in yaml.safe_load_all((self.webhook_dir / "manifests.yaml").read_text()) if d
        ]
        _apply_patches(docs, self.webhook_dir)
        bundle = base64.b64encode(ca_pem).decode()
        for doc in docs:
            doc["metadata"]["name"] = prefix + doc["metadata"]["name"]
            for webhook in doc["webhooks"]:
                service = webhook["clientConfig"]["service"]
                service.update(name=prefix + service["name"], namespace=namespace, port=port)
                webhook["clientConfig"]["caBundle"] = bundle
        return docs

    def webhook_service(self) -> tuple[str, str]:
        """(namespace, name) of the webhooks' Service after `config/default`."""
        namespace, prefix = self.install_names()
        doc = yaml.safe_load((self.webhook_dir / "service.yaml").read_text())
        return namespace, prefix + doc["metadata"]["name"]


_WEBHOOK_INDEX = re.compile(r"/webhooks/(\d+)")


def _apply_patches(docs: list[dict[str, Any]], folder: Path) -> None:
    """The JSON 6902 patches of `folder`'s kustomization.yaml, applied to `docs` by kind
    and name. Only what JobSet's patches use is understood (`replace` of a whole webhook);
    anything else fails loudly rather than install something JobSet's own install does
    not."""
    kustomization = yaml.safe_load((folder / "kustomization.yaml").read_text())
    for patch in kustomization.get("patches") or []:
        target = patch.get("target") or {}
        matches = [
            d
            for d in docs
            if d.get("kind") == target.get("kind")
            and d["metadata"].get("name") == target.get("name")
        ]
        if len(matches) != 1:
            raise HarnessError(f"JobSet's webhook patch {patch} targets {len(matches)} documents")
        for op in yaml.safe_load((folder / patch["path"]).read_text()):
            index = _WEBHOOK_INDEX.fullmatch(str(op.get("path")))
            if op.get("op") != "replace" or index is None:
                raise HarnessError(f"unexpected operation in JobSet's {patch['path']}: {op}")
            matches[0]["webhooks"][int(index.group(1))] = op["value"]


def configuration(
    *, webhook_port: int, metrics_port: int, probe_port: int, cert_dir: Path
) -> dict[str, Any]:
    """The manager's `--config` (config.jobset.x-k8s.io/v1alpha1 Configuration)."""
    return {
        "apiVersion": "config.jobset.x-k8s.io/v1alpha1",
        "kind": "Configuration",
        # Its default is true (RecommendedDefaultLeaderElectionConfiguration).
        "leaderElection": {"leaderElect": False},
        # Off: it would write a Secret and patch the webhook configurations' caBundle for
        # a Deployment's Service; the certificate comes from this harness instead.
        "internalCertManagement": {"enable": False},
        "webhook": {"host": "127.0.0.1", "port": webhook_port, "certDir": str(cert_dir)},
        # The metrics server always serves TLS; with internal certificates off it reads
        # tls.crt/tls.key from certDir (default: a fixed folder under /tmp).
        "metrics": {"bindAddress": f"127.0.0.1:{metrics_port}", "certDir": str(cert_dir)},
        "health": {"healthProbeBindAddress": f"127.0.0.1:{probe_port}"},
    }


def _readyz(port: int) -> bool | None:
    """True once the manager's /readyz answers 200: its webhook server has started."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=2) as response:
            return True if response.status == 200 else None
    except (OSError, urllib.error.URLError):
        return None


def jobset_manifest(  # noqa: PLR0913 - the JobSet's fields, keyword-only
    name: str,
    namespace: str,
    *,
    replicas: int = 2,
    replicated_job: str = "workers",
    run_for: str | None = "1s",
    cpu: str = "100m",
    labels: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """A JobSet of one replicatedJob of `replicas` one-Pod Jobs; with `run_for`, kwok
    completes each Pod that long after it runs (tests/e2e/nodes.py), otherwise it runs
    until deleted. Only what a user writes: the webhook adds the defaults."""
    pod_meta: dict[str, Any] = {}
    if run_for is not None:
        pod_meta["annotations"] = {RUN_FOR_ANNOTATION: run_for}
    metadata: dict[str, Any] = {"name": name, "namespace": namespace}
    if labels:
        metadata["labels"] = dict(labels)
    return {
        "apiVersion": API_VERSION,
        "kind": "JobSet",
        "metadata": metadata,
        "spec": {
            "replicatedJobs": [
                {
                    "name": replicated_job,
                    "replicas": replicas,
                    "template": {
                        "spec": {
                            "template": {
                                "metadata": pod_meta,
                                "spec": {
                                    "containers": [
                                        {
                                            "name": "main",
                                            "image": "busybox",
                                            "resources": {"requests": {"cpu": cpu}},
                                        }
                                    ],
                                },
                            }
                        }
                    },
                }
            ]
        },
    }


def condition(obj: Mapping[str, Any], kind: str) -> dict[str, Any] | None:
    """The status condition of type `kind` of `obj`, if any."""
    for item in (obj.get("status") or {}).get("conditions") or []:
        if item.get("type") == kind:
            found: dict[str, Any] = item
            return found
    return None


@dataclass
class JobSetController:
    """JobSet's CRD, manager and webhooks on `plane` (see the module docstring)."""

    plane: ControlPlane
    binary: Path
    sources: JobSetSources
    workdir: Path
    process: ManagedProcess | None = field(default=None, init=False)
    webhook_port: int = field(default=0, init=False)
    probe_port: int = field(default=0, init=False)
    metrics_port: int = field(default=0, init=False)
    startup_seconds: float = field(default=0.0, init=False)
    _ca: CertifiedKey | None = field(default=None, init=False)
    _registered: list[str] = field(default_factory=list, init=False)

    # -- lifecycle ------------------------------------------------------------------------

    def start(self) -> None:
        started = time.monotonic()
        self.workdir.mkdir(parents=True, exist_ok=True)
        self._install_crd()
        cert_dir = self._write_certificates()
        self.webhook_port, self.metrics_port, self.probe_port = (
            free_port(),
            free_port(),
            free_port(),
        )
        config = self.workdir / "config.yaml"
        config.write_text(
            yaml.safe_dump(
                configuration(
                    webhook_port=self.webhook_port,
                    metrics_port=self.metrics_port,
                    probe_port=self.probe_port,
                    cert_dir=cert_dir,
                ),
                sort_keys=False,
            )
        )
        kubeconfig = self.plane.user(CONTROLLER_USER, CONTROLLER_GROUPS).kubeconfig
        self.process = ManagedProcess(
            "jobset",
            [str(self.binary), f"--config={config}", f"--kubeconfig={kubeconfig}"],
            self.plane.logs_dir / "jobset.log",
        )
        self.process.start()
        wait_for(
            functools.partial(_readyz, self.probe_port),
            timeout=READY_SECONDS,
            what="the JobSet manager's /readyz",
            interval=0.5,
            alive=self.check_alive,
        )
        self._register_webhooks()
        wait_for(
            self._webhooks_in_force,
            timeout=WEBHOOKS_SECONDS,
            what="JobSet's webhooks called by kube-apiserver (a server-side dry run)",
            interval=0.5,
            alive=self.check_alive,
        )
        self.startup_seconds = time.monotonic() - started

    def stop(self) -> None:
        # Webhooks first: while registered and unanswered, they refuse every JobSet and
        # every JobSet Pod (failurePolicy Fail), the later modules' included.
        if self._registered:
            self.plane.kubectl("delete", *self._registered, "--ignore-not-found", check=False)
            self._registered.clear()
        if self.process is not None:
            self.process.stop()
            self.process = None
        # Every JobSet, then what they own: their Jobs (whose Pods the garbage collector
        # removes, while it still runs) and headless Services. Deleted here rather than
        # left to the collector: it resolves an owner's kind through discovery it
        # refreshes every 30 s, so it may not know JobSet yet, and never will once the
        # CRD is gone.
        if self._crd_installed():
            self.plane.kubectl("delete", "jobsets", "--all", "-A", "--wait=false", check=False)
        for kind in ("jobs", "services"):
            owned = self._owned_by_jobsets(kind)
            for namespace, names in owned.items():
                self.plane.kubectl(
                    "delete", kind, *names, "-n", namespace, "--wait=false", check=False
                )
        wait_for(
            self._children_gone,
            timeout=GONE_SECONDS,
            what="the Jobs, Pods and Services of every JobSet gone",
            interval=0.5,
        )
        namespace, service = self.sources.webhook_service()
        # The namespace stays: no namespace controller runs to finish deleting one.
        self.plane.kubectl(
            "delete", "service", service, "-n", namespace, "--ignore-not-found", check=False
        )
        self.plane.kubectl(
            "delete",
            "crd",
            CRD_NAME,
            "--ignore-not-found",
            f"--timeout={CRD_DELETE_SECONDS}s",
            check=False,
            timeout=CRD_DELETE_SECONDS + 30,
        )

    def check_alive(self) -> None:
        if self.process is not None:
            self.process.check_alive()

    # -- steps ------------------------------------------------------------------------------

    def _apply(self, documents: list[dict[str, Any]]) -> None:
        """Server-side apply as this harness's field manager (it owns what it applies)."""
        self.plane.kubectl(
            "apply",
            "--server-side",
            "--force-conflicts",
            f"--field-manager={FIELD_MANAGER}",
            "-f",
            "-",
            input="\n---\n".join(json.dumps(d) for d in documents),
        )

    def _install_crd(self) -> None:
        self._apply([self.sources.crd_document()])
        # Polled rather than `kubectl wait`, which fails outright when it reads the new
        # CRD before kube-apiserver has written any condition.
        wait_for(
            lambda: True if self._crd_established() else None,
            timeout=CRD_ESTABLISHED_SECONDS,
            what=f"CRD {CRD_NAME} Established",
            interval=0.25,
        )

    def _crd_established(self) -> bool:
        doc = self.plane.get_json("crd", CRD_NAME)
        found = condition(doc, "Established")
        return found is not None and found.get("status") == "True"

    def _crd_installed(self) -> bool:
        result = self.plane.kubectl("get", "crd", CRD_NAME, "--ignore-not-found", "-o", "name")
        return bool(result.stdout.strip())

    def _write_certificates(self) -> Path:
        """A CA of its own and a serving certificate for the webhook Service's DNS names
        (what kube-apiserver checks when it dials through the Service), as tls.crt and
        tls.key: the names the manager's webhook and metrics servers read."""
        namespace, service = self.sources.webhook_service()
        now = datetime.now(UTC)
        self._ca = create_ca(now=now, common_name="e2e-jobset-webhook-ca")
        serving = issue_serving_cert(self._ca, namespace=namespace, service=service, now=now)
        cert_dir = self.workdir / "certs"
        cert_dir.mkdir(parents=True, exist_ok=True)
        write_certified_key(serving, cert_dir / "tls.crt", cert_dir / "tls.key")
        return cert_dir

    def _register_webhooks(self) -> None:
        assert self._ca is not None
        namespace, service = self.sources.webhook_service()
        objects: list[dict[str, Any]] = [
            {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}},
            {
                "apiVersion": "v1",
                "kind": "Service",
                "metadata": {"name": service, "namespace": namespace},
                # As for queuescope's webhooks (tests/e2e/cluster.py): kube-apiserver
                # dials localhost:<clientConfig port>; Endpoints refuse loopback addresses.
                "spec": {"type": "ExternalName", "externalName": "localhost"},
            },
        ]
        webhooks = self.sources.webhook_documents(self.webhook_port, self._ca.cert_pem)
        self._registered = [
            f"{d['kind'].lower()}.admissionregistration.k8s.io/{d['metadata']['name']}"
            for d in webhooks
        ]
        self._apply([*objects, *webhooks])

    def dry_run(self, manifest: Mapping[str, Any]) -> tuple[int, dict[str, Any]]:
        """A server-side dry-run create of the JobSet `manifest` through the API (not
        kubectl, which rewrites an Invalid status into its own words and drops which
        webhook refused): (HTTP status, the object as it would be stored or the Status)."""
        namespace = manifest["metadata"]["namespace"]
        response = self.plane.request(
            f"/apis/{API_VERSION}/namespaces/{namespace}/jobsets?dryRun=All",
            self.plane.admin,
            method="POST",
            headers={"Content-Type": "application/json", "Accept": "application/json"},
            body=json.dumps(manifest).encode(),
        )
        doc: dict[str, Any] = response.json()
        return response.status, doc

    def _webhooks_in_force(self) -> bool | None:
        """Both webhooks called: a JobSet comes back defaulted (the mutating one), one
        with an invalid replicatedJob name is refused (the validating one). kube-apiserver
        reads new webhook configurations through a watch, so for a moment after applying
        them, it calls neither."""
        status, defaulted = self.dry_run(jobset_manifest("webhook-probe", "default"))
        if status != 201 or "successPolicy" not in defaulted["spec"]:
            return None
        status, refused = self.dry_run(
            jobset_manifest("webhook-probe", "default", replicated_job="Not_A_Label")
        )
        denied = f'admission webhook "{VALIDATING_JOBSET_WEBHOOK}" denied'
        return True if status == 422 and denied in refused.get("message", "") else None

    def _owned_by_jobsets(self, kind: str) -> dict[str, list[str]]:
        """Names of the `kind` objects a JobSet controls, by namespace."""
        owned: dict[str, list[str]] = {}
        for item in self.plane.get_json(kind, "-A")["items"]:
            meta = item["metadata"]
            if any(
                ref.get("controller") and ref["apiVersion"].startswith("jobset.x-k8s.io/")
                for ref in meta.get("ownerReferences") or []
            ):
                owned.setdefault(meta["namespace"], []).append(meta["name"])
        return owned

    def _children_gone(self) -> bool | None:
        if self._owned_by_jobsets("jobs") or self._owned_by_jobsets("services"):
            return None
        pods = self.plane.get_json("pods", "-A", "-l", JOBSET_NAME_LABEL)["items"]
        return None if pods else True


@contextlib.contextmanager
def running_jobset_controller(
    plane: ControlPlane, binary: Path, module_dir: Path, workdir: Path
) -> Iterator[JobSetController]:
    """`JobSetController` started on `plane` for the duration of the block; stopped (and
    everything it installed removed) afterwards, even when it did not start."""
    controller = JobSetController(plane, binary, JobSetSources(module_dir), workdir)
    try:
        controller.start()
        yield controller
    finally:
        controller.stop()
