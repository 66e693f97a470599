"""The webhooks' place in the app: `POST /convert` as a route that skips access checks.

kube-apiserver calls a CRD conversion webhook without credentials (docs/operations.md,
"API versions and the conversion webhook"), so the route is registered as open: the access
middleware neither authenticates nor authorizes it. It only transforms what it is sent.
"""

from __future__ import annotations

from fastapi import APIRouter
from starlette.routing import Route
from starlette.types import Receive, Scope, Send

from visibility_server.webhooks.conversion import CONVERSION_PATH, serve_conversion


class _ConversionEndpoint:
    """An ASGI endpoint: Starlette hands it every method, and it answers 405 itself."""

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await serve_conversion(scope, receive, send)


def webhook_routes(router: APIRouter, labels: dict[str, tuple[str, str]]) -> frozenset[str]:
    """Add the webhook routes and their metric labels; return the paths that are open."""
    router.routes.append(Route(CONVERSION_PATH, _ConversionEndpoint()))
    labels[CONVERSION_PATH] = ("conversion", "v1")
    return frozenset({CONVERSION_PATH})
