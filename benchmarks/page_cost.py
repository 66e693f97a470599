"""How much does one 100-item page cost at 1k and at 100k pending? (visibility-api.md §4.1)

In-process through the real app (authentication, authorization, negotiation, rendering),
without TLS or sockets, so the figure isolates what depends on queue depth. The full
benchmarks with a separate load generator are `python -m benchmarks` (performance.md).
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
from types import MappingProxyType

import httpx

from scheduler.runtime.snapshot import PendingEntry, Snapshot, build_view
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


def _snapshot(depth: int) -> Snapshot:
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
    snap = _snapshot(depth)
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--requests", type=int, default=400)
    args = parser.parse_args()
    for depth in (1_000, 100_000):
        t = sorted(asyncio.run(_measure(depth, args.requests))[20:])  # skip warm-up
        p50 = statistics.median(t) * 1000
        p99 = t[int(len(t) * 0.99) - 1] * 1000
        print(f"depth={depth:>7} page=100 p50={p50:.2f}ms p99={p99:.2f}ms")


if __name__ == "__main__":
    main()
