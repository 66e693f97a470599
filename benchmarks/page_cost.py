"""How much does one 100-item page cost at 1k and at 100k pending?
(docs/visibility-api.md#one-immutable-snapshot-per-response)

In-process through the real app (authentication, authorization, negotiation, rendering),
without TLS or sockets, so the figure isolates what depends on queue depth. The full
benchmarks with a separate load generator are `python -m benchmarks` (docs/performance.md).

`--asgi` instead calls the app's ASGI callable directly (no HTTP client at all) and
reports the CPU time (`time.process_time`) per request of a few kinds of request, the
lowest of several rounds: the cost of the server's own pipeline, which is what a change
of routing or middleware moves. `--against DIR` runs the same measurement on another
checkout too (its own interpreter, `DIR/.venv/bin/python`, nothing written there),
alternating the two, so both are measured in one run on the same machine state.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import shutil
import statistics
import subprocess
import time
from collections.abc import Sequence
from pathlib import Path
from types import MappingProxyType
from typing import Any

import httpx

from scheduler.runtime.snapshot import Snapshot

try:
    from scheduler.runtime.pages import build_view
    from scheduler.runtime.workload_records import PendingEntry
except ImportError:  # a checkout from before the snapshot module was split (--against)
    from scheduler.runtime.snapshot import (  # type: ignore[attr-defined,no-redef]
        PendingEntry,
        build_view,
    )
from queuescope.logformat import configure_logging
from visibility_server.authn.interface import RequestCredentials
from visibility_server.authz.embedded import EmbeddedBackend
from visibility_server.authz.identity import UserInfo, authenticated_user
from visibility_server.authz.pipeline import Authorizer
from visibility_server.authz.rbac import RBACAuthorizer
from visibility_server.http import create_app

PATH = "/apis/visibility.kueue.x-k8s.io/v1beta1/clusterqueues/cq/pendingworkloads"


class _Admin:
    async def authenticate(self, credentials: RequestCredentials) -> UserInfo:
        return authenticated_user("admin", groups=["system:masters"])


def bench_snapshot(depth: int) -> Snapshot:
    entries = [
        PendingEntry.make(f"ns-{i % 50}", f"wl-{i:06d}", 1_700_000_000_000_000 + i, (), i % 7, "lq")
        for i in range(depth)
    ]
    view = build_view("cq", entries)
    return Snapshot(
        generation=1,
        synced=True,
        views=MappingProxyType({"cq": view}),
        local_queues=MappingProxyType({(f"ns-{i}", "lq"): "cq" for i in range(50)}),
        workloads=MappingProxyType({e.key: "cq" for e in entries}),
    )


async def _measure(depth: int, requests: int) -> list[float]:
    snap = bench_snapshot(depth)
    app = create_app(
        snapshot=lambda: snap,
        authenticator=_Admin(),
        authorizer=Authorizer(EmbeddedBackend(RBACAuthorizer())),
        version_info={"gitVersion": "bench"},
    )
    timings: list[float] = []
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="https://bench") as client:
        for i in range(requests):
            offset = (i * 7919) % max(1, depth - 100)
            start = time.perf_counter()
            response = await client.get(PATH, params={"offset": offset, "limit": 100})
            timings.append(time.perf_counter() - start)
            assert response.status_code == 200, response.text
            assert len(response.json()["items"]) == min(100, depth)
    return timings


def bench_app(snap: Snapshot) -> Any:
    return create_app(
        snapshot=lambda: snap,
        authenticator=_Admin(),
        authorizer=Authorizer(EmbeddedBackend(RBACAuthorizer())),
        version_info={"gitVersion": "bench"},
    )


async def call(
    app: Any, path: str, query: bytes, headers: Sequence[tuple[bytes, bytes]]
) -> tuple[int, dict[bytes, bytes]]:
    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "GET",
        "scheme": "https",
        "path": path,
        "raw_path": path.encode(),
        "query_string": query,
        "root_path": "",
        "headers": [(b"host", b"bench"), *headers],
        "server": ("127.0.0.1", 8443),
        "client": ("127.0.0.1", 5555),
        "extensions": {},
    }
    start: dict[str, Any] = {}

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: dict[str, Any]) -> None:
        if message["type"] == "http.response.start":
            start.update(message)

    await app(scope, receive, send)
    return start["status"], dict(start["headers"])


WARM_REQUESTS = 2000  # every page's fragments are memoized after this many


async def request_kinds(app: Any, depth: int) -> dict[str, Any]:
    """Each kind of request: request number -> (path, query, headers)."""
    etag = (await call(app, PATH, b"limit=100", []))[1][b"etag"]
    offsets = [
        b"limit=100&offset=%d" % ((i * 7919) % max(1, depth - 100)) for i in range(WARM_REQUESTS)
    ]
    return {
        "page, same page again (200)": lambda i: (PATH, b"limit=100", []),
        "page, 2000 offsets in turn (200)": lambda i: (PATH, offsets[i % len(offsets)], []),
        "If-None-Match (304)": lambda i: (PATH, b"limit=100", [(b"if-none-match", etag)]),
        "/healthz (200)": lambda i: ("/healthz", b"", []),
        "unknown path (404)": lambda i: ("/apis/nope", b"", []),
    }


async def _run(app: Any, kind: str, request: Any, count: int) -> None:
    for i in range(count):
        code, _ = await call(app, *request(i))
        assert code in (200, 304, 404), (kind, code)


async def _asgi_cpu(depth: int, requests: int, rounds: int) -> dict[str, float]:
    """CPU µs per request of each kind, the lowest of `rounds` rounds."""
    app = bench_app(bench_snapshot(depth))
    kinds = await request_kinds(app, depth)
    best: dict[str, float] = {}
    for _ in range(rounds):
        for kind, request in kinds.items():
            await _run(app, kind, request, WARM_REQUESTS)
            start = time.process_time()
            await _run(app, kind, request, requests)
            per = (time.process_time() - start) / requests * 1e6
            best[kind] = min(best.get(kind, per), per)
    return best


async def _one_kind(depth: int, kind: str, requests: int) -> None:
    """Warm, then `requests` requests of one kind: what the instruction count measures.

    The heap is frozen after the warm-up, as `serve` freezes it after its initial load
    (docs/architecture.md): otherwise a full collection that the longer run happens to
    trigger, and the shorter does not, would be counted as the requests' own work."""
    app = bench_app(bench_snapshot(depth))
    request = (await request_kinds(app, depth))[kind]
    await _run(app, kind, request, WARM_REQUESTS)
    gc.collect()
    gc.freeze()
    await _run(app, kind, request, requests)


