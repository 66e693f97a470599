"""Shared building blocks of every API model: the pydantic configuration and scalar types.

Kubernetes decodes JSON strictly and with exact types, so the models do too: a YAML
`count: "3"` or `labels: {x: true}` is a type error, exactly as `kubectl apply` would
report it, instead of being silently coerced.
"""

from __future__ import annotations

import re
from datetime import UTC, date, datetime
from typing import Annotated, Any, ClassVar

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    PlainSerializer,
    PrivateAttr,
    SerializerFunctionWrapHandler,
    model_serializer,
)
from pydantic.alias_generators import to_camel

from scheduler.api.durations import DurationError, format_duration, parse_duration
from scheduler.api.errors import SourceRef

INT32_MIN = -(2**31)
INT32_MAX = 2**31 - 1
INT64_MIN = -(2**63)
INT64_MAX = 2**63 - 1


class ApiModel(BaseModel):
    """Base of every API model: camelCase JSON names, unknown fields rejected, immutable."""

    model_config = ConfigDict(
        extra="forbid",
        populate_by_name=True,
        frozen=True,
        strict=True,
        alias_generator=to_camel,
    )

    def to_dict(self) -> dict[str, Any]:
        """The camelCase plain-JSON form, as `kubectl get -o json` would show it."""
        return self.model_dump(mode="json", by_alias=True, exclude_none=True)


class OmitEmptyModel(ApiModel):
    """Serializes like Go's `omitempty`: empty strings, maps and lists are left out.

    Only for Kubernetes core types (metadata, pod templates) and status blocks, where
    an empty value means "unset". Kueue specs keep their defaults visible, and there
    an empty value can matter (`namespaceSelector: {}` matches every namespace).
    """

    @model_serializer(mode="wrap")
    def _omit_empty(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        data: dict[str, Any] = handler(self)
        return {k: v for k, v in data.items() if not _is_empty(v)}


def _is_empty(value: Any) -> bool:
    return (isinstance(value, str | dict | list)) and not value


class TypedObject(ApiModel):
    """A top-level document: anything with `apiVersion` and `kind`."""

    # Kubernetes objects are namespaced or cluster-scoped by kind; decoding uses this
    # to default (or clear) `metadata.namespace` as the API server would.
    namespaced: ClassVar[bool] = False

    api_version: str
    kind: str

    # Where the object was decoded from (see scheduler.api.source); not part of its value.
    _source: SourceRef | None = PrivateAttr(default=None)
    # The apiVersion it was written in, when decoding converted it (see source.wire_version).
    _wire_version: str | None = PrivateAttr(default=None)

    def __eq__(self, other: object) -> bool:
        # pydantic also compares private attributes; the same object read from another
        # file or document position is still the same object.
        if not isinstance(other, BaseModel):
            return NotImplemented
        return (
            type(self) is type(other)
            and self.__dict__ == other.__dict__
            and self.__pydantic_extra__ == other.__pydantic_extra__
        )

    __hash__ = None  # type: ignore[assignment]  # mutable dict fields: never hashable


# RFC 3339 as Go's time.RFC3339 accepts it: a date, "T", a time, optional fraction,
# and a mandatory zone. Anything looser would be a silent guess at the time zone.
_RFC3339 = re.compile(
    r"(\d{4})-(\d{2})-(\d{2})[Tt](\d{2}):(\d{2}):(\d{2})(?:\.(\d+))?([Zz]|[+-]\d{2}:\d{2})",
    re.ASCII,
)


def _to_timestamp(raw: Any) -> Any:
    if isinstance(raw, datetime):
        if raw.tzinfo is None:
            raise ValueError(
                "timestamp must carry a time zone (RFC 3339, e.g. 2026-01-01T00:00:00Z)"
            )
        return raw.astimezone(UTC)
    if isinstance(raw, date):
        raise ValueError("a date is not a timestamp (RFC 3339, e.g. 2026-01-01T00:00:00Z)")
    if not isinstance(raw, str):
        return raw  # let the strict datetime schema report the type error
    match = _RFC3339.fullmatch(raw)
    if match is None:
        raise ValueError(f'"{raw}" is not an RFC 3339 timestamp (e.g. 2026-01-01T00:00:00Z)')
    fraction = (match[7] or "")[:6].ljust(6, "0")  # nanoseconds truncated to micros
    zone = match[8]
    text = (
        f"{match[1]}-{match[2]}-{match[3]}T{match[4]}:{match[5]}:{match[6]}.{fraction}"
        f"{'+00:00' if zone in ('Z', 'z') else zone}"
    )
    try:
        return datetime.fromisoformat(text).astimezone(UTC)
    except ValueError as err:
        raise ValueError(f'"{raw}" is not a valid timestamp: {err}') from None


def parse_timestamp(raw: object) -> datetime:
    """An RFC 3339 timestamp as Kubernetes writes it (a condition's lastTransitionTime),
    in UTC; ValueError for anything else."""
    if not isinstance(raw, str):
        raise ValueError(f"{raw!r} is not an RFC 3339 timestamp")
    value = _to_timestamp(raw)
    assert isinstance(value, datetime)
    return value


def format_timestamp(value: datetime) -> str:
    """RFC 3339 in UTC; sub-second digits only when present (Kubernetes prints whole seconds)."""
    value = value.astimezone(UTC)
    base = value.strftime("%Y-%m-%dT%H:%M:%S")
    if value.microsecond:
        return f"{base}.{value.microsecond:06d}".rstrip("0") + "Z"
    return f"{base}Z"


Timestamp = Annotated[
    datetime,
    BeforeValidator(_to_timestamp),
    PlainSerializer(format_timestamp, return_type=str, when_used="json"),
]
"""An aware UTC datetime, from an RFC 3339 string or a YAML timestamp."""


def _check_int32(raw: Any) -> Any:
    if isinstance(raw, int) and not isinstance(raw, bool) and not INT32_MIN <= raw <= INT32_MAX:
        raise ValueError(f"{raw} does not fit in a 32-bit signed integer")
    return raw


def _check_int64(raw: Any) -> Any:
    if isinstance(raw, int) and not isinstance(raw, bool) and not INT64_MIN <= raw <= INT64_MAX:
        raise ValueError(f"{raw} does not fit in a 64-bit signed integer")
    return raw


Int32 = Annotated[int, BeforeValidator(_check_int32)]
"""Go int32 fields (counts, priorities): out-of-range values are decoding errors."""

Int64 = Annotated[int, BeforeValidator(_check_int64)]


def _to_duration(raw: Any) -> Any:
    # YAML turns a bare `0` into an int; Go's "0" is the only unit-less duration.
    if isinstance(raw, int) and not isinstance(raw, bool) and raw == 0:
        return 0
    if isinstance(raw, str):
        try:
            return parse_duration(raw)
        except DurationError as err:
            raise ValueError(str(err)) from None
    if isinstance(raw, int) and not isinstance(raw, bool):
        raise ValueError(f"{raw} is not a duration: a unit is required (e.g. 30s, 5m)")
    return raw


DurationMicros = Annotated[
    int,
    BeforeValidator(_to_duration),
    PlainSerializer(format_duration, return_type=str, when_used="json"),
]
"""A Go duration string ("1h2m3s") held as exact integer microseconds."""
