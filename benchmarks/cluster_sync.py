"""`cluster-sync`: queuescope in cluster mode against a real kube-apiserver.

1. **Ready time.** `--workloads` Workloads already sit in the API server (pending in a
   ClusterQueue with no quota). The server starts in cluster mode; the figure is the
   time from process start to `/readyz` 200, i.e. the initial list of every resource
   applied to the core and a synced snapshot published.
2. **Admissions per second, end to end.** The ClusterQueue's quota is raised so that
   `--admit` of them fit; the figure is `--admit` divided by the time from that change
   until the last admission is *in the API server* (Workload status written through
   the status subresource), with the writers limited to `--qps`.

The control plane is the e2e suite's (tests/e2e/harness.py): etcd and kube-apiserver
built by tools/controlplane/build.py and cached. Objects are created by a pool of
threads over keep-alive HTTPS with the admin client certificate.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import contextlib
import http.client
import importlib.util
import json
import socket
import ssl
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from benchmarks.result import Result, Target
from tests.e2e.cluster import ClusterModeServer, cpu_queue, flavor
from tests.e2e.harness import ControlPlane, wait_for

REPO = Path(__file__).resolve().parent.parent
NS = "bench-sync"
CQ = "bench-sync"
LQ = "bench-sync"
QUIET_SECONDS = 3.0


def _build_module() -> Any:
    path = REPO / "tools" / "controlplane" / "build.py"
    spec = importlib.util.spec_from_file_location("queuescope_controlplane_build", path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def _queues(cpu: str) -> str:
    return (
        flavor("bench-flavor")
        + "\n---\n"
        + cpu_queue(NS, "bench-flavor", CQ, LQ, cpu, queueingStrategy="BestEffortFIFO")
    )


def _workload(i: int) -> dict[str, Any]:
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta1",
        "kind": "Workload",
        "metadata": {"name": f"wl-{i:06d}", "namespace": NS},
        "spec": {
            "queueName": LQ,
            "priority": i % 7,
            "podSets": [
                {
                    "name": "main",
                    "count": 1,
                    "template": {
                        "spec": {
                            "restartPolicy": "Never",
                            "containers": [
                                {
                                    "name": "c",
                                    "image": "busybox",
                                    "resources": {"requests": {"cpu": "1"}},
                                }
                            ],
                        }
                    },
                }
            ],
        },
    }


class _Admin:
    """Keep-alive HTTPS connections to kube-apiserver as the admin, one per thread."""

    def __init__(self, plane: Any) -> None:
        self.plane = plane
        admin = plane.admin
        self.context = ssl.create_default_context(cafile=str(plane.cluster_ca_file))
        self.context.load_cert_chain(admin.cert, admin.key)
        self.local = threading.local()

    def _conn(self) -> http.client.HTTPSConnection:
        conn = getattr(self.local, "conn", None)
        if conn is None:
            conn = http.client.HTTPSConnection(
                "127.0.0.1", self.plane.port, context=self.context, timeout=60
            )
            self.local.conn = conn
        return conn

    def request(self, method: str, path: str, body: Any = None) -> tuple[int, Any]:
        for attempt in range(3):
            conn = self._conn()
            try:
                payload = json.dumps(body).encode() if body is not None else None
                conn.request(
                    method, path, body=payload, headers={"Content-Type": "application/json"}
                )
                response = conn.getresponse()
                data = response.read()
                return response.status, json.loads(data) if data else None
            except (OSError, http.client.HTTPException):
                conn.close()
                self.local.conn = None
                if attempt == 2:
                    raise
        raise AssertionError("unreachable")


def _create_workloads(admin: _Admin, count: int, threads: int = 16) -> float:
    path = f"/apis/kueue.x-k8s.io/v1beta1/namespaces/{NS}/workloads"
    started = time.monotonic()

    def create(i: int) -> None:
        status, body = admin.request("POST", path, _workload(i))
        if status not in (201, 409):
            raise RuntimeError(f"creating workload {i}: {status} {body}")

    with concurrent.futures.ThreadPoolExecutor(threads) as pool:
        list(pool.map(create, range(count)))
    return time.monotonic() - started


def _is_admitted(w: dict[str, Any]) -> bool:
    return any(
        c.get("type") == "Admitted" and c.get("status") == "True"
        for c in (w.get("status") or {}).get("conditions") or []
    )


class _AdmissionWatch:
    """Counts Workloads whose Admitted condition is in the API, from one watch stream
    (listing thousands of Workloads in a loop would load kube-apiserver, on the same
    two cores, more than the thing measured)."""

    def __init__(self, admin: _Admin) -> None:
        self.admitted: set[str] = set()
        self.events = 0
        self.last_at = 0.0
        self.last_event_at = time.monotonic()
        self._admin = admin
        path = f"/apis/kueue.x-k8s.io/v1beta1/namespaces/{NS}/workloads"
        status, doc = admin.request("GET", f"{path}?limit=1")
        if status != 200:
            raise RuntimeError(f"listing workloads: {status}")
        self._path = f"{path}?watch=1&resourceVersion={doc['metadata']['resourceVersion']}"
        self._conn = http.client.HTTPSConnection(
            "127.0.0.1", admin.plane.port, context=admin.context, timeout=600
        )
        self._conn.request("GET", self._path)
        self._response = self._conn.getresponse()
        self._thread = threading.Thread(target=self._follow, daemon=True)
        self._thread.start()

    def _follow(self) -> None:
        try:
            for line in self._response:
                event = json.loads(line)
                self.events += 1
                self.last_event_at = time.monotonic()
                obj = event.get("object") or {}
                if _is_admitted(obj):
                    name = obj["metadata"]["name"]
                    if name not in self.admitted:
                        self.admitted.add(name)
                        self.last_at = time.monotonic()
        except (OSError, ValueError, http.client.HTTPException):
            return

    def close(self) -> None:
        # End the stream under the reader first and let it return; closing the connection
        # while the thread is inside a read pulls the file out from under it.
        sock = self._conn.sock
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
        self._thread.join(timeout=10)
        self._conn.close()


def cluster_sync(args: argparse.Namespace) -> Result:
    build = _build_module()
    toolchain = build.ensure_toolchain(log=lambda m: print(m, file=sys.stderr))
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
            admin = _Admin(plane)
            create_seconds = _create_workloads(admin, args.workloads)

            started = time.monotonic()
            server.start()  # returns once /readyz answers 200
            ready_seconds = time.monotonic() - started

            # The server first writes every Workload's Pending condition (as Kueue does):
            # wait for those writes to end so they are not counted as admission time.
            watch = _AdmissionWatch(admin)
            wait_for(
                lambda: True if time.monotonic() - watch.last_event_at > QUIET_SECONDS else None,
                timeout=max(120.0, args.workloads / 20),
                what="the initial status writes to end",
                interval=0.5,
            )
            initial_writes = watch.events
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
            admit_seconds = watch.last_at - changed
            admission_writes = watch.events - initial_writes
            watch.close()
        finally:
            if server is not None:
                server.stop()
            plane.stop()
    rate = args.admit / admit_seconds
    return Result(
        name="cluster-sync",
        headline=ready_seconds,
        unit="s",
        headline_label=f"start to ready with {args.workloads:,} Workloads in kube-apiserver",
        command=f"python -m benchmarks cluster-sync --workloads {args.workloads} "
        f"--admit {args.admit} --qps {args.qps}",
        columns=["measure", "value"],
        rows=[
            ["Workloads created before the start (16 threads)", f"{create_seconds:.1f} s"],
            ["start to /readyz 200", f"{ready_seconds:.1f} s"],
            ["Pending conditions written after the start", f"{initial_writes:,}"],
            [f"{args.admit:,} admissions written, QPS {args.qps:g}", f"{admit_seconds:.1f} s"],
            ["Workload writes seen while admitting", f"{admission_writes:,}"],
            ["admissions per second, end to end", f"{rate:.0f} /s"],
        ],
        targets=[
            Target("ready", ready_seconds, "<=", 30, "s"),
            Target(f"admissions/s at QPS {args.qps:g}", rate, ">=", 100, "/s"),
        ],
        notes=[
            "Real etcd and kube-apiserver on the same 2-core machine as the server; "
            "the time to admission is measured from the quota change to the watch event "
            "of the last Workload whose Admitted condition is in the API."
        ],
        figures={
            "ready_seconds": ready_seconds,
            "admit_seconds": admit_seconds,
            "admissions_per_second": rate,
            "create_seconds": create_seconds,
            "initial_writes": initial_writes,
            "admission_writes": admission_writes,
        },
    )
