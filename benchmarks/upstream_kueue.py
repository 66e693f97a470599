"""Upstream Kueue's manager beside our server, for the benchmarks only (never shipped).

Its binary is built from Kueue's Go module and cached by
tools/controlplane/kueue_manager.py. Running it outside a cluster takes:

* its own CRDs (Kueue's module, `config/components/crd/bases`). On a control plane that
  holds ours, the CRDs are taken over in place (server-side apply, conversion set to
  `None` first: ours convert through our server, which is not running then), so the
  objects already stored, the same Workloads, stay;
* a Configuration: no leader election, no internal certificate management (that would
  inject CA bundles into webhook configurations that do not exist here), the batch/v1
  Job integration only, the given client QPS, a webhook serving certificate of ours;
* a metrics certificate: without internal certificate management its metrics server
  reads one from a fixed path, `/etc/kueue/metrics/certs`, even with metrics off. One
  is written there when none is (the only file these benchmarks put outside a
  temporary folder);
* a kubeconfig: the control plane's admin one.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import yaml

from tests.e2e.harness import ControlPlane, ManagedProcess, free_port, wait_for
from visibility_server.certs import create_ca, issue_serving_cert, write_certified_key

REPO = Path(__file__).resolve().parent.parent
KUEUE_VERSION = "v0.19.2"
METRICS_CERT_DIR = Path("/etc/kueue/metrics/certs")
NAMESPACE = "kueue-system"


def load_tool(name: str, filename: str) -> Any:
    """A module of tools/controlplane/, loaded by path (it is not a package)."""
    path = REPO / "tools" / "controlplane" / filename
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def ensure_manager() -> Path:
    """Kueue's manager binary, built once from its Go module (minutes when cold)."""
    tool = load_tool("queuescope_controlplane_kueue_manager", "kueue_manager.py")
    path: Path = tool.ensure_kueue_manager(log=lambda m: print(m, file=sys.stderr))
    return path


def kueue_crds(version: str = KUEUE_VERSION) -> list[Path]:
    """Kueue's CRD bases from its Go module in the module cache (downloaded by the build
    of its manager)."""
    gomodcache = os.environ.get("GOMODCACHE") or ""
    if not gomodcache:
        try:
            gomodcache = subprocess.run(
                ["go", "env", "GOMODCACHE"], capture_output=True, text=True, check=True
            ).stdout.strip()
        except (OSError, subprocess.CalledProcessError):
            gomodcache = str(Path.home() / "go" / "pkg" / "mod")
    bases = Path(gomodcache) / f"sigs.k8s.io/kueue@{version}/config/components/crd/bases"
    found = sorted(bases.glob("kueue.x-k8s.io_*.yaml"))
    if not found:
        raise FileNotFoundError(f"no Kueue CRDs under {bases}")
    return found


def install_crds(plane: ControlPlane) -> None:
    """Upstream's CRDs, taking over ours in place when they are there (objects stay)."""
    ours = plane.kubectl("get", "crd", "-o", "name").stdout.split()
    for name in ours:
        if name.endswith(".kueue.x-k8s.io"):
            plane.kubectl(
                "patch", name, "--type=merge",
                "-p", json.dumps({"spec": {"conversion": {"strategy": "None", "webhook": None}}}),
            )  # fmt: skip
    for crd in kueue_crds():
        plane.kubectl(
            "apply", "--server-side", "--force-conflicts",
            "--field-manager=kueue-bench", "-f", str(crd),
        )  # fmt: skip
    plane.kubectl("wait", "--for=condition=Established", "crd", "--all", "--timeout=60s")
    plane.apply(
        json.dumps({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}})
    )


def _self_signed(directory: Path, service: str) -> None:
    now = datetime.now(UTC)
    ca = create_ca(now=now, common_name=f"bench-{service}-ca")
    serving = issue_serving_cert(ca, namespace=NAMESPACE, service=service, now=now)
    directory.mkdir(parents=True, exist_ok=True)
    write_certified_key(serving, directory / "tls.crt", directory / "tls.key")


def ensure_metrics_certificate(directory: Path = METRICS_CERT_DIR) -> None:
    if not ((directory / "tls.crt").exists() and (directory / "tls.key").exists()):
        _self_signed(directory, "kueue-metrics")


def write_config(
    root: Path, *, webhook_port: int, health_port: int, qps: float, cache_sync_seconds: float
) -> Path:
    """Upstream's Configuration for a manager outside the cluster. `cache_sync_seconds`:
    how long its controllers may take to fill their caches before the manager gives up
    (controller-runtime's default is two minutes, too short for 100,000 Workloads on a
    loaded machine; an administrator of such a cluster would raise it the same way)."""
    certs = root / "webhook-certs"
    _self_signed(certs, "kueue-webhook-service")
    config = {
        "apiVersion": "config.kueue.x-k8s.io/v1beta1",
        "kind": "Configuration",
        "namespace": NAMESPACE,
        "health": {"healthProbeBindAddress": f"127.0.0.1:{health_port}"},
        "metrics": {"bindAddress": "0"},
        "webhook": {"port": webhook_port, "host": "127.0.0.1", "certDir": str(certs)},
        "leaderElection": {"leaderElect": False},
        "internalCertManagement": {"enable": False},
        "integrations": {"frameworks": ["batch/job"]},
        "clientConnection": {"qps": qps, "burst": int(qps)},
        # A Go time.Duration: nanoseconds.
        "controller": {"cacheSyncTimeout": int(cache_sync_seconds * 1e9)},
    }
    path = root / "kueue-config.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


def _ready(port: int) -> bool | None:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=2) as response:
            return True if response.status == 200 else None
    except OSError:
        return None


@contextmanager
def running_manager(
    manager: Path, plane: ControlPlane, root: Path, *, qps: float, ready_timeout: float = 300
) -> Iterator[ManagedProcess]:
    """Upstream's manager on `plane` (its CRDs installed first: `install_crds`), up and
    ready; stopped on exit. Its log: the plane's logs folder, `kueue-manager.log`."""
    root.mkdir(parents=True, exist_ok=True)
    ensure_metrics_certificate()
    health = free_port()
    config = write_config(
        root,
        webhook_port=free_port(),
        health_port=health,
        qps=qps,
        cache_sync_seconds=max(120.0, ready_timeout),
    )
    process = ManagedProcess(
        "kueue-manager",
        # No on-demand visibility server: our side serves none in these runs either.
        [str(manager), f"--config={config}", "--feature-gates=VisibilityOnDemand=false"],
        plane.logs_dir / "kueue-manager.log",
        env={**os.environ, "KUBECONFIG": str(plane.admin.kubeconfig)},
    )
    process.start()
    try:
        wait_for(
            lambda: _ready(health),
            timeout=ready_timeout,
            what="upstream Kueue manager /readyz",
            interval=0.5,
            alive=process.check_alive,
        )
        yield process
    finally:
        process.stop()
