"""Many Workloads in the real kube-apiserver, cheaply, and the writes made to them.

Shared by the 10k e2e check (`test_cluster_quiet_start.py`) and the `cluster-sync`
benchmark (100k): creating objects one `kubectl` at a time would take hours, so a pool
of threads posts minimal Workloads over keep-alive HTTPS with the admin certificate;
`WorkloadWatch` counts every write to the namespace's Workloads from one watch stream
(kube-apiserver sends one event per write, whoever made it).
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import http.client
import json
import os
import socket
import ssl
import threading
import time
from pathlib import Path
from typing import Any

from tests.e2e.cluster import ClusterModeServer
from tests.e2e.harness import ADMIN_GROUPS, ADMIN_USER, ControlPlane, wait_for

WORKLOADS = "/apis/kueue.x-k8s.io/v1beta2/namespaces/{ns}/workloads"


class Admin:
    """Keep-alive HTTPS connections to kube-apiserver as the admin, one per thread."""

    def __init__(self, plane: ControlPlane) -> None:
        self.plane = plane
        admin = plane.admin
        self.context = ssl.create_default_context(cafile=str(plane.cluster_ca_file))
        self.context.load_cert_chain(admin.cert, admin.key)
        self.local = threading.local()

    def connect(self, timeout: float = 60) -> http.client.HTTPSConnection:
        return http.client.HTTPSConnection(
            "127.0.0.1", self.plane.port, context=self.context, timeout=timeout
        )

    def _conn(self) -> http.client.HTTPSConnection:
        conn = getattr(self.local, "conn", None)
        if conn is None:
            conn = self.connect()
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


def pending_workload(namespace: str, queue: str, i: int) -> dict[str, Any]:
    """The smallest Workload a ClusterQueue can consider: one pod asking for 1 cpu."""
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "Workload",
        "metadata": {"name": f"wl-{i:06d}", "namespace": namespace},
        "spec": {
            "queueName": queue,
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


def create_workloads(
    admin: Admin, namespace: str, queue: str, count: int, threads: int = 16
) -> float:
    """Create `count` Workloads concurrently; the seconds it took. Already there: fine."""
    path = WORKLOADS.format(ns=namespace)
    started = time.monotonic()

    def create(i: int) -> None:
        status, body = admin.request("POST", path, pending_workload(namespace, queue, i))
        if status not in (201, 409):
            raise RuntimeError(f"creating workload {i}: {status} {body}")

    with concurrent.futures.ThreadPoolExecutor(threads) as pool:
        list(pool.map(create, range(count)))
    return time.monotonic() - started


def resource_versions(admin: Admin, namespace: str) -> dict[str, str]:
    """name -> resourceVersion of every Workload in `namespace` (paged list)."""
    path = WORKLOADS.format(ns=namespace)
    found: dict[str, str] = {}
    token = ""
    while True:
        query = f"?limit=5000&continue={token}" if token else "?limit=5000"
        status, doc = admin.request("GET", path + query)
        if status != 200:
            raise RuntimeError(f"listing workloads: {status} {doc}")
        for item in doc["items"]:
            found[item["metadata"]["name"]] = item["metadata"]["resourceVersion"]
        token = doc["metadata"].get("continue") or ""
        if not token:
            return found


def is_admitted(w: dict[str, Any]) -> bool:
    return any(
        c.get("type") == "Admitted" and c.get("status") == "True"
        for c in (w.get("status") or {}).get("conditions") or []
    )


class WorkloadWatch:
    """Every write to the Workloads of a namespace from the moment it opens: one watch
    stream (listing thousands of Workloads in a loop would load kube-apiserver, on the
    same cores, more than what is measured). Counts events, remembers which Workloads
    were written and which are admitted."""

    def __init__(self, admin: Admin, namespace: str) -> None:
        self.events = 0
        self.written: set[str] = set()
        self.admitted: set[str] = set()
        self.last_admitted_at = 0.0
        self.last_event_at = time.monotonic()
        self.resumed = 0
        self._lock = threading.Lock()
        self._closing = False
        self._admin = admin
        self._path = WORKLOADS.format(ns=namespace)
        status, doc = admin.request("GET", f"{self._path}?limit=1")
        if status != 200:
            raise RuntimeError(f"listing workloads: {status}")
        self._rv = doc["metadata"]["resourceVersion"]
        self._conn = admin.connect(timeout=3600)
        self._response = self._open()
        self._thread = threading.Thread(target=self._follow, daemon=True)
        self._thread.start()

    def _open(self) -> http.client.HTTPResponse:
        """Start the watch; a 429 while kube-apiserver (re)initializes the storage is
        retried after the delay it asks for, as clients do."""
        for _ in range(120):
            self._conn.request("GET", f"{self._path}?watch=1&resourceVersion={self._rv}")
            response = self._conn.getresponse()
            if response.status == 200:
                return response
            body = response.read()
            if response.status != 429:
                raise RuntimeError(f"watching workloads: {response.status} {body[:300]!r}")
            time.sleep(1)
        raise RuntimeError("watching workloads: still 429 after 120 tries")

    def _follow(self) -> None:
        """Follow the stream; after an ERROR event (kube-apiserver re-initializes a CRD's
        storage when the CRD changes, e.g. when its conversion caBundle is set), resume
        from the last resourceVersion seen, as any client of a watch does. Resuming
        loses no event; a 410 (too old) would, and ends the count loudly."""
        try:
            while not self._closing:
                if not self._read_until_error():
                    return
                time.sleep(1)
                with self._lock:
                    self.resumed += 1
                self._response = self._open()
        except (OSError, ValueError, http.client.HTTPException):
            return

    def _read_until_error(self) -> bool:
        """Read events until the stream ends (False) or brings an ERROR (True)."""
        for line in self._response:
            event = json.loads(line)
            obj = event.get("object") or {}
            if event.get("type") == "ERROR":
                if obj.get("code") == 410:
                    raise RuntimeError(f"watch expired, events lost: {obj.get('message')}")
                return True
            metadata = obj.get("metadata") or {}
            name = metadata.get("name", "")
            with self._lock:
                self._rv = metadata.get("resourceVersion", self._rv)
                self.events += 1
                self.last_event_at = time.monotonic()
                self.written.add(name)
                if is_admitted(obj) and name not in self.admitted:
                    self.admitted.add(name)
                    self.last_admitted_at = self.last_event_at
        return False

    def count(self) -> int:
        with self._lock:
            return self.events

    def wait_quiet(self, quiet: float, timeout: float) -> float:
        """Wait until no write came for `quiet` seconds; the instant of the last one."""
        wait_for(
            lambda: True if time.monotonic() - self.last_event_at > quiet else None,
            timeout=timeout,
            what=f"{quiet:g} s without a Workload write",
            interval=0.5,
        )
        return self.last_event_at

    def close(self) -> None:
        self._closing = True
        # End the stream under the reader first and let it return; closing the connection
        # while the thread is inside a read pulls the file out from under it.
        sock = self._conn.sock
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
        self._thread.join(timeout=10)
        self._conn.close()


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a live process so far (Linux /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def server_metrics(server: ClusterModeServer) -> dict[str, float]:
    """Our server's /metrics (as the admin, through the front proxy): `name{labels}` →
    value, for the queuescope_ series."""
    body = server.as_front_proxy("/metrics", ADMIN_USER, ADMIN_GROUPS).body.decode()
    found: dict[str, float] = {}
    for line in body.splitlines():
        if line.startswith("queuescope_"):
            name, _, value = line.rpartition(" ")
            found[name] = float(value)
    return found


def writes_made(metrics: dict[str, float]) -> float:
    return metrics.get('queuescope_workload_status_writes_total{result="written"}', 0.0)


def wait_until_quiet(
    server: ClusterModeServer, watch: WorkloadWatch, *, quiet: float, timeout: float
) -> float:
    """Wait until the leading server has nothing left to decide or write (its engine
    idle, its write backlog empty) and no Workload write came for `quiet` seconds; the
    instant it went quiet (the later of its last write and its first idle poll)."""
    idle_since: list[float] = []

    def probe() -> float | None:
        m = server_metrics(server)
        idle = (
            m.get("queuescope_leader") == 1.0
            and m.get("queuescope_engine_idle") == 1.0
            and m.get("queuescope_workload_status_backlog") == 0.0
        )
        if not idle:
            idle_since.clear()
            return None
        if not idle_since:
            idle_since.append(time.monotonic())
        if time.monotonic() - max(watch.last_event_at, idle_since[0]) < quiet:
            return None
        return max(watch.last_event_at, idle_since[0])

    return wait_for(probe, timeout=timeout, what="the server to go quiet", interval=0.5)
