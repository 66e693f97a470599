"""`memory --cluster`: resident memory per Workload in cluster mode, beside upstream Kueue.

For each size in `--workloads`, on a fresh etcd and kube-apiserver (tests/e2e/harness.py):

1. Our CRDs, one ResourceFlavor, a ClusterQueue with no quota (BestEffortFIFO, so every
   Workload is examined) and its LocalQueue; N minimal pending Workloads created in bulk
   (tests/e2e/bulk.py: one pod asking for 1 CPU, as `cluster-sync` uses).
2. Our server in cluster mode, leader-elected, as in a pod. Once it is quiet (it leads,
   its engine is idle, nothing is left to write, no Workload write for 3 s) its RSS and
   peak RSS are read from /proc, with its CPU time since the start.
3. Our server stopped, upstream Kueue's manager (benchmarks/upstream_kueue.py) on the
   same control plane: its CRDs take over ours in place, so it reads the very same
   Workloads. Once synced and quiet (its ClusterQueue status counts all N pending, no
   Workload write for `QUIET_SECONDS`, under 5 % of a core used over that span), or at
   a time limit, the same figures.

Per Workload: the whole process's RSS divided by N (what a memory limit must cover);
with two sizes, also the growth between them divided by the added Workloads (the cost
of one more Workload, without the fixed part).
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from benchmarks import upstream_kueue
from benchmarks.result import Result, Target
from tests.e2e.bulk import Admin, WorkloadWatch, cpu_seconds, create_workloads, wait_until_quiet
from tests.e2e.cluster import ClusterModeServer, cpu_queue, flavor
from tests.e2e.harness import ControlPlane, HarnessError

NS = "bench-memory"
CQ = "bench-memory"
LQ = "bench-memory"
CQ_PATH = f"/apis/kueue.x-k8s.io/v1beta2/clusterqueues/{CQ}"
OURS_QUIET_SECONDS = 3.0
QUIET_SECONDS = 10.0
TARGET_KIB = 4.0
KIB = 1024
MIB = 1024 * 1024


@dataclass
class Side:
    """One process's figures at one size."""

    side: str
    workloads: int
    rss: int  # bytes, once quiet
    peak: int  # bytes, VmHWM
    cpu: float  # CPU seconds from its start until measured
    seconds: float  # wall seconds from its start until measured
    writes: int  # Workload writes seen meanwhile
    quiet: bool  # False: measured at the time limit, still writing

    @property
    def per_workload(self) -> float:
        return self.rss / self.workloads


def proc_memory(pid: int) -> tuple[int, int]:
    """(VmRSS, VmHWM) of a live process in bytes (Linux /proc)."""
    found: dict[str, int] = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in ("VmRSS", "VmHWM"):
            found[key] = int(value.split()[0]) * KIB
    return found["VmRSS"], found["VmHWM"]


@dataclass
class Bench:
    """One size's control plane, its working folder and the admin's connections."""

    plane: ControlPlane
    root: Path
    admin: Admin


def _ours(bench: Bench, n: int, qps: float) -> Side:
    plane, root, admin = bench.plane, bench.root, bench.admin
    server = ClusterModeServer(
        plane,
        root / "server",
        leader_elect=True,
        ready_seconds=max(60.0, n / 100),  # 100k: 87-117 s unloaded, over 200 s loaded
        extra_args=["--kube-api-qps", str(qps), "--kube-api-burst", str(int(qps))],
    )
    server.prepare()
    plane.apply(flavor("bench-flavor"))
    plane.apply(cpu_queue(NS, "bench-flavor", CQ, LQ, "0", queueingStrategy="BestEffortFIFO"))
    create_seconds = create_workloads(admin, NS, LQ, n)
    print(f"memory --cluster: {n:,} Workloads created in {create_seconds:.0f} s", file=sys.stderr)
    watch = WorkloadWatch(admin, NS)
    try:
        started = time.monotonic()
        server.start()
        quiet_at = wait_until_quiet(
            server, watch, quiet=OURS_QUIET_SECONDS, timeout=max(300.0, n / 20)
        )
        assert server.process is not None
        pid = server.process.pid
        rss, peak = proc_memory(pid)
        return Side(
            "queuescope",
            n,
            rss,
            peak,
            cpu_seconds(pid),
            quiet_at - started,
            watch.count(),
            quiet=True,
        )
    finally:
        watch.close()
        server.stop()


