"""Which Kueue API version `simulate` prints (docs/simulate.md "API versions").

Unless `--api-version` says otherwise, the output speaks the version of the input:
v1beta2 as soon as one input object (also one applied by a Scenario event) was written
in `kueue.x-k8s.io/v1beta2`, v1beta1 otherwise, so v1beta1 input prints exactly what it
always printed.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

from scheduler.api.base import TypedObject
from scheduler.api.conversion import convert_document
from scheduler.api.decode import Decoded
from scheduler.api.scenario import Scenario
from scheduler.api.source import wire_version
from scheduler.api.versions import CONVERTIBLE_KINDS, KUEUE_V1BETA1, KUEUE_V1BETA2

Json = dict[str, Any]


def _objects(documents: Sequence[Decoded]) -> Iterator[TypedObject]:
    for decoded in documents:
        yield decoded.obj
        if isinstance(decoded.obj, Scenario):
            for event in decoded.obj.spec.events:
                if event.apply is not None:
                    yield event.apply


def input_api_version(documents: Sequence[Decoded]) -> str:
    if any(wire_version(obj) == KUEUE_V1BETA2 for obj in _objects(documents)):
        return KUEUE_V1BETA2
    return KUEUE_V1BETA1


def in_api_version(document: Json, api_version: str) -> Json:
    """The output List with its Kueue objects in `api_version` (other items unchanged)."""
    if api_version == KUEUE_V1BETA1:
        return document
    items = [
        convert_document(item, api_version, keep=False)
        if item.get("apiVersion") == KUEUE_V1BETA1 and item.get("kind") in CONVERTIBLE_KINDS
        else item
        for item in document["items"]
    ]
    return {**document, "items": items}
