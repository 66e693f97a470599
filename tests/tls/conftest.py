"""Run every real-socket test on both event loops: asyncio's, and uvloop's, which
`uvicorn[standard]` brings and the server runs on in production. Their TLS transports are
separate implementations, and the peer-certificate protocol must work on both."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping

import pytest
import uvloop


def pytest_asyncio_loop_factories(
    config: pytest.Config, item: pytest.Item
) -> Mapping[str, Callable[[], asyncio.AbstractEventLoop]]:
    return {"asyncio": asyncio.new_event_loop, "uvloop": uvloop.new_event_loop}
