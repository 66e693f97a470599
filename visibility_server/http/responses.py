"""The server's responses: pre-rendered bytes, exact headers, streamed chunks.

Every answer is a Starlette `Response` the routes return, but one that writes exactly
the headers it is given (no Content-Type or charset added, header order kept), sends no
body to HEAD (with the GET's Content-Length), and streams long pages chunk by chunk
with a loop turn between them (docs/visibility-api.md, "Large responses and
backpressure"). No response model is validated. `done` runs once the answer has been
sent (or failed): a data answer gives its in-flight slot back there, since it holds it
while it is written.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable, Sequence

from starlette.responses import Response
from starlette.types import Receive, Scope, Send

Headers = Sequence[tuple[str, str]]


def _encode(headers: Headers) -> list[tuple[bytes, bytes]]:
    return [(name.encode("latin-1"), value.encode("latin-1")) for name, value in headers]


class _Written(Response):
    """Writes its status and exactly its headers, then `_body`; runs `done` at the end."""

    def __init__(self, status: int, headers: Headers, done: Callable[[], None] | None) -> None:
        # Not Response.__init__: it would add headers of its own.
        self.status_code = status
        self.background = None
        self.done = done
        self.raw_headers = _encode(headers)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            start = {"type": "http.response.start", "status": self.status_code}
            await send({**start, "headers": self.raw_headers})
            await self._body(send, head=scope["method"] == "HEAD")
        finally:
            if self.done is not None:
                self.done()

    async def _body(self, send: Send, *, head: bool) -> None:
        raise NotImplementedError


class BytesResponse(_Written):
    """A complete answer with Content-Length (a HEAD answer gets the headers only)."""

    def __init__(
        self,
        status: int,
        headers: Headers,
        body: bytes = b"",
        *,
        done: Callable[[], None] | None = None,
    ) -> None:
        if status != 304:
            headers = [*headers, ("content-length", str(len(body)))]
        super().__init__(status, headers, done)
        self.body = body

    async def _body(self, send: Send, *, head: bool) -> None:
        head = head or self.status_code == 304
        await send({"type": "http.response.body", "body": b"" if head else self.body})


class ChunkedResponse(_Written):
    """A streamed answer: each chunk is sent, then the loop gets a turn."""

    def __init__(
        self,
        status: int,
        headers: Headers,
        chunks: Callable[[], Iterable[bytes]],
        *,
        done: Callable[[], None] | None = None,
    ) -> None:
        super().__init__(status, headers, done)
        self.chunks = chunks

    async def _body(self, send: Send, *, head: bool) -> None:
        if not head:
            for chunk in self.chunks():
                await send({"type": "http.response.body", "body": chunk, "more_body": True})
                await asyncio.sleep(0)
        await send({"type": "http.response.body", "body": b""})


async def wait_for_disconnect(receive: Receive) -> None:
    """Returns when the client has gone away (reads and drops any request body)."""
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            return
