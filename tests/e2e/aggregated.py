"""Our server behind the real kube-apiserver's aggregation layer: the one place that
starts it, registers it, and talks to it (docs/cluster.md#real-cluster-tests).

kube-apiserver reaches our server through an ExternalName Service (`localhost`, routing
off: docs/cluster.md#the-aggregation-layer, #real-cluster-tests) and trusts it through `caBundle` =
the CA of a cluster certificate folder made by `visibility_server.certs` (`--cert-dir`, rotated by
E8/E9), never `insecureSkipTLSVerify`.

The server runs as `queuescope serve --embedded` for now; cluster mode (`serve
--kubeconfig`) replaces `VisibilityServer.command` and `VisibilityServer.apply_objects`,
and nothing else here or in the tests has to know.
"""

from __future__ import annotations

import base64
import contextlib
import functools
import http.client
import json
import os
import signal
import socket
import ssl
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from cryptography import x509

from tests.e2e.harness import (
    FRONT_PROXY_CLIENT,
    ControlPlane,
    HarnessError,
    ManagedProcess,
    Response,
    User,
    free_port,
    wait_for,
)
from visibility_server.certs import (
    APISERVICE_NAMES,
    CertDir,
    ServiceName,
    generate_cert_dir,
    required_service_san,
)

GROUP = "visibility.kueue.x-k8s.io"
VERSIONS = ("v1beta1", "v1beta2")
NAMESPACE = "queuescope-system"
SERVICE = "queuescope-visibility"
# The TLS server name kube-apiserver sends as SNI and verifies
# (docs/cluster.md#the-aggregation-layer).
SERVER_NAME = required_service_san(NAMESPACE, SERVICE)
REPO = Path(__file__).resolve().parents[2]
SAMPLE_RBAC = REPO / "manifests" / "samples" / "70-rbac.yaml"
AVAILABLE_SECONDS = 90.0
SERVER_READY_SECONDS = 60.0
DISCOVERY_V2 = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"

# cq-a has 1 CPU; every workload asks for 2, so nothing is ever admitted and the pending
# order is fixed: priority, then creation time. cq-b starts empty (for tests that add to
# a queue without moving cq-a's positions).
QUEUES = """\
apiVersion: kueue.x-k8s.io/v1beta1
kind: ResourceFlavor
metadata: {name: default}
"""
CLUSTER_QUEUE = """\
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: ClusterQueue
metadata: {{name: {name}}}
spec:
  namespaceSelector: {{}}
  resourceGroups:
  - coveredResources: [cpu]
    flavors: [{{name: default, resources: [{{name: cpu, nominalQuota: "1"}}]}}]
"""
LOCAL_QUEUE = """\
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: LocalQueue
metadata: {{name: {name}, namespace: {ns}}}
spec: {{clusterQueue: {cq}}}
"""
QUEUES += "".join(CLUSTER_QUEUE.format(name=name) for name in ("cq-a", "cq-b"))
QUEUES += "".join(
    LOCAL_QUEUE.format(ns=ns, name=name, cq=cq)
    for ns, name, cq in (
        ("team-a", "lq-a", "cq-a"),
        ("team-a", "lq-b", "cq-a"),
        ("team-b", "lq-c", "cq-a"),
        ("team-b", "lq-d", "cq-b"),
    )
)

WORKLOAD = """\
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: Workload
metadata: {{name: {name}, namespace: {ns}, creationTimestamp: "2026-01-01T00:00:0{sec}Z"}}
spec:
  queueName: {queue}
  priority: {priority}
  podSets:
  - name: main
    count: 1
    template:
      spec:
        containers:
        - name: c
          resources: {{requests: {{cpu: "2"}}}}
"""

# (namespace, name, LocalQueue, priority)
WORKLOADS = [
    ("team-a", "a-high", "lq-a", 100),
    ("team-b", "b-high", "lq-c", 100),
    ("team-a", "a-low", "lq-a", 50),
    ("team-b", "b-low", "lq-c", 50),
]
# (namespace, name, positionInClusterQueue, positionInLocalQueue)
CLUSTER_QUEUE_ORDER = [
    ("team-a", "a-high", 0, 0),
    ("team-b", "b-high", 1, 0),
    ("team-a", "a-low", 2, 1),
    ("team-b", "b-low", 3, 1),
]

