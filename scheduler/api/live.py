"""Objects from a live API server into the API model (the store's reads and the
validating webhook's requests: one decoding, so they accept exactly the same objects).

The models reject unknown fields, which is right for hand-written manifests (a typo
must not pass silently) and wrong for what a server returns: it adds defaulted
fields, newer Kubernetes fields, and whatever other controllers write. So before
validation, every field that the model has no place for is pruned, walking the
model's own JSON schema; what remains is validated exactly as a manifest would be.
"""

from __future__ import annotations

import functools
from typing import Any, TypeVar

from scheduler.api.base import TypedObject
from scheduler.api.decode import decode_as, decode_object
from scheduler.api.kinds import KINDS, ApiObject

Json = dict[str, Any]
Schema = dict[str, Any]

T = TypeVar("T", bound=TypedObject)


@functools.cache
def _schema(model: type[TypedObject]) -> Schema:
    return model.model_json_schema(by_alias=True, mode="validation")


def _resolve(schema: Schema, defs: Schema) -> Schema:
    while "$ref" in schema:
        schema = defs.get(schema["$ref"].rsplit("/", 1)[-1], {})
    return schema


def _object_branch(schema: Schema, defs: Schema) -> Schema | None:
    """The branch of a schema that describes an object, if any."""
    schema = _resolve(schema, defs)
    if schema.get("type") == "object" or "properties" in schema:
        return schema
    for key in ("anyOf", "oneOf", "allOf"):
        for branch in schema.get(key, []):
            found = _object_branch(branch, defs)
            if found is not None:
                return found
    return None


def _array_branch(schema: Schema, defs: Schema) -> Schema | None:
    schema = _resolve(schema, defs)
    if schema.get("type") == "array":
        return schema
    for key in ("anyOf", "oneOf"):
        for branch in schema.get(key, []):
            found = _array_branch(branch, defs)
            if found is not None:
                return found
    return None


def prune(value: Any, schema: Schema, defs: Schema) -> Any:
    """`value` without the fields `schema` does not describe (recursively)."""
    if isinstance(value, dict):
        branch = _object_branch(schema, defs)
        if branch is None:
            return value
        props: Schema = branch.get("properties", {})
        extra = branch.get("additionalProperties", not props)
        out: Json = {}
        for key, item in value.items():
            if key in props:
                out[key] = prune(item, props[key], defs)
            elif isinstance(extra, dict):
                out[key] = prune(item, extra, defs)
            elif extra is True:
                out[key] = item
        return out
    if isinstance(value, list):
        branch = _array_branch(schema, defs)
        items = branch.get("items") if branch is not None else None
        if not isinstance(items, dict):
            return value
        return [prune(item, items, defs) for item in value]
    return value


def decode_live(data: Json, *, source: str) -> ApiObject:
    """Validate one object read from the API server; ApiError if it cannot be used."""
    model = KINDS.get((str(data.get("apiVersion", "")), str(data.get("kind", ""))))
    if model is not None:
        schema = _schema(model)
        data = prune(data, schema, schema.get("$defs", {}))
    return decode_object(data, source=source)


def decode_live_as(model: type[T], data: Json, *, source: str) -> T:
    """An object of a kind outside the API layer's table (a Pod an integration reads),
    pruned and validated the same way; ApiError if it cannot be used."""
    schema = _schema(model)
    return decode_as(model, prune(data, schema, schema.get("$defs", {})), source=source)
