"""Content negotiation (docs/visibility-api.md#content-negotiation): `Accept` and `pretty`.

`Accept` entries are tried by descending `q`, then in header order; the first entry
that names a representation the endpoint offers wins. Media-type parameters are
compared as a set (order-insensitive). `as`, `g` and `v` ask for a conversion: an
entry carrying any of them is acceptable only as one of the conversions we serve
(Table v1, aggregated discovery v2/v2beta1); other parameters (`charset`, ...) are
ignored, as kube-apiserver ignores unrecognized ones. Unsupported types (protobuf,
CBOR, Table v1beta1, PartialObjectMetadata) are skipped rather than refused, because
real clients always list JSON after them.
"""

from __future__ import annotations

import enum
import functools
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Final


class Media(enum.Enum):
    JSON = "application/json"
    YAML = "application/yaml"
    TABLE = "application/json;as=Table;v=v1;g=meta.k8s.io"
    DISCOVERY_V2 = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"
    DISCOVERY_V2BETA1 = "application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList"

    @property
    def content_type(self) -> str:
        # A Table is JSON on the wire; its Content-Type says so (kubectl expects that).
        if self is Media.TABLE:
            return "application/json"
        return str(self.value)


# What each kind of endpoint can answer.
OBJECT_MEDIA: Final = frozenset({Media.JSON, Media.YAML})
SUMMARY_MEDIA: Final = frozenset({Media.JSON, Media.YAML, Media.TABLE})
APIS_MEDIA: Final = frozenset({Media.JSON, Media.YAML, Media.DISCOVERY_V2, Media.DISCOVERY_V2BETA1})
JSON_ONLY: Final = frozenset({Media.JSON})

_CONVERSION_PARAMS: Final = frozenset({"as", "g", "v"})
_CONVERSIONS: Final = {
    ("Table", "meta.k8s.io", "v1"): Media.TABLE,
    ("APIGroupDiscoveryList", "apidiscovery.k8s.io", "v2"): Media.DISCOVERY_V2,
    ("APIGroupDiscoveryList", "apidiscovery.k8s.io", "v2beta1"): Media.DISCOVERY_V2BETA1,
}
PRETTY_TRUE: Final = frozenset({"1", "t", "T", "TRUE", "true", "True"})
PRETTY_USER_AGENTS: Final = ("curl", "Wget", "Mozilla/5.0")


@dataclass(frozen=True, slots=True)
class AcceptEntry:
    type: str  # lower-case
    subtype: str  # lower-case
    params: frozenset[tuple[str, str]]  # lower-case names, `q` removed
    q: float

    def media(self) -> Media | None:
        """The representation this entry asks for, or None if we never serve it."""
        params = dict(self.params)
        conversion = {k: v for k, v in params.items() if k in _CONVERSION_PARAMS}
        if conversion:
            return self._conversion(conversion)
        if self.type == "*" and self.subtype == "*":
            return Media.JSON
        if self.type != "application":
            return None
        return _APPLICATION_SUBTYPES.get(self.subtype)

    def _conversion(self, conversion: dict[str, str]) -> Media | None:
        """A Table or a discovery document asked for through `as`/`g`/`v`."""
        if (self.type, self.subtype) != ("application", "json"):
            return None
        key = (conversion.get("as", ""), conversion.get("g", ""), conversion.get("v", ""))
        return _CONVERSIONS.get(key)


# application/<subtype> without conversion parameters.
_APPLICATION_SUBTYPES: Final = {"json": Media.JSON, "*": Media.JSON, "yaml": Media.YAML}


def _split_outside_quotes(text: str, separator: str) -> list[str]:
    if '"' not in text:
        return text.split(separator)  # the usual case, without a character loop
    parts: list[str] = []
    current: list[str] = []
    quoted = False
    escaped = False
    for char in text:
        if escaped:
            escaped = False
        elif char == "\\" and quoted:
            escaped = True
        elif char == '"':
            quoted = not quoted
        elif char == separator and not quoted:
            parts.append("".join(current))
            current = []
            continue
        current.append(char)
    parts.append("".join(current))
    return parts


def _parse_q(value: str) -> float | None:
    # RFC 9110 qvalue: 0, 1, or up to three decimals; anything else makes the entry invalid.
    try:
        q = float(value)
    except ValueError:
        return None
    if not 0.0 <= q <= 1.0:
        return None
    return q


def parse_accept(values: Iterable[str]) -> tuple[AcceptEntry, ...]:
    """Every valid entry of every `Accept` line, by descending q then header order."""
    return _parse_accept(tuple(values))


# Clients send a handful of distinct Accept headers over and over; parsing one costs
# more than the rest of a 304, so parsed headers are remembered.
@functools.lru_cache(maxsize=512)
def _parse_accept(values: tuple[str, ...]) -> tuple[AcceptEntry, ...]:
    entries: list[AcceptEntry] = []
    for line in values:
        for raw in _split_outside_quotes(line, ","):
            pieces = _split_outside_quotes(raw, ";")
            media_range = pieces[0].strip().lower()
            kind, slash, subtype = media_range.partition("/")
            if not slash or not kind or not subtype:
                continue
            q: float | None = 1.0
            params: set[tuple[str, str]] = set()
            for piece in pieces[1:]:
                name, equals, value = piece.strip().partition("=")
                name = name.strip().lower()
                value = value.strip()
                if len(value) >= 2 and value[0] == value[-1] == '"':
                    value = value[1:-1]
                if not name or not equals:
                    continue
                if name == "q":
                    q = _parse_q(value)
                else:
                    params.add((name, value))
            if q is None or q <= 0.0:
                continue
            entries.append(AcceptEntry(kind.strip(), subtype.strip(), frozenset(params), q))
    # Python's sort is stable: equal q keeps header order.
    entries.sort(key=lambda entry: -entry.q)
    return tuple(entries)


def negotiate(entries: tuple[AcceptEntry, ...] | None, offered: frozenset[Media]) -> Media | None:
    """The first acceptable representation among `offered`; no header means JSON.

    `entries` is None when the request has no `Accept` header at all (or only empty
    ones), which accepts anything.
    """
    if entries is None:
        return Media.JSON
    for entry in entries:
        media = entry.media()
        if media is not None and media in offered:
            return media
    return None


def error_media(entries: tuple[AcceptEntry, ...] | None) -> Media:
    """How to encode a Status: YAML when the caller prefers YAML, JSON otherwise."""
    if entries is None:
        return Media.JSON
    for entry in entries:
        media = entry.media()
        if media is Media.YAML:
            return Media.YAML
        if media is not None:
            return Media.JSON
    return Media.JSON


def wants_pretty(query_value: str | None, user_agent: str) -> bool:
    """kube-apiserver's rule: a non-empty `pretty` value decides, else the User-Agent."""
    if query_value:
        return query_value in PRETTY_TRUE
    return user_agent.startswith(PRETTY_USER_AGENTS)
