"""Rendering pages: `PendingWorkloadsSummary` and `Table` (docs/visibility-api.md#response-body,
#table-output).

Both documents end with one potentially huge list. A document is therefore described
as a head (every other key, in order) plus the list, and each format knows how to
write the head around a stream of items, so a page is produced in chunks of
`CHUNK_ITEMS` items and the server can give the event loop a turn between chunks.
For compact JSON an item is its entry's memoized head (everything but the two
positions, the same on both endpoints and versions) with the positions appended, so a
page is a join; the memo is the server's own (`memo.RenderMemo`), never the runtime's
objects.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, Final

import orjson

from scheduler.runtime.pages import ClusterQueueView, PageItem
from scheduler.runtime.workload_records import PendingEntry
from visibility_server.http.discovery import SUMMARY_KIND
from visibility_server.http.encode import json_compact, json_pretty, to_yaml
from visibility_server.http.memo import RenderMemo
from visibility_server.http.negotiation import Media
from visibility_server.http.timestamps import rfc3339_seconds

CHUNK_ITEMS: Final = 1000
# Pages above this many items are streamed chunk by chunk
# (docs/visibility-api.md#large-responses-and-backpressure), never held whole.
STREAM_ABOVE_ITEMS: Final = 5 * CHUNK_ITEMS
_PRETTY_ITEM_INDENT: Final = b"\n    "


def item_metadata(entry: PendingEntry) -> dict[str, Any]:
    metadata: dict[str, Any] = {
        "name": entry.name,
        "namespace": entry.namespace,
        "creationTimestamp": rfc3339_seconds(entry.creation),
    }
    if entry.owners:
        metadata["ownerReferences"] = [
            {"apiVersion": o.api_version, "kind": o.kind, "name": o.name, "uid": o.uid}
            for o in entry.owners
        ]
    return metadata


def item_object(item: PageItem) -> dict[str, Any]:
    """One `PendingWorkload`, keys in upstream's field order."""
    entry = item.entry
    return {
        "metadata": item_metadata(entry),
        "priority": entry.priority,
        "localQueueName": entry.local_queue,
        "positionInClusterQueue": item.position_in_cluster_queue,
        "positionInLocalQueue": item.position_in_local_queue,
    }


_HEAD_END: Final = b',"positionInClusterQueue":'


def _head(entry: PendingEntry) -> bytes:
    shown = {
        "metadata": item_metadata(entry),
        "priority": entry.priority,
        "localQueueName": entry.local_queue,
    }
    return orjson.dumps(shown)[:-1] + _HEAD_END


def _fragment(head: bytes, item: PageItem) -> bytes:
    return b'%b%d,"positionInLocalQueue":%d}' % (
        head,
        item.position_in_cluster_queue,
        item.position_in_local_queue,
    )


def item_fragment(memo: RenderMemo, view: ClusterQueueView, item: PageItem) -> bytes:
    """The compact JSON of one item of `view`: `item_object(item)` as orjson writes it.

    Its head (everything up to the positions) is memoized by the item's chunk: positions
    move with every admission, the rest of an item only when its workload changes, and
    chunks are shared by consecutive views, so a publish does not make pages render anew.
    """
    heads, start, _ = memo.chunk_heads(view, item.position_in_cluster_queue)
    local = item.position_in_cluster_queue - start
    head = heads[local]
    if head is None:
        head = heads[local] = _head(item.entry)
    return _fragment(head, item)


def view_fragment(memo: RenderMemo, view: ClusterQueueView, item: PageItem) -> bytes:
    """`item_fragment(item)`, memoized by the item's view and ClusterQueue index (a view
    is immutable, so an index's fragment never changes; both endpoints share it)."""
    kept = memo.of_view(view)
    index = item.position_in_cluster_queue
    fragment = kept.fragments.get(index)
    if fragment is None:
        fragment = item_fragment(memo, view, item)
        kept.keep(index, fragment)
    return fragment


def fragments(memo: RenderMemo, view: ClusterQueueView, start: int, stop: int) -> list[bytes]:
    """Items [start, stop) of the ClusterQueue order as compact JSON, memoized by the
    view and index (a view is immutable, so an index's fragment never changes).

    Missing fragments are rendered walking the chunks once, not locating each item."""
    kept = memo.of_view(view)
    rendered = kept.fragments
    out: list[bytes] = []
    items: list[PageItem] | None = None  # taken only if some index is not memoized
    heads: list[bytes | None] = []
    chunk_start = chunk_stop = 0
    for k, index in enumerate(range(start, stop)):
        fragment = rendered.get(index)
        if fragment is None:
            if items is None:
                items = view.page(start, stop - start)
            if not chunk_start <= index < chunk_stop:
                heads, chunk_start, chunk_stop = memo.chunk_heads(view, index)
            item = items[k]
            head = heads[index - chunk_start]
            if head is None:
                head = heads[index - chunk_start] = _head(item.entry)
            fragment = _fragment(head, item)
            kept.keep(index, fragment)
        out.append(fragment)
    return out


