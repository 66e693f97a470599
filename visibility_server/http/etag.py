"""Entity tags and `If-None-Match` (docs/visibility-api.md#snapshot-identity,
#conditional-requests).

A data ETag hashes everything that changes the bytes of a 200: the view digest
(content-derived, so every replica computes the same tag for the same queue), the
version, the effective paging, the media type, pretty and Table `includeObject`.
Static documents use a hash of their bytes.
"""

from __future__ import annotations

import functools
import hashlib
from collections.abc import Iterable


def quoted(digest_hex: str) -> str:
    return f'"{digest_hex}"'


# Pollers ask for the same few pages of the same snapshot over and over: a tag is
# remembered by its (hashable) parts, typed so that True and 1 stay distinct.
@functools.lru_cache(maxsize=8192, typed=True)
def tag_of(*parts: object) -> str:
    """A strong ETag: 16 hex characters of BLAKE2b over the parts, NUL-separated."""
    joined = "\0".join(map(str, parts)).encode("utf-8", "surrogatepass")
    return quoted(hashlib.blake2b(joined, digest_size=8).hexdigest())


def tag_of_bytes(body: bytes) -> str:
    return quoted(hashlib.blake2b(body, digest_size=8).hexdigest())


def _entity_tags(header: str) -> Iterable[str]:
    for raw in header.split(","):
        tag = raw.strip()
        # If-None-Match uses the weak comparison: W/"x" matches "x".
        yield tag.removeprefix("W/")


def none_match(values: Iterable[str], etag: str) -> bool:
    """Whether `If-None-Match` lists `etag` (or is `*`): the answer is then 304."""
    for header in values:
        for tag in _entity_tags(header):
            if tag in ("*", etag):
                return True
    return False
