"""pydantic validation errors -> FieldErrors with Kubernetes-style JSON paths and wording."""

from __future__ import annotations

import datetime as dt
import types
import typing
from collections.abc import Mapping, Sequence
from typing import Annotated, Any, Literal, get_args, get_origin

from pydantic import BaseModel, ValidationError
from pydantic_core import ErrorDetails

from scheduler.api.errors import FieldError, join_path, quote, unsupported_detail

__all__ = ["field_errors", "json_type"]


def _strip(annotation: Any) -> Any:
    """Unwrap Annotated[...] and `X | None` down to the type that shapes the data."""
    while True:
        origin = get_origin(annotation)
        if origin is Annotated:
            annotation = get_args(annotation)[0]
        elif origin is typing.Union or origin is types.UnionType:
            members = [a for a in get_args(annotation) if a is not type(None)]
            if len(members) != 1:
                return annotation
            annotation = members[0]
        else:
            return annotation


def _model_field(model: type[BaseModel], json_name: str) -> tuple[str, Any] | None:
    # Documents are decoded by JSON name only, so only JSON names can match here.
    for name, info in model.model_fields.items():
        if json_name == (info.alias or name):
            return json_name, info.annotation
    return None


def _append(path: str, element: str | int) -> str:
    if isinstance(element, int):
        return f"{path}[{element}]"
    return join_path(path, element)


def _walk(model: type[BaseModel], loc: tuple[str | int, ...]) -> tuple[str, Any]:
    """JSON path of a pydantic error location, and the declared type found there.

    pydantic's `loc` does not say whether a string is a field or a map key; the
    models' annotations do, so map keys render as `labels[app]`, fields as `.spec`.
    """
    path = ""
    annotation: Any = model
    for element in loc:
        annotation = _strip(annotation)
        origin = get_origin(annotation)
        if isinstance(annotation, type) and issubclass(annotation, BaseModel):
            found = _model_field(annotation, element) if isinstance(element, str) else None
            if found is None:
                path = _append(path, element)
                annotation = Any
            else:
                path = join_path(path, found[0])
                annotation = found[1]
        elif origin in (list, Sequence):
            path += f"[{element}]"
            annotation = get_args(annotation)[0]
        elif origin in (dict, Mapping):
            if element == "[key]":
                continue  # the key itself failed; the path already names it
            path += f"[{element}]"
            annotation = get_args(annotation)[1]
        else:
            path = _append(path, element)
            annotation = Any
    return path, _strip(annotation)


# Checked in order: bool before int (a bool is an int), datetime before date.
_JSON_TYPES: tuple[tuple[type | tuple[type, ...], str], ...] = (
    (bool, "boolean"),
    (int, "integer"),
    (float, "number"),
    (str, "string"),
    (Mapping, "object"),
    ((list, tuple), "list"),
    (dt.datetime, "timestamp"),
    (dt.date, "date"),
)


def json_type(value: object) -> str:
    """The JSON/YAML name of a value's type, for "expected X, got Y" messages."""
    if value is None:
        return "null"
    for kinds, name in _JSON_TYPES:
        if isinstance(value, kinds):
            return name
    return type(value).__name__


_EXPECTED = {
    "string_type": "a string",
    "int_type": "an integer",
    "int_from_float": "an integer",
    "int_parsing": "an integer",
    "bool_type": "a boolean (true or false)",
    "bool_parsing": "a boolean (true or false)",
    "float_type": "a number",
    "dict_type": "an object",
    "model_type": "an object",
    "model_attributes_type": "an object",
    "list_type": "a list",
    "datetime_type": "an RFC 3339 timestamp",
    "datetime_parsing": "an RFC 3339 timestamp",
}


def _literal_detail(error: ErrorDetails, declared: Any, value: Any) -> str:
    if get_origin(declared) is Literal:
        return unsupported_detail(value, [str(a) for a in get_args(declared)])
    expected = (error.get("ctx") or {}).get("expected", "")
    return f"Unsupported value: {quote(value)}: supported values: {expected}"


def _detail(error: ErrorDetails, declared: Any) -> str:
    kind = error["type"]
    value = error.get("input")
    if kind == "missing":
        return "Required value"
    if kind == "extra_forbidden":
        return f"unknown field {quote(error['loc'][-1])}"
    if kind in _EXPECTED:
        return f"expected {_EXPECTED[kind]}, got {json_type(value)}"
    if kind == "literal_error":
        return _literal_detail(error, declared, value)
    if kind == "value_error":
        ctx = error.get("ctx") or {}
        return str(ctx.get("error", error["msg"]))
    return error["msg"]


def field_errors(
    model: type[BaseModel], err: ValidationError, prefix: str = ""
) -> list[FieldError]:
    """One FieldError per pydantic error of validating `model`, paths under `prefix`."""
    errors: list[FieldError] = []
    for error in err.errors(include_url=False):
        path, declared = _walk(model, tuple(error["loc"]))
        errors.append(FieldError(join_path(prefix, path), _detail(error, declared)))
    return errors
