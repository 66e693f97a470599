"""The load generator: a separate process speaking HTTPS/1.1 with keep-alive.

    python -m benchmarks.loadgen --port P --state DIR MODE [options]

A deliberately small client (asyncio streams, TLS with the state folder's admin
certificate, Content-Length or chunked bodies) so that the client costs as little as
possible per request. Every loop is bounded by a request count and by a time limit
and stops by itself. The figures go to stdout as one JSON object.

Modes:

* ``latency``: one connection per target, requests interleaved (ours, baseline, ours,
  ...) at random offsets, so both see the same machine at the same moments;
* ``throughput``: C connections as fast as they go, for a page or for a conditional
  request answered by 304;
* ``steady``: requests paced at a fixed rate (loop-lag), recording every latency.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import random
import ssl
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchmarks.stats import summary

PAGE_PATH = "/apis/visibility.kueue.x-k8s.io/v1beta1/clusterqueues/{cq}/pendingworkloads"
BASELINE_PATH = "/bench/baseline/clusterqueues/{cq}/pendingworkloads"
BASELINE_WARMUP = 2  # requests of the baseline dropped as warm-up (ours: --warmup)


class HttpError(Exception):
    pass


@dataclass(slots=True)
class Response:
    status: int
    headers: dict[str, str]
    body: bytes


def client_context(state: Path) -> ssl.SSLContext:
    ctx = ssl.create_default_context(cafile=str(state / "ca.crt"))
    ctx.load_cert_chain(str(state / "admin.crt"), str(state / "admin.key"))
    return ctx


class Connection:
    """One keep-alive HTTP/1.1 connection over TLS."""

    def __init__(self, host: str, port: int, ctx: ssl.SSLContext) -> None:
        self.host, self.port, self.ctx = host, port, ctx
        self._reader: asyncio.StreamReader | None = None
        self._writer: asyncio.StreamWriter | None = None

    async def open(self) -> None:
        self._reader, self._writer = await asyncio.open_connection(
            self.host, self.port, ssl=self.ctx, server_hostname=self.host
        )

    async def close(self) -> None:
        if self._writer is not None:
            self._writer.close()
            with contextlib.suppress(ssl.SSLError, ConnectionError):
                await self._writer.wait_closed()
            self._writer = None

    async def get(self, path: str, headers: dict[str, str] | None = None) -> Response:
        if self._writer is None or self._reader is None:
            await self.open()
        assert self._writer is not None and self._reader is not None
        lines = [
            f"GET {path} HTTP/1.1",
            f"Host: {self.host}:{self.port}",
            "Accept: application/json",
        ]
        lines += [f"{k}: {v}" for k, v in (headers or {}).items()]
        self._writer.write(("\r\n".join(lines) + "\r\n\r\n").encode())
        return await read_response(self._reader)


async def read_response(reader: asyncio.StreamReader) -> Response:
    head = await reader.readuntil(b"\r\n\r\n")
    status_line, *header_lines = head[:-4].decode("latin-1").split("\r\n")
    parts = status_line.split(" ", 2)
    if len(parts) < 2 or not parts[0].startswith("HTTP/"):
        raise HttpError(f"bad status line {status_line!r}")
    headers = {}
    for line in header_lines:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    status = int(parts[1])
    if status == 304 or status < 200:
        return Response(status, headers, b"")
    if headers.get("transfer-encoding", "").lower() == "chunked":
        body = bytearray()
        while True:
            size = int((await reader.readuntil(b"\r\n"))[:-2].split(b";")[0], 16)
            if size == 0:
                await reader.readuntil(b"\r\n")
                break
            body += await reader.readexactly(size + 2)
            del body[-2:]
        return Response(status, headers, bytes(body))
    length = int(headers.get("content-length", "0"))
    return Response(status, headers, await reader.readexactly(length))


def page_query(path: str, depth: int, limit: int, rng: random.Random) -> str:
    offset = rng.randrange(max(1, depth - limit + 1))
    return f"{path}?limit={limit}&offset={offset}"


@dataclass(slots=True)
class Tally:
    latencies_ms: list[float] = field(default_factory=list)
    statuses: dict[str, int] = field(default_factory=dict)
    errors: int = 0

    def record(self, status: int, elapsed: float, ok: set[int]) -> None:
        self.latencies_ms.append(elapsed * 1000)
        self.statuses[str(status)] = self.statuses.get(str(status), 0) + 1
        if status not in ok:
            self.errors += 1

    def figures(self, warmup: int = 0) -> dict[str, Any]:
        kept = self.latencies_ms[warmup:]
        return {"latency_ms": summary(kept), "statuses": self.statuses, "errors": self.errors}


async def latency(args: argparse.Namespace, ctx: ssl.SSLContext) -> dict[str, Any]:
    rng = random.Random(args.seed)
    targets = {"ours": PAGE_PATH.format(cq=args.cq)}
    if args.baseline:
        targets["baseline"] = BASELINE_PATH.format(cq=args.cq)
    conns = {name: Connection(args.host, args.port, ctx) for name in targets}
    tallies = {name: Tally() for name in targets}
    warmup = {"ours": args.warmup, "baseline": BASELINE_WARMUP}
    budget = {
        "ours": args.requests + args.warmup,
        "baseline": args.baseline_requests + BASELINE_WARMUP,
    }
    # The baseline may use half of the time: at 1M one of its requests takes seconds, and
    # it must not starve our side of samples.
    spent = dict.fromkeys(targets, 0.0)
    share = {"ours": args.max_seconds, "baseline": args.max_seconds / 2}
    deadline = time.perf_counter() + args.max_seconds
    while time.perf_counter() < deadline:
        active = [
            n for n in targets if len(tallies[n].latencies_ms) < budget[n] and spent[n] < share[n]
        ]
        if not active:
            break
        for name in active:
            path = page_query(targets[name], args.depth, args.limit, rng)
            started = time.perf_counter()
            response = await conns[name].get(path)
            elapsed = time.perf_counter() - started
            spent[name] += elapsed
            tallies[name].record(response.status, elapsed, {200})
    for c in conns.values():
        await c.close()
    return {name: t.figures(warmup[name]) for name, t in tallies.items()}


async def throughput(args: argparse.Namespace, ctx: ssl.SSLContext) -> dict[str, Any]:
    rng = random.Random(args.seed)
    path = PAGE_PATH.format(cq=args.cq)
    etags: dict[str, str] = {}
    if args.conditional:
        probe = Connection(args.host, args.port, ctx)
        for _ in range(args.distinct_pages):
            query = page_query(path, args.depth, args.limit, rng)
            etags[query] = (await probe.get(query)).headers["etag"]
        await probe.close()
    queries = list(etags)
    tally = Tally()
    ok = {304} if args.conditional else {200}
    stop_at = time.perf_counter() + args.seconds
    sent = 0

    async def worker(seed: int) -> None:
        nonlocal sent
        wrng = random.Random(seed)
        conn = Connection(args.host, args.port, ctx)
        await conn.open()
        while time.perf_counter() < stop_at and sent < args.max_requests:
            sent += 1
            if args.conditional:
                query = wrng.choice(queries)
                headers = {"If-None-Match": etags[query]}
            else:
                query, headers = page_query(path, args.depth, args.limit, wrng), {}
            started = time.perf_counter()
            try:
                response = await conn.get(query, headers)
                tally.record(response.status, time.perf_counter() - started, ok)
            except (OSError, HttpError, asyncio.IncompleteReadError):
                tally.errors += 1
                await conn.close()
        await conn.close()

    cpu0, started = time.process_time(), time.perf_counter()
    await asyncio.gather(*(worker(args.seed + i) for i in range(args.connections)))
    elapsed = time.perf_counter() - started
    figures = tally.figures()
    figures.update(
        requests=len(tally.latencies_ms),
        seconds=elapsed,
        rps=len(tally.latencies_ms) / elapsed if elapsed else 0.0,
        client_cpu_share=(time.process_time() - cpu0) / elapsed if elapsed else 0.0,
    )
    return figures


async def steady(args: argparse.Namespace, ctx: ssl.SSLContext) -> dict[str, Any]:
    """Requests at `rate` per second over `connections`, half pages, half 304s."""
    path = PAGE_PATH.format(cq=args.cq)
    tally = Tally()
    interval = args.connections / args.rate
    stop_at = time.perf_counter() + args.seconds

    async def worker(seed: int) -> None:
        wrng = random.Random(seed)
        conn = Connection(args.host, args.port, ctx)
        etag = ""
        next_at = time.perf_counter() + wrng.random() * interval
        while time.perf_counter() < stop_at and len(tally.latencies_ms) < args.max_requests:
            await asyncio.sleep(max(0.0, next_at - time.perf_counter()))
            next_at += interval
            headers = {"If-None-Match": etag} if etag and wrng.random() < 0.5 else {}
            started = time.perf_counter()
            try:
                response = await conn.get(page_query(path, args.depth, args.limit, wrng), headers)
            except (OSError, HttpError, asyncio.IncompleteReadError):
                tally.errors += 1
                await conn.close()
                continue
            tally.record(response.status, time.perf_counter() - started, {200, 304})
            etag = response.headers.get("etag", etag)

    await asyncio.gather(*(worker(args.seed + i) for i in range(args.connections)))
    figures = tally.figures()
    figures["over_100ms"] = sum(1 for x in tally.latencies_ms if x > 100)
    return figures


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m benchmarks.loadgen", description=__doc__)
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--state", type=Path, required=True, help="the server's state folder")
    p.add_argument("--cq", default="bench")
    p.add_argument("--depth", type=int, required=True, help="pending workloads in the queue")
    p.add_argument("--limit", type=int, default=100)
    p.add_argument("--seed", type=int, default=7)
    p.add_argument("--cpu", type=int, default=None, help="pin the process to this CPU")
    sub = p.add_subparsers(dest="mode", required=True)
    lat = sub.add_parser("latency")
    lat.add_argument("--requests", type=int, default=500)
    lat.add_argument("--warmup", type=int, default=20)
    lat.add_argument("--baseline", action="store_true")
    lat.add_argument("--baseline-requests", type=int, default=50)
    lat.add_argument("--max-seconds", type=float, default=60.0)
    thr = sub.add_parser("throughput")
    thr.add_argument("--connections", type=int, default=8)
    thr.add_argument("--seconds", type=float, default=5.0)
    thr.add_argument("--max-requests", type=int, default=1_000_000)
    thr.add_argument("--conditional", action="store_true")
    thr.add_argument("--distinct-pages", type=int, default=50)
    std = sub.add_parser("steady")
    std.add_argument("--rate", type=float, default=200.0)
    std.add_argument("--connections", type=int, default=4)
    std.add_argument("--seconds", type=float, default=10.0)
    std.add_argument("--max-requests", type=int, default=1_000_000)
    return p


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    if args.cpu is not None:
        os.sched_setaffinity(0, {args.cpu})
    try:
        import uvloop  # noqa: PLC0415 (optional)

        uvloop.install()
    except ImportError:
        pass
    ctx = client_context(args.state)
    run = {"latency": latency, "throughput": throughput, "steady": steady}[args.mode]
    result = asyncio.run(run(args, ctx))
    json.dump(result, sys.stdout)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
