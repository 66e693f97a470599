"""The required real-socket test of docs/cluster.md#tls-in-python: uvicorn with TLS on 127.0.0.1,
our httptools protocol putting the peer certificate in the scope, and the authenticator chain
reading it.
"""

from __future__ import annotations

import importlib.metadata
import ssl
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import UTC, datetime

import pytest
import uvicorn
from cryptography.hazmat.primitives import serialization

from tests.tls.support import (
    SERVICE_SAN,
    TLSConnection,
    WhoAmI,
    call,
    client_context,
    in_thread,
    refused,
    running_server,
)
from visibility_server.authn.chain import AuthenticatorChain
from visibility_server.authn.config import AuthenticationConfig
from visibility_server.certs import (
    CertifiedKey,
    PemPair,
    create_ca,
    issue_client_cert,
    issue_serving_cert,
)
from visibility_server.tls.listener import ListenerTLS

PINNED_MINOR = (0, 54)
NOW = datetime.now(UTC)  # real handshakes check validity against the real clock

SERVING_CA = create_ca(now=NOW)
FRONT_PROXY_CA = create_ca(now=NOW, common_name="front-proxy-ca")
CLIENT_CA = create_ca(now=NOW, common_name="kubernetes")
ROGUE_CA = create_ca(now=NOW, common_name="rogue-ca")

FRONT_PROXY = issue_client_cert(FRONT_PROXY_CA, user="front-proxy-client", now=NOW)
WRONG_PROXY = issue_client_cert(FRONT_PROXY_CA, user="not-the-proxy", now=NOW)
ALICE = issue_client_cert(CLIENT_CA, user="alice", groups=["team-a-devs", "qa"], now=NOW)
MALLORY = issue_client_cert(ROGUE_CA, user="mallory", groups=["system:masters"], now=NOW)

ANONYMOUS = {"user": "system:anonymous", "uid": "", "groups": ["system:unauthenticated"]}
# kube-apiserver connects with SNI = the Service name; direct clients may send none.
SERVER_NAMES = [SERVICE_SAN, "127.0.0.1"]


def test_installed_uvicorn_is_the_pinned_minor() -> None:
    installed = importlib.metadata.version("uvicorn")
    for version in {installed, uvicorn.__version__}:
        minor = tuple(int(part) for part in version.split(".")[:2])
        assert minor == PINNED_MINOR, (
            f"uvicorn {version} is installed; visibility_server.peercert subclasses uvicorn's "
            "httptools protocol and relies on its internal `app` attribute, verified for "
            "uvicorn 0.54.x only. Re-check the subclass against this release, move the pin in "
            "pyproject.toml, or switch to uvicorn's native peer-certificate support: see "
            "docs/cluster.md#tls-in-python (Python TLS specifics)."
        )


@dataclass
class Server:
    port: int
    app: WhoAmI
    listener: ListenerTLS


def kubeadm_config() -> AuthenticationConfig:
    return AuthenticationConfig(
        client_ca_pem=CLIENT_CA.cert_pem,
        requestheader_ca_pem=FRONT_PROXY_CA.cert_pem,
        allowed_names=("front-proxy-client",),
        username_headers=("X-Remote-User",),
        group_headers=("X-Remote-Group",),
        extra_headers_prefixes=("X-Remote-Extra-",),
        uid_headers=("X-Remote-Uid",),
    )


@pytest.fixture
async def server() -> AsyncIterator[Server]:
    config = kubeadm_config()
    serving = issue_serving_cert(
        SERVING_CA, namespace="queuescope-system", service="queuescope-visibility", now=NOW
    )
    listener = ListenerTLS(PemPair(serving.cert_pem, serving.key_pem), config.accepted_cas_pem)
    app = WhoAmI(AuthenticatorChain(config, None))
    async with running_server(app, listener) as port:
        yield Server(port, app, listener)


def client(identity: CertifiedKey | None = None, **kwargs: object) -> ssl.SSLContext:
    return client_context(SERVING_CA, identity, **kwargs)  # type: ignore[arg-type]


