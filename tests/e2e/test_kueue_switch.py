"""Switching an installed Kueue to queuescope, and back (issue 12; docs/operations.md,
"Switching from Kueue").

On the real kube-apiserver: Kueue v0.19.2's own CRDs (read from its Go module) are
installed the way Kueue's manifests are (`kubectl apply --server-side`), objects are
created in v1beta2 (admitted Workloads with the status Kueue writes, pending ones without);
and, for Kueue 0.14 and earlier, whose CRDs served and stored only v1beta1, the same with
only the v1beta1 version of those CRDs and the objects written in v1beta1,
and then queuescope takes over the documented way: Kueue stopped (nothing runs here), the
CRDs applied by `tools/deploy.py`'s own steps (stored versions checked, field-manager
conflicts forced), then queuescope started in cluster mode. Every object must come through
unchanged (same resourceVersion: the switch rewrites no object), v1beta1 clients read
them through our conversion webhook, the admitted Workloads stay admitted and the pending
ones pending, in the same order. Then back: queuescope stopped, Kueue v0.19.2's CRDs
applied the same way (a rollback goes to a Kueue that serves v1beta2: queuescope's writes
are stored as v1beta2), and every object is still there.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import yaml

from scheduler.api import ApiError, Configuration, load_documents, load_yaml
from scheduler.api.conversion import convert_document
from tests.e2e.aggregated import NAMESPACE, SERVICE
from tests.e2e.cluster import (
    CRD_NAMES,
    EXTERNAL_SERVICE,
    REPO,
    ClusterModeServer,
    controller_kubeconfig,
    crd_documents,
    subset,
    wait_json,
)
from tests.e2e.harness import (
    ADMIN_GROUPS,
    ADMIN_USER,
    ControlPlane,
    HarnessError,
    private_control_plane,
    wait_for,
)
from visibility_server.certs import ServiceName, generate_cert_dir

pytestmark = pytest.mark.realcluster

KUEUE_MODULE = "sigs.k8s.io/kueue@v0.19.2"
V2 = "kueue.x-k8s.io/v1beta2"
NS = "switch-e2e"
KINDS = ("resourceflavors", "cohorts", "clusterqueues", "workloadpriorityclasses", "localqueues")
# (name, priority, admitted): the cluster queue has 2 CPUs and each Workload asks for 1,
# so the two admitted ones hold all of it and the others wait, by priority then age.
WORKLOADS = [
    ("w-admitted-1", 0, True),
    ("w-admitted-2", 0, True),
    ("w-pending-low", 0, False),
    ("w-pending-high", 100, False),
    ("w-pending-low-2", 0, False),
]
PENDING_ORDER = ["w-pending-high", "w-pending-low", "w-pending-low-2"]


def _deploy_module() -> ModuleType:
    spec = importlib.util.spec_from_file_location("deploy_tool_e2e", REPO / "tools" / "deploy.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("deploy_tool_e2e", module)
    spec.loader.exec_module(module)
    return module


deploy = _deploy_module()


V1BETA1_ONLY = "v1beta1-only"  # the layout of Kueue 0.14 and earlier
V1BETA2_STORED = "v1beta2-stored"  # Kueue 0.15 and later


def kueue_crds(layout: str = V1BETA2_STORED) -> list[dict[str, Any]]:
    """Kueue v0.19.2's CRDs of the kinds queuescope serves, from its Go module (Go's module
    cache keeps the download; no other network); with V1BETA1_ONLY, only their v1beta1
    version, served and stored, as Kueue 0.14 had."""
    crds = _kueue_v0192_crds()
    if layout == V1BETA1_ONLY:
        for crd in crds:
            (old,) = [v for v in crd["spec"]["versions"] if v["name"] == "v1beta1"]
            old.pop("deprecated", None)
            old.pop("deprecationWarning", None)
            crd["spec"]["versions"] = [{**old, "storage": True}]
    return crds


def kueue_source() -> Path:
    """Kueue v0.19.2's module, as Go's module cache holds it (downloaded once)."""
    go = os.environ.get("GO") or shutil.which("go")
    if not go:
        pytest.fail("Go is needed to read Kueue's module (go mod download)")
    with tempfile.TemporaryDirectory() as tmp:
        result = subprocess.run(
            [go, "mod", "download", "-json", KUEUE_MODULE],
            cwd=tmp,
            capture_output=True,
            text=True,
            check=False,
            env={**os.environ, "GOFLAGS": "-mod=mod", "GOWORK": "off"},
        )
    if result.returncode != 0:
        pytest.fail(f"go mod download {KUEUE_MODULE}: {result.stderr or result.stdout}")
    return Path(json.loads(result.stdout)["Dir"])


def _kueue_v0192_crds() -> list[dict[str, Any]]:
    bases = kueue_source() / "config" / "components" / "crd" / "bases"
    return [
        yaml.safe_load((bases / f"kueue.x-k8s.io_{name}.yaml").read_text()) for name in CRD_NAMES
    ]


def wait_established(plane: ControlPlane) -> None:
    for name in CRD_NAMES:
        plane.kubectl(
            "wait", "--for=condition=Established", f"crd/{name}.kueue.x-k8s.io", "--timeout=60s"
        )


def objects() -> list[dict[str, Any]]:
    pod_set = {
        "name": "main",
        "count": 1,
        "template": {
            "spec": {
                "restartPolicy": "Never",
                "containers": [
                    {"name": "c", "image": "busybox", "resources": {"requests": {"cpu": "1"}}}
                ],
            }
        },
    }
    resources = [{"name": "cpu", "nominalQuota": "2"}]
    return [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}},
        {"apiVersion": V2, "kind": "ResourceFlavor", "metadata": {"name": "switch-rf"}},
        {"apiVersion": V2, "kind": "Cohort", "metadata": {"name": "switch-cohort"}},
        {
            "apiVersion": V2,
            "kind": "WorkloadPriorityClass",
            "metadata": {"name": "switch-high"},
            "value": 100,
        },
        {
            "apiVersion": V2,
            "kind": "ClusterQueue",
            "metadata": {"name": "switch-cq"},
            "spec": {
                "cohortName": "switch-cohort",
                "namespaceSelector": {},
                "resourceGroups": [
                    {
                        "coveredResources": ["cpu"],
                        "flavors": [{"name": "switch-rf", "resources": resources}],
                    }
                ],
            },
        },
        {
            "apiVersion": V2,
            "kind": "LocalQueue",
            "metadata": {"name": "switch-lq", "namespace": NS},
            "spec": {"clusterQueue": "switch-cq"},
        },
    ] + [
        {
            "apiVersion": V2,
            "kind": "Workload",
            "metadata": {"name": name, "namespace": NS},
            "spec": {
                "queueName": "switch-lq",
                "priority": priority,
                **(
                    {
                        "priorityClassRef": {
                            "group": "kueue.x-k8s.io",
                            "kind": "WorkloadPriorityClass",
                            "name": "switch-high",
                        }
                    }
                    if priority
                    else {}
                ),
                "podSets": [pod_set],
            },
        }
        for name, priority, _ in WORKLOADS
    ]


def admitted_status(now: str) -> dict[str, Any]:
    """What Kueue writes when it admits a Workload."""
    condition = {"status": "True", "lastTransitionTime": now, "message": "admitted"}
    return {
        "status": {
            "admission": {
                "clusterQueue": "switch-cq",
                "podSetAssignments": [
                    {
                        "name": "main",
                        "flavors": {"cpu": "switch-rf"},
                        "resourceUsage": {"cpu": "1"},
                        "count": 1,
                    }
                ],
            },
            "conditions": [
                {**condition, "type": "QuotaReserved", "reason": "QuotaReserved"},
                {**condition, "type": "Admitted", "reason": "Admitted"},
            ],
        }
    }


def snapshot(plane: ControlPlane, version: str = "v1beta2") -> dict[tuple[str, str], Any]:
    """Every object of ours, by (kind, name), as a client of `version` reads it."""
    found: dict[tuple[str, str], Any] = {}
    for kind in (*KINDS, "workloads"):
        args = [f"{kind}.{version}.kueue.x-k8s.io"]
        args += ["-n", NS] if kind in ("localqueues", "workloads") else []
        for item in plane.get_json(*args)["items"]:
            if item["metadata"]["name"].startswith(("switch-", "w-")):
                item["metadata"].pop("managedFields", None)
                found[(item["kind"], item["metadata"]["name"])] = item
    return found


@dataclass
class SwitchServer(ClusterModeServer):
    """queuescope in cluster mode over objects that are already there: the certificates,
    namespace, RBAC and credentials of an install, but none of the fixture objects, and the
    CRDs left to the switch itself."""

    def prepare(self) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        generate_cert_dir(
            self.certs.root, service=ServiceName(NAMESPACE, SERVICE), now=datetime.now(UTC)
        )
        self.plane.kubectl("apply", "-f", str(REPO / "manifests" / "deploy" / "namespace.yaml"))
        self.plane.kubectl("apply", "-k", str(REPO / "manifests" / "rbac"))
        self.plane.apply(json.dumps(EXTERNAL_SERVICE))
        self.kubeconfig = controller_kubeconfig(self.plane, self.root / "controller.kubeconfig")


def pending_names(server: ClusterModeServer) -> list[str]:
    path = "/apis/visibility.kueue.x-k8s.io/v1beta2/clusterqueues/switch-cq/pendingworkloads"
    response = server.as_front_proxy(path, ADMIN_USER, ADMIN_GROUPS)
    if response.status != 200:
        raise HarnessError(f"{path}: {response.status} {response.body[:300]!r}")
    return [item["metadata"]["name"] for item in response.json()["items"]]


@dataclass(frozen=True)
class Installed:
    plane: ControlPlane
    layout: str

    @property
    def version(self) -> str:
        """The version Kueue's clients used: the only one served before the switch."""
        return "v1beta1" if self.layout == V1BETA1_ONLY else "v1beta2"


