"""What a Pod's integration reads of where a Pod stands, on the raw object (the JSON
dict the API server sends): its phase, whether it ended, is Ready, is being deleted."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from scheduler.api import raw_object as raw


def phase(pod: Mapping[str, Any]) -> str:
    return str(raw.mapping(pod.get("status")).get("phase") or "")


def ended(pod: Mapping[str, Any]) -> bool:
    return phase(pod) in ("Succeeded", "Failed")


def succeeded(pod: Mapping[str, Any]) -> bool:
    return phase(pod) == "Succeeded"


def ready(pod: Mapping[str, Any]) -> bool:
    conditions = raw.mapping(pod.get("status")).get("conditions") or []
    return any(
        isinstance(c, Mapping) and c.get("type") == "Ready" and c.get("status") == "True"
        for c in conditions
    )


def deleting(pod: Mapping[str, Any]) -> bool:
    return bool(raw.metadata_of(pod).get("deletionTimestamp"))
