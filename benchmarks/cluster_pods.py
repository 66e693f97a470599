"""The pods run of `cluster-sync`: admissions per second end to end, with real Pods.

A fresh control plane with the Node agents of the e2e suite (tests/e2e/nodes.py: the Job
controller, kube-scheduler, kwok) and `--pod-nodes` on-demand Nodes. `--pod-jobs` one-CPU
Jobs wait in a ClusterQueue with no quota; their Workloads are created by the admission
controller under test. Then the quota is set to `--pod-quota` CPUs and the clock runs
until every Job is Complete: each admission unsuspends a Job, the Job controller creates
its Pod, the scheduler binds it, kwok runs it for `--pod-run-for` and marks it Succeeded,
the Job completes, its Workload finishes, the quota is freed and the next one is admitted.
Reported: Jobs per second over that span (every Job is admitted exactly once), the wall
time, and the CPU time of the admission controller. The same shape runs again with plain
Pods instead of Jobs (the `pod` integration, its webhooks registered): each admission
lifts a Pod's scheduling gate, kube-scheduler binds it, kwok runs it to `Succeeded`.

The same shape runs for upstream Kueue's manager when a binary is given
(`upstream_pods_run`), each side on its own control plane, one after the other.
"""

from __future__ import annotations

import concurrent.futures
import json
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from benchmarks import upstream_kueue
from tests.e2e.bulk import Admin, cpu_seconds
from tests.e2e.cluster import ClusterModeServer, webhook_documents
from tests.e2e.harness import ControlPlane, wait_for
from tests.e2e.nodes import RUN_FOR_ANNOTATION, NodeAgents, flavor_nodes
from tests.e2e.pods import QUEUE_LABEL, PodJob, flavor_queue, sample_flavors

NS = "bench-pods"
CQ = "bench-pods"
LQ = "bench-pods"
FLAVOR = "on-demand"
JOBS_PATH = f"/apis/batch/v1/namespaces/{NS}/jobs"
PODS_PATH = f"/api/v1/namespaces/{NS}/pods"
WORKLOADS_PATH = f"/apis/kueue.x-k8s.io/v1beta2/namespaces/{NS}/workloads"
KUEUE_VERSION = upstream_kueue.KUEUE_VERSION


@dataclass(frozen=True)
class PodsRun:
    """One side's figures."""

    side: str
    jobs: int
    seconds: float  # quota opened → the last Job Complete
    cpu: float  # the admission controller's CPU seconds over the same span
    startup: float  # control plane, Node agents and the controller up
    hold: float  # mean seconds a Workload held quota (Admitted → Finished, 1 s resolution)

    @property
    def rate(self) -> float:
        return self.jobs / self.seconds


@dataclass(frozen=True)
class PodsShape:
    jobs: int
    quota: int
    nodes: int
    run_for: str
    qps: float  # the admission controller's client QPS (and burst)


@dataclass
class Bench:
    """The control plane and Node agents of one side."""

    plane: ControlPlane
    agents: NodeAgents
    admin: Admin


@contextmanager
def _bench_plane(
    toolchain: Any, nodes_toolchain: Any, root: Path, shape: PodsShape
) -> Iterator[Bench]:
    plane = ControlPlane(
        etcd=toolchain.etcd,
        kube_apiserver=toolchain.kube_apiserver,
        kubectl=toolchain.kubectl,
        workdir=root / "plane",
    )
    agents = NodeAgents(
        plane,
        nodes_toolchain.kube_controller_manager,
        nodes_toolchain.kube_scheduler,
        nodes_toolchain.kwok,
        root / "agents",
        nodes=[
            n
            for n in flavor_nodes(
                shape.nodes, capacity={"cpu": "64", "memory": "256Gi", "pods": "250"}
            )
            if n.labels.get("cloud.example.com/capacity") == FLAVOR
        ],
    )
    try:
        plane.start()
        agents.start()
        yield Bench(plane, agents, Admin(plane))
    finally:
        agents.stop()
        plane.stop()


