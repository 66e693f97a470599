"""Discovery (`/apis`, the group, each version), `/version` and the OpenAPI documents.

All are static documents, negotiated and rendered once (`documents.StaticDocuments`).
The three discovery paths accept exactly one trailing slash; nothing is ever redirected.
"""

from __future__ import annotations

import email.utils
from typing import Final

from starlette.requests import Request
from starlette.responses import Response

from visibility_server.http import status
from visibility_server.http.app_state import VisibilityServer
from visibility_server.http.etag import none_match
from visibility_server.http.negotiation import APIS_MEDIA, JSON_ONLY, OBJECT_MEDIA, negotiate
from visibility_server.http.requestinfo import info_of
from visibility_server.http.responses import BytesResponse, Headers
from visibility_server.http.routers.table import Endpoint, RouteTable
from visibility_server.http.routes import Kind
from visibility_server.http.status import VISIBILITY_GROUP

ONE_YEAR_SECONDS: Final = 365 * 24 * 3600
GROUP_PATH: Final = f"/apis/{VISIBILITY_GROUP}"

_STATIC_MEDIA: Final = {
    Kind.APIS: APIS_MEDIA,
    Kind.GROUP: OBJECT_MEDIA,
    Kind.VERSION: OBJECT_MEDIA,
    Kind.OPENAPI_V2: JSON_ONLY,
    Kind.OPENAPI_V3: JSON_ONLY,
    Kind.OPENAPI_V3_VERSION: JSON_ONLY,
    Kind.VERSION_INFO: JSON_ONLY,
}
_VARY_ACCEPT: Final = frozenset({Kind.APIS, Kind.GROUP, Kind.VERSION, Kind.VERSION_INFO})
# Conditional GET on static documents: `/apis` and OpenAPI only. `G/{v}` must always
# answer 200 with a body (the aggregator's legacy fallback treats anything else as a
# failure, and may send the `/apis` ETag it cached).
_STATIC_WITH_ETAG: Final = frozenset(
    {Kind.APIS, Kind.OPENAPI_V2, Kind.OPENAPI_V3, Kind.OPENAPI_V3_VERSION}
)


def _static(server: VisibilityServer, kind: Kind, version: str = "") -> Endpoint:
    documents = server.config.documents
    clock = server.config.clock

    def openapi_v3_caching(requested_hash: str | None) -> Headers:
        """A matching `hash` may be cached for a year; anything else must revalidate.

        [DIFF] kube-openapi redirects (301) a stale hash to the current URL, which the
        aggregator turns into a 502; we answer 200 with the current document instead.
        """
        if requested_hash is not None and requested_hash == documents.openapi_v3_hashes[version]:
            expires = email.utils.formatdate(clock() + ONE_YEAR_SECONDS, usegmt=True)
            return [("cache-control", "public, immutable"), ("expires", expires)]
        return [("cache-control", "no-cache")]

    async def endpoint(request: Request) -> Response:
        info = info_of(request.scope)
        media = negotiate(info.accept, _STATIC_MEDIA[kind])
        if media is None:
            raise status.not_acceptable()
        doc = documents.get(kind, version, media, info.pretty)
        headers: list[tuple[str, str]] = [("content-type", doc.content_type)]
        if kind in _VARY_ACCEPT:
            headers.append(("vary", "Accept"))
        if kind is Kind.OPENAPI_V3_VERSION:
            headers.extend(openapi_v3_caching(info.params.get("hash")))
        if kind in _STATIC_WITH_ETAG:
            headers.append(("etag", doc.etag))
            if none_match(info.header_values("if-none-match"), doc.etag):
                # A 304 has no body, hence no Content-Type.
                return BytesResponse(304, headers[1:])
        return BytesResponse(200, headers, doc.body)

    return endpoint


def discovery_routes(server: VisibilityServer, table: RouteTable) -> None:
    for path in ("/apis", "/apis/"):
        table.get(path, _static(server, Kind.APIS), "discovery")
    for path in (GROUP_PATH, f"{GROUP_PATH}/"):
        table.get(path, _static(server, Kind.GROUP), "discovery")
    for version in server.config.versions:
        endpoint = _static(server, Kind.VERSION, version)
        for path in (f"{GROUP_PATH}/{version}", f"{GROUP_PATH}/{version}/"):
            table.get(path, endpoint, "discovery", version)
    table.get("/version", _static(server, Kind.VERSION_INFO), "version")


def openapi_routes(server: VisibilityServer, table: RouteTable) -> None:
    table.get("/openapi/v2", _static(server, Kind.OPENAPI_V2), "openapi")
    table.get("/openapi/v3", _static(server, Kind.OPENAPI_V3), "openapi")
    for version in server.config.versions:
        path = f"/openapi/v3/apis/{VISIBILITY_GROUP}/{version}"
        table.get(path, _static(server, Kind.OPENAPI_V3_VERSION, version), "openapi", version)
