"""`make deploy` and `make undeploy`: install and remove queuescope in the order of
docs/cluster.md#install-upgrade-and-uninstall, with kubectl.

    python tools/deploy.py install   [--kubectl CMD] [--timeout SECONDS]
    python tools/deploy.py uninstall [--kubectl CMD] [--timeout SECONDS] [--delete-crds]

install: refuse if an APIService v1beta{1,2}.visibility.kueue.x-k8s.io exists and points
at another Service, if admission webhooks of another server still intercept kueue.x-k8s.io
objects, or if Kueue's controller Deployment still has replicas (Kueue: queuescope replaces
it and must not run beside it; docs/operations.md, "Switching from Kueue", says how to stop
it); refuse if an existing CRD has a stored version our CRDs do not serve (kube-apiserver
would reject the CRD: the objects need a storage migration first); write
manifests/overlays/default/certs with `queuescope certs generate` if it is absent (the
folder is git-ignored) and verify it; apply the CRDs with --force-conflicts (they take over
the fields Kueue's installer owned) and wait until they are Established; apply the rest of
overlays/default without the APIServices and the admission webhook configurations; wait
for the rollout; apply the webhook configurations, then the APIServices; wait until both
are Available. The webhooks and APIServices come last so that kube-apiserver never sends
a write or a group to a server that is not running yet (the webhooks fail closed).

uninstall: delete our admission webhook configurations FIRST (with the server gone, they
would refuse every write of a Kueue object and of a Job that names a LocalQueue), then our
APIServices (an APIService whose backend is gone makes every namespace deletion in the
cluster hang in Terminating), then everything of overlays/app-only, and the CRDs (with
every Kueue object in the cluster) only with --delete-crds. APIServices that point at
another Service are left alone.

CMD is split like a shell command line (`--kubectl "kubectl --context prod"`); the cluster
is whatever that kubectl talks to (KUBECONFIG, current context). Exit codes: 0 done,
1 a step failed or the install was refused, 2 unusable arguments.
"""

from __future__ import annotations

import argparse
import json
import shlex
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from queuescope.cli import main as queuescope
from visibility_server.certs import (
    APISERVICE_NAMES,
    CA_BUNDLE_PATCH_FILE,
    DEFAULT_NAMESPACE,
    DEFAULT_SERVICE,
    CertsError,
    refresh_ca_bundle_patch,
)
from visibility_server.webhooks.registrations import WEBHOOK_CONFIGURATIONS

REPO = Path(__file__).resolve().parents[1]
DEPLOYMENT = "queuescope-controller"
FIELD_MANAGER = "queuescope-deploy"
# What `certs generate` writes that kustomize reads (ca.key stays local).
CERT_FILES = ("ca.crt", "tls.crt", "tls.key", CA_BUNDLE_PATCH_FILE)
DEFAULT_TIMEOUT = 300
KUEUE_GROUP = "kueue.x-k8s.io"
# The Deployment Kueue's manifests and Helm chart install (any namespace).
KUEUE_DEPLOYMENT = "kueue-controller-manager"
WEBHOOK_KINDS = frozenset(kind for kind, _, _ in WEBHOOK_CONFIGURATIONS)
# Applied after the rollout, in this order (see the module docstring).
LATE_KINDS = (*sorted(WEBHOOK_KINDS), "APIService")

Doc = dict[str, Any]


class DeployError(Exception):
    """A step failed, or the cluster is in a state we refuse to touch."""


@dataclass(frozen=True)
class Kubectl:
    argv: tuple[str, ...]

    def run(self, *args: str, stdin: str | None = None) -> str:
        """kubectl's stdout; DeployError with its stderr when it exits non-zero."""
        command = [*self.argv, *args]
        print(f"+ {shlex.join(command)}", file=sys.stderr, flush=True)
        try:
            result = subprocess.run(
                command, input=stdin, capture_output=True, text=True, check=False
            )
        except OSError as err:
            raise DeployError(f"cannot run {self.argv[0]}: {err}") from None
        if result.returncode != 0:
            raise DeployError(
                f"`{shlex.join(command)}` exited {result.returncode}: {result.stderr.strip()}"
            )
        if result.stderr.strip():
            print(result.stderr.rstrip(), file=sys.stderr)
        return result.stdout

    def apiservice(self, name: str) -> Doc | None:
        out = self.run("get", "apiservice", name, "--ignore-not-found", "-o", "json")
        if not out.strip():
            return None
        doc: Doc = json.loads(out)
        return doc

    def render(self, overlay: Path) -> list[Doc]:
        return [d for d in yaml.safe_load_all(self.run("kustomize", str(overlay))) if d]

    def apply(self, docs: Sequence[Doc], *, force_conflicts: bool = False) -> None:
        force = ["--force-conflicts"] if force_conflicts else []
        self.run(
            "apply",
            "--server-side",
            *force,
            f"--field-manager={FIELD_MANAGER}",
            "-f",
            "-",
            stdin=_yaml(docs),
        )

    def items(self, *args: str) -> list[Doc]:
        """`kubectl get ARGS -o json` as a list of objects (a List's items, or one object)."""
        out = self.run("get", *args, "-o", "json")
        if not out.strip():
            return []
        doc: Doc = json.loads(out)
        found: list[Doc] = (
            doc.get("items", [doc]) if doc.get("kind", "").endswith("List") else [doc]
        )
        return found


