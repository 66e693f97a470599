"""Run the visibility app on uvicorn with our TLS listener (docs/cluster.md#tls-in-python).

The settings: our protocol class so requests see the peer certificate, our SSL context
factory, the app's lifespan (its startup and shutdown; the process still owns the
engine's), no websockets, no proxy headers, no server header, no access log.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import uvicorn

from visibility_server.peercert import PeerCertHttpToolsProtocol
from visibility_server.tls.listener import ListenerTLS


class _EmbeddedServer(uvicorn.Server):
    """uvicorn without its own signal handlers: the process installs one set for all of
    its tasks (engine, store, server) and stops them together."""

    @contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


def build_server(app: Any, listener: ListenerTLS, host: str, port: int) -> uvicorn.Server:
    config = uvicorn.Config(
        app,
        host=host,
        port=port,
        http=PeerCertHttpToolsProtocol,
        ws="none",
        lifespan="on",
        ssl_context_factory=listener.ssl_context_factory,
        proxy_headers=False,
        server_header=False,
        date_header=True,
        access_log=False,
        # No handlers of uvicorn's own: its records propagate to the root logger, so
        # `--log-format json` covers them too (queuescope/logformat.py).
        log_config=None,
        log_level="warning",
        timeout_keep_alive=120,
        timeout_graceful_shutdown=20,
    )
    return _EmbeddedServer(config)