@pytest.fixture(scope="module", params=[V1BETA2_STORED, V1BETA1_ONLY])
def kueue_installed(
    toolchain: Any, tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest
) -> Iterator[Installed]:
    """A cluster that ran Kueue: its CRDs, installed as Kueue's manifests are, and its
    objects. On a control plane of its own: the session's holds other modules' CRDs and
    objects, and deleting CRDs is slow and can stall (its finalizer backs off for
    minutes while the CRD's storage is being set up again)."""
    workdir = tmp_path_factory.mktemp(f"switch-{request.param}")
    with private_control_plane(toolchain, workdir) as plane:
        installed = Installed(plane, request.param)
        install_kueue(installed)
        yield installed


def install_kueue(installed: Installed) -> None:
    """Kueue's CRDs of `installed.layout`, applied as its manifests are, then the objects
    written by Kueue's clients of that time (the admitted ones with Kueue's status)."""
    plane = installed.plane
    plane.kubectl(
        "apply",
        "--server-side",
        "-f",
        "-",
        input="\n---\n".join(json.dumps(d) for d in kueue_crds(installed.layout)),
    )
    wait_established(plane)
    now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    for doc in objects():
        if doc["kind"] == "Workload":
            time.sleep(1.1)  # creation order is the FIFO tie-breaker, to the second
        old = installed.version == "v1beta1" and doc["apiVersion"] == V2
        written = convert_document(doc, "kueue.x-k8s.io/v1beta1", keep=False) if old else doc
        plane.apply(json.dumps(written))
    for name, _, admitted in WORKLOADS:
        if admitted:
            plane.kubectl(
                "patch",
                f"workload.{installed.version}.kueue.x-k8s.io",
                name,
                "-n",
                NS,
                "--subresource=status",
                "--type=merge",
                "-p",
                json.dumps(admitted_status(now)),
            )


