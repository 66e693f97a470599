"""The flags of `queuescope serve` and their QUEUESCOPE_* twins: a bad value is a usage
error naming the flag (and the twin it came from), and the visibility API's caps reach
the app (docs/operations.md#flags-and-environment)."""

from __future__ import annotations

import contextlib
import io
from pathlib import Path
from typing import NamedTuple

import pytest
from prometheus_client import CollectorRegistry

from queuescope.cli import _parser
from queuescope.cli import main as cli_main
from queuescope.engine_serving import Access, EngineServing
from queuescope.serve_cluster import endpoint_grace
from scheduler.core.ingest import scheduler_config
from scheduler.core.scheduler import Scheduler
from scheduler.runtime.clock import SystemClock
from scheduler.runtime.engine import Engine
from scheduler.runtime.what_if import WhatIfService
from visibility_server.authn.chain import AuthenticatorChain
from visibility_server.authn.config import AuthenticationConfig
from visibility_server.authz.embedded import EmbeddedBackend
from visibility_server.authz.pipeline import Authorizer
from visibility_server.authz.rbac import RBACAuthorizer


class Case(NamedTuple):
    flag: str
    twin: str
    good: str  # a value it takes
    value: object  # as parsed
    bad: str  # a value it refuses
    why: str  # part of the error

    @property
    def dest(self) -> str:
        return self.flag.removeprefix("--").replace("-", "_")


CASES = [
    Case("--publish-interval", "PUBLISH_INTERVAL", "500ms", 0.5, "-1", "a duration >= 0"),
    Case("--log-level", "LOG_LEVEL", "debug", "DEBUG", "loud", "one of DEBUG, INFO"),
    Case("--log-format", "LOG_FORMAT", "json", "json", "xml", "one of text, json"),
    Case("--loop", "LOOP", "asyncio", "asyncio", "tokio", "one of auto, uvloop, asyncio"),
    Case("--forecast-method", "FORECAST_METHOD", "rate", "rate", "guess", "one of forecast"),
    Case("--forecast-interval", "FORECAST_INTERVAL", "1m", 60.0, "0", "a duration above 0"),
    Case("--whatif-rate", "WHATIF_RATE", "2.5", 2.5, "0", "a number above 0"),
    Case("--whatif-burst", "WHATIF_BURST", "3", 3, "0", "a whole number >= 1"),
    Case("--visibility-max-inflight", "VISIBILITY_MAX_INFLIGHT", "8", 8, "0", ">= 1"),
    Case("--visibility-max-waiters", "VISIBILITY_MAX_WAITERS", "2", 2, "-3", ">= 1"),
    Case("--anonymous-auth", "ANONYMOUS_AUTH", "false", False, "perhaps", "true or false"),
    Case("--kube-api-qps", "KUBE_API_QPS", "20", 20.0, "-1", "a number above 0"),
    Case("--kube-api-burst", "KUBE_API_BURST", "40", 40, "many", "a whole number"),
    Case("--cert-reload-interval", "CERT_RELOAD_INTERVAL", "1m30s", 90.0, "0s", "above 0"),
    Case("--status-sweep-interval", "STATUS_SWEEP_INTERVAL", "5m", 300.0, "soon", "like 10s"),
    Case(
        "--authentication-token-webhook-cache-ttl",
        "AUTHENTICATION_TOKEN_WEBHOOK_CACHE_TTL",
        "0s",
        0.0,
        "-5s",
        "a duration >= 0",
    ),
    Case(
        "--authorization-webhook-cache-authorized-ttl",
        "AUTHORIZATION_WEBHOOK_CACHE_AUTHORIZED_TTL",
        "2m",
        120.0,
        "2 minutes",
        "like 10s",
    ),
    Case(
        "--authorization-webhook-cache-unauthorized-ttl",
        "AUTHORIZATION_WEBHOOK_CACHE_UNAUTHORIZED_TTL",
        "30s",
        30.0,
        "-30s",
        "a duration >= 0",
    ),
    Case("--pending-condition-window", "PENDING_CONDITION_WINDOW", "0", 0, "-1", ">= 0"),
]


def _refused(args: list[str]) -> str:
    """What argparse wrote to standard error when it refused `serve args`."""
    err = io.StringIO()
    with pytest.raises(SystemExit) as stopped, contextlib.redirect_stderr(err):
        _parser().parse_args(["serve", *args])
    assert stopped.value.code == 2
    return err.getvalue()