@dataclass(frozen=True)
class Layout:
    manifests: Path

    @property
    def default(self) -> Path:
        return self.manifests / "overlays" / "default"

    @property
    def app_only(self) -> Path:
        return self.manifests / "overlays" / "app-only"

    @property
    def crds(self) -> Path:
        return self.manifests / "crds"

    @property
    def certs(self) -> Path:
        return self.default / "certs"


def foreign_target(apiservice: Doc) -> str | None:
    """Where an existing visibility APIService sends requests, if not to our Service."""
    service = (apiservice.get("spec") or {}).get("service")
    if not service:
        return "kube-apiserver itself (no spec.service)"
    if (service.get("namespace"), service.get("name")) == (DEFAULT_NAMESPACE, DEFAULT_SERVICE):
        return None
    return f"Service {service.get('namespace')}/{service.get('name')}"


def install(kubectl: Kubectl, layout: Layout, *, timeout: int) -> None:
    foreign = [
        f"APIService {name} points at {target}"
        for name in APISERVICE_NAMES
        if (found := kubectl.apiservice(name)) is not None
        and (target := foreign_target(found)) is not None
    ]
    if foreign:
        raise DeployError(
            "; ".join(foreign) + ". Another visibility server (Kueue?) is installed: "
            "queuescope replaces Kueue and must not be installed next to it. Uninstall it first."
        )
    _refuse_running_kueue(kubectl)
    _ensure_certs(layout.certs)
    docs = kubectl.render(layout.default)
    crds = [d for d in docs if d.get("kind") == "CustomResourceDefinition"]
    apiservices = [d for d in docs if d.get("kind") == "APIService"]
    webhooks = [d for d in docs if d.get("kind") in WEBHOOK_KINDS]
    if crds:
        _check_stored_versions(kubectl, crds)
        # Kueue's installer (or an earlier kubectl apply) owns fields of these CRDs: take
        # them over, or server-side apply stops at the first conflict.
        kubectl.apply(crds, force_conflicts=True)
        kubectl.run(
            "wait",
            "--for=condition=Established",
            *(f"crd/{d['metadata']['name']}" for d in crds),
            f"--timeout={timeout}s",
        )
    kubectl.apply(
        [d for d in docs if d.get("kind") not in (*LATE_KINDS, "CustomResourceDefinition")]
    )
    kubectl.run(
        "-n",
        DEFAULT_NAMESPACE,
        "rollout",
        "status",
        f"deployment/{DEPLOYMENT}",
        f"--timeout={timeout}s",
    )
    if webhooks:
        kubectl.apply(webhooks)
    kubectl.apply(apiservices)
    kubectl.run(
        "wait",
        "--for=condition=Available",
        *(f"apiservice/{d['metadata']['name']}" for d in apiservices),
        f"--timeout={timeout}s",
    )
    print("queuescope is installed; both visibility APIServices are Available")


def _webhooks_on_kueue_objects(config: Doc) -> bool:
    for webhook in config.get("webhooks") or ():
        service = (webhook.get("clientConfig") or {}).get("service") or {}
        if (service.get("namespace"), service.get("name")) == (DEFAULT_NAMESPACE, DEFAULT_SERVICE):
            continue
        for rule in webhook.get("rules") or ():
            if KUEUE_GROUP in (rule.get("apiGroups") or ()):
                return True
    return False


def _refuse_running_kueue(kubectl: Kubectl) -> None:
    """Kueue must be stopped first: its webhooks would reject or rewrite our writes (and,
    with Kueue gone, fail every write), and its controller would fight ours."""
    problems = [
        f"{config['kind']} {config['metadata']['name']} sends kueue.x-k8s.io objects to "
        "another server"
        for config in kubectl.items("validatingwebhookconfigurations,mutatingwebhookconfigurations")
        if _webhooks_on_kueue_objects(config)
    ]
    problems += [
        f"Deployment {d['metadata'].get('namespace')}/{KUEUE_DEPLOYMENT} has "
        f"{d['spec'].get('replicas')} replicas"
        for d in kubectl.items(
            "deployments", "-A", f"--field-selector=metadata.name={KUEUE_DEPLOYMENT}"
        )
        if (d.get("spec") or {}).get("replicas", 1) != 0
    ]
    if problems:
        raise DeployError(
            "; ".join(problems) + ". Kueue is still running: stop it first (scale its "
            "controller to 0 and delete its webhook configurations and APIServices, "
            'keeping its CRDs), as docs/operations.md "Switching from Kueue" describes.'
        )


