"""Real-browser tests of the dashboard: headless Chromium (Debian's `chromium`, never a
downloaded browser) driven by Playwright, against `queuescope serve --embedded
manifests/samples --demo` over real TLS with client certificates.

`make test` installs chromium (apt-get) and Playwright (the test extra). Without them
the suite fails under `QUEUESCOPE_E2E_REQUIRED=1` (as `make test` and CI run it) and is
skipped with the reason otherwise.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NoReturn

import pytest

from queuescope.cli import main as cli_main

REPO = Path(__file__).resolve().parents[2]
SAMPLES = REPO / "manifests" / "samples"
REQUIRED_ENV = "QUEUESCOPE_E2E_REQUIRED"
CHROMIUM_ENV = "QUEUESCOPE_CHROMIUM"
DEFAULT_CHROMIUM = "/usr/bin/chromium"
READY_SECONDS = 60.0
# Flags for a closed network and a root user (docs/dashboard.md, "Tests").
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


def _unavailable(reason: str) -> NoReturn:
    if os.environ.get(REQUIRED_ENV) == "1":
        pytest.fail(f"{REQUIRED_ENV}=1 and the browser tests cannot run: {reason}")
    pytest.skip(f"browser tests unavailable ({reason}); set {REQUIRED_ENV}=1 to fail instead")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class DemoServer:
    url: str
    state: Path
    log: Path

    def identity(self, user: str) -> tuple[Path, Path]:
        if user == "admin":
            return self.state / "admin.crt", self.state / "admin.key"
        return self.state / "users" / f"{user}.crt", self.state / "users" / f"{user}.key"

    def ssl_context(self, user: str | None) -> ssl.SSLContext:
        context = ssl.create_default_context(cafile=str(self.state / "ca.crt"))
        if user is not None:
            context.load_cert_chain(*self.identity(user))
        return context

    def get(self, path: str, user: str | None = "admin") -> tuple[int, bytes]:
        request = urllib.request.Request(self.url + path)
        try:
            with urllib.request.urlopen(request, context=self.ssl_context(user), timeout=10) as r:
                return int(r.status), r.read()
        except urllib.error.HTTPError as err:
            return int(err.code), err.read()


@pytest.fixture(scope="module")
def demo_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DemoServer]:
    """`make run`'s server: the sample manifests with the demo load."""
    root = tmp_path_factory.mktemp("dashboard")
    state = root / "state"
    port = _free_port()
    log = root / "serve.log"
    with log.open("w") as out:
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "queuescope.cli",
                "serve",
                "--embedded",
                str(SAMPLES),
                "--demo",
                "--state-dir",
                str(state),
                "--listen",
                f"127.0.0.1:{port}",
                # Forecasts refreshed every second, so the Estimated start column fills soon.
                "--forecast-interval",
                "1",
            ],
            stdout=out,
            stderr=subprocess.STDOUT,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
    server = DemoServer(f"https://127.0.0.1:{port}", state, log)
    try:
        deadline = time.monotonic() + READY_SECONDS
        while True:
            assert proc.poll() is None, log.read_text()
            with contextlib.suppress(OSError, ssl.SSLError):
                if server.get("/readyz", None)[0] == 200:
                    break
            assert time.monotonic() < deadline, f"server not ready:\n{log.read_text()}"
            time.sleep(0.2)
        assert cli_main(["certs", "client", "--state-dir", str(state), "--user", "alice"]) == 0
        yield server
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)


@pytest.fixture(scope="module")
def chromium() -> Iterator[Any]:
    """A headless Debian Chromium driven by Playwright.

    Module-scoped on purpose: Playwright's sync API runs its own event loop in this
    thread until it stops, and pytest-asyncio's tests that follow in the same session
    fail with "Cannot run the event loop while another loop is running" if it outlives
    the browser tests."""
    executable = os.environ.get(CHROMIUM_ENV, DEFAULT_CHROMIUM)
    if not (os.path.exists(executable) or shutil.which(executable)):
        _unavailable(f"no Chromium at {executable} (apt-get install chromium)")
    try:
        from playwright.sync_api import sync_playwright  # noqa: PLC0415 (may be missing)
    except ImportError as err:
        _unavailable(f"Playwright is not installed ({err}); pip install -e '.[test]'")
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=executable, args=CHROMIUM_ARGS)
        try:
            yield browser
        finally:
            browser.close()


@pytest.fixture
def page_as(chromium: Any, demo_server: DemoServer) -> Iterator[Any]:
    """`page_as(user)`: a new page presenting `user`'s client certificate (None: none)."""
    contexts: list[Any] = []

    def open_page(user: str | None) -> Any:
        certificates = []
        if user is not None:
            cert, key = demo_server.identity(user)
            certificates = [{"origin": demo_server.url, "certPath": str(cert), "keyPath": str(key)}]
        context = chromium.new_context(
            client_certificates=certificates,
            ignore_https_errors=True,  # the state folder's own CA
            viewport={"width": 1280, "height": 900},
        )
        contexts.append(context)
        return context.new_page()

    yield open_page
    for context in contexts:
        context.close()