@pytest.mark.parametrize("case", CASES, ids=lambda case: case.flag)
def test_a_flag_and_its_twin_take_the_same_values(
    case: Case, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert getattr(_parser().parse_args(["serve", f"{case.flag}={case.good}"]), case.dest) == (
        case.value
    )
    monkeypatch.setenv(f"QUEUESCOPE_{case.twin}", case.good)
    assert getattr(_parser().parse_args(["serve"]), case.dest) == case.value


@pytest.mark.parametrize("case", CASES, ids=lambda case: case.flag)
def test_a_bad_value_is_a_usage_error_naming_the_flag(case: Case) -> None:
    err = _refused([f"{case.flag}={case.bad}"])
    assert f"argument {case.flag}: expected " in err
    assert case.why in err
    assert repr(case.bad) in err
    assert "Traceback" not in err
    assert f"(from QUEUESCOPE_{case.twin})" not in err


@pytest.mark.parametrize("case", CASES, ids=lambda case: case.flag)
def test_a_bad_twin_is_a_usage_error_naming_the_twin(
    case: Case, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(f"QUEUESCOPE_{case.twin}", case.bad)
    err = _refused([])
    assert f"argument {case.flag}: expected " in err
    assert case.why in err
    assert f"got {case.bad!r} (from QUEUESCOPE_{case.twin})" in err
    # The flag wins over its twin, so a bad twin under a good flag is never read.
    parsed = _parser().parse_args(["serve", f"{case.flag}={case.good}"])
    assert getattr(parsed, case.dest) == case.value


def test_the_defaults() -> None:
    args = _parser().parse_args(["serve"])
    assert (args.publish_interval, args.log_level, args.log_format, args.loop) == (
        0.2,
        "INFO",
        "text",
        "auto",
    )
    assert (args.visibility_max_inflight, args.visibility_max_waiters) == (64, 1024)
    assert (args.whatif_rate, args.whatif_burst, args.forecast_interval) == (1.0, 5, 10.0)
    assert (args.kube_api_qps, args.kube_api_burst, args.anonymous_auth) == (50.0, 100, True)
    assert args.cert_reload_interval == args.authentication_token_webhook_cache_ttl == 10.0
    assert args.status_sweep_interval == 60.0
    assert args.queue_status_interval is None


def test_the_queue_status_interval_has_no_twin_and_is_checked() -> None:
    assert _parser().parse_args(["serve", "--queue-status-interval=2s"]).queue_status_interval == 2
    err = _refused(["--queue-status-interval=0"])
    assert "argument --queue-status-interval: expected a duration above 0, got '0'" in err


def test_the_visibility_caps_reach_the_app(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("QUEUESCOPE_VISIBILITY_MAX_WAITERS", "7")
    args = _parser().parse_args(
        ["serve", "--visibility-max-inflight", "3", "--forecast-method", "none"]
    )
    scheduler = Scheduler(SystemClock(), scheduler_config(None))
    engine = Engine(scheduler)
    serving = EngineServing.build(args, engine, CollectorRegistry())
    access = Access(
        AuthenticatorChain(AuthenticationConfig(client_ca_pem=b""), token_reviewer=None),
        Authorizer(EmbeddedBackend(RBACAuthorizer())),
    )
    app = serving.app(
        args,
        access,
        version_info={"gitVersion": "test"},
        what_if=WhatIfService(scheduler, lambda: ({}, {})),
    )
    server = app.state.visibility_server
    assert (server.config.max_inflight, server.config.max_waiters) == (3, 7)


def test_a_bad_shutdown_grace_stops_the_start_not_the_shutdown(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("QUEUESCOPE_SHUTDOWN_GRACE", "soon")
    # Cluster mode: the grace is read before the certificates or kube-apiserver.
    assert cli_main(["serve", "--cert-dir", str(tmp_path), "--loop", "asyncio"]) == 2
    err = capsys.readouterr().err
    assert "error: QUEUESCOPE_SHUTDOWN_GRACE: expected a duration like 10s or 1m30s" in err


@pytest.mark.parametrize(("text", "grace"), [("0", 0.0), ("1500ms", 1.5), ("1h", 5.0)])
def test_the_shutdown_grace_shortens_never_lengthens(
    monkeypatch: pytest.MonkeyPatch, text: str, grace: float
) -> None:
    monkeypatch.setenv("QUEUESCOPE_SHUTDOWN_GRACE", text)
    assert endpoint_grace() == grace
