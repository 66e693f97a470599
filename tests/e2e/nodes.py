"""Nodes and Pods for the e2e tests that need them (docs/cluster.md#real-cluster-tests).

`NodeAgents` adds to a running `ControlPlane` what turns a Job into Pods on Nodes:

* kube-controller-manager with exactly the Job and garbage-collector controllers (the
  Job controller creates and deletes Pods; the garbage collector removes what a deleted
  owner leaves behind). No ServiceAccount controller: the apiserver runs without the
  ServiceAccount admission plugin (tests/e2e/harness.py), so Pods need no token;
* kube-scheduler, which binds Pods to Nodes by their nodeSelector and tolerations;
* kwok, which plays the kubelet of fake Nodes: it marks them Ready and moves their Pods
  through the lifecycle stages below.

The Nodes are those the sample ResourceFlavors (manifests/samples/10-flavors.yaml)
describe: each carries a flavor's node labels and taints, so a Pod lands on a Node of
its assigned flavor only if the Job was unsuspended with that flavor's nodeSelector and
tolerations.

Pod stages, chosen by the Pod's labels and annotations (set in a Job's pod template):

| Pod | what kwok does |
|---|---|
| (default) | Pending and bound → Running and Ready |
| label `e2e.queuescope.io/never-ready: "true"` | → Running, never Ready |
| annotation `e2e.queuescope.io/run-for: 2s` | Running and Ready → Succeeded after 2 s |
| annotation `e2e.queuescope.io/fail-after: 2s` | Running → Failed (exit code 1) after 2 s |
| deleted | finalizers dropped, then gone |
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import ssl
import time
import urllib.error
import urllib.request
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from tests.e2e.harness import ControlPlane, HarnessError, ManagedProcess, free_port, wait_for

REPO = Path(__file__).resolve().parents[2]
SAMPLE_FLAVORS = REPO / "manifests" / "samples" / "10-flavors.yaml"

NEVER_READY_LABEL = "e2e.queuescope.io/never-ready"
RUN_FOR_ANNOTATION = "e2e.queuescope.io/run-for"
FAIL_AFTER_ANNOTATION = "e2e.queuescope.io/fail-after"
KWOK_NODE_ANNOTATION = "kwok.x-k8s.io/node"
NODE_LABEL = "e2e.queuescope.io/kwok"
NOT_READY_TAINT = "node.kubernetes.io/not-ready:NoSchedule"
# The Deployment, ReplicaSet and StatefulSet controllers for the `deployment` and
# `statefulset` integrations' tests.
KCM_CONTROLLERS = (
    "job-controller",
    "garbage-collector-controller",
    "deployment-controller",
    "replicaset-controller",
    "statefulset-controller",
)
AGENT_READY_SECONDS = 120.0
NODES_READY_SECONDS = 60.0
PODS_GONE_SECONDS = 120.0

DEFAULT_CAPACITY: Mapping[str, str] = {"cpu": "16", "memory": "64Gi", "pods": "110"}
GPU_RESOURCE = "nvidia.com/gpu"


@dataclass(frozen=True)
class NodeSpec:
    """One fake Node: its name, labels, taints and capacity."""

    name: str
    labels: Mapping[str, str]
    taints: Sequence[Mapping[str, str]] = ()
    capacity: Mapping[str, str] = field(default_factory=lambda: dict(DEFAULT_CAPACITY))

    def manifest(self) -> dict[str, Any]:
        spec: dict[str, Any] = {}
        if self.taints:
            spec["taints"] = [dict(t) for t in self.taints]
        return {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {
                "name": self.name,
                "labels": {
                    **self.labels,
                    NODE_LABEL: "true",
                    "kubernetes.io/hostname": self.name,
                    "kubernetes.io/os": "linux",
                    "kubernetes.io/arch": "amd64",
                    "type": "kwok",
                },
                "annotations": {KWOK_NODE_ANNOTATION: "fake"},
            },
            "spec": spec,
            # Kept on create: kwok's node stage copies capacity and allocatable from here.
            "status": {"capacity": dict(self.capacity), "allocatable": dict(self.capacity)},
        }


def flavor_nodes(
    per_flavor: int = 1,
    capacity: Mapping[str, str] | None = None,
    flavors_file: Path = SAMPLE_FLAVORS,
) -> list[NodeSpec]:
    """`per_flavor` Nodes for each ResourceFlavor of `flavors_file`, with its nodeLabels
    and nodeTaints; a flavor whose labels name a GPU product gets GPUs too."""
    nodes: list[NodeSpec] = []
    for doc in yaml.safe_load_all(flavors_file.read_text()):
        if not doc or doc.get("kind") != "ResourceFlavor":
            continue
        name = doc["metadata"]["name"]
        spec = doc.get("spec") or {}
        cap = dict(capacity or DEFAULT_CAPACITY)
        if any(key.startswith("nvidia.com/") for key in spec.get("nodeLabels") or {}):
            cap.setdefault(GPU_RESOURCE, "8")
        for index in range(per_flavor):
            nodes.append(
                NodeSpec(
                    name=f"kwok-{name}-{index}",
                    labels=dict(spec.get("nodeLabels") or {}),
                    taints=[dict(t) for t in spec.get("nodeTaints") or []],
                    capacity=cap,
                )
            )
    return nodes


def _expressions(*pairs: tuple[str, str, Sequence[str]]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for key, operator, values in pairs:
        item: dict[str, Any] = {"key": key, "operator": operator}
        if values:
            item["values"] = list(values)
        out.append(item)
    return out


def _stage(
    name: str,
    kind: str,
    selector: list[dict[str, Any]],
    next_: dict[str, Any],
    delay_from: str | None = None,
) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "resourceRef": {"apiGroup": "v1", "kind": kind},
        "selector": {"matchExpressions": selector},
        "next": next_,
    }
    if delay_from is not None:
        spec["delay"] = {"durationMilliseconds": 0, "durationFrom": {"expressionFrom": delay_from}}
    return {
        "apiVersion": "kwok.x-k8s.io/v1alpha1",
        "kind": "Stage",
        "metadata": {"name": name},
        "spec": spec,
    }


# Go templates kwok renders into the object's status (its functions: Now, Quote).
_NODE_READY = """\
{{ $now := Now }}
conditions:
- {type: Ready, status: "True", reason: KubeletReady, message: kwok,
   lastHeartbeatTime: {{ $now | Quote }}, lastTransitionTime: {{ $now | Quote }}}