def _instructions(checkout: Path, depth: int, kind: str, requests: int) -> int:
    """Instructions executed by a child in `checkout` that answers `requests` requests of
    `kind` after the warm-up (valgrind's cachegrind without cache simulation)."""
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1", "PYTHONPATH": str(checkout)}
    command = ["valgrind", "--tool=cachegrind", "--cache-sim=no", "--cachegrind-out-file=/dev/null"]
    command += [str(checkout / ".venv" / "bin" / "python"), str(Path(__file__).resolve())]
    command += ["--one-kind", kind, "--depth", str(depth), "--requests", str(requests)]
    out = subprocess.run(command, env=env, cwd=checkout, check=True, capture_output=True)
    for line in out.stderr.decode().splitlines():
        if "I   refs:" in line:
            return int(line.rpartition(":")[2].replace(",", "").strip())
    raise RuntimeError(f"no instruction count from valgrind: {out.stderr.decode()[-2000:]}")


def _instructions_main(args: argparse.Namespace, sides: dict[str, Path]) -> None:
    kinds = list(asyncio.run(request_kinds(bench_app(bench_snapshot(200)), 200)))
    print(
        f"depth={args.depth} instructions per request ({args.requests} requests): "
        + " | ".join(sides)
    )
    for kind in kinds:
        counts = []
        for checkout in sides.values():
            extra = _instructions(checkout, args.depth, kind, args.requests)
            base = _instructions(checkout, args.depth, kind, 0)
            counts.append((extra - base) / args.requests)
        ratio = f"  ({counts[0] / counts[1] - 1:+.1%})" if len(counts) == 2 else ""
        print(f"{kind:34} " + " | ".join(f"{c:9,.0f}" for c in counts) + ratio)