# bob may read team-b's queues as far as kube-apiserver knows; our manifests say nothing
# about him, so our own authorization must deny him.
BOB_ONLY_IN_KUBE_APISERVER = """\
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: bob-sees-team-b-queues, namespace: team-b}
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: ClusterRole
  name: queuescope-localqueue-viewer
subjects:
- {apiGroup: rbac.authorization.k8s.io, kind: User, name: bob}
"""


def cq_path(version: str, name: str = "cq-a") -> str:
    return f"/apis/{GROUP}/{version}/clusterqueues/{name}/pendingworkloads"


def lq_path(version: str, namespace: str, name: str) -> str:
    return f"/apis/{GROUP}/{version}/namespaces/{namespace}/localqueues/{name}/pendingworkloads"


def positions(doc: dict[str, Any]) -> list[tuple[str, str, int, int]]:
    return [
        (
            item["metadata"]["namespace"],
            item["metadata"]["name"],
            item["positionInClusterQueue"],
            item["positionInLocalQueue"],
        )
        for item in doc["items"]
    ]


def workload_manifest(ns: str, name: str, queue: str, priority: int, sec: int = 0) -> str:
    return WORKLOAD.format(name=name, ns=ns, queue=queue, priority=priority, sec=sec)


def _cluster_objects(port: int, ca_bundle: bytes) -> str:
    """What kube-apiserver needs: namespaces, the ExternalName Service, both APIServices."""
    bundle = base64.b64encode(ca_bundle).decode()
    docs = [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}
        for name in (NAMESPACE, "team-a", "team-b")
    ]
    docs.append(
        {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": SERVICE, "namespace": NAMESPACE},
            # ExternalName with aggregator routing off: kube-apiserver dials
            # localhost:<APIService port>; Endpoints would refuse a loopback address.
            "spec": {"type": "ExternalName", "externalName": "localhost"},
        }
    )
    for version, priority in (("v1beta2", 100), ("v1beta1", 90)):
        docs.append(
            {
                "apiVersion": "apiregistration.k8s.io/v1",
                "kind": "APIService",
                "metadata": {"name": f"{version}.{GROUP}"},
                "spec": {
                    "group": GROUP,
                    "version": version,
                    "groupPriorityMinimum": 100,
                    "versionPriority": priority,
                    "service": {"name": SERVICE, "namespace": NAMESPACE, "port": port},
                    "caBundle": bundle,
                },
            }
        )
    return "\n---\n".join(json.dumps(doc) for doc in docs)


