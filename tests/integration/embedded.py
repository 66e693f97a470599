"""`queuescope serve --embedded` in a child process over real TLS, for tests that need
the whole server as a user runs it: certificates from its state folder, RBAC from the
manifests."""

from __future__ import annotations

import contextlib
import http.client
import json
import os
import signal
import socket
import ssl
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

RBAC = Path(__file__).resolve().parents[2] / "manifests" / "samples" / "70-rbac.yaml"
READY_SECONDS = 60


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class EmbeddedServer:
    port: int
    state: Path
    manifests: Path
    log: Path
    process: subprocess.Popen[bytes]

    def context(self, user: str | None = None) -> ssl.SSLContext:
        ctx = ssl.create_default_context(cafile=str(self.state / "ca.crt"))
        if user == "admin":
            ctx.load_cert_chain(self.state / "admin.crt", self.state / "admin.key")
        elif user is not None:
            users = self.state / "users"
            ctx.load_cert_chain(users / f"{user}.crt", users / f"{user}.key")
        return ctx

    def get(self, path: str, user: str | None = None) -> tuple[int, bytes]:
        conn = http.client.HTTPSConnection(
            "127.0.0.1", self.port, context=self.context(user), timeout=10
        )
        try:
            conn.request("GET", path)
            response = conn.getresponse()
            return response.status, response.read()
        finally:
            conn.close()

    def get_json(self, path: str, user: str | None = None) -> tuple[int, Any]:
        code, body = self.get(path, user)
        return code, json.loads(body)


@contextlib.contextmanager
def embedded_server(
    root: Path, manifests: str, extra_args: Sequence[str] = ()
) -> Iterator[EmbeddedServer]:
    """Serve `manifests` (one YAML text, plus the sample RBAC) until the block ends;
    waits for `/readyz`."""
    folder = root / "manifests"
    folder.mkdir()
    (folder / "cluster.yaml").write_text(manifests)
    (folder / "rbac.yaml").write_text(RBAC.read_text())
    state = root / "state"
    port = free_port()
    log_path = root / "serve.log"
    log = log_path.open("w")
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "queuescope.cli",
            "serve",
            "--embedded",
            str(folder),
            "--state-dir",
            str(state),
            "--listen",
            f"127.0.0.1:{port}",
            *extra_args,
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    srv = EmbeddedServer(port, state, folder, log_path, proc)
    try:
        deadline = time.monotonic() + READY_SECONDS
        while True:
            assert proc.poll() is None, log_path.read_text()
            with contextlib.suppress(OSError, ssl.SSLError):
                if srv.get("/readyz")[0] == 200:
                    break
            assert time.monotonic() < deadline, "server not ready: " + log_path.read_text()
            time.sleep(0.2)
        yield srv
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)
        log.close()
