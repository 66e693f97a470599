"""A real control plane for the e2e suite (docs/cluster.md#real-cluster-tests): etcd and
kube-apiserver on loopback, free ports, certificates from our own `visibility_server.certs`, the
aggregation-layer flags, an admin kubeconfig, and bounded teardown.

Nothing here knows about queuescope's API; the tests register our server themselves.
"""

from __future__ import annotations

import base64
import contextlib
import ctypes
import fcntl
import functools
import http.client
import json
import os
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Any, TypeVar

from cryptography.hazmat.primitives import serialization

from visibility_server.certs import (
    PUBLIC_MODE,
    SECRET_MODE,
    CertifiedKey,
    create_ca,
    generate_key,
    issue_client_cert,
    issue_serving_cert,
    render_kubeconfig,
    write_atomic,
    write_certified_key,
)

T = TypeVar("T")

SERVICE_CLUSTER_IP_RANGE = "10.0.0.0/24"
SERVICE_ACCOUNT_ISSUER = "https://kubernetes.default.svc.cluster.local"
FRONT_PROXY_CLIENT = "front-proxy-client"
ADMIN_USER = "e2e-admin"
ADMIN_GROUPS = ("system:masters",)
ETCD_READY_SECONDS = 60.0
APISERVER_READY_SECONDS = 120.0
STOP_SECONDS = 20.0
KILL_SECONDS = 10.0
LOG_TAIL_LINES = 60
ETCD_DIR_PREFIX = "queuescope-e2e-etcd-"
STALE_AFTER_SECONDS = 60.0

# Every log file of the session, by label: attached to the report of a failed test.
LOG_FILES: dict[str, Path] = {}


class HarnessError(Exception):
    """The control plane (or a process of the test) did not come up or misbehaved."""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def tail(path: Path, lines: int = LOG_TAIL_LINES) -> str:
    try:
        text = path.read_text(errors="replace").splitlines()
    except OSError as err:
        return f"(cannot read {path}: {err})"
    return "\n".join(text[-lines:])


def wait_for(
    probe: Callable[[], T | None],
    *,
    timeout: float,
    what: str,
    interval: float = 0.25,
    alive: Callable[[], None] | None = None,
) -> T:
    """Call `probe` until it returns something other than None; HarnessError on timeout.

    `alive` is called between attempts and raises when waiting is pointless (the process
    we wait for has exited). Exceptions of `probe` count as "not yet" and the last one is
    reported on timeout.
    """
    deadline = time.monotonic() + timeout
    last: BaseException | None = None
    while True:
        try:
            result = probe()
        except Exception as err:
            last = err
        else:
            if result is not None:
                return result
        if alive is not None:
            alive()
        if time.monotonic() >= deadline:
            detail = f"; last error: {last!r}" if last is not None else ""
            raise HarnessError(f"timed out after {timeout:.0f}s waiting for {what}{detail}")
        time.sleep(interval)


def _die_with_parent() -> None:
    # Linux: the child is killed when the pytest process dies, even by SIGKILL, so a
    # crashed session leaves no etcd or kube-apiserver behind holding ports and memory.
    # SIGKILL, not SIGTERM: kube-apiserver's graceful shutdown hangs once etcd is gone.
    with contextlib.suppress(Exception):
        libc = ctypes.CDLL(None, use_errno=True)
        pr_set_pdeathsig = 1
        libc.prctl(pr_set_pdeathsig, signal.SIGKILL)


@dataclass
class ManagedProcess:
    """A child process whose output goes to a log file kept after the session."""

    label: str
    argv: Sequence[str]
    log_path: Path
    env: Mapping[str, str] | None = None
    proc: subprocess.Popen[bytes] | None = field(default=None, init=False)

    def start(self) -> None:
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        LOG_FILES[self.label] = self.log_path
        with self.log_path.open("ab") as log:
            log.write(f"$ {' '.join(self.argv)}\n".encode())
            log.flush()
            self.proc = subprocess.Popen(
                list(self.argv),
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                env=dict(self.env) if self.env is not None else None,
                preexec_fn=_die_with_parent if sys.platform == "linux" else None,  # noqa: PLW1509
            )

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def check_alive(self) -> None:
        if self.proc is not None and self.proc.poll() is not None:
            raise HarnessError(
                f"{self.label} exited with {self.proc.returncode}; last lines of "
                f"{self.log_path}:\n{tail(self.log_path)}"
            )

    def stop(self, sig: int = signal.SIGTERM) -> int | None:
        """Signal, wait at most STOP_SECONDS, then SIGKILL and wait KILL_SECONDS."""
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                self.proc.send_signal(sig)
            try:
                self.proc.wait(timeout=STOP_SECONDS)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                with contextlib.suppress(subprocess.TimeoutExpired):
                    self.proc.wait(timeout=KILL_SECONDS)
        return self.proc.returncode


