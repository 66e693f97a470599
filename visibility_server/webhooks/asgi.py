"""The HTTP side every webhook shares: POST only, a bounded body, a JSON answer.

kube-apiserver POSTs one JSON review per call and reads one JSON answer. A webhook gives
`serve` a pure function from the body to an `Answer`; it runs in a worker thread, since
decoding and checking a large object takes longer than one turn of the event loop may.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final

from starlette.types import Receive, Scope, Send

JSON_CONTENT_TYPE: Final = "application/json"


@dataclass(frozen=True)
class Answer:
    status: int
    body: bytes


def status_body(code: int, reason: str, message: str) -> bytes:
    """A Kubernetes `Status` (Failure) as kube-apiserver's clients read it."""
    status = {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": reason,
        "code": code,
    }
    return json.dumps(status, separators=(",", ":")).encode()


class _TooLargeError(Exception):
    pass


async def _read_body(receive: Receive, limit: int) -> bytes | None:
    """The request body; None when the client left; _TooLargeError over `limit` bytes."""
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            return None
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > limit:
            raise _TooLargeError
        chunks.append(chunk)
        if not message.get("more_body", False):
            return b"".join(chunks)


async def serve(  # noqa: PLR0913 - the ASGI triple, then what the webhook is
    scope: Scope,
    receive: Receive,
    send: Send,
    *,
    path: str,
    what: str,
    limit: int,
    answer_for: Callable[[bytes], Answer],
) -> None:
    """Answer one call of the webhook at `path` (`what` names its review kind)."""
    extra: list[tuple[bytes, bytes]] = []
    if scope.get("method") != "POST":
        answer = Answer(405, status_body(405, "MethodNotAllowed", f"{path} accepts POST only"))
        extra.append((b"allow", b"POST"))
    else:
        try:
            body = await _read_body(receive, limit)
        except _TooLargeError:
            message = f"a {what} is limited to {limit} bytes"
            answer = Answer(413, status_body(413, "RequestEntityTooLarge", message))
        else:
            if body is None:
                return
            answer = await asyncio.to_thread(answer_for, body)
    headers = [
        (b"content-type", JSON_CONTENT_TYPE.encode()),
        (b"content-length", str(len(answer.body)).encode()),
        *extra,
    ]
    await send({"type": "http.response.start", "status": answer.status, "headers": headers})
    await send({"type": "http.response.body", "body": answer.body})
