"""`cluster-sync`: queuescope in cluster mode against a real kube-apiserver.

`--workloads` Workloads already sit in the API server, pending in a ClusterQueue with
no quota (BestEffortFIFO: every one is examined by a cycle). The server runs with
leader election, as in a pod.

1. **First start.** Time from process start to `/readyz` 200 (the initial list applied
   and a synced snapshot published); then the Workload writes it makes and the time
   until it is quiet (engine idle, nothing left to write, no write for 3 s), with the
   server's CPU time until then.
2. **SIGTERM to exit** (the leader: stop writing, release the Lease, exit).
3. **Restart with nothing changed**: the same figures; the target is under 1 % of the
   Workloads written (issue 17).
4. **Admissions per second, end to end.** The ClusterQueue's quota is raised so that
   `--admit` of them fit; the figure is `--admit` divided by the time from that change
   until the last admission is *in the API server*, with the writers limited to `--qps`.
5. **SIGTERM to exit** again, now with `--admit` quota holders.
6. **With Pods** (`--pod-jobs`, 0 skips it; benchmarks/cluster_pods.py): on a fresh
   control plane with the Job controller, kube-scheduler and kwok Nodes, Jobs admitted
   one quota's worth at a time really run and finish a Pod each; admissions per second
   end to end, wall and CPU time; then the same shape with as many plain Pods (the `pod`
   integration); upstream Kueue's manager in the same run, on the Jobs shape, when
   `--kueue-manager PATH` names one.

The control plane is the e2e suite's (tests/e2e/harness.py): etcd and kube-apiserver
built by tools/controlplane/build.py and cached. Objects are created by a pool of
threads over keep-alive HTTPS with the admin client certificate (tests/e2e/bulk.py).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchmarks.cluster_pods import PodsSection, PodsShape, pods_section
from benchmarks.result import Result, Target
from benchmarks.upstream_kueue import load_tool
from tests.e2e.bulk import (
    Admin,
    WorkloadWatch,
    cpu_seconds,
    create_workloads,
    wait_until_quiet,
)
from tests.e2e.cluster import ClusterModeServer, cpu_queue, flavor
from tests.e2e.harness import ControlPlane, wait_for

REPO = Path(__file__).resolve().parent.parent
NS = "bench-sync"
CQ = "bench-sync"
LQ = "bench-sync"
QUIET_SECONDS = 3.0


def _build_module() -> Any:
    return load_tool("queuescope_controlplane_build", "build.py")


def _queues(cpu: str) -> str:
    return (
        flavor("bench-flavor")
        + "\n---\n"
        + cpu_queue(NS, "bench-flavor", CQ, LQ, cpu, queueingStrategy="BestEffortFIFO")
    )


@dataclass
class Start:
    ready: float  # process start to /readyz 200
    quiet: float  # process start to quiet
    writes: int  # Workload writes seen meanwhile
    cpu: float  # the server's CPU seconds until quiet


def _start(server: ClusterModeServer, admin: Admin, timeout: float) -> Start:
    watch = WorkloadWatch(admin, NS)
    try:
        started = time.monotonic()
        server.start()  # returns once /readyz answers 200
        ready = time.monotonic() - started
        quiet_at = wait_until_quiet(server, watch, quiet=QUIET_SECONDS, timeout=timeout)
        assert server.process is not None
        cpu = cpu_seconds(server.process.pid)
        return Start(ready, quiet_at - started, watch.count(), cpu)
    finally:
        watch.close()


def _sigterm(server: ClusterModeServer) -> tuple[float, int | None, str]:
    """Seconds from SIGTERM to exit, the exit code (negative: killed), and the server's
    own account of its shutdown steps (seconds since SIGTERM at the end of each)."""
    started = time.monotonic()
    code = server.stop()
    took = time.monotonic() - started
    steps: list[str] = []
    for line in (server.root / "serve.log").read_text(errors="replace").splitlines():
        if "event=shutdown-start" in line:
            steps = []
        elif "event=shutdown-step" in line:
            fields = dict(f.split("=", 1) for f in line.split() if "=" in f)
            steps.append(f"{fields.get('step')} {fields.get('elapsed')}")
    return took, code, ", ".join(steps)


def cluster_sync(args: argparse.Namespace) -> Result:
    build = _build_module()
    toolchain = build.ensure_toolchain(log=lambda m: print(m, file=sys.stderr))
    quiet_timeout = max(300.0, args.workloads / 20)
    with tempfile.TemporaryDirectory(prefix="queuescope-bench-sync-") as tmp:
        root = Path(tmp)
        plane = ControlPlane(
            etcd=toolchain.etcd,
            kube_apiserver=toolchain.kube_apiserver,
            kubectl=toolchain.kubectl,
            workdir=root / "plane",
        )
        plane.start()
        server: Any = None
        try:
            server = ClusterModeServer(
                plane,
                root / "server",
                leader_elect=True,
                ready_seconds=max(60.0, args.workloads / 500),
                extra_args=[
                    "--kube-api-qps",
                    str(args.qps),
                    "--kube-api-burst",
                    str(int(args.qps)),
                    "--queue-status-interval",
                    "5s",
                ],
            )
            server.prepare()
            plane.apply(_queues("0"))
            admin = Admin(plane)
            create_seconds = create_workloads(admin, NS, LQ, args.workloads)

            first = _start(server, admin, quiet_timeout)
            first_exit, first_code, first_steps = _sigterm(server)
            again = _start(server, admin, quiet_timeout)

            watch = WorkloadWatch(admin, NS)
            plane.kubectl(
                "patch", "clusterqueue", CQ, "--type=json", "-p",
                json.dumps([{"op": "replace",
                             "path": "/spec/resourceGroups/0/flavors/0/resources/0/nominalQuota",
                             "value": str(args.admit)}]),
            )  # fmt: skip
            changed = time.monotonic()
            wait_for(
                lambda: True if len(watch.admitted) >= args.admit else None,
                timeout=max(120.0, args.admit / 10),
                what=f"{args.admit} admissions written",
                interval=0.5,
            )
            admit_seconds = watch.last_admitted_at - changed
            admission_writes = watch.count()
            watch.close()
            last_exit, last_code, last_steps = _sigterm(server)
            server = None
        finally:
            if server is not None:
                server.stop()
            plane.stop()
    pods = _pods(build, toolchain, args)
    rate = args.admit / admit_seconds
    restart_share = again.writes / args.workloads
    n = f"{args.workloads:,}"
    result = Result(
        name="cluster-sync",
        headline=first.ready,
        unit="s",
        headline_label=f"start to ready with {n} Workloads in kube-apiserver",
        command=f"python -m benchmarks cluster-sync --workloads {args.workloads} "
        f"--admit {args.admit} --qps {args.qps} --pod-jobs {args.pod_jobs} "
        f"--pod-quota {args.pod_quota}"
        + (f" --kueue-manager {args.kueue_manager}" if args.kueue_manager else ""),
        columns=["measure", "value"],
        rows=[
            ["Workloads created before the start (16 threads)", f"{create_seconds:.1f} s"],
            ["first start: to /readyz 200", f"{first.ready:.1f} s"],
            ["first start: Workload writes", f"{first.writes:,}"],
            [
                "first start: to quiet (server CPU)",
                f"{first.quiet:.1f} s ({first.cpu:.1f} s CPU)",
            ],
            ["SIGTERM to exit, pending only (exit code)", f"{first_exit:.1f} s ({first_code})"],
            ["restart, nothing changed: to /readyz 200", f"{again.ready:.1f} s"],
            [
                "restart, nothing changed: Workload writes",
                f"{again.writes:,} ({restart_share:.2%})",
            ],
            [
                "restart, nothing changed: to quiet (server CPU)",
                f"{again.quiet:.1f} s ({again.cpu:.1f} s CPU)",
            ],
            [f"{args.admit:,} admissions written, QPS {args.qps:g}", f"{admit_seconds:.1f} s"],
            ["Workload writes seen while admitting", f"{admission_writes:,}"],
            ["admissions per second, end to end", f"{rate:.0f} /s"],
            [
                f"SIGTERM to exit, {args.admit:,} admitted (exit code)",
                f"{last_exit:.1f} s ({last_code})",
            ],
        ],
        targets=[
            Target("ready", first.ready, "<=", 30, "s"),
            Target(f"admissions/s at QPS {args.qps:g}", rate, ">=", 100, "/s"),
            Target("restart writes / Workloads", restart_share * 100, "<", 1, "%"),
            Target("SIGTERM to exit", max(first_exit, last_exit), "<", 10, "s"),
        ],
        notes=[
            "Real etcd and kube-apiserver on the same 2-core machine as the server; "
            "the time to admission is measured from the quota change to the watch event "
            "of the last Workload whose Admitted condition is in the API. Writes are "
            "counted from one watch on the Workloads (one event per write). SIGTERM to "
            "exit includes the 5 s the server keeps answering so endpoints drop the pod.",
            f"Shutdown steps, pending only (since SIGTERM): {first_steps}; "
            f"with {args.admit:,} admitted: {last_steps}; the rest to exit is the "
            "interpreter's own teardown.",
        ],
        figures={
            "ready_seconds": first.ready,
            "admit_seconds": admit_seconds,
            "admissions_per_second": rate,
            "create_seconds": create_seconds,
            "initial_writes": first.writes,
            "first_quiet_seconds": first.quiet,
            "first_cpu_seconds": first.cpu,
            "restart_writes": again.writes,
            "restart_quiet_seconds": again.quiet,
            "restart_cpu_seconds": again.cpu,
            "sigterm_exit_seconds": first_exit,
            "sigterm_exit_admitted_seconds": last_exit,
            "admission_writes": admission_writes,
        },
    )
    if pods is not None:
        result.rows.extend(pods.rows)
        result.notes.extend(pods.notes)
        result.figures.update(pods.figures)
        if pods.upstream is not None:
            result.targets.append(
                Target(
                    "pods admissions/s, queuescope / Kueue",
                    pods.figures["pods_ratio"],
                    ">=",
                    1,
                    "x",
                )
            )
    return result


def _pods(build: Any, toolchain: Any, args: argparse.Namespace) -> PodsSection | None:
    """The run with Pods (docs/benchmarks.md#cluster-sync), after the plane above is gone."""
    if args.pod_jobs <= 0:
        return None
    nodes_toolchain = build.ensure_nodes(log=lambda m: print(m, file=sys.stderr))
    shape = PodsShape(jobs=args.pod_jobs, quota=args.pod_quota, nodes=1, run_for="1s", qps=args.qps)
    manager = Path(args.kueue_manager) if args.kueue_manager else None
    with tempfile.TemporaryDirectory(prefix="queuescope-bench-pods-") as tmp:
        return pods_section(toolchain, nodes_toolchain, Path(tmp), shape, manager)