@dataclass(frozen=True)
class User:
    """A client-certificate identity of the cluster with its kubeconfig."""

    name: str
    groups: tuple[str, ...]
    cert: Path
    key: Path
    kubeconfig: Path


@dataclass(frozen=True)
class Response:
    status: int
    headers: Mapping[str, str]
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)

    @classmethod
    def read_from(cls, response: http.client.HTTPResponse) -> Response:
        """The whole answer, header names in lower case."""
        return cls(
            response.status,
            {k.lower(): v for k, v in response.getheaders()},
            response.read(),
        )


@dataclass
class ClusterCerts:
    """The certificates of docs/cluster.md#real-cluster-tests, written under `root`."""

    root: Path
    client_ca: CertifiedKey
    cluster_ca: CertifiedKey
    front_proxy_ca: CertifiedKey

    def path(self, name: str) -> Path:
        return self.root / name

    @classmethod
    def generate(cls, root: Path, now: datetime) -> ClusterCerts:
        root.mkdir(parents=True, exist_ok=True)
        cluster_ca = create_ca(now=now, common_name="e2e-cluster-ca")
        client_ca = create_ca(now=now, common_name="e2e-client-ca")
        # Distinct from the client CA: a client certificate must never pass as the proxy.
        front_proxy_ca = create_ca(now=now, common_name="e2e-front-proxy-ca")
        kas = issue_serving_cert(
            cluster_ca, namespace="default", service="kubernetes", now=now, extra_sans=("10.0.0.1",)
        )
        # CN=front-proxy-client, clientAuth, no SAN: kubeadm's shape.
        proxy_client = issue_client_cert(front_proxy_ca, user=FRONT_PROXY_CLIENT, now=now)
        for name, pair in (
            ("cluster-ca", cluster_ca),
            ("client-ca", client_ca),
            ("front-proxy-ca", front_proxy_ca),
            ("kas", kas),
            ("front-proxy-client", proxy_client),
        ):
            write_certified_key(pair, root / f"{name}.crt", root / f"{name}.key")
        sa_key = generate_key("ecdsa-p256")
        write_atomic(
            root / "sa.key",
            sa_key.private_bytes(
                serialization.Encoding.PEM,
                serialization.PrivateFormat.PKCS8,
                serialization.NoEncryption(),
            ),
            mode=SECRET_MODE,
        )
        write_atomic(
            root / "sa.pub",
            sa_key.public_key().public_bytes(
                serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
            ),
            mode=PUBLIC_MODE,
        )
        return cls(root, client_ca, cluster_ca, front_proxy_ca)