@dataclass
class VisibilityServer:
    """Our server process, its files and its port. `kill` and `start` again keep all
    three, as a restarted pod behind the same Service would."""

    plane: ControlPlane
    root: Path
    port: int = field(default_factory=free_port)
    process: ManagedProcess | None = None
    ready_seconds: float = SERVER_READY_SECONDS  # the initial sync of 100k objects takes longer

    @property
    def manifests(self) -> Path:
        return self.root / "manifests"

    @property
    def state(self) -> Path:
        return self.root / "state"

    @property
    def certs(self) -> CertDir:
        """The serving certificate folder (`--cert-dir`), in `queuescope certs` layout."""
        return CertDir(self.root / "certs")

    def prepare(self) -> None:
        """First start only: the certificates and the fixture objects."""
        generate_cert_dir(self.certs.root, service=ServiceName(NAMESPACE, SERVICE), now=_now())
        self.manifests.mkdir()
        self.apply_objects("queues", QUEUES)
        self.apply_workloads(
            [
                workload_manifest(ns, name, queue, priority, index)
                for index, (ns, name, queue, priority) in enumerate(WORKLOADS)
            ]
        )
        self.apply_objects("rbac", SAMPLE_RBAC.read_text())

    def apply_workloads(self, manifests: list[str]) -> None:
        """The fixture Workloads, in creation order (their creationTimestamps are
        one second apart in the manifests)."""
        self.apply_objects("workloads", "".join(manifests))

    def apply_objects(self, name: str, manifest: str) -> None:
        """Create or update Kueue and RBAC objects the server reads; `name` groups them
        (applying the same name again replaces the group). Embedded mode: a manifest
        file in the watched folder, picked up by the running server too."""
        target = self.manifests / f"{name}.yaml"
        partial = target.with_suffix(".partial")  # not a manifest suffix: never half-read
        partial.write_text(manifest)
        partial.replace(target)

    def command(self) -> list[str]:
        return [
            sys.executable,
            "-m",
            "queuescope.cli",
            "serve",
            "--embedded",
            str(self.manifests),
            "--state-dir",
            str(self.state),
            "--cert-dir",
            str(self.certs.root),
            "--listen",
            f"127.0.0.1:{self.port}",
            "--requestheader-client-ca-file",
            str(self.plane.front_proxy_ca_file),
            "--requestheader-allowed-names",
            FRONT_PROXY_CLIENT,
        ]

    def environment(self) -> dict[str, str]:
        return {**os.environ, "PYTHONUNBUFFERED": "1"}

    def start(self) -> None:
        self.process = ManagedProcess(
            "queuescope-serve",
            self.command(),
            self.root / "serve.log",
            env=self.environment(),
        )
        self.process.start()
        wait_for(
            lambda: True if self.get_status("/readyz") == 200 else None,
            timeout=self.ready_seconds,
            what="queuescope serve /readyz",
            alive=self.check_alive,
        )

    def kill(self) -> None:
        """SIGKILL: no graceful shutdown, sockets closed by the kernel."""
        assert self.process is not None
        self.process.stop(signal.SIGKILL)

    def stop(self) -> int | None:
        """SIGTERM, then SIGKILL if it has not exited in time; the exit code."""
        if self.process is not None:
            return self.process.stop()
        return None

    def check_alive(self) -> None:
        if self.process is not None:
            self.process.check_alive()

    # -- straight to our server --------------------------------------------------------

    def _context(self, ca_pem: bytes | None = None) -> ssl.SSLContext:
        return ssl.create_default_context(
            cadata=(ca_pem or self.certs.ca_cert.read_bytes()).decode()
        )

    def get_status(self, path: str) -> int:
        """GET straight to our server, anonymously, trusting its CA."""
        request = urllib.request.Request(f"https://127.0.0.1:{self.port}{path}")
        try:
            with urllib.request.urlopen(request, context=self._context(), timeout=5) as response:
                return int(response.status)
        except urllib.error.HTTPError as err:
            return int(err.code)

    def as_front_proxy(
        self,
        path: str,
        user: str,
        groups: tuple[str, ...],
        headers: Mapping[str, str] | None = None,
    ) -> Response:
        """GET straight to our server the way kube-apiserver sends it: the front-proxy
        client certificate, the identity in X-Remote-* headers."""
        context = self._context()
        certs = self.plane.certs
        context.load_cert_chain(
            certs.path("front-proxy-client.crt"), certs.path("front-proxy-client.key")
        )
        conn = http.client.HTTPSConnection("127.0.0.1", self.port, context=context, timeout=10)
        try:
            conn.putrequest("GET", path, skip_accept_encoding=True)
            conn.putheader("X-Remote-User", user)
            for group in groups:
                conn.putheader("X-Remote-Group", group)
            for name, value in (headers or {}).items():
                conn.putheader(name, value)
            conn.endheaders()
            return Response.read_from(conn.getresponse())
        finally:
            conn.close()

    def served_certificate(self, trusted_pem: bytes) -> x509.Certificate:
        """The certificate a TLS client sees when it asks for kube-apiserver's server
        name (SNI) and trusts only `trusted_pem`: verification failing raises."""
        context = self._context(trusted_pem)
        with (
            socket.create_connection(("127.0.0.1", self.port), timeout=10) as raw,
            context.wrap_socket(raw, server_hostname=SERVER_NAME) as tls,
        ):
            der = tls.getpeercert(binary_form=True)
        assert der is not None
        return x509.load_der_x509_certificate(der)