def _pending_in_status(admin: Admin) -> int | None:
    status, doc = admin.request("GET", CQ_PATH)
    if status != 200:
        return None
    pending = (doc.get("status") or {}).get("pendingWorkloads")
    return pending if isinstance(pending, int) else None


class _Settled:
    """Upstream's manager is synced and quiet: its ClusterQueue status counts every
    Workload pending (so its queues hold them all: its caches are full), no Workload
    write came for `QUIET_SECONDS`, and it used under 5 % of a core over that span."""

    def __init__(self, admin: Admin, watch: WorkloadWatch, pid: int, n: int) -> None:
        self.admin, self.watch, self.pid, self.n = admin, watch, pid, n
        self.cpu: list[tuple[float, float]] = []  # (instant, CPU seconds)

    def __call__(self) -> bool:
        now = time.monotonic()
        self.cpu.append((now, cpu_seconds(self.pid)))
        past = [(t, c) for t, c in self.cpu if now - t >= QUIET_SECONDS]
        if not past:
            return False
        then, cpu_then = past[-1]
        idle = (self.cpu[-1][1] - cpu_then) / (now - then) < 0.05
        quiet = now - self.watch.last_event_at >= QUIET_SECONDS
        return idle and quiet and _pending_in_status(self.admin) == self.n


def _upstream(manager: Path, bench: Bench, n: int, qps: float) -> Side:
    plane, root, admin = bench.plane, bench.root, bench.admin
    upstream_kueue.install_crds(plane)
    # Our server counted the pending Workloads in this status: clear it, so that the
    # count read later is upstream's own.
    plane.kubectl(
        "patch", "clusterqueue", CQ, "--subresource=status", "--type=json",
        "-p", json.dumps([{"op": "remove", "path": "/status"}]),
    )  # fmt: skip
    limit = max(300.0, n / 150)
    watch = WorkloadWatch(admin, NS)
    try:
        started = time.monotonic()
        with upstream_kueue.running_manager(
            manager, plane, root / "kueue", qps=qps, ready_timeout=max(300.0, n / 200)
        ) as process:
            settled = _Settled(admin, watch, process.pid, n)
            quiet = False
            while time.monotonic() - started < limit:
                process.check_alive()
                if settled():
                    quiet = True
                    break
                time.sleep(1.0)
            rss, peak = proc_memory(process.pid)
            return Side(
                f"Kueue {upstream_kueue.KUEUE_VERSION}",
                n,
                rss,
                peak,
                cpu_seconds(process.pid),
                time.monotonic() - started,
                watch.count(),
                quiet=quiet,
            )
    finally:
        watch.close()


def _keep_logs(root: Path, logs: str, n: int) -> None:
    """Copy every log of the run (control plane, our server, upstream's manager)."""
    target = Path(logs) / f"{n}"
    for log in root.rglob("*.log"):
        dest = target / log.relative_to(root)
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(log, dest)


def _one_size(toolchain: Any, manager: Path | None, n: int, args: argparse.Namespace) -> list[Side]:
    qps = args.qps
    with tempfile.TemporaryDirectory(prefix="queuescope-bench-memory-") as tmp:
        root = Path(tmp)
        plane = ControlPlane(
            etcd=toolchain.etcd,
            kube_apiserver=toolchain.kube_apiserver,
            kubectl=toolchain.kubectl,
            workdir=root / "plane",
        )
        plane.start()
        try:
            bench = Bench(plane, root, Admin(plane))
            sides = [_ours(bench, n, qps)]
            _print_side(sides[0])
            if manager is not None:
                try:
                    sides.append(_upstream(manager, bench, n, qps))
                except HarnessError as err:
                    # On a loaded machine upstream's manager can give up (its caches
                    # not synced within its own two minutes): report ours regardless.
                    print(f"memory --cluster: upstream at {n:,} failed: {err}", file=sys.stderr)
                else:
                    _print_side(sides[-1])
            return sides
        finally:
            plane.stop()
            if args.logs:
                _keep_logs(root, args.logs, n)


