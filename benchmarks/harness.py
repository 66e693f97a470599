"""Processes of a benchmark: the server (`benchmarks.server_under_test`) and the load generator
(`benchmarks.loadgen`), each its own Python process on 127.0.0.1.

With two or more CPUs the server is pinned to CPU 0 and the load generator to CPU 1,
so "one server process on one core" is what is measured.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import os
import platform
import shutil
import socket
import ssl
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from types import TracebackType
from typing import Any

READY_TIMEOUT = 1800.0  # seconds: feeding 1M decoded workloads is slow; bounded anyway


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def cpus() -> tuple[int | None, int | None]:
    """(server CPU, load generator CPU), or (None, None) on a single CPU."""
    available = sorted(os.sched_getaffinity(0))
    if len(available) < 2:
        return None, None
    return available[0], available[1]


def machine() -> dict[str, Any]:
    model = ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    mem = 0
    with contextlib.suppress(ValueError, OSError):
        mem = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    return {
        "cpu_model": model or platform.processor(),
        "cpus": os.cpu_count(),
        "memory_gib": round(mem / 2**30, 1),
        "python": platform.python_version(),
        "platform": platform.platform(),
        # Other work on a shared machine shows here: above the CPU count, every figure
        # of the run was taken with the CPUs oversubscribed.
        "load_average_1m": round(os.getloadavg()[0], 2),
    }


def server_ready(stats: dict[str, Any], pending: int) -> bool:
    """Ready once a snapshot lists every fed workload not admitted yet and the
    forecast worker, if one runs, has had its first refresh: the first one ships
    every pending workload to it, a one-time cost no measurement should count."""
    listed = stats.get("view_entries", 0) + stats["engine"]["admitted"]
    forecasts = stats.get("forecasts", {})
    return bool(
        stats.get("synced")
        and stats.get("generation", 0) > 0
        and listed >= pending
        and (not forecasts.get("running") or forecasts.get("refreshes", 0) > 0)
    )


class BenchServer:
    """`python -m benchmarks.server_under_test` in a child process, ready when the snapshot holds
    the fed queue."""

    def __init__(
        self,
        pending: int,
        *,
        feed: str = "bulk",
        cpu_quota: str = "0",
        log: Path | None = None,
        log_level: str = "WARNING",
    ) -> None:
        self.pending = pending
        self.log_level = log_level
        self.feed = feed
        self.cpu_quota = cpu_quota
        self.dir = Path(tempfile.mkdtemp(prefix="queuescope-bench-"))
        self.port = free_port()
        self.server_cpu, self.client_cpu = cpus()
        self._log_path = log or self.dir / "server.log"
        self._proc: subprocess.Popen[bytes] | None = None
        self._conn: http.client.HTTPSConnection | None = None

    @property
    def state(self) -> Path:
        return self.dir / "state"

    def __enter__(self) -> BenchServer:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    def start(self) -> None:
        cmd = [
            sys.executable,
            "-m",
            "benchmarks.server_under_test",
            "--dir",
            str(self.dir),
            "--port",
            str(self.port),
            "--pending",
            str(self.pending),
            "--feed",
            self.feed,
            "--cpu-quota",
            self.cpu_quota,
            "--log-level",
            self.log_level,
        ]
        if self.server_cpu is not None:
            cmd += ["--cpu", str(self.server_cpu)]
        with open(self._log_path, "wb") as log:
            self._proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + READY_TIMEOUT
        while time.monotonic() < deadline:
            if self._proc.poll() is not None:
                raise RuntimeError(f"benchmark server exited: {self._log_path.read_text()[-3000:]}")
            if (self.state / "admin.key").exists():
                try:
                    stats = self.get_json("/bench/stats")
                except (OSError, http.client.HTTPException, ValueError):
                    self._conn = None
                else:
                    if server_ready(stats, self.pending):
                        return
            time.sleep(0.5)
        raise TimeoutError("benchmark server not ready in time")

    def get_json(self, path: str, timeout: float = 600.0) -> Any:
        if self._conn is None:
            ctx = ssl.create_default_context(cafile=str(self.state / "ca.crt"))
            ctx.load_cert_chain(str(self.state / "admin.crt"), str(self.state / "admin.key"))
            self._conn = http.client.HTTPSConnection(
                "127.0.0.1", self.port, context=ctx, timeout=timeout
            )
        self._conn.request("GET", path)
        response = self._conn.getresponse()
        body = response.read()
        if response.status != 200:
            raise ValueError(f"{path}: {response.status} {body[:300]!r}")
        return json.loads(body)

    def loadgen(self, mode: str, *args: str, depth: int | None = None) -> Any:
        cmd = [
            sys.executable,
            "-m",
            "benchmarks.loadgen",
            "--port",
            str(self.port),
            "--state",
            str(self.state),
            "--depth",
            str(self.pending if depth is None else depth),
        ]
        if self.client_cpu is not None:
            cmd += ["--cpu", str(self.client_cpu)]
        done = subprocess.run(
            [*cmd, mode, *args], capture_output=True, check=False, timeout=READY_TIMEOUT
        )
        if done.returncode != 0:
            raise RuntimeError(f"load generator failed: {done.stderr.decode()[-3000:]}")
        return json.loads(done.stdout.decode().strip().splitlines()[-1])

    def stop(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None
        if self._proc is not None and self._proc.poll() is None:
            self._proc.terminate()
            try:
                self._proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait()
        self._proc = None
        shutil.rmtree(self.dir, ignore_errors=True)