@dataclass
class Aggregated:
    """A started server registered with kube-apiserver, and the test users."""

    plane: ControlPlane
    server: VisibilityServer
    alice: User
    bob: User
    carol: User

    def register(self, ca_bundle: bytes) -> None:
        plane = self.plane
        plane.apply(_cluster_objects(self.server.port, ca_bundle))
        # The same user-facing RBAC as the server's, so that kube-apiserver's own
        # authorization lets the same callers through.
        plane.apply(SAMPLE_RBAC.read_text())
        plane.apply(BOB_ONLY_IN_KUBE_APISERVER)

    def set_ca_bundle(self, ca_bundle: bytes) -> None:
        patch = json.dumps({"spec": {"caBundle": base64.b64encode(ca_bundle).decode()}})
        for name in APISERVICE_NAMES:
            self.plane.kubectl("patch", "apiservice", name, "--type=merge", "-p", patch)

    def apiservice_condition(self, version: str) -> dict[str, Any] | None:
        obj = self.plane.get_json("apiservice", f"{version}.{GROUP}")
        return available_condition(obj)

    def wait_available(self, timeout: float = AVAILABLE_SECONDS) -> None:
        for version in VERSIONS:
            try:
                wait_for(
                    functools.partial(self._available, version),
                    timeout=timeout,
                    what=f"APIService {version}.{GROUP} Available=True",
                    interval=0.5,
                    alive=self.server.check_alive,
                )
            except HarnessError as err:
                # The condition's message carries kube-apiserver's reason
                # (docs/operations.md#troubleshooting).
                raise HarnessError(
                    f"{err}; condition: {self.apiservice_condition(version)}"
                ) from err

    def _available(self, version: str) -> dict[str, Any] | None:
        condition = self.apiservice_condition(version)
        return condition if condition is not None and condition.get("status") == "True" else None

    def get(
        self, path: str, user: User | None = None, headers: Mapping[str, str] | None = None
    ) -> Response:
        """GET through kube-apiserver (default: as the admin)."""
        return self.plane.request(path, user or self.plane.admin, headers=headers)

    def discovery_freshness(self) -> dict[str, str]:
        """Our group-versions in kube-apiserver's aggregated discovery: version →
        freshness (absent means Current)."""
        response = self.get("/apis", headers={"Accept": DISCOVERY_V2})
        if response.status != 200:
            raise HarnessError(f"/apis answered {response.status}: {response.body[:300]!r}")
        for group in response.json()["items"]:
            if group["metadata"]["name"] == GROUP:
                return {v["version"]: v.get("freshness", "Current") for v in group["versions"]}
        return {}


def available_condition(apiservice: Mapping[str, Any]) -> dict[str, Any] | None:
    for condition in apiservice.get("status", {}).get("conditions", []):
        if condition.get("type") == "Available":
            return dict(condition)
    return None


@contextlib.contextmanager
def aggregated_server(
    plane: ControlPlane, root: Path, server_type: type[VisibilityServer] = VisibilityServer
) -> Iterator[Aggregated]:
    """Start our server, register it with both APIServices, wait for Available=True;
    on exit delete the APIServices first (docs/cluster.md#install-upgrade-and-uninstall: later tests
    share this kube-apiserver, and a dangling APIService makes its discovery stale), then stop.
    `server_type` picks the mode: the scenario fixtures run cluster mode
    (`tests.e2e.cluster.ClusterModeServer`), as docs/cluster.md#real-cluster-tests describes."""
    server = server_type(plane, root)
    server.prepare()
    env = Aggregated(
        plane=plane,
        server=server,
        alice=plane.user("alice", ("team-a-devs",)),
        bob=plane.user("bob", ("team-b-devs",)),
        carol=plane.user("carol", ("batch-admins",)),
    )
    try:
        server.start()
        env.register(server.certs.ca_cert.read_bytes())
        env.wait_available()
        yield env
    finally:
        plane.kubectl(
            "delete",
            "apiservice",
            *(f"{version}.{GROUP}" for version in VERSIONS),
            "--ignore-not-found",
            check=False,
        )
        server.stop()


def _now() -> datetime:
    return datetime.now(UTC)


