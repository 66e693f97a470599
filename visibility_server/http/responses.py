"""Writing answers on a raw ASGI `send`.

The server speaks ASGI directly instead of through framework responses: it needs
exact bytes, exact headers, bodies streamed in chunks with a loop turn between them,
and no framework behaviour (redirects, default error pages) in the way.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Sequence

from starlette.types import Receive, Send

Headers = Sequence[tuple[str, str]]


def _encode(headers: Headers) -> list[tuple[bytes, bytes]]:
    return [(name.encode("latin-1"), value.encode("latin-1")) for name, value in headers]


async def send_body(send: Send, status: int, headers: Headers, body: bytes, *, head: bool) -> None:
    """A complete answer with Content-Length (a HEAD answer gets the headers only)."""
    all_headers = [*headers, ("content-length", str(len(body)))] if status != 304 else headers
    await send({"type": "http.response.start", "status": status, "headers": _encode(all_headers)})
    await send({"type": "http.response.body", "body": b"" if head else body})


async def send_chunks(
    send: Send, status: int, headers: Headers, chunks: Iterable[bytes], *, head: bool
) -> None:
    """A streamed answer: each chunk is sent, then the loop gets a turn (§4.4)."""
    await send({"type": "http.response.start", "status": status, "headers": _encode(headers)})
    if not head:
        for chunk in chunks:
            await send({"type": "http.response.body", "body": chunk, "more_body": True})
            await asyncio.sleep(0)
    await send({"type": "http.response.body", "body": b""})


async def wait_for_disconnect(receive: Receive) -> None:
    """Returns when the client has gone away (reads and drops any request body)."""
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            return