- {type: MemoryPressure, status: "False", reason: KubeletHasSufficientMemory, message: kwok,
   lastHeartbeatTime: {{ $now | Quote }}, lastTransitionTime: {{ $now | Quote }}}
- {type: DiskPressure, status: "False", reason: KubeletHasNoDiskPressure, message: kwok,
   lastHeartbeatTime: {{ $now | Quote }}, lastTransitionTime: {{ $now | Quote }}}
- {type: PIDPressure, status: "False", reason: KubeletHasSufficientPID, message: kwok,
   lastHeartbeatTime: {{ $now | Quote }}, lastTransitionTime: {{ $now | Quote }}}
nodeInfo: {architecture: amd64, operatingSystem: linux, kubeletVersion: kwok}
phase: Running
"""


def _pod_running(ready: bool) -> str:
    flag = "true" if ready else "false"
    status = '"True"' if ready else '"False"'
    return f"""\
{{{{ $now := Now }}}}
conditions:
- {{type: PodScheduled, status: "True", lastTransitionTime: {{{{ $now | Quote }}}}}}
- {{type: Initialized, status: "True", lastTransitionTime: {{{{ $now | Quote }}}}}}
- {{type: ContainersReady, status: {status}, lastTransitionTime: {{{{ $now | Quote }}}}}}
- {{type: Ready, status: {status}, lastTransitionTime: {{{{ $now | Quote }}}}}}
containerStatuses:
{{{{ range .spec.containers }}}}
- name: {{{{ .name | Quote }}}}
  image: {{{{ .image | Quote }}}}
  ready: {flag}
  started: true
  restartCount: 0
  state: {{running: {{startedAt: {{{{ $now | Quote }}}}}}}}
{{{{ end }}}}
phase: Running
startTime: {{{{ $now | Quote }}}}
"""


def _pod_terminated(phase: str, exit_code: int, reason: str) -> str:
    return f"""\
{{{{ $now := Now }}}}
conditions:
- {{type: ContainersReady, status: "False", reason: PodCompleted,
   lastTransitionTime: {{{{ $now | Quote }}}}}}
