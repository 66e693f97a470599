"""The benchmark server: `queuescope serve --embedded` with pending work fed in.

    python -m benchmarks.server_under_test --dir DIR --port PORT --pending N [--feed bulk|decode]

It writes the benchmark cluster's manifests into DIR/manifests and runs the real
command (`queuescope.serve.run_serve` with arguments parsed by the real `queuescope`
parser): real TLS with the state folder's certificates, uvicorn with httptools, the
engine, the publisher and the embedded store on one loop. Two hooks are added, and
nothing else changes:

* after the embedded store has loaded the manifests, N pending workloads are fed into
  the core (`benchmarks.feed`), before `serve` applies the load and freezes the heap;
* the app `serve` builds is wrapped so that paths under `/bench/` answer benchmark
  requests (figures of this process, the upstream-equivalent baseline page, load
  drivers); every other request goes to the visibility app unchanged.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import json
import os
import resource
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from types import ModuleType
from typing import Any
from urllib.parse import parse_qs

from benchmarks.baseline import upstream_copy_and_sort_page
from benchmarks.feed import (
    CLUSTER_QUEUE,
    FEEDS,
    HIGH_PRIORITY,
    Shape,
    cluster_manifests,
    feed,
    workload_manifest,
)
from benchmarks.stats import summary
from queuescope import engine_serving, serve
from queuescope.cli import _parser as queuescope_parser
from scheduler.api import Workload, decode_object
from scheduler.core.clock import datetime_from_instant
from scheduler.runtime.commands import ApplyObject, Finish
from scheduler.runtime.embedded import EmbeddedStore
from scheduler.runtime.engine import Engine
from scheduler.runtime.forecasts import ForecastService
from scheduler.runtime.stepclock import Stamp, since, stamp

Scope = dict[str, Any]
Receive = Callable[[], Awaitable[dict[str, Any]]]
Send = Callable[[dict[str, Any]], Awaitable[None]]
PAGE = os.sysconf("SC_PAGE_SIZE")


def cpu_steal_seconds() -> float:
    """Time the hypervisor gave this process's CPUs to someone else (/proc/stat's
    steal column, summed over the CPUs the process may run on): on a virtual machine
    the loop stalls for that long with no work of ours running."""
    allowed = {f"cpu{c}" for c in os.sched_getaffinity(0)}
    total = 0
    with contextlib.suppress(OSError), open("/proc/stat") as f:
        for line in f:
            fields = line.split()
            if fields and fields[0] in allowed and len(fields) > 8:
                total += int(fields[8])
    return total / os.sysconf("SC_CLK_TCK")


def rss_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * PAGE


class LagProbe:
    """Asks for a 1 ms sleep over and over; any overshoot is time the loop was held."""

    def __init__(self, interval: float = 0.001) -> None:
        self.interval = interval
        self.lags: list[float] = []
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self.lags = []
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._run(), name="lag-probe")

    def stop(self) -> dict[str, float]:
        if self._task is not None:
            self._task.cancel()
            self._task = None
        return summary([lag * 1000 for lag in self.lags])

    async def _run(self) -> None:
        while True:
            started = time.perf_counter()
            await asyncio.sleep(self.interval)
            self.lags.append(max(0.0, time.perf_counter() - started - self.interval))
            if len(self.lags) > 2_000_000:  # bounded: keep the newest million
                del self.lags[:1_000_000]


class GcPauses:
    """Every cyclic-collector pass and how long it held the loop (wall and CPU time),
    by generation."""

    def __init__(self) -> None:
        self.pauses: dict[int, list[float]] = {0: [], 1: [], 2: []}
        self.cpu: dict[int, list[float]] = {0: [], 1: [], 2: []}
        # per generation: the objects the costliest pass (in CPU) found to be garbage
        self.collected_by_costliest: dict[int, int] = {0: 0, 1: 0, 2: 0}
        self._started: Stamp = (0.0, 0.0)

    def __call__(self, phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            self._started = stamp()
        else:
            wall, cpu = since(self._started)
            gen = info["generation"]
            if cpu > max(self.cpu[gen], default=0.0):
                self.collected_by_costliest[gen] = info["collected"]
            self.pauses[gen].append(wall)
            self.cpu[gen].append(cpu)

    def reset(self) -> None:
        self.pauses = {0: [], 1: [], 2: []}
        self.cpu = {0: [], 1: [], 2: []}
        self.collected_by_costliest = {0: 0, 1: 0, 2: 0}

    def figures(self) -> dict[str, Any]:
        return {
            f"gen{g}": {
                "count": len(p),
                "max_ms": max(p, default=0.0) * 1000,
                "max_cpu_ms": max(self.cpu[g], default=0.0) * 1000,
                "cpu_ms": sum(self.cpu[g]) * 1000,
                "collected_by_costliest": self.collected_by_costliest[g],
            }
            for g, p in self.pauses.items()
        }


class Arrivals:
    """The loop-lag load inside the server: new workloads at a steady rate (a share
    of them high-priority, which preempt), and admitted workloads finished after
    `run_seconds`, so the scheduler admits, preempts and receives all the time."""

    def __init__(self, engine: Engine, shape: Shape) -> None:
        self.engine = engine
        self.shape = shape
        self.submitted = 0
        self.finished = 0
        self._admitted_at: dict[str, float] = {}
        self._task: asyncio.Task[None] | None = None
        self._template: dict[int, Workload] = {}

    def start(self, rate: float, seconds: float, high_share: float, run_seconds: float) -> None:
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(
                self._run(rate, seconds, high_share, run_seconds), name="arrivals"
            )

    def workload(self, index: int, priority: int) -> Workload:
        """The arrival numbered `index` at `priority` (a copy of a decoded template)."""
        template = self._template.get(priority)
        if template is None:
            obj = decode_object(workload_manifest(self.shape.namespace(0), "template", priority))
            assert isinstance(obj, Workload)
            template = self._template[priority] = obj
        ns = self.shape.namespace(index % self.shape.namespaces)
        # What the store's `fill_metadata` would fill (uid, creationTimestamp), set in
        # the one copy: this driver runs on the measured loop, so it stays cheap.
        meta = template.metadata.model_copy(
            update={
                "name": f"arrival-{index:07d}",
                "namespace": ns,
                "uid": f"00000000-0000-4000-8000-{index:012d}",
                "creation_timestamp": datetime_from_instant(self.engine.scheduler.now()),
            }
        )
        return template.model_copy(update={"metadata": meta})

    async def _run(
        self, rate: float, seconds: float, high_share: float, run_seconds: float
    ) -> None:
        loop = asyncio.get_running_loop()
        tick = 0.01
        started = loop.time()
        every = max(1, round(1 / high_share)) if high_share > 0 else 0
        s = self.engine.scheduler
        while (now := loop.time()) - started < seconds:
            due = int((now - started) * rate)
            while self.submitted < due:
                i = self.submitted
                priority = HIGH_PRIORITY if every and i % every == every - 1 else 0
                self.engine.submit(ApplyObject(self.workload(i, priority)))
                self.submitted += 1
            for key in s.holders.all_keys():
                first = self._admitted_at.setdefault(key, now)
                if now - first >= run_seconds:
                    self.engine.submit(Finish(key))
                    self.finished += 1
                    del self._admitted_at[key]
            await asyncio.sleep(tick)

    @property
    def running(self) -> bool:
        return self._task is not None and not self._task.done()


class BenchState:
    def __init__(self, shape: Shape, pending: int, how: str) -> None:
        self.shape = shape
        self.pending = pending
        self.how = how
        self.engine: Engine | None = None
        self.forecasts: ForecastService | None = None
        self.probe = LagProbe()
        self.gc = GcPauses()
        self.arrivals: Arrivals | None = None
        self.feed_seconds = 0.0
        self.rss_before_feed = 0
        self.rss_after_feed = 0


def install_feed(state: BenchState) -> None:
    """Feed the pending workloads right after the embedded store's initial load."""

    class FedStore(EmbeddedStore):
        def load(self) -> None:
            super().load()
            engine = self.engine
            engine.apply_pending()  # the manifests' cluster first
            state.engine = engine
            state.rss_before_feed = rss_bytes()
            started = time.perf_counter()
            feed(engine.scheduler, state.shape, state.pending, how=state.how)
            state.feed_seconds = time.perf_counter() - started
            state.rss_after_feed = rss_bytes()
            engine.publisher.request()

    replace_global(serve, "EmbeddedStore", FedStore)