def _print_side(run: Side) -> None:
    print(
        f"memory --cluster: {run.side} at {run.workloads:,}: RSS {run.rss / MIB:.0f} MiB "
        f"({run.per_workload / KIB:.2f} KiB/Workload), peak {run.peak / MIB:.0f} MiB, "
        f"CPU {run.cpu:.1f} s, {run.seconds:.0f} s to measured",
        file=sys.stderr,
    )


def _growth(runs: list[Side], side: str) -> float | None:
    """Bytes per added Workload between the smallest and the largest size of a side."""
    mine = sorted((r for r in runs if r.side == side), key=lambda r: r.workloads)
    if len(mine) < 2 or mine[-1].workloads == mine[0].workloads:
        return None
    return (mine[-1].rss - mine[0].rss) / (mine[-1].workloads - mine[0].workloads)


def memory_cluster(args: argparse.Namespace, command: str) -> Result:
    build = upstream_kueue.load_tool("queuescope_controlplane_build", "build.py")
    toolchain = build.ensure_toolchain(log=lambda m: print(m, file=sys.stderr))
    manager = None if args.no_upstream else upstream_kueue.ensure_manager()
    runs: list[Side] = []
    for n in args.workloads:
        runs.extend(_one_size(toolchain, manager, n, args))
    rows = [
        [
            r.side,
            f"{r.workloads:,}",
            f"{r.rss / MIB:,.0f} MiB",
            f"{r.per_workload / KIB:.2f} KiB",
            f"{r.peak / MIB:,.0f} MiB",
            f"{r.seconds:.0f} s" + ("" if r.quiet else " (time limit, still writing)"),
            f"{r.cpu:.1f} s",
            f"{r.writes:,}",
        ]
        for r in runs
    ]
    sides = list(dict.fromkeys(r.side for r in runs))
    for side in sides:
        growth = _growth(runs, side)
        if growth is not None:
            rows.append([side, "growth per added Workload", "", f"{growth / KIB:.2f} KiB"])
    ours = [r for r in runs if r.side == "queuescope"]
    largest = max(ours, key=lambda r: r.workloads)
    targets = [
        Target(
            f"queuescope RSS per Workload at {largest.workloads:,}",
            largest.per_workload / KIB,
            "<=",
            TARGET_KIB,
            "KiB",
        )
    ]
    for theirs in (r for r in runs if r.side != "queuescope"):
        mine = next(r for r in ours if r.workloads == theirs.workloads)
        targets.append(
            Target(
                f"queuescope / Kueue RSS at {theirs.workloads:,}",
                mine.rss / theirs.rss,
                "<",
                1,
                "x",
            )
        )
    return Result(
        name="memory-cluster",
        headline=largest.per_workload / KIB,
        unit="KiB/Workload",
        headline_label=f"cluster-mode RSS per pending Workload at {largest.workloads:,}",
        command=command,
        columns=[
            "process",
            "Workloads",
            "RSS",
            "per Workload (all of the process)",
            "peak RSS",
            "start to measured",
            "CPU time",
            "Workload writes",
        ],
        rows=rows,
        targets=targets,
        notes=[
            "Real etcd and kube-apiserver on the same machine; each size on a fresh control "
            "plane. Our server leader-elected, measured once quiet; then upstream's manager "
            "on the same stored Workloads (its CRDs take over ours in place), measured once "
            "its ClusterQueue status counted every Workload pending, no Workload write came "
            f"for {QUIET_SECONDS:g} s and it used under 5 % of a core over that span (or at "
            "the time limit). RSS "
            "and peak (VmHWM) from /proc/PID/status, CPU time from /proc/PID/stat.",
        ],
        figures={"runs": [asdict(r) for r in runs]},
    )