def _create_jobs(admin: Admin, shape: PodsShape, threads: int = 8) -> None:
    def create(i: int) -> None:
        job = PodJob(
            f"job-{i:05d}", NS, LQ, pod_annotations={RUN_FOR_ANNOTATION: shape.run_for}
        ).manifest()
        status, body = admin.request("POST", JOBS_PATH, json.loads(job))
        if status not in (201, 409):
            raise RuntimeError(f"creating job {i}: {status} {body}")

    with concurrent.futures.ThreadPoolExecutor(threads) as pool:
        list(pool.map(create, range(shape.jobs)))


def _create_pods(admin: Admin, shape: PodsShape, threads: int = 8) -> None:
    def create(i: int) -> None:
        pod = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": f"pod-{i:05d}",
                "namespace": NS,
                "labels": {QUEUE_LABEL: LQ},
                "annotations": {RUN_FOR_ANNOTATION: shape.run_for},
            },
            "spec": {
                "restartPolicy": "Never",
                "terminationGracePeriodSeconds": 0,
                "nodeSelector": {"type": "kwok"},
                "containers": [
                    {"name": "main", "image": "busybox", "resources": {"requests": {"cpu": "1"}}}
                ],
            },
        }
        status, body = admin.request("POST", PODS_PATH, pod)
        if status not in (201, 409):
            raise RuntimeError(f"creating pod {i}: {status} {body}")

    with concurrent.futures.ThreadPoolExecutor(threads) as pool:
        list(pool.map(create, range(shape.jobs)))


def _succeeded(pod: dict[str, Any]) -> bool:
    return (pod.get("status") or {}).get("phase") == "Succeeded"


def _count(admin: Admin, path: str, predicate: Callable[[dict[str, Any]], bool]) -> int:
    status, body = admin.request("GET", path)
    if status != 200:
        raise RuntimeError(f"GET {path}: {status} {body}")
    return sum(1 for item in body["items"] if predicate(item))


def _complete(job: dict[str, Any]) -> bool:
    return any(
        c.get("type") == "Complete" and c.get("status") == "True"
        for c in (job.get("status") or {}).get("conditions") or []
    )


def _open_quota(plane: ControlPlane, cpu: int) -> None:
    plane.kubectl(
        "patch", "clusterqueue", CQ, "--type=json", "-p",
        json.dumps([{"op": "replace",
                     "path": "/spec/resourceGroups/0/flavors/0/resources/0/nominalQuota",
                     "value": str(cpu)}]),
    )  # fmt: skip


@dataclass(frozen=True)
class Kind:
    """What one run creates: Jobs (the Job integration) or plain Pods (the `pod`
    integration), where they are listed, and when one is done."""

    name: str  # "Jobs", "plain Pods"
    path: str
    create: Callable[[Admin, PodsShape], None]
    done: Callable[[dict[str, Any]], bool]


@dataclass(frozen=True)
class Subject:
    """The admission controller measured: its name in the table, its process, and how
    long the plane, the Node agents and it took to come up."""

    side: str
    pid: int
    startup: float


def _measure(bench: Bench, shape: PodsShape, subject: Subject, kind: Kind) -> PodsRun:
    """Objects created against a closed queue, their Workloads awaited, then the quota
    opened and the clock run until every one is done."""
    admin = bench.admin
    side, pid = subject.side, subject.pid
    kind.create(admin, shape)
    wait_for(
        lambda: True if _count(admin, WORKLOADS_PATH, lambda _: True) >= shape.jobs else None,
        timeout=max(120.0, shape.jobs / 5),
        what=f"{side}: a Workload for each of {shape.jobs} {kind.name}",
        interval=0.5,
    )
    cpu_before = cpu_seconds(pid)
    started = time.monotonic()
    _open_quota(bench.plane, shape.quota)
    wait_for(
        lambda: True if _count(admin, kind.path, kind.done) >= shape.jobs else None,
        timeout=max(300.0, shape.jobs * 2.0),
        what=f"{side}: {shape.jobs} {kind.name} done",
        interval=0.25,
    )
    seconds = time.monotonic() - started
    cpu = cpu_seconds(pid) - cpu_before
    return PodsRun(side, shape.jobs, seconds, cpu, subject.startup, _mean_hold(admin))


