"""Errors as Kubernetes `Status` answers (docs/visibility-api.md, "Errors"): the exception handlers.

Every stage raises a `StatusError`; the framework's own 404 (no route) and 405 (a route
without that method) become the contract's `Status` bodies too, so no error page of the
framework's ever leaves the server. The access middleware, which runs before routing,
renders its errors with the same function.
"""

from __future__ import annotations

from typing import Final

from fastapi import FastAPI
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response

from visibility_server.http import status
from visibility_server.http.encode import json_compact, json_pretty, to_yaml
from visibility_server.http.negotiation import Media, error_media
from visibility_server.http.requestinfo import RequestInfo, info_of
from visibility_server.http.responses import BytesResponse
from visibility_server.http.status import StatusError

UNEXPECTED_CAUSE: Final = "unexpected error while serving the request"


def status_response(info: RequestInfo, error: StatusError) -> BytesResponse:
    # 406 is always JSON: the aggregator's clean legacy fallback expects that.
    media = Media.JSON if error.code == 406 else error_media(info.accept)
    obj = error.body()
    if media is Media.YAML:
        body = to_yaml(obj)
    else:
        body = json_pretty(obj) if info.pretty else json_compact(obj)
    headers = [
        ("content-type", media.content_type),
        ("x-content-type-options", "nosniff"),
        *error.headers,
    ]
    return BytesResponse(error.code, headers, body)


async def _status_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, StatusError)
    return status_response(info_of(request.scope), exc)


async def _framework_error(request: Request, exc: Exception) -> Response:
    """No route for the path (404) or none for the method (405); nothing else is raised."""
    assert isinstance(exc, HTTPException)
    if exc.status_code == 405:
        error = status.method_not_allowed()
    elif exc.status_code == 404:
        error = status.path_not_found()
    else:
        error = status.internal_error(UNEXPECTED_CAUSE)
    return status_response(info_of(request.scope), error)


def install_error_handlers(app: FastAPI) -> None:
    app.add_exception_handler(StatusError, _status_error)
    app.add_exception_handler(HTTPException, _framework_error)
