"""Query parameters of the data endpoints (docs/visibility-api.md#query-parameters,
#pretty-printing, #table-output, #long-poll).

Only the first occurrence of a parameter counts, and unknown parameters are ignored,
as upstream. Integers are strictly `[+-]?[0-9]+` within int64: Python's `int()` would
also take spaces, underscores and non-ASCII digits, which Go's `strconv.ParseInt`
rejects. `+` is kept literally (not decoded as a space) so `?limit=+7` means 7, as the
contract's table says.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final
from urllib.parse import unquote

from visibility_server.http.status import bad_query_value

DEFAULT_LIMIT: Final = 1000
MAX_LIMIT: Final = 100_000
MIN_WAIT_SECONDS: Final = 1
MAX_WAIT_SECONDS: Final = 50
INT64_MIN: Final = -(2**63)
INT64_MAX: Final = 2**63 - 1

_INTEGER: Final = re.compile(r"[+-]?[0-9]+", re.ASCII)

INCLUDE_OBJECT_VALUES: Final = ("None", "Metadata", "Object")
DEFAULT_INCLUDE_OBJECT: Final = "Metadata"


def first_values(query_string: bytes) -> dict[str, str]:
    """Each parameter's first value, percent-decoded (`+` stays `+`)."""
    found: dict[str, str] = {}
    for pair in query_string.decode("latin-1").split("&"):
        if not pair:
            continue
        raw_key, _, raw_value = pair.partition("=")
        key = unquote(raw_key)
        if key not in found:
            found[key] = unquote(raw_value)
    return found


def all_values(query_string: bytes, name: str) -> list[str]:
    """Every value of a repeatable parameter (the health endpoints' `exclude`)."""
    values: list[str] = []
    for pair in query_string.decode("latin-1").split("&"):
        raw_key, _, raw_value = pair.partition("=")
        if pair and unquote(raw_key) == name:
            values.append(unquote(raw_value))
    return values


def parse_int64(parameter: str, value: str) -> int:
    if _INTEGER.fullmatch(value) is None:
        raise bad_query_value(parameter, value)
    number = int(value)
    if not INT64_MIN <= number <= INT64_MAX:
        raise bad_query_value(parameter, value)
    return number


@dataclass(frozen=True, slots=True)
class PageQuery:
    """Effective (clamped) paging of a summary request."""

    offset: int = 0
    limit: int = DEFAULT_LIMIT


def clamp_limit(limit: int) -> int:
    if limit == 0:
        return DEFAULT_LIMIT
    return min(max(limit, 0), MAX_LIMIT)


def parse_page(params: Mapping[str, str]) -> PageQuery:
    """`offset` and `limit`, validated then clamped (clamping never errors)."""
    offset = 0
    limit = DEFAULT_LIMIT
    if "offset" in params:
        offset = max(parse_int64("offset", params["offset"]), 0)
    if "limit" in params:
        limit = clamp_limit(parse_int64("limit", params["limit"]))
    return PageQuery(offset, limit)


def parse_wait_seconds(params: Mapping[str, str]) -> int | None:
    """[EXT] longpoll's `waitSeconds`, clamped to 1..50; None when absent."""
    if "waitSeconds" not in params:
        return None
    seconds = parse_int64("waitSeconds", params["waitSeconds"])
    return min(max(seconds, MIN_WAIT_SECONDS), MAX_WAIT_SECONDS)


def parse_include_object(params: Mapping[str, str]) -> str:
    """Table `includeObject`; an unknown value falls back to the default, never an error."""
    value = params.get("includeObject", "")
    return value if value in INCLUDE_OBJECT_VALUES else DEFAULT_INCLUDE_OBJECT