def _transition(obj: dict[str, Any], type_: str) -> datetime | None:
    for c in (obj.get("status") or {}).get("conditions") or []:
        if c.get("type") == type_ and c.get("status") == "True":
            return datetime.fromisoformat(str(c["lastTransitionTime"]).replace("Z", "+00:00"))
    return None


def _mean_hold(admin: Admin) -> float:
    """Mean time from Admitted to Finished over the Workloads: how long a Job keeps its
    quota. With the quota Q, Q / hold is the rate an admission controller that reacts at
    once would reach; the rest of the measured time is quota left idle."""
    status, body = admin.request("GET", WORKLOADS_PATH)
    if status != 200:
        raise RuntimeError(f"GET {WORKLOADS_PATH}: {status} {body}")
    holds = [
        (finished - admitted).total_seconds()
        for w in body["items"]
        if (admitted := _transition(w, "Admitted")) is not None
        and (finished := _transition(w, "Finished")) is not None
    ]
    return sum(holds) / len(holds) if holds else float("nan")


JOBS = Kind("Jobs", JOBS_PATH, _create_jobs, _complete)
PLAIN_PODS = Kind("plain Pods", PODS_PATH, _create_pods, _succeeded)
# The `pod` integration is on only with a Configuration that lists it.
PODS_CONFIG = """apiVersion: config.kueue.x-k8s.io/v1beta2
kind: Configuration
integrations:
  frameworks: [batch/job, pod]
"""


def _queues() -> str:
    return sample_flavors() + "\n---\n" + flavor_queue(NS, CQ, LQ, FLAVOR, "0")


def queuescope_pods_run(
    toolchain: Any, nodes_toolchain: Any, root: Path, shape: PodsShape, kind: Kind = JOBS
) -> PodsRun:
    """queuescope in cluster mode, leader-elected as in a pod; for plain Pods with the
    `pod` integration on and its webhooks registered, as `make deploy` does."""
    started = time.monotonic()
    with _bench_plane(toolchain, nodes_toolchain, root, shape) as bench:
        args = ["--kube-api-qps", str(shape.qps), "--kube-api-burst", str(int(shape.qps))]
        if kind is PLAIN_PODS:
            config = root / "config.yaml"
            config.parent.mkdir(parents=True, exist_ok=True)
            config.write_text(PODS_CONFIG)
            args += ["--config", str(config)]
        server = ClusterModeServer(bench.plane, root / "server", leader_elect=True, extra_args=args)
        server.prepare()
        bench.plane.apply(_queues())
        server.start()
        try:
            if kind is PLAIN_PODS:
                _register_webhooks(bench.plane, server)
            assert server.process is not None
            subject = Subject("queuescope", server.process.pid, time.monotonic() - started)
            return _measure(bench, shape, subject, kind)
        finally:
            server.stop()


def _register_webhooks(plane: ControlPlane, server: ClusterModeServer) -> None:
    """manifests/webhooks aimed at `server`, waited for until a Pod is gated by them."""
    docs = webhook_documents(server.port, server.certs.ca_cert.read_bytes())
    plane.apply("\n---\n".join(json.dumps(d) for d in docs))
    probe = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "probe", "namespace": NS, "labels": {QUEUE_LABEL: LQ}},
        "spec": {"containers": [{"name": "c", "image": "busybox"}]},
    }

    def gated() -> bool | None:
        result = plane.kubectl(
            "create", "--dry-run=server", "-o", "json", "-f", "-",
            input=json.dumps(probe), check=False,
        )  # fmt: skip
        if result.returncode != 0:
            return None
        return True if json.loads(result.stdout)["spec"].get("schedulingGates") else None

    wait_for(gated, timeout=60, what="the pod webhook in force")


# -- upstream Kueue ----------------------------------------------------------------------


