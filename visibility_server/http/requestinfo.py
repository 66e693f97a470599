"""What every stage reads from a request, decoded once per request.

The access middleware makes a `RequestInfo` from the ASGI scope and leaves it in the
scope (`info_of`), so the routes and the error handlers read the same decoded path,
query parameters and Accept header instead of parsing them again.

Clients repeat the same few paths, queries and Accept headers; everything derived from
them alone (decoded path, authorization attributes, query parameters) is remembered, in
bounded memos, instead of re-parsed per request. Errors (400) are never remembered: the
functions raise again.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Final
from urllib.parse import unquote

from starlette.types import Scope

from visibility_server.authz.attributes import request_attributes
from visibility_server.http.credentials import decode_headers, peer_certificate
from visibility_server.http.negotiation import AcceptEntry, parse_accept, wants_pretty
from visibility_server.http.query import PageQuery, first_values, parse_page

REQUEST_KEY: Final = "queuescope.request"

MEMO_SIZE: Final = 4096
decoded_path = functools.lru_cache(maxsize=MEMO_SIZE)(unquote)
attributes = functools.lru_cache(maxsize=MEMO_SIZE)(request_attributes)


@functools.lru_cache(maxsize=MEMO_SIZE)
def _query_params(query_string: bytes) -> Mapping[str, str]:
    return MappingProxyType(first_values(query_string))


@functools.lru_cache(maxsize=MEMO_SIZE)
def page_query(query_string: bytes) -> PageQuery:
    return parse_page(_query_params(query_string))


@dataclass(slots=True)
class RequestInfo:
    """What the pipeline reads from the ASGI scope, decoded once."""

    method: str
    raw_path: str  # percent-encoded, as sent
    path: str  # percent-decoded once
    query_string: bytes
    headers: list[tuple[str, str]]
    params: Mapping[str, str]  # first value of each query parameter
    accept: tuple[AcceptEntry, ...] | None  # None: no Accept header at all
    pretty: bool
    peer_cert: bytes | None  # DER of the TLS client certificate, from the listener
    client: str  # the peer's "host:port", "" when the server does not know it

    @property
    def head(self) -> bool:
        return self.method == "HEAD"

    def header_values(self, name: str) -> list[str]:
        return [v for k, v in self.headers if k == name]

    @classmethod
    def of(cls, scope: Scope) -> RequestInfo:
        raw = scope.get("raw_path")
        raw_path = raw.decode("latin-1") if isinstance(raw, bytes) else str(scope.get("path", "/"))
        raw_path = raw_path.partition("?")[0]
        headers = decode_headers(scope)
        query_string = scope.get("query_string", b"")
        params = _query_params(query_string)
        accept_lines = [v for k, v in headers if k == "accept" and v.strip()]
        user_agent = next((v for k, v in headers if k == "user-agent"), "")
        return cls(
            method=str(scope.get("method", "GET")).upper(),
            raw_path=raw_path,
            path=decoded_path(raw_path),
            query_string=query_string,
            headers=headers,
            params=params,
            accept=parse_accept(accept_lines) if accept_lines else None,
            pretty=wants_pretty(params.get("pretty"), user_agent),
            peer_cert=peer_certificate(scope),
            client=_client(scope),
        )


def _client(scope: Scope) -> str:
    peer = scope.get("client")
    if not peer:
        return ""
    host, port = peer
    return f"[{host}]:{port}" if ":" in str(host) else f"{host}:{port}"


def info_of(scope: Scope) -> RequestInfo:
    """The request's `RequestInfo`, made by the access middleware (or now, if it was not)."""
    info = scope.get(REQUEST_KEY)
    if info is None:
        info = scope[REQUEST_KEY] = RequestInfo.of(scope)
    assert isinstance(info, RequestInfo)
    return info
