"""The `Table` representation of a summary page, for kubectl (docs/visibility-api.md#table-output).

Rows follow item order. `Age` is computed from the injected clock in kubectl's short
style (`duration.HumanDuration`), from the second-precision creation time a client
would see. `includeObject`: `None` leaves the row without an object, `Metadata`
embeds a `PartialObjectMetadata`, `Object` the item exactly as the summary serves it.
"""

from __future__ import annotations

from typing import Any, Final

import orjson

from scheduler.runtime.pages import PageItem
from visibility_server.http.memo import RenderMemo
from visibility_server.http.render import (
    ListDocument,
    ListOrigin,
    item_object,
    view_fragment,
)
from visibility_server.http.timestamps import rfc3339_seconds


def _column(name: str, type_: str, description: str, fmt: str = "", priority: int = 0) -> Any:
    return {
        "name": name,
        "type": type_,
        "format": fmt,
        "description": description,
        "priority": priority,
    }


COLUMNS: Final = (
    _column("Name", "string", "Name of the Workload", fmt="name"),
    _column("Namespace", "string", "Namespace of the Workload"),
    _column("LocalQueue", "string", "LocalQueue the Workload was submitted to"),
    _column("Priority", "integer", "Priority of the Workload"),
    _column("Position in ClusterQueue", "integer", "0-based position in the ClusterQueue"),
    _column("Position in LocalQueue", "integer", "0-based position in the LocalQueue"),
    _column("Age", "string", "Time since the Workload was created"),
    # Priority 1: shown only with `-o wide`.
    _column("Owner", "string", "Kind/name of the first owner", priority=1),
)

_MINUTE: Final = 60
_HOUR: Final = 60 * _MINUTE
_DAY: Final = 24 * _HOUR
_YEAR: Final = 365 * _DAY


def human_duration(micros: int) -> str:
    """k8s.io/apimachinery's `duration.HumanDuration`, which kubectl prints as Age."""
    # Go truncates towards zero; a clock up to a second behind still reads "0s".
    seconds = int(micros / 1_000_000) if micros >= 0 else -((-micros) // 1_000_000)
    if seconds < -1:
        return "<invalid>"
    if seconds < 0:
        return "0s"
    if seconds < 2 * _MINUTE:
        return f"{seconds}s"
    if seconds < 3 * _HOUR:
        return _in_minutes(seconds)
    return _in_hours(seconds)


def _in_minutes(seconds: int) -> str:
    minutes = seconds // _MINUTE
    if minutes < 10:
        rest = seconds % _MINUTE
        return f"{minutes}m" if rest == 0 else f"{minutes}m{rest}s"
    return f"{minutes}m"


def _in_hours(seconds: int) -> str:
    hours = seconds // _HOUR
    if hours < 8:
        rest = (seconds // _MINUTE) % 60
        return f"{hours}h" if rest == 0 else f"{hours}h{rest}m"
    if hours < 48:
        return f"{hours}h"
    if hours < 24 * 8:
        rest = hours % 24
        return f"{hours // 24}d" if rest == 0 else f"{hours // 24}d{rest}h"
    if hours < 24 * 365 * 2:
        return f"{hours // 24}d"
    if hours < 24 * 365 * 8:
        rest = (hours // 24) % 365
        return f"{hours // 24 // 365}y" if rest == 0 else f"{hours // 24 // 365}y{rest}d"
    return f"{hours // 24 // 365}y"


def _cells(item: PageItem, now_micros: int) -> list[Any]:
    entry = item.entry
    created = (entry.creation // 1_000_000) * 1_000_000
    owner = f"{entry.owners[0].kind}/{entry.owners[0].name}" if entry.owners else ""
    return [
        entry.name,
        entry.namespace,
        entry.local_queue,
        entry.priority,
        item.position_in_cluster_queue,
        item.position_in_local_queue,
        human_duration(now_micros - created),
        owner,
    ]


def _partial_metadata(item: PageItem) -> dict[str, Any]:
    entry = item.entry
    return {
        "kind": "PartialObjectMetadata",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": {
            "name": entry.name,
            "namespace": entry.namespace,
            "creationTimestamp": rfc3339_seconds(entry.creation),
        },
    }


def table_document(
    origin: ListOrigin,
    items: list[PageItem],
    include_object: str,
    now_micros: int,
    memo: RenderMemo,
) -> ListDocument:
    view = origin.view

    def row(i: int, *, compact: bool) -> dict[str, Any]:
        item = items[i]
        built: dict[str, Any] = {"cells": _cells(item, now_micros)}
        if include_object == "Metadata":
            built["object"] = _partial_metadata(item)
        elif include_object == "Object":
            # Compact output reuses the memoized item; pretty/YAML render it normally.
            built["object"] = (
                orjson.Fragment(view_fragment(memo, view, item)) if compact else item_object(item)
            )
        return built

    head = {
        "kind": "Table",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": {"resourceVersion": origin.resource_version},
        "columnDefinitions": list(COLUMNS),
    }
    return ListDocument(
        head,
        "rows",
        len(items),
        lambda indexes: [orjson.dumps(row(i, compact=True)) for i in indexes],
        lambda i: row(i, compact=False),
    )