def upstream_pods_run(
    manager: Path, toolchain: Any, nodes_toolchain: Any, root: Path, shape: PodsShape
) -> PodsRun:
    """Upstream Kueue's manager binary (`manager`), same shape, its own control plane:
    its CRDs from Kueue's module, the same flavors and queue, the same Jobs."""
    started = time.monotonic()
    with _bench_plane(toolchain, nodes_toolchain, root, shape) as bench:
        plane = bench.plane
        upstream_kueue.install_crds(plane)
        plane.apply(_queues())
        with upstream_kueue.running_manager(
            manager, plane, root / "kueue", qps=shape.qps, ready_timeout=120
        ) as process:
            subject = Subject(f"Kueue {KUEUE_VERSION}", process.pid, time.monotonic() - started)
            return _measure(bench, shape, subject, JOBS)


@dataclass
class PodsSection:
    """What the pods run adds to `cluster-sync`'s result."""

    rows: list[list[str]]
    figures: dict[str, float]
    notes: list[str]
    ours: PodsRun
    plain: PodsRun
    upstream: PodsRun | None


def pods_section(
    toolchain: Any, nodes_toolchain: Any, root: Path, shape: PodsShape, manager: Path | None
) -> PodsSection:
    """Our side, then upstream's when a manager binary is given."""
    ours = queuescope_pods_run(toolchain, nodes_toolchain, root / "ours", shape)
    plain = queuescope_pods_run(toolchain, nodes_toolchain, root / "plain-pods", shape, PLAIN_PODS)
    upstream = (
        upstream_pods_run(manager, toolchain, nodes_toolchain, root / "upstream", shape)
        if manager is not None
        else None
    )
    label = f"pods: {shape.jobs} Jobs, {shape.quota} CPUs, {shape.run_for} each"
    rows = []
    figures: dict[str, float] = {}
    for run in (ours, plain, upstream):
        if run is None:
            continue
        what = label.replace("Jobs", "plain Pods") if run is plain else label
        rows.append(
            [
                f"{what}, {run.side}: admissions/s end to end (wall, controller CPU)",
                f"{run.rate:.2f} /s ({run.seconds:.1f} s, {run.cpu:.1f} s CPU)",
            ]
        )
        idle = shape.quota / run.rate - run.hold
        rows.append(
            [
                f"{what}, {run.side}: quota held per object (Admitted to Finished), "
                "idle per slot between a finish and the next admission",
                f"{run.hold:.1f} s, {idle:.1f} s",
            ]
        )
        key = {id(ours): "pods_queuescope", id(plain): "pods_plain_queuescope"}.get(
            id(run), "pods_upstream"
        )
        figures[f"{key}_hold_seconds"] = run.hold
        figures[f"{key}_idle_seconds"] = idle
        figures[f"{key}_admissions_per_second"] = run.rate
        figures[f"{key}_seconds"] = run.seconds
        figures[f"{key}_cpu_seconds"] = run.cpu
    figures["pods_plain_over_jobs"] = plain.rate / ours.rate
    rows.append(
        [f"{label}: admissions/s, plain Pods / Jobs, queuescope", f"{plain.rate / ours.rate:.2f}"]
    )
    notes = [
        "Plain Pods run: the same shape with as many single Pods (the `pod` integration, "
        "its webhooks registered): each admission lifts a Pod's scheduling gate instead "
        "of unsuspending a Job, so no Job controller is in the path.",
        "Pods run: a fresh etcd and kube-apiserver with kube-controller-manager (Job and "
        "garbage-collector controllers), kube-scheduler and kwok on the same 2 cores; "
        f"{shape.nodes} kwok Node(s) of flavor {FLAVOR}. Timed from the quota change to the "
        "last Job Complete; every admission unsuspends a Job whose Pod is created, bound, "
        f"run for {shape.run_for} and marked Succeeded before its quota is freed.",
    ]
    if upstream is not None:
        ratio = ours.rate / upstream.rate
        figures["pods_ratio"] = ratio
        rows.append([f"{label}: queuescope / Kueue {KUEUE_VERSION}", f"{ratio:.2f}"])
    else:
        notes.append(
            f"Upstream Kueue {KUEUE_VERSION} side not run: pass --kueue-manager PATH "
            "(a manager binary built from Kueue's module) to run it."
        )
    return PodsSection(rows, figures, notes, ours, plain, upstream)