def test_switch_to_queuescope_and_back(kueue_installed: Installed, tmp_path: Path) -> None:
    plane, version = kueue_installed.plane, kueue_installed.version
    before = snapshot(plane, version)
    assert len(before) == 5 + len(WORKLOADS)
    server = SwitchServer(plane, tmp_path / "server")
    server.prepare()
    ours = crd_documents(server.port, server.certs.ca_cert.read_bytes())
    kubectl = deploy.Kubectl((str(plane.kubectl_binary), f"--kubeconfig={plane.admin.kubeconfig}"))

    # Without taking over the fields Kueue's apply owns, server-side apply stops.
    conflict = plane.kubectl(
        "apply",
        "--server-side",
        f"--field-manager={deploy.FIELD_MANAGER}",
        "-f",
        "-",
        input=json.dumps(ours[0]),
        check=False,
    )
    assert conflict.returncode != 0 and "conflict" in conflict.stderr.lower(), conflict.stderr

    # The documented switch: Kueue stopped, then make deploy's CRD steps.
    deploy._refuse_running_kueue(kubectl)
    deploy._check_stored_versions(kubectl, ours)
    kubectl.apply(ours, force_conflicts=True)
    wait_established(plane)
    for name in CRD_NAMES:
        crd = plane.get_json("crd", f"{name}.kueue.x-k8s.io")
        assert set(crd["status"]["storedVersions"]) <= {"v1beta1", "v1beta2"}
        assert crd["metadata"]["labels"]["app.kubernetes.io/name"] == "queuescope"

    def unchanged() -> None:
        """Nothing was rewritten by the switch (same resourceVersion), and everything
        Kueue's CRDs showed is still shown (ours may default more fields on read)."""
        switched = snapshot(plane, version)
        assert set(switched) == set(before)
        for key, obj in before.items():
            rv = switched[key]["metadata"]["resourceVersion"]
            assert rv == obj["metadata"]["resourceVersion"], key
            assert subset(obj, switched[key]), (key, obj, switched[key])

    # In the version the objects are stored in: readable before any server runs, and
    # before queuescope writes its first status.
    unchanged()
    server.start()
    try:
        # v1beta1 clients read the same objects through our conversion webhook.
        old = snapshot(plane, "v1beta1")
        assert set(old) == set(before)
        assert old[("ClusterQueue", "switch-cq")]["spec"]["cohort"] == "switch-cohort"
        high = old[("Workload", "w-pending-high")]["spec"]
        assert high["priorityClassName"] == "switch-high"
        assert high["priorityClassSource"] == "kueue.x-k8s.io/workloadpriorityclass"

        wait_json(
            plane,
            "switch-cq status written by queuescope: 2 admitted, 3 pending",
            lambda cq: (
                (cq.get("status") or {}).get("admittedWorkloads") == 2
                and cq["status"].get("pendingWorkloads") == 3
            ),
            "clusterqueue.v1beta2.kueue.x-k8s.io",
            "switch-cq",
        )
        wait_for(
            lambda: True if pending_names(server) == PENDING_ORDER else None,
            timeout=60,
            what=f"the pending order {PENDING_ORDER} in the visibility API",
        )
        after = snapshot(plane)
        same_version = snapshot(plane, version)
        for name, _, admitted in WORKLOADS:
            wl = same_version[("Workload", name)]
            status = wl.get("status") or {}
            if admitted:
                was = before[("Workload", name)]["status"]
                assert status["admission"] == was["admission"], name
                conditions = {c["type"]: c["status"] for c in status["conditions"]}
                assert conditions["QuotaReserved"] == conditions["Admitted"] == "True", name
            else:
                assert "admission" not in status, name
            assert subset(before[("Workload", name)]["spec"], wl["spec"]), name
    finally:
        server.stop()

    # Back to Kueue (v0.19.2: a rollback target must serve v1beta2, which queuescope's
    # writes are stored as): its CRDs applied the same way; every object is there as
    # queuescope last showed it, and every admission as Kueue made it.
    kubectl.apply(kueue_crds(), force_conflicts=True)
    wait_established(plane)
    back = snapshot(plane)
    assert set(back) == set(after) == set(before)
    for key, obj in after.items():
        for path in KEY_FIELDS.get(key[0], ()):
            assert dig(back[key], path) == dig(obj, path), (key, path)
        if key[0] == "Workload" and "admission" in (before[key].get("status") or {}):
            assert back[key]["status"]["admission"] == before[key]["status"]["admission"], key