def install_routes(state: BenchState) -> None:
    real_create_app = vars(engine_serving)["create_app"]

    def create_app(**kwargs: Any) -> Any:
        app = real_create_app(**kwargs)
        gc.callbacks.append(state.gc)
        return BenchApp(app, state)

    replace_global(engine_serving, "create_app", create_app)


def install_forecast_capture(state: BenchState) -> None:
    """Keep the forecast service `serve` builds, so the stats can say when its first
    refresh is done: until then the server ships every pending workload to the worker,
    a one-time cost the page benchmarks must not count (docs/benchmarks.md)."""
    real_forecast_service = vars(engine_serving)["forecast_service"]

    def forecast_service(*args: Any, **kwargs: Any) -> ForecastService | None:
        state.forecasts = real_forecast_service(*args, **kwargs)
        return state.forecasts

    replace_global(engine_serving, "forecast_service", forecast_service)


def replace_global(module: ModuleType, name: str, value: Any) -> None:
    """Swap a name the serve path looks up at run time. A name that moved away fails here,
    loudly, rather than leaving a benchmark that silently measures the unpatched server."""
    if name not in vars(module):
        raise RuntimeError(f"{module.__name__} no longer defines {name}: update the benchmark")
    vars(module)[name] = value


class BenchApp:
    """`/bench/...` answered here (no authentication: 127.0.0.1, benchmark only)."""

    def __init__(self, app: Any, state: BenchState) -> None:
        self.app = app
        self.state = state

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        path = scope.get("path", "")
        if scope["type"] != "http" or not path.startswith("/bench/"):
            await self.app(scope, receive, send)
            return
        query = {k: v[0] for k, v in parse_qs(scope.get("query_string", b"").decode()).items()}
        try:
            code, body = await self._route(path, query)
        except Exception as exc:  # a benchmark bug: say so to the harness
            code, body = 500, json.dumps({"error": repr(exc)}).encode()
        await send(
            {
                "type": "http.response.start",
                "status": code,
                "headers": [
                    (b"content-type", b"application/json"),
                    (b"content-length", str(len(body)).encode()),
                ],
            }
        )
        await send({"type": "http.response.body", "body": body})

    async def _route(self, path: str, query: dict[str, str]) -> tuple[int, bytes]:
        st = self.state
        engine = st.engine
        if engine is None:
            return 503, b'{"error": "not loaded"}'
        prefix = "/bench/baseline/clusterqueues/"
        if path.startswith(prefix) and path.endswith("/pendingworkloads"):
            cq = path[len(prefix) : -len("/pendingworkloads")]
            offset, limit = int(query.get("offset", "0")), int(query.get("limit", "1000"))
            return 200, upstream_copy_and_sort_page(engine.scheduler, cq, offset, limit)
        if path == "/bench/stats":
            return 200, json.dumps(self.stats()).encode()
        if path == "/bench/probe/start":
            # The step maxima cover the probe's window, not the initial load and publish.
            engine.stats.reset_maxima()
            engine.publisher.stats.reset_maxima()
            st.gc.reset()
            st.probe.start()
            return 200, b"{}"
        if path == "/bench/probe/stop":
            lag = st.probe.stop()
            return 200, json.dumps({"lag_ms": lag, "gc": st.gc.figures()}).encode()
        if path == "/bench/arrivals/start":
            if st.arrivals is None:
                st.arrivals = Arrivals(engine, st.shape)
            st.arrivals.start(
                float(query.get("rate", "1000")),
                float(query.get("seconds", "10")),
                float(query.get("high_share", "0.02")),
                float(query.get("run_seconds", "0.5")),
            )
            return 200, b"{}"
        if path == "/bench/snapshot/trials":
            trials = await self.snapshot_trials(int(query.get("count", "10")))
            return 200, json.dumps(trials).encode()
        return 404, b'{"error": "no such bench route"}'

    def stats(self) -> dict[str, Any]:
        st = self.state
        engine = st.engine
        assert engine is not None
        snap = engine.snapshot()
        view = snap.view(CLUSTER_QUEUE)
        pub = engine.publisher.stats
        arrivals = st.arrivals
        return {
            "synced": snap.synced,
            "loop": type(asyncio.get_running_loop()).__module__.split(".")[0],
            "generation": snap.generation,
            "view_entries": len(view) if view is not None else 0,
            "workloads": len(engine.scheduler.objects.workloads),
            "rss_bytes": rss_bytes(),
            "max_rss_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
            "rss_before_feed": st.rss_before_feed,
            "rss_after_feed": st.rss_after_feed,
            "feed_seconds": st.feed_seconds,
            "feed": st.how,
            "cpu_seconds": time.process_time(),
            "steal_seconds": cpu_steal_seconds(),
            "publisher": {
                "publishes": pub.publishes,
                "last_capture_ms": pub.last_capture_seconds * 1000,
                "last_total_ms": pub.last_total_seconds * 1000,
                "last_max_step_ms": pub.last_max_step_seconds * 1000,
                "max_step_ms": pub.max_step_seconds * 1000,
                "max_step_cpu_ms": pub.max_step_cpu_seconds * 1000,
                "chunks_built": pub.chunks_built,
                "chunks_reused": pub.chunks_reused,
                "freezes": engine.publisher.collector.freezes,
            },
            "engine": {
                "cycles": engine.stats.cycles,
                "admitted": engine.stats.admitted,
                "preempted": engine.stats.preempted,
                "commands": engine.stats.commands,
                "max_step_ms": engine.stats.max_step_seconds * 1000,
                "max_step_ms_by_kind": {
                    kind: seconds * 1000
                    for kind, seconds in sorted(engine.stats.max_step_by_kind.items())
                },
                "max_step_cpu_ms": engine.stats.max_step_cpu_seconds * 1000,
                "max_step_cpu_ms_by_kind": {
                    kind: seconds * 1000
                    for kind, seconds in sorted(engine.stats.max_step_cpu_by_kind.items())
                },
            },
            "arrivals": {
                "running": arrivals.running if arrivals else False,
                "submitted": arrivals.submitted if arrivals else 0,
                "finished": arrivals.finished if arrivals else 0,
            },
            "gc": st.gc.figures(),
            "forecasts": {
                "running": st.forecasts is not None,
                "refreshes": st.forecasts.stats.refreshes if st.forecasts else 0,
                "chunks_sent": st.forecasts.stats.chunks_sent if st.forecasts else 0,
            },
        }

    async def snapshot_trials(self, count: int) -> list[dict[str, float]]:
        """`count` republishes of the big view, each after one new pending workload."""
        engine = self.state.engine
        assert engine is not None
        results = []
        arrivals = self.state.arrivals or Arrivals(engine, self.state.shape)
        self.state.arrivals = arrivals
        for i in range(count):
            self.state.gc.reset()
            self.state.probe.start()
            steal_before = cpu_steal_seconds()
            generation = engine.generation
            engine.submit(ApplyObject(arrivals.workload(900_000 + i, 0)))
            await engine.wait_for_change(60.0, after=generation)
            await asyncio.sleep(0.05)  # let any collection the publish caused show
            lag = self.state.probe.stop()
            pub = engine.publisher.stats
            results.append(
                {
                    "total_ms": pub.last_total_seconds * 1000,
                    "max_step_ms": pub.last_max_step_seconds * 1000,
                    "max_step_cpu_ms": pub.last_max_step_cpu_seconds * 1000,
                    "steal_ms": (cpu_steal_seconds() - steal_before) * 1000,
                    "capture_ms": pub.last_capture_seconds * 1000,
                    "probe_max_lag_ms": lag.get("max", 0.0),
                    "gc_max_ms": max(g["max_ms"] for g in self.state.gc.figures().values()),
                }
            )
            await asyncio.sleep(engine.publisher.interval)
        return results


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.server_under_test", description=__doc__)
    p.add_argument("--dir", required=True, help="working folder (manifests, state)")
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--pending", type=int, default=0)
    p.add_argument("--feed", choices=FEEDS, default="bulk")
    p.add_argument("--namespaces", type=int, default=10)
    p.add_argument("--cpu-quota", default="0")
    p.add_argument("--cpu", type=int, default=None, help="pin the process to this CPU")
    p.add_argument("--publish-interval", default="0.2")
    p.add_argument(
        "--log-level",
        default="WARNING",
        help="serve's --log-level (INFO writes the access log, docs/operations.md#the-access-log)",
    )
    p.add_argument(
        "--loop",
        choices=("auto", "uvloop", "asyncio"),
        default=os.environ.get("QUEUESCOPE_LOOP", "auto"),
        help="serve's --loop (default: $QUEUESCOPE_LOOP, else auto: uvloop where installed)",
    )
    args = p.parse_args(argv)
    if args.cpu is not None:
        os.sched_setaffinity(0, {args.cpu})
    shape = Shape(namespaces=args.namespaces, cpu_quota=args.cpu_quota)
    root = Path(args.dir)
    manifests = root / "manifests"
    manifests.mkdir(parents=True, exist_ok=True)
    (manifests / "cluster.yaml").write_text(cluster_manifests(shape))
    state = BenchState(shape, args.pending, args.feed)
    install_feed(state)
    install_routes(state)
    install_forecast_capture(state)
    serve_args = queuescope_parser().parse_args(
        [
            "serve",
            "--embedded",
            str(manifests),
            "--state-dir",
            str(root / "state"),
            "--listen",
            f"127.0.0.1:{args.port}",
            "--publish-interval",
            args.publish_interval,
            "--log-level",
            args.log_level,
            "--loop",
            args.loop,
        ]
    )
    return serve.run_serve(serve_args)


if __name__ == "__main__":
    raise SystemExit(main())