@dataclass(frozen=True, slots=True)
class ListDocument:
    """`head` holds every key but the list, in order; the list comes last (`list_key`).

    `compact(r)` is the items of range `r` as compact JSON, `obj(i)` item i as plain data
    (for pretty JSON and YAML, which render normally).
    """

    head: dict[str, Any]
    list_key: str
    count: int
    compact: Callable[[range], list[bytes]]
    obj: Callable[[int], Any]

    def _empty(self) -> dict[str, Any]:
        return {**self.head, self.list_key: []}

    def chunks(self, media: Media, pretty: bool) -> Iterator[bytes]:
        if media is Media.YAML:
            return self._yaml()
        if pretty:
            return self._pretty()
        return self._compact()

    def _ranges(self) -> Iterator[range]:
        for start in range(0, self.count, CHUNK_ITEMS):
            yield range(start, min(start + CHUNK_ITEMS, self.count))

    def _compact(self) -> Iterator[bytes]:
        empty = orjson.dumps(self._empty())
        prefix, suffix = empty[:-2], b"]}\n"  # cut the closing `]}` of the empty list
        first = True
        for indexes in self._ranges():
            joined = b",".join(self.compact(indexes))
            yield (prefix if first else b",") + joined
            first = False
        yield (prefix if first else b"") + suffix

    def _pretty(self) -> Iterator[bytes]:
        empty = json_pretty(self._empty())
        if self.count == 0:
            yield empty
            return
        prefix = empty[: -len(b"[]\n}")] + b"[" + _PRETTY_ITEM_INDENT
        separator = b"," + _PRETTY_ITEM_INDENT
        first = True
        for indexes in self._ranges():
            items = (json_pretty(self.obj(i)).replace(b"\n", _PRETTY_ITEM_INDENT) for i in indexes)
            yield (prefix if first else separator) + separator.join(items)
            first = False
        yield b"\n  ]\n}"

    def _yaml(self) -> Iterator[bytes]:
        empty = to_yaml(self._empty())
        if self.count == 0:
            yield empty
            return
        # Keys are sorted in YAML, so the list may sit in the middle of the document.
        marker = f"\n{self.list_key}: []\n".encode()
        before, _, after = (b"\n" + empty).partition(marker)
        yield before[1:] + f"\n{self.list_key}:\n".encode()
        for indexes in self._ranges():
            yield b"".join(_yaml_list_item(to_yaml(self.obj(i))) for i in indexes)
        yield after


def _yaml_list_item(rendered: bytes) -> bytes:
    """A mapping rendered at top level, turned into an entry of an unindented sequence."""
    lines = rendered.rstrip(b"\n").split(b"\n")
    return b"- " + lines[0] + b"\n" + b"".join(b"  " + line + b"\n" for line in lines[1:])


@dataclass(frozen=True, slots=True)
class ListOrigin:
    """Where a list document's items come from: one ClusterQueue view, listed at a
    resourceVersion under an apiVersion."""

    api_version: str
    resource_version: str
    view: ClusterQueueView


def _summary_head(origin: ListOrigin) -> dict[str, Any]:
    return {
        "kind": SUMMARY_KIND,
        "apiVersion": origin.api_version,
        "metadata": {"resourceVersion": origin.resource_version},
    }


def summary_document(origin: ListOrigin, items: list[PageItem], memo: RenderMemo) -> ListDocument:
    view = origin.view
    return ListDocument(
        _summary_head(origin),
        "items",
        len(items),
        lambda indexes: [view_fragment(memo, view, items[i]) for i in indexes],
        lambda i: item_object(items[i]),
    )


def cluster_queue_summary(origin: ListOrigin, rows: range, memo: RenderMemo) -> ListDocument:
    """Items `rows` of the ClusterQueue order, walked chunk by chunk."""
    view, offset = origin.view, rows.start
    return ListDocument(
        _summary_head(origin),
        "items",
        len(rows),
        lambda indexes: fragments(memo, view, offset + indexes.start, offset + indexes.stop),
        lambda i: item_object(view.item(offset + i)),
    )


def whole(document: ListDocument, media: Media, pretty: bool) -> bytes:
    return b"".join(document.chunks(media, pretty))


def encode(obj: Any, media: Media, pretty: bool) -> bytes:
    """A single (small) object in the negotiated representation."""
    if media is Media.YAML:
        return to_yaml(obj)
    return json_pretty(obj) if pretty else json_compact(obj)