# What each kind is for, compared after the roll-back (defaults of either CRD aside).
KEY_FIELDS: dict[str, tuple[tuple[str, ...], ...]] = {
    "ClusterQueue": (("spec", "cohortName"), ("spec", "resourceGroups")),
    "LocalQueue": (("spec", "clusterQueue"),),
    "WorkloadPriorityClass": (("value",),),
    "Workload": (
        ("spec", "queueName"),
        ("spec", "priority"),
        ("spec", "priorityClassRef"),
        ("spec", "podSets"),
    ),
}


def dig(obj: Any, path: tuple[str, ...]) -> Any:
    for key in path:
        obj = obj.get(key) if isinstance(obj, dict) else None
    return obj


def test_kueues_own_configuration_files_are_read() -> None:
    """The Configuration a Kueue v0.19.2 install runs with, as its manifests and its Helm
    chart ship it (config.kueue.x-k8s.io/v1beta2), and those of its own e2e suites: read
    with v1beta2's defaults (docs/scheduling.md#configuration), or, for dynamic resource
    allocation, refused by name."""
    source = kueue_source()
    manifest = source / "config" / "components" / "manager" / "controller_manager_config.yaml"
    chart = yaml.safe_load((source / "charts" / "kueue" / "values.yaml").read_text())
    shipped = [
        load_documents([str(manifest)]),
        load_yaml(chart["managerConfig"]["controllerManagerConfigYaml"], "values.yaml"),
    ]
    for decoded in shipped:
        (cfg,) = [d.obj for d in decoded]
        assert isinstance(cfg, Configuration)
        assert cfg.waits_for_pods_ready  # on by default in v0.19
        wait = cfg.wait_for_pods_ready
        assert (wait.timeout, wait.block_admission) == (30 * 60 * 1_000_000, False)
        assert not cfg.fair_sharing.enable
    suites = sorted((source / "test" / "e2e" / "config").rglob("controller_manager_config.yaml"))
    assert len(suites) >= 5
    for path in suites:
        if "dra" in path.parts:
            with pytest.raises(ApiError, match=r"resources\.deviceClassMappings: not supported"):
                load_documents([str(path)])
            continue
        (decoded,) = load_documents([str(path)])
        assert isinstance(decoded.obj, Configuration), path
    (extended,) = load_documents(
        [str(source / "test/e2e/config/extended/controller_manager_config.yaml")]
    )
    assert isinstance(extended.obj, Configuration)
    assert extended.obj.fair_sharing.preemption_strategies == [
        "LessThanOrEqualToFinalShare",
        "LessThanInitialShare",
    ]