class ControlPlane:
    """etcd + kube-apiserver for one test session."""

    def __init__(self, *, etcd: Path, kube_apiserver: Path, kubectl: Path, workdir: Path) -> None:
        self.etcd_binary = etcd
        self.kube_apiserver_binary = kube_apiserver
        self.kubectl_binary = kubectl
        self.workdir = workdir
        self.certs_dir = workdir / "certs"
        self.logs_dir = workdir / "logs"
        self.users_dir = workdir / "users"
        self.kubectl_cache = workdir / "kubectl-cache"
        self._etcd: ManagedProcess | None = None
        self._apiserver: ManagedProcess | None = None
        self._etcd_data: Path | None = None
        self._etcd_lock: IO[str] | None = None
        self._certs: ClusterCerts | None = None
        self._users: dict[str, User] = {}
        self.port = 0
        self.etcd_port = 0
        self.startup_seconds = 0.0

    # -- lifecycle -----------------------------------------------------------------------

    def start(self) -> None:
        started = time.monotonic()
        now = datetime.now(UTC)
        self._certs = ClusterCerts.generate(self.certs_dir, now)
        self._start_etcd()
        self._start_apiserver()
        self.startup_seconds = time.monotonic() - started

    def stop(self) -> None:
        for process in (self._apiserver, self._etcd):
            if process is not None:
                process.stop()
        if self._etcd_data is not None:
            shutil.rmtree(self._etcd_data, ignore_errors=True)
            self._etcd_data = None
        if self._etcd_lock is not None:
            self._etcd_lock.close()
            self._etcd_lock = None

    def _start_etcd(self) -> None:
        # /dev/shm when there is one: etcd fsyncs every write, and a tmpfs makes that free.
        shm = Path("/dev/shm")
        base = shm if shm.is_dir() and os.access(shm, os.W_OK) else self.workdir
        _sweep_stale_etcd_dirs(base)
        self._etcd_data = Path(tempfile.mkdtemp(prefix=ETCD_DIR_PREFIX, dir=base))
        # Held for the session: a folder whose lock nobody holds belongs to a session
        # that was killed, and the next one removes it (memory, when on /dev/shm).
        self._etcd_lock = (self._etcd_data / ".lock").open("w")
        fcntl.flock(self._etcd_lock, fcntl.LOCK_EX)
        last: HarnessError | None = None
        for attempt in range(3):  # a free port can be taken between probe and bind
            client, peer = free_port(), free_port()
            data = self._etcd_data / f"member-{attempt}"
            process = ManagedProcess(
                "etcd",
                [
                    str(self.etcd_binary),
                    "--name=default",
                    f"--data-dir={data}",
                    f"--listen-client-urls=http://127.0.0.1:{client}",
                    f"--advertise-client-urls=http://127.0.0.1:{client}",
                    f"--listen-peer-urls=http://127.0.0.1:{peer}",
                    f"--initial-advertise-peer-urls=http://127.0.0.1:{peer}",
                    f"--initial-cluster=default=http://127.0.0.1:{peer}",
                    "--initial-cluster-state=new",
                    "--log-level=warn",
                ],
                self.logs_dir / "etcd.log",
            )
            process.start()
            try:
                wait_for(
                    functools.partial(_etcd_healthy, client),
                    timeout=ETCD_READY_SECONDS,
                    what="etcd /health",
                    alive=process.check_alive,
                )
            except HarnessError as err:
                process.stop()
                last = err
                if "address already in use" in tail(process.log_path):
                    continue
                raise
            self._etcd, self.etcd_port = process, client
            return
        raise HarnessError(f"etcd did not start: {last}")

    def apiserver_args(self, port: int) -> list[str]:
        """kube-apiserver's flags, as docs/cluster.md#real-cluster-tests lists them."""
        c = self.certs_dir
        return [
            f"--etcd-servers=http://127.0.0.1:{self.etcd_port}",
            # serving
            "--bind-address=127.0.0.1",
            "--advertise-address=127.0.0.1",
            f"--secure-port={port}",
            f"--tls-cert-file={c / 'kas.crt'}",
            f"--tls-private-key-file={c / 'kas.key'}",
            f"--cert-dir={self.workdir / 'kas'}",
            # client authentication (anonymous auth stays at its default)
            f"--client-ca-file={c / 'client-ca.crt'}",
            # service accounts
            f"--service-account-issuer={SERVICE_ACCOUNT_ISSUER}",
            f"--service-account-key-file={c / 'sa.pub'}",
            f"--service-account-signing-key-file={c / 'sa.key'}",
            f"--service-cluster-ip-range={SERVICE_CLUSTER_IP_RANGE}",
            # authorization
            "--authorization-mode=RBAC",
            # aggregation layer
            f"--requestheader-client-ca-file={c / 'front-proxy-ca.crt'}",
            f"--requestheader-allowed-names={FRONT_PROXY_CLIENT}",
            "--requestheader-username-headers=X-Remote-User",
            "--requestheader-group-headers=X-Remote-Group",
            "--requestheader-extra-headers-prefix=X-Remote-Extra-",
            "--requestheader-uid-headers=X-Remote-Uid",
            f"--proxy-client-cert-file={c / 'front-proxy-client.crt'}",
            f"--proxy-client-key-file={c / 'front-proxy-client.key'}",
            "--enable-aggregator-routing=false",
            # no controller-manager runs, so nothing would create ServiceAccount tokens
            "--disable-admission-plugins=ServiceAccount",
            "--profiling=false",
            "--v=2",
        ]

    def _start_apiserver(self) -> None:
        last: HarnessError | None = None
        for _ in range(3):
            port = free_port()
            process = ManagedProcess(
                "kube-apiserver",
                [str(self.kube_apiserver_binary), *self.apiserver_args(port)],
                self.logs_dir / "kube-apiserver.log",
            )
            process.start()
            self.port = port
            self._users.clear()  # kubeconfigs name the port
            try:
                wait_for(
                    self._ready,
                    timeout=APISERVER_READY_SECONDS,
                    what="kube-apiserver /readyz",
                    interval=0.5,
                    alive=process.check_alive,
                )
            except HarnessError as err:
                process.stop()
                last = err
                if "address already in use" in tail(process.log_path):
                    continue
                raise
            self._apiserver = process
            return
        raise HarnessError(f"kube-apiserver did not start: {last}")

    def restart_apiserver(self) -> None:
        """Stop kube-apiserver (SIGTERM) and start it again on the same port, as a
        control-plane upgrade or crash would: clients keep their URL."""
        assert self._apiserver is not None, "start() first"
        self._apiserver.stop()
        process = ManagedProcess(
            "kube-apiserver",
            [str(self.kube_apiserver_binary), *self.apiserver_args(self.port)],
            self.logs_dir / "kube-apiserver.log",
        )
        process.start()
        wait_for(
            self._ready,
            timeout=APISERVER_READY_SECONDS,
            what="kube-apiserver /readyz after a restart",
            interval=0.5,
            alive=process.check_alive,
        )
        self._apiserver = process

    def compact_etcd(self) -> int:
        """Compact etcd's history up to its current revision (etcd's JSON gateway), as
        kube-apiserver does every few minutes: a watch resuming from any older
        resourceVersion then gets 410 Gone. Returns the revision."""

        def post(path: str, body: dict[str, Any]) -> Any:
            request = urllib.request.Request(
                f"http://127.0.0.1:{self.etcd_port}{path}",
                data=json.dumps(body).encode(),
                headers={"Content-Type": "application/json"},
            )
            with urllib.request.urlopen(request, timeout=10) as response:
                return json.loads(response.read())

        key = base64.b64encode(b"/").decode()
        revision = int(post("/v3/kv/range", {"key": key, "limit": 1})["header"]["revision"])
        post("/v3/kv/compaction", {"revision": str(revision), "physical": True})
        return revision

    def _ready(self) -> bool | None:
        response = self.request("/readyz", self.admin, timeout=5)
        return True if response.status == 200 else None

    def check_alive(self) -> None:
        for process in (self._etcd, self._apiserver):
            if process is not None:
                process.check_alive()

    # -- identities ----------------------------------------------------------------------

    @property
    def admin(self) -> User:
        """CN=e2e-admin, O=system:masters."""
        return self.user(ADMIN_USER, ADMIN_GROUPS)

    @property
    def url(self) -> str:
        return f"https://127.0.0.1:{self.port}"

    @property
    def certs(self) -> ClusterCerts:
        assert self._certs is not None, "start() first"
        return self._certs

    @property
    def front_proxy_ca_file(self) -> Path:
        return self.certs.path("front-proxy-ca.crt")

    @property
    def cluster_ca_file(self) -> Path:
        return self.certs.path("cluster-ca.crt")

    def user(self, name: str, groups: Sequence[str] = ()) -> User:
        """A client certificate from the client CA (CN=name, O=groups) and its kubeconfig."""
        known = self._users.get(name)
        if known is not None:
            if known.groups != tuple(groups):
                raise HarnessError(f"user {name} exists with groups {known.groups}")
            return known
        self.users_dir.mkdir(parents=True, exist_ok=True)
        pair = issue_client_cert(
            self.certs.client_ca, user=name, groups=tuple(groups), now=datetime.now(UTC)
        )
        cert, key = self.users_dir / f"{name}.crt", self.users_dir / f"{name}.key"
        write_certified_key(pair, cert, key)
        kubeconfig = self.users_dir / f"{name}.kubeconfig"
        write_atomic(
            kubeconfig,
            render_kubeconfig(
                server=self.url,
                ca_pem=self.certs.cluster_ca.cert_pem,
                client=pair,
                user=name,
                cluster="e2e",
            ),
            mode=SECRET_MODE,
        )
        found = User(name, tuple(groups), cert, key, kubeconfig)
        self._users[name] = found
        return found

    # -- clients -------------------------------------------------------------------------

    def connection(
        self, user: User | None = None, *, timeout: float | None = 30
    ) -> http.client.HTTPSConnection:
        """An HTTPS connection to kube-apiserver as `user` (None: anonymous), trusting the
        cluster CA; `timeout=None` for a watch that blocks until closed."""
        context = ssl.create_default_context(cafile=str(self.cluster_ca_file))
        if user is not None:
            context.load_cert_chain(user.cert, user.key)
        return http.client.HTTPSConnection("127.0.0.1", self.port, context=context, timeout=timeout)

    def request(
        self,
        path: str,
        user: User | None = None,
        *,
        method: str = "GET",
        headers: Mapping[str, str] | None = None,
        body: bytes | None = None,
        timeout: float = 30,
    ) -> Response:
        """One HTTPS request to kube-apiserver as `user` (None: anonymous)."""
        conn = self.connection(user, timeout=timeout)
        try:
            conn.request(method, path, body=body, headers=dict(headers or {}))
            return Response.read_from(conn.getresponse())
        finally:
            conn.close()

    def kubectl(
        self,
        *args: str,
        user: User | None = None,
        input: str | None = None,
        check: bool = True,
        timeout: float = 60,
    ) -> subprocess.CompletedProcess[str]:
        who = user or self.admin
        argv = [
            str(self.kubectl_binary),
            f"--kubeconfig={who.kubeconfig}",
            f"--cache-dir={self.kubectl_cache}",
            *args,
        ]
        env = {**os.environ, "HOME": str(self.workdir)}
        env.pop("KUBECONFIG", None)
        result = subprocess.run(
            argv,
            input=input,
            capture_output=True,
            text=True,
            timeout=timeout,
            env=env,
            check=False,
        )
        if check and result.returncode != 0:
            raise HarnessError(
                f"kubectl {' '.join(args)} exited {result.returncode}:\n"
                f"{result.stderr.strip()}\n{result.stdout.strip()}"
            )
        return result

    def apply(self, manifest: str) -> None:
        self.kubectl("apply", "-f", "-", input=manifest)

    def get_json(self, *args: str) -> Any:
        return json.loads(self.kubectl("get", *args, "-o", "json").stdout)


