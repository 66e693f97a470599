"""`serve` in cluster mode: the delegated-auth flags reach `DelegatedAuth` as the clients
they name (docs/cluster.md#authentication-and-authorization-flags)."""

from __future__ import annotations

from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry

from queuescope.cli import _parser
from queuescope.kubeclient import ClusterClients
from queuescope.serve_cluster import delegated_auth
from tests.unit.queuescope.support import kubeconfig
from visibility_server.kube.delegated import DelegatedAuth


async def wired(args: list[str]) -> tuple[ClusterClients, DelegatedAuth]:
    parsed = _parser().parse_args(["serve", *args])
    clients = ClusterClients(
        parsed.kubeconfig, parsed.authentication_kubeconfig, parsed.authorization_kubeconfig
    )
    await clients.open()
    return clients, delegated_auth(parsed, clients, CollectorRegistry())


async def test_each_flag_wires_its_own_client(tmp_path: Path) -> None:
    main = kubeconfig(tmp_path / "main", "m")
    authn = kubeconfig(tmp_path / "authn", "n")
    authz = kubeconfig(tmp_path / "authz", "z")
    clients, delegated = await wired(
        [
            "--kubeconfig",
            main,
            "--authentication-kubeconfig",
            authn,
            "--authorization-kubeconfig",
            authz,
        ]
    )
    try:
        authentication = delegated.authentication_identity
        authorization = delegated.authorization_identity
        assert authentication.api is clients.authentication.rest
        assert authentication.refresh_credentials == clients.authentication.refresh
        assert authentication.who == f"the user of --authentication-kubeconfig {authn}"
        assert authorization.api is clients.authorization.rest
        assert authorization.refresh_credentials == clients.authorization.refresh
        assert authorization.who == f"the user of --authorization-kubeconfig {authz}"
        assert len({id(authentication.api), id(authorization.api), id(clients.main.rest)}) == 3
    finally:
        await clients.close()


async def test_without_the_flags_the_main_client_does_everything(tmp_path: Path) -> None:
    main = kubeconfig(tmp_path / "main", "m")
    clients, delegated = await wired(["--kubeconfig", main])
    try:
        for identity in (
            delegated.authentication_identity,
            delegated.authorization_identity,
        ):
            assert identity.api is clients.main.rest
            assert identity.refresh_credentials == clients.main.refresh
            assert identity.who == f"the user of --kubeconfig {main}"
    finally:
        await clients.close()


def test_the_flags_have_environment_twins(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("QUEUESCOPE_AUTHENTICATION_KUBECONFIG", "/etc/authn")
    monkeypatch.setenv("QUEUESCOPE_AUTHORIZATION_KUBECONFIG", "/etc/authz")
    parsed = _parser().parse_args(["serve"])
    assert parsed.authentication_kubeconfig == "/etc/authn"
    assert parsed.authorization_kubeconfig == "/etc/authz"


def test_the_pending_condition_window_flag(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    assert _parser().parse_args(["serve"]).pending_condition_window == 100
    assert (
        _parser().parse_args(["serve", "--pending-condition-window", "0"]).pending_condition_window
        == 0
    )
    with pytest.raises(SystemExit):
        _parser().parse_args(["serve", "--pending-condition-window", "-1"])
    assert "expected a whole number >= 0, got '-1'" in capsys.readouterr().err
    monkeypatch.setenv("QUEUESCOPE_PENDING_CONDITION_WINDOW", "2500")
    assert _parser().parse_args(["serve"]).pending_condition_window == 2500
