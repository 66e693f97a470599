"""The clients of cluster mode: `--kubeconfig` for everything, and a client of its own for
`--authentication-kubeconfig` / `--authorization-kubeconfig` when given, each with its own
credential re-read (bound tokens rotate)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from queuescope.kubeclient import ClusterClients, KubeClient
from scheduler.kubeapi.credentials import Endpoint
from tests.unit.queuescope.support import kubeconfig


def bearer(kube: KubeClient) -> str:
    assert kube.api is not None
    return str(kube.api.configuration.api_key["BearerToken"])


def test_without_the_flags_every_call_uses_the_main_client() -> None:
    clients = ClusterClients("/etc/main")
    assert clients.authentication is clients.main
    assert clients.authorization is clients.main
    assert clients.distinct == [clients.main]
    assert clients.main.identity == "the user of --kubeconfig /etc/main"


def test_in_cluster_credentials_are_named_as_the_service_account() -> None:
    assert ClusterClients(None).main.identity == "queuescope's ServiceAccount"


@pytest.mark.parametrize(
    ("authentication", "authorization"), [("/etc/authn", ""), ("", "/etc/authz")]
)
def test_one_flag_gives_one_client_of_its_own(authentication: str, authorization: str) -> None:
    clients = ClusterClients(None, authentication, authorization)
    own = clients.authentication if authentication else clients.authorization
    other = clients.authorization if authentication else clients.authentication
    assert other is clients.main
    assert own is not clients.main
    assert clients.distinct == [clients.main, own]
    flag = "--authentication-kubeconfig" if authentication else "--authorization-kubeconfig"
    assert own.identity == f"the user of {flag} {authentication or authorization}"


async def test_each_client_opens_and_rereads_its_own_credentials(tmp_path: Path) -> None:
    clients = ClusterClients(
        kubeconfig(tmp_path / "main", "main-1"),
        kubeconfig(tmp_path / "authn", "authn-1"),
        kubeconfig(tmp_path / "authz", "authz-1"),
    )
    assert len(clients.distinct) == 3
    api = await clients.open()
    try:
        assert api is clients.main.api
        assert [bearer(k) for k in clients.distinct] == [
            "Bearer main-1",
            "Bearer authn-1",
            "Bearer authz-1",
        ]
        # The authorization client's token rotated: only its re-read picks it up, and the
        # live ApiClient (the one the reviews use) sends the new one.
        kubeconfig(tmp_path / "authz", "authz-2")
        kubeconfig(tmp_path / "main", "main-2")
        await clients.authorization.refresh()
        assert bearer(clients.authorization) == "Bearer authz-2"
        assert bearer(clients.main) == "Bearer main-1"
        identity = clients.authorization.as_identity()
        assert identity.api is clients.authorization.rest
        assert clients.authorization.rest is not None
        assert clients.authorization.rest.api is clients.authorization.api
        assert identity.refresh_credentials == clients.authorization.refresh
        assert identity.who == f"the user of --authorization-kubeconfig {tmp_path / 'authz'}"
    finally:
        await clients.close()
    assert all(k.api is None and k.rest is None for k in clients.distinct)


async def test_a_client_that_cannot_open_closes_the_others(tmp_path: Path) -> None:
    clients = ClusterClients(kubeconfig(tmp_path / "main", "main-1"), "", str(tmp_path / "missing"))
    with pytest.raises(FileNotFoundError, match=r"--authorization-kubeconfig .*missing: no such"):
        await clients.open()
    assert clients.main.api is None


def test_an_unopened_client_has_no_identity_to_give() -> None:
    with pytest.raises(RuntimeError, match="open"):
        KubeClient("/etc/main").as_identity()


async def test_a_kubeconfig_the_plain_reader_leaves_goes_through_kubernetes_asyncio(
    tmp_path: Path,
) -> None:
    path = tmp_path / "basic"
    path.write_text(
        json.dumps(
            {
                "clusters": [{"name": "c", "cluster": {"server": "http://127.0.0.1:1"}}],
                "users": [{"name": "u", "user": {"username": "a", "password": "b"}}],
                "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}],
                "current-context": "c",
            }
        )
    )
    kube = KubeClient(str(path))
    await kube.open()
    try:
        assert not isinstance(kube.configuration, Endpoint)
        assert bearer(kube) == "Basic YTpi"  # base64 of "a:b"
    finally:
        await kube.close()


def test_serving_does_not_import_kubernetes_asyncio() -> None:
    """It costs about 35 MiB of every server's memory (docs/benchmarks.md, sixth round)."""
    code = (
        "import sys, queuescope.cli, queuescope.serve, queuescope.serve_cluster;"
        "sys.exit('kubernetes_asyncio' in sys.modules)"
    )
    assert subprocess.run([sys.executable, "-c", code], check=False).returncode == 0