- {{type: Ready, status: "False", reason: PodCompleted, lastTransitionTime: {{{{ $now | Quote }}}}}}
containerStatuses:
{{{{ range .spec.containers }}}}
- name: {{{{ .name | Quote }}}}
  image: {{{{ .image | Quote }}}}
  ready: false
  started: false
  restartCount: 0
  state:
    terminated: {{exitCode: {exit_code}, reason: {reason},
                  startedAt: {{{{ $now | Quote }}}}, finishedAt: {{{{ $now | Quote }}}}}}
{{{{ end }}}}
phase: {phase}
"""


def _annotation(name: str) -> str:
    return f'.metadata.annotations["{name}"]'


def stages() -> list[dict[str, Any]]:
    """kwok's Stage documents for the table in the module docstring."""
    alive = (".metadata.deletionTimestamp", "DoesNotExist", ())
    pending = (".status.phase", "In", ("Pending",))
    running = (".status.phase", "In", ("Running",))
    ready = ('.status.conditions.[] | select( .type == "Ready" ) | .status', "In", ("True",))
    never_ready = (f'.metadata.labels["{NEVER_READY_LABEL}"]', "In", ("true",))
    may_be_ready = (f'.metadata.labels["{NEVER_READY_LABEL}"]', "NotIn", ("true",))
    return [
        _stage(
            "node-ready",
            "Node",
            _expressions(
                ('.status.conditions.[] | select( .type == "Ready" ) | .status', "NotIn", ("True",))
            ),
            {"statusTemplate": _NODE_READY},
        ),
        _stage(
            "pod-ready",
            "Pod",
            _expressions(alive, pending, may_be_ready),
            {"statusTemplate": _pod_running(ready=True)},
        ),
        _stage(
            "pod-running-never-ready",
            "Pod",
            _expressions(alive, pending, never_ready),
            {"statusTemplate": _pod_running(ready=False)},
        ),
        _stage(
            "pod-succeed",
            "Pod",
            _expressions(alive, running, ready, (_annotation(RUN_FOR_ANNOTATION), "Exists", ())),
            {"statusTemplate": _pod_terminated("Succeeded", 0, "Completed")},
            delay_from=_annotation(RUN_FOR_ANNOTATION),
        ),
        _stage(
            "pod-fail",
            "Pod",
            _expressions(alive, running, (_annotation(FAIL_AFTER_ANNOTATION), "Exists", ())),
            {"statusTemplate": _pod_terminated("Failed", 1, "Error")},
            delay_from=_annotation(FAIL_AFTER_ANNOTATION),
        ),
        _stage(
            "pod-delete",
            "Pod",
            _expressions((".metadata.deletionTimestamp", "Exists", ())),
            {"finalizers": {"empty": True}, "delete": True},
        ),
    ]


def _healthz(port: int) -> bool | None:
    """True once a component answers /healthz on its secure port (self-signed: the
    probe checks liveness, not identity)."""
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    try:
        with urllib.request.urlopen(
            f"https://127.0.0.1:{port}/healthz", timeout=2, context=context
        ) as response:
            return True if response.status == 200 else None
    except (OSError, urllib.error.URLError):
        return None