def _asgi_child(
    checkout: Path, depth: int, requests: int, rounds: int, log_format: str
) -> dict[str, float]:
    """The same measurement in `checkout`, with its own interpreter; writes nothing there."""
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1", "PYTHONPATH": str(checkout)}
    command = [str(checkout / ".venv" / "bin" / "python"), str(Path(__file__).resolve())]
    command += ["--asgi", "--json", "--depth", str(depth), "--requests", str(requests)]
    command += ["--rounds", str(rounds), "--log-format", log_format]
    out = subprocess.run(command, env=env, cwd=checkout, check=True, capture_output=True)
    result: dict[str, float] = json.loads(out.stdout.decode().strip().splitlines()[-1])
    return result


def _asgi_main(args: argparse.Namespace) -> None:
    if args.json:
        if args.log_format != "none":
            # As `serve` logs: INFO and up to standard error (here the parent's pipe),
            # which is what makes the access log's line part of a request's cost.
            configure_logging("INFO", args.log_format)
        print(json.dumps(asyncio.run(_asgi_cpu(args.depth, args.requests, args.rounds))))
        return
    here = Path(__file__).resolve().parent.parent
    sides = {"this checkout": here}
    if args.against:
        sides["--against"] = Path(args.against).resolve()
    if args.instructions:
        if shutil.which("valgrind") is None:
            raise SystemExit("--instructions needs valgrind (Debian: apt-get install valgrind)")
        _instructions_main(args, sides)
        return
    best: dict[str, dict[str, float]] = {}
    for _ in range(args.alternations):
        for side, checkout in sides.items():
            got = _asgi_child(checkout, args.depth, args.requests, args.rounds, args.log_format)
            mine = best.setdefault(side, {})
            for kind, value in got.items():
                mine[kind] = min(mine.get(kind, value), value)
    names = list(sides)
    print(f"depth={args.depth} CPU µs per request (lowest of all rounds): " + " | ".join(names))
    for kind in best[names[0]]:
        values = [best[side][kind] for side in names]
        ratio = f"  ({values[0] / values[1] - 1:+.0%})" if len(values) == 2 else ""
        print(f"{kind:34} " + " | ".join(f"{v:7.1f}" for v in values) + ratio)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--requests", type=int, default=400)
    parser.add_argument("--asgi", action="store_true", help="CPU per request, no HTTP client")
    parser.add_argument("--against", help="another checkout to measure side by side (--asgi)")
    parser.add_argument("--depth", type=int, default=100_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--alternations", type=int, default=2)
    parser.add_argument(
        "--instructions",
        action="store_true",
        help="with --asgi: instructions per request counted by valgrind (deterministic)",
    )
    parser.add_argument(
        "--log-format",
        choices=("none", "text", "json"),
        default="none",
        help="with --asgi: log at INFO to standard error in this format, as serve does",
    )
    parser.add_argument("--json", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--one-kind", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one_kind:
        asyncio.run(_one_kind(args.depth, args.one_kind, args.requests))
        return
    if args.asgi:
        _asgi_main(args)
        return
    for depth in (1_000, 100_000):
        t = sorted(asyncio.run(_measure(depth, args.requests))[20:])  # skip warm-up
        p50 = statistics.median(t) * 1000
        p99 = t[int(len(t) * 0.99) - 1] * 1000
        print(f"depth={depth:>7} page=100 p50={p50:.2f}ms p99={p99:.2f}ms")


if __name__ == "__main__":
    main()