def _check_stored_versions(kubectl: Kubectl, crds: Sequence[Doc]) -> None:
    """kube-apiserver rejects a CRD whose spec.versions lacks a version still in
    status.storedVersions: say which, and what to do, before applying anything."""
    served = {d["metadata"]["name"]: {v["name"] for v in d["spec"]["versions"]} for d in crds}
    problems: list[str] = []
    for live in kubectl.items("crd", *served, "--ignore-not-found"):
        name = live["metadata"]["name"]
        stored = (live.get("status") or {}).get("storedVersions") or []
        missing = [v for v in stored if v not in served.get(name, set())]
        if missing:
            problems.append(
                f"CRD {name} has objects stored as {', '.join(missing)}, which queuescope "
                f"does not serve ({', '.join(sorted(served[name]))})"
            )
    if problems:
        raise DeployError(
            "; ".join(problems) + ". Migrate those objects to v1beta1 or v1beta2 with the "
            "Kueue release that serves both (rewrite every object, then drop the old version "
            "from status.storedVersions), then install again."
        )


def uninstall(kubectl: Kubectl, layout: Layout, *, timeout: int, delete_crds: bool) -> None:
    kubectl.run(
        "delete",
        *(f"{kind.lower()}/{name}" for kind, name, _ in WEBHOOK_CONFIGURATIONS),
        "--ignore-not-found",
    )
    ours: list[str] = []
    for name in APISERVICE_NAMES:
        found = kubectl.apiservice(name)
        if found is None:
            continue
        target = foreign_target(found)
        if target is None:
            ours.append(name)
        else:
            print(f"leaving APIService {name} alone: it points at {target}", file=sys.stderr)
    if ours:
        kubectl.run("delete", "apiservice", *ours, "--ignore-not-found")
    with _renderable(layout) as renderable:
        docs = kubectl.render(renderable.app_only)
    kubectl.run(
        "delete", "--ignore-not-found", f"--timeout={timeout}s", "-f", "-", stdin=_yaml(docs)
    )
    if delete_crds:
        kubectl.run("delete", "--ignore-not-found", f"--timeout={timeout}s", "-k", str(layout.crds))
    else:
        print(f"CRDs kept (and every queue and Workload); to delete them: {layout.crds}")
    print("queuescope is uninstalled")


def _has_certs(folder: Path) -> bool:
    return all((folder / name).is_file() for name in CERT_FILES)


def _ensure_certs(folder: Path) -> None:
    # `generate` refuses (exit 2) a folder holding part of the set rather than replace a CA.
    if not _has_certs(folder) and queuescope(["certs", "generate", "--out", str(folder)]) != 0:
        raise DeployError(f"`queuescope certs generate --out {folder}` failed")
    if queuescope(["certs", "verify", "--dir", str(folder)]) != 0:
        raise DeployError(f"the certificates in {folder} do not pass `queuescope certs verify`")
    try:
        if refresh_ca_bundle_patch(folder):
            print(f"added the CRDs' conversion caBundle to {folder / CA_BUNDLE_PATCH_FILE}")
    except CertsError as err:
        raise DeployError(str(err)) from None


@contextmanager
def _renderable(layout: Layout) -> Iterator[Layout]:
    """`layout`, or, when its certificates are gone, a copy with throwaway ones: deleting
    needs only the objects' names, and the Secret's name does not depend on its content."""
    if _has_certs(layout.certs):
        yield layout
        return
    with tempfile.TemporaryDirectory(prefix="queuescope-undeploy-") as tmp:
        copy = Layout(Path(tmp) / "manifests")
        shutil.copytree(layout.manifests, copy.manifests, ignore=shutil.ignore_patterns("certs"))
        if queuescope(["certs", "generate", "--out", str(copy.certs)]) != 0:
            raise DeployError("cannot make throwaway certificates to render overlays/app-only")
        yield copy


def _yaml(docs: Sequence[Doc]) -> str:
    return yaml.safe_dump_all(list(docs), sort_keys=False)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="deploy.py",
        description=__doc__.split("\n\n")[0] if __doc__ else None,
    )
    parser.add_argument("action", choices=("install", "uninstall"))
    parser.add_argument("--kubectl", default="kubectl", metavar="CMD")
    parser.add_argument("--timeout", type=int, default=DEFAULT_TIMEOUT, metavar="SECONDS")
    parser.add_argument(
        "--delete-crds",
        action="store_true",
        help="uninstall: also delete the CRDs, and with them every Kueue object",
    )
    parser.add_argument(
        "--manifests", type=Path, default=REPO / "manifests", help=argparse.SUPPRESS
    )
    args = parser.parse_args(argv)
    kubectl = Kubectl(tuple(shlex.split(args.kubectl)))
    if not kubectl.argv or args.timeout <= 0:
        parser.error("--kubectl must name a command and --timeout must be positive")
    layout = Layout(args.manifests)
    try:
        if args.action == "install":
            install(kubectl, layout, timeout=args.timeout)
        else:
            uninstall(kubectl, layout, timeout=args.timeout, delete_crds=args.delete_crds)
    except DeployError as err:
        print(f"error: {err}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