@dataclass
class NodeAgents:
    """kube-controller-manager, kube-scheduler and kwok attached to `plane`."""

    plane: ControlPlane
    kube_controller_manager: Path
    kube_scheduler: Path
    kwok: Path
    workdir: Path
    nodes: list[NodeSpec] = field(default_factory=flavor_nodes)
    kcm_qps: int = 200
    processes: dict[str, ManagedProcess] = field(default_factory=dict, init=False)
    startup_seconds: float = field(default=0.0, init=False)

    def start(self) -> None:
        started = time.monotonic()
        self.workdir.mkdir(parents=True, exist_ok=True)
        kubeconfig = self.plane.admin.kubeconfig
        stages_file = self.workdir / "kwok-stages.yaml"
        stages_file.write_text("---\n".join(yaml.safe_dump(s, sort_keys=False) for s in stages()))
        logs = self.plane.logs_dir
        kcm_port, scheduler_port = free_port(), free_port()
        self._spawn(
            "kube-controller-manager",
            [
                str(self.kube_controller_manager),
                f"--kubeconfig={kubeconfig}",
                f"--controllers={','.join(KCM_CONTROLLERS)}",
                "--leader-elect=false",
                "--bind-address=127.0.0.1",
                f"--secure-port={kcm_port}",
                f"--cert-dir={self.workdir / 'kcm-certs'}",
                # Our Jobs' Pods are the only load: answer the Job controller quickly.
                f"--kube-api-qps={self.kcm_qps}",
                f"--kube-api-burst={self.kcm_qps * 2}",
                "--concurrent-job-syncs=10",
                "--v=2",
            ],
            logs / "kube-controller-manager.log",
        )
        self._spawn(
            "kube-scheduler",
            [
                str(self.kube_scheduler),
                f"--kubeconfig={kubeconfig}",
                f"--authentication-kubeconfig={kubeconfig}",
                f"--authorization-kubeconfig={kubeconfig}",
                "--leader-elect=false",
                "--bind-address=127.0.0.1",
                f"--secure-port={scheduler_port}",
                f"--cert-dir={self.workdir / 'scheduler-certs'}",
                f"--kube-api-qps={self.kcm_qps}",
                f"--kube-api-burst={self.kcm_qps * 2}",
                "--v=2",
            ],
            logs / "kube-scheduler.log",
        )
        self._spawn(
            "kwok",
            [
                str(self.kwok),
                f"--kubeconfig={kubeconfig}",
                f"--config={stages_file}",
                "--manage-all-nodes=false",
                f"--manage-nodes-with-annotation-selector={KWOK_NODE_ANNOTATION}=fake",
                f"--server-address=127.0.0.1:{free_port()}",
                "--node-lease-duration-seconds=0",
            ],
            logs / "kwok.log",
            # kwok reads and writes under $HOME/.kwok: keep it in the session's folder.
            env={**os.environ, "HOME": str(self.workdir)},
        )
        for label, port in (
            ("kube-controller-manager", kcm_port),
            ("kube-scheduler", scheduler_port),
        ):
            wait_for(
                functools.partial(_healthz, port),
                timeout=AGENT_READY_SECONDS,
                what=f"{label} /healthz",
                interval=0.5,
                alive=self.check_alive,
            )
        self.plane.apply("\n---\n".join(json.dumps(n.manifest()) for n in self.nodes))
        wait_for(
            self._nodes_ready,
            timeout=NODES_READY_SECONDS,
            what=f"{len(self.nodes)} kwok Nodes Ready",
            interval=0.5,
            alive=self.check_alive,
        )
        # kube-apiserver's TaintNodesByCondition admission taints every new Node not-ready;
        # the node-lifecycle controller would lift it once the Node is Ready. It does not
        # run (it would also evict Pods of Nodes without kubelet heartbeats): lift it here.
        for spec in self.nodes:
            self.plane.kubectl("taint", "nodes", spec.name, f"{NOT_READY_TAINT}-", check=False)
        self.startup_seconds = time.monotonic() - started

    def _spawn(
        self,
        label: str,
        argv: list[str],
        log_path: Path,
        env: Mapping[str, str] | None = None,
    ) -> None:
        process = ManagedProcess(label, argv, log_path, env=env)
        process.start()
        self.processes[label] = process

    def _nodes_ready(self) -> bool | None:
        doc = self.plane.get_json("nodes", "-l", f"{NODE_LABEL}=true")
        ready = {
            item["metadata"]["name"]
            for item in doc["items"]
            if any(
                c.get("type") == "Ready" and c.get("status") == "True"
                for c in (item.get("status") or {}).get("conditions") or []
            )
        }
        return True if ready >= {n.name for n in self.nodes} else None

    def check_alive(self) -> None:
        for process in self.processes.values():
            process.check_alive()

    def stop(self) -> None:
        for process in reversed(list(self.processes.values())):
            process.stop()
        self.processes.clear()

    # -- helpers for the tests ----------------------------------------------------------

    def pods(self, namespace: str, selector: str | None = None) -> list[dict[str, Any]]:
        args = ["pods", "-n", namespace]
        if selector:
            args += ["-l", selector]
        items: list[dict[str, Any]] = self.plane.get_json(*args)["items"]
        return items

    def node(self, name: str) -> NodeSpec:
        for spec in self.nodes:
            if spec.name == name:
                return spec
        raise HarnessError(f"no kwok node {name}")

    def clear_namespace(self, namespace: str) -> None:
        """Delete every Job and Deployment of `namespace` and wait until their Pods are
        gone (while the controllers still run), so the next module starts with empty Nodes."""
        self.plane.kubectl(
            "delete",
            "jobs,deployments",
            "--all",
            "-n",
            namespace,
            "--cascade=background",
            "--wait=false",
        )
        wait_for(
            lambda: True if not self.pods(namespace) else None,
            timeout=PODS_GONE_SECONDS,
            what=f"the Pods of {namespace} gone",
            interval=0.5,
        )


@contextlib.contextmanager
def node_agents(
    plane: ControlPlane, toolchain: Any, workdir: Path, nodes: list[NodeSpec] | None = None
) -> Iterator[NodeAgents]:
    """`NodeAgents` started on `plane` for the duration of the block."""
    agents = NodeAgents(
        plane,
        toolchain.kube_controller_manager,
        toolchain.kube_scheduler,
        toolchain.kwok,
        workdir,
        nodes if nodes is not None else flavor_nodes(),
    )
    try:
        agents.start()
        yield agents
    finally:
        agents.stop()