@pytest.mark.parametrize("server_hostname", SERVER_NAMES)
async def test_front_proxy_cert_and_headers_are_the_user(
    server: Server, server_hostname: str
) -> None:
    status, body = await call(
        server.port,
        client(FRONT_PROXY),
        [
            ("X-Remote-User", "alice"),
            ("X-Remote-Group", "team-a-devs"),
            ("X-Remote-Group", "system:masters,evil"),
            ("X-Remote-Extra-Authentication.kubernetes.io%2Fpod-name", "pod-1"),
            ("X-Remote-Uid", "u-1"),
            ("Audit-ID", "6f0c"),
        ],
        server_hostname=server_hostname,
    )
    assert status == 200
    assert body == {
        "user": "alice",
        "uid": "u-1",
        # Two lines are two groups, and a comma inside a line is not a separator.
        "groups": ["team-a-devs", "system:masters,evil", "system:authenticated"],
        "extra": {"authentication.kubernetes.io/pod-name": ["pod-1"]},
    }
    assert server.app.peer_certs == [FRONT_PROXY.cert.public_bytes(serialization.Encoding.DER)]


@pytest.mark.parametrize("server_hostname", SERVER_NAMES)
async def test_no_certificate_is_anonymous(server: Server, server_hostname: str) -> None:
    status, body = await call(server.port, client(), server_hostname=server_hostname)
    assert (status, body) == (200, ANONYMOUS | {"extra": {}})
    assert server.app.peer_certs == [None]


async def test_a_disallowed_cn_is_401(server: Server) -> None:
    status, body = await call(server.port, client(WRONG_PROXY), [("X-Remote-User", "alice")])
    assert status == 401
    assert body["message"] == "Unauthorized"
    assert body["code"] == 401


async def test_a_front_proxy_cert_without_a_username_is_401(server: Server) -> None:
    status, _ = await call(server.port, client(FRONT_PROXY), [("X-Remote-Group", "g")])
    assert status == 401


@pytest.mark.parametrize("server_hostname", SERVER_NAMES)
async def test_a_client_ca_cert_is_its_cn_and_o_values(
    server: Server, server_hostname: str
) -> None:
    status, body = await call(server.port, client(ALICE), server_hostname=server_hostname)
    assert status == 200
    assert body["user"] == "alice"
    assert body["groups"] == ["team-a-devs", "qa", "system:authenticated"]
    assert list(body["extra"]) == ["authentication.kubernetes.io/credential-id"]


@pytest.mark.parametrize(
    "version", [ssl.TLSVersion.TLSv1_2, ssl.TLSVersion.TLSv1_3], ids=["tls1.2", "tls1.3"]
)
async def test_a_cert_from_an_unknown_ca_fails_the_handshake(
    server: Server, version: ssl.TLSVersion
) -> None:
    context = client(MALLORY, maximum_version=version)
    # Which exception depends on the TLS version and the event loop, hence Exception.
    with pytest.raises(Exception) as caught:
        await call(server.port, context, [("X-Remote-User", "admin")])
    # asyncio's TLS transport closes at once on a failed handshake, so the client may see
    # EOF or a reset rather than the `unknown_ca` alert; either way no request got through.
    assert refused(caught.value), repr(caught.value)
    assert server.app.requests == 0


async def test_forged_front_proxy_headers_without_a_cert_are_ignored(server: Server) -> None:
    status, body = await call(
        server.port,
        client(),
        [("X-Remote-User", "admin"), ("X-Remote-Group", "system:masters")],
    )
    assert (status, body) == (200, ANONYMOUS | {"extra": {}})


async def test_forged_front_proxy_headers_with_a_client_cert_are_ignored(server: Server) -> None:
    status, body = await call(
        server.port,
        client(ALICE),
        [("X-Remote-User", "admin"), ("X-Remote-Group", "system:masters")],
    )
    assert status == 200
    assert body["user"] == "alice"
    assert "system:masters" not in body["groups"]


async def test_every_request_of_a_kept_alive_connection_carries_the_cert(server: Server) -> None:
    connection = TLSConnection(server.port, client(FRONT_PROXY), SERVICE_SAN)

    def two_requests() -> list[tuple[int, dict[str, object]]]:
        try:
            return [
                connection.call([("X-Remote-User", "alice")]),
                connection.call([("X-Remote-User", "bob")]),
            ]
        finally:
            connection.close()

    replies = await in_thread(two_requests)
    assert [(status, body["user"]) for status, body in replies] == [(200, "alice"), (200, "bob")]
    assert len(server.app.peer_certs) == 2
    assert all(der is not None for der in server.app.peer_certs)


async def test_alpn_settles_on_http_1_1(server: Server) -> None:
    connection = TLSConnection(server.port, client(), SERVICE_SAN)

    def negotiated() -> str | None:
        try:
            connection.connect()
            assert isinstance(connection.sock, ssl.SSLSocket)
            return connection.sock.selected_alpn_protocol()
        finally:
            connection.close()

    assert await in_thread(negotiated) == "http/1.1"