def start_control_plane(toolchain: Any, workdir: Path) -> ControlPlane:
    """etcd and kube-apiserver of `toolchain` (the build module's Toolchain) up and ready,
    with an admin kubeconfig, under `workdir`. If they do not start, both are stopped and
    the HarnessError carries their logs."""
    plane = ControlPlane(
        etcd=toolchain.etcd,
        kube_apiserver=toolchain.kube_apiserver,
        kubectl=toolchain.kubectl,
        workdir=workdir,
    )
    try:
        plane.start()
    except HarnessError as err:
        plane.stop()
        logs = "\n".join(
            f"--- {label} ({path}):\n{tail(path)}" for label, path in LOG_FILES.items()
        )
        raise HarnessError(f"control plane did not start: {err}\n{logs}") from err
    except BaseException:
        plane.stop()
        raise
    return plane


@contextlib.contextmanager
def private_control_plane(toolchain: Any, workdir: Path) -> Iterator[ControlPlane]:
    """A control plane of its own for a block whose changes must not reach the session's
    (docs/cluster.md#real-cluster-tests); stopped after the block, and the logs a failure
    report attaches are again the session's."""
    logs = dict(LOG_FILES)
    plane = start_control_plane(toolchain, workdir)
    try:
        yield plane
    finally:
        plane.stop()
        LOG_FILES.clear()
        LOG_FILES.update(logs)


def _sweep_stale_etcd_dirs(base: Path) -> None:
    for folder in base.glob(f"{ETCD_DIR_PREFIX}*"):
        try:
            if time.time() - folder.stat().st_mtime < STALE_AFTER_SECONDS:
                continue  # possibly a session between creating it and locking it
            with (folder / ".lock").open("a") as handle:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
                shutil.rmtree(folder, ignore_errors=True)
        except OSError:
            continue  # held by a live session, or not ours to remove


def _etcd_healthy(port: int) -> bool | None:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2) as response:
            doc = json.loads(response.read())
    except (OSError, urllib.error.URLError, ValueError):
        return None
    return True if doc.get("health") == "true" else None