class AvailabilityWatch:
    """Every `Available` condition kube-apiserver writes on our APIServices while the
    watch is open. A watch, not polling: a flap shorter than a poll interval would go
    unseen. `observed` holds (APIService, status, reason, message) in order, starting
    with the state at the time the watch opened."""

    def __init__(self, plane: ControlPlane) -> None:
        self.plane = plane
        self.observed: list[tuple[str, str, str, str]] = []
        self.error: BaseException | None = None
        self._conn: http.client.HTTPSConnection | None = None
        self._thread: threading.Thread | None = None
        self._stopping = threading.Event()
        self._lock = threading.Lock()

    def __enter__(self) -> AvailabilityWatch:
        listing = self.plane.request(
            "/apis/apiregistration.k8s.io/v1/apiservices", self.plane.admin
        ).json()
        for item in listing["items"]:
            self._record(item)
        mine = [name for name, *_ in self.observed]
        if sorted(mine) != sorted(APISERVICE_NAMES):
            raise HarnessError(f"expected both APIServices with conditions, got {mine}")
        version = listing["metadata"]["resourceVersion"]
        self._conn = self.plane.connection(self.plane.admin, timeout=None)
        self._conn.request(
            "GET",
            "/apis/apiregistration.k8s.io/v1/apiservices?watch=1"
            f"&resourceVersion={version}&timeoutSeconds=1800",
        )
        response = self._conn.getresponse()
        if response.status != 200:
            raise HarnessError(f"watch answered {response.status}: {response.read()[:300]!r}")
        self._thread = threading.Thread(target=self._follow, args=(response,), daemon=True)
        self._thread.start()
        return self

    def _record(self, apiservice: Mapping[str, Any]) -> None:
        name = apiservice["metadata"]["name"]
        if name not in APISERVICE_NAMES:
            return
        condition = available_condition(apiservice) or {}
        with self._lock:
            self.observed.append(
                (
                    name,
                    str(condition.get("status")),
                    str(condition.get("reason")),
                    str(condition.get("message", "")),
                )
            )

    def _follow(self, response: http.client.HTTPResponse) -> None:
        try:
            while True:
                line = response.readline()
                if not line:
                    raise HarnessError("the APIService watch ended early")
                event = json.loads(line)
                if event["type"] == "ERROR":
                    raise HarnessError(f"the APIService watch failed: {event['object']}")
                self._record(event["object"])
        except BaseException as err:
            if not self._stopping.is_set():
                self.error = err

    def __exit__(self, *exc: object) -> None:
        self._stopping.set()
        if self._conn is not None and self._conn.sock is not None:
            # The raw socket, not the TLS layer: the reader thread is inside it.
            with contextlib.suppress(OSError):
                socket.socket.shutdown(self._conn.sock, socket.SHUT_RDWR)
        if self._thread is not None:
            self._thread.join(timeout=10)
        if self._conn is not None:
            self._conn.close()

    def not_available(self) -> list[tuple[str, str, str, str]]:
        with self._lock:
            return [seen for seen in self.observed if seen[1] != "True"]


@dataclass(frozen=True)
class Polled:
    at: float  # monotonic
    status: int
    body: bytes


class Poller:
    """GET `path` through kube-apiserver at `rate` requests per second in a thread,
    recording every answer (a connection error is recorded as status 0)."""

    def __init__(self, env: Aggregated, path: str, rate: float = 4.0) -> None:
        self.env = env
        self.path = path
        self.interval = 1.0 / rate
        self.results: list[Polled] = []
        self.started = 0.0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._lock = threading.Lock()

    def __enter__(self) -> Poller:
        self.started = time.monotonic()
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=60)

    def _run(self) -> None:
        due = self.started
        while not self._stop.is_set():
            try:
                response = self.env.get(self.path)
                result = Polled(time.monotonic(), response.status, response.body[:300])
            except OSError as err:
                result = Polled(time.monotonic(), 0, repr(err).encode())
            with self._lock:
                self.results.append(result)
            due += self.interval
            self._stop.wait(max(0.0, due - time.monotonic()))

    def snapshot(self) -> list[Polled]:
        with self._lock:
            return list(self.results)

    def answered_since(self, since: float) -> int:
        """How many answers arrived after the monotonic instant `since`."""
        return sum(1 for r in self.snapshot() if r.at > since)

    def failures(self) -> list[Polled]:
        return [r for r in self.snapshot() if r.status != 200]
