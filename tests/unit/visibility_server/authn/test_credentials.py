"""From what the server received to RequestCredentials: bearer parsing (as Go's
bearertoken authenticator), header decoding, and the peer certificate in the scope."""

from __future__ import annotations

from typing import Any

import pytest

from visibility_server.authn.credentials import credentials_from_headers, parse_bearer_token
from visibility_server.peercert import (
    PEER_CERT_EXTENSION,
    credentials_from_scope,
    peer_cert_from_scope,
    uvicorn_version_problem,
)


@pytest.mark.parametrize(
    ("value", "token"),
    [
        (None, None),
        ("", None),
        ("Bearer abc", "abc"),
        ("bearer abc", "abc"),
        ("BEARER abc", "abc"),
        ("  Bearer abc  ", "abc"),
        ("Bearer abc def", "abc"),
        ("Bearer  abc", None),  # two spaces: an empty token, no opinion
        ("Bearer", None),
        ("Bearer ", None),
        ("Basic dXNlcjpwYXNz", None),
        ("abc", None),
    ],
)
def test_parse_bearer_token(value: str | None, token: str | None) -> None:
    assert parse_bearer_token(value) == token


def test_headers_are_latin1_with_lower_case_names_in_order() -> None:
    raw = [
        (b"X-Remote-Group", b"a"),
        (b"x-remote-group", b"b"),
        (b"X-Remote-Extra-Name", "caf\u00e9".encode("latin-1")),
        (b"Authorization", b"Bearer first"),
        (b"authorization", b"Bearer second"),
    ]
    credentials = credentials_from_headers(b"DER", raw)
    assert credentials.peer_cert_der == b"DER"
    assert credentials.headers == (
        ("x-remote-group", "a"),
        ("x-remote-group", "b"),
        ("x-remote-extra-name", "caf\u00e9"),
        ("authorization", "Bearer first"),
        ("authorization", "Bearer second"),
    )
    assert credentials.values("X-Remote-Group") == ["a", "b"]
    assert credentials.bearer_token == "first"


def scope(extensions: Any = None, headers: list[tuple[bytes, bytes]] | None = None) -> Any:
    value: dict[str, Any] = {"type": "http", "headers": headers or []}
    if extensions is not None:
        value["extensions"] = extensions
    return value


def test_the_peer_certificate_comes_from_our_extension_only() -> None:
    assert peer_cert_from_scope(scope({PEER_CERT_EXTENSION: b"DER"})) == b"DER"
    assert peer_cert_from_scope(scope({PEER_CERT_EXTENSION: None})) is None
    assert peer_cert_from_scope(scope({"tls": {"client_cert_chain": ["x"]}})) is None
    assert peer_cert_from_scope(scope()) is None


def test_credentials_from_scope() -> None:
    credentials = credentials_from_scope(
        scope({PEER_CERT_EXTENSION: b"DER"}, [(b"authorization", b"Bearer t")])
    )
    assert credentials.peer_cert_der == b"DER"
    assert credentials.bearer_token == "t"


@pytest.mark.parametrize("version", ["0.54.0", "0.54.7", "0.54.1.dev3"])
def test_the_pinned_minor_is_accepted(version: str) -> None:
    assert uvicorn_version_problem(version) is None


@pytest.mark.parametrize("version", ["0.55.0", "0.53.9", "1.54.0", "garbage"])
def test_other_versions_are_refused_pointing_at_the_spec(version: str) -> None:
    problem = uvicorn_version_problem(version)
    assert problem is not None
    assert version in problem
    assert "docs/cluster.md#tls-in-python" in problem
