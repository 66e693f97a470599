"""Kubernetes resource quantities (docs/scheduling.md#quantities).

Values are exact rationals so that parsing, comparison and the conversion to the
scheduler's integer values never lose precision. Like the Go apimachinery, a
quantity remembers the *format family* of its input, because the canonical
string of a value depends on it ("1Ki" prints as "1Ki", "1024" as "1024").
"""

from __future__ import annotations

import enum
import math
import re
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Annotated, Any

from pydantic import PlainSerializer, PlainValidator, WithJsonSchema

__all__ = [
    "Quantity",
    "QuantityError",
    "QuantityField",
    "QuantityFormat",
    "format_resource",
    "scheduler_value",
]

INT64_MIN = -(2**63)
INT64_MAX = 2**63 - 1

# Kubernetes never keeps more precision than nano-units; finer values are rounded
# up (away from zero) so that a tiny non-zero request never becomes zero.
_NANO = 10**9

# Exponents this large are never meaningful quota and would make exact rational
# arithmetic arbitrarily expensive, so they are rejected rather than computed.
_MAX_EXPONENT = 1000

_GRAMMAR = re.compile(
    r"(?P<sign>[+-]?)"
    r"(?P<int>[0-9]*)(?:\.(?P<frac>[0-9]*))?"
    r"(?P<suffix>[KMGTPE]i|[numkMGTPE]|[eE][+-]?[0-9]+)?",
    re.ASCII,
)

_PATTERN_TEXT = r"^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$"

_DECIMAL_SUFFIXES: dict[str, int] = {
    "n": -9,
    "u": -6,
    "m": -3,
    "": 0,
    "k": 3,
    "M": 6,
    "G": 9,
    "T": 12,
    "P": 15,
    "E": 18,
}
_SUFFIX_BY_DECIMAL_EXPONENT = {exp: suffix for suffix, exp in _DECIMAL_SUFFIXES.items()}
_BINARY_SUFFIXES = ("", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei")

# Resources that Kueue formats as BinarySI quantities.
_BINARY_RESOURCES = frozenset({"memory", "ephemeral-storage"})
_HUGEPAGES_PREFIX = "hugepages-"


class QuantityError(ValueError):
    """A string is not a Kubernetes quantity, or a value does not fit int64."""


class QuantityFormat(enum.Enum):
    DECIMAL_SI = "DecimalSI"
    BINARY_SI = "BinarySI"
    DECIMAL_EXPONENT = "DecimalExponent"


def _round_to_nano(value: Fraction) -> Fraction:
    scaled = value * _NANO
    if scaled.denominator == 1:
        return value
    magnitude = math.ceil(abs(scaled))
    return Fraction(magnitude if scaled > 0 else -magnitude, _NANO)


def _invalid(raw: object) -> QuantityError:
    return QuantityError(
        f'invalid quantity "{raw}": quantities must match the regular expression '
        f"'{_PATTERN_TEXT}'"
    )


@dataclass(frozen=True, slots=True, order=True, init=False, repr=False)
class Quantity:
    """An immutable Kubernetes quantity; equality and order are by value only."""

    value: Fraction
    format: QuantityFormat = field(compare=False)

    def __init__(
        self,
        value: int | Fraction,
        fmt: QuantityFormat = QuantityFormat.DECIMAL_SI,
    ) -> None:
        object.__setattr__(self, "value", _round_to_nano(Fraction(value)))
        object.__setattr__(self, "format", fmt)

    @classmethod
    def parse(cls, raw: str | int | float) -> Quantity:
        # bool is an int subclass, but True is never a sensible quantity.
        if isinstance(raw, bool):
            raise _invalid(raw)
        if isinstance(raw, int):
            return cls(raw)
        if isinstance(raw, float):
            text = repr(raw)
        elif isinstance(raw, str):
            text = raw
        else:
            raise _invalid(raw)
        match = _GRAMMAR.fullmatch(text)
        if match is None:
            raise _invalid(text)
        int_digits = match["int"]
        frac_digits = match["frac"] or ""
        if not int_digits and not frac_digits:
            raise _invalid(text)
        mantissa = Fraction(int(int_digits or "0"))
        if frac_digits:
            mantissa += Fraction(int(frac_digits), 10 ** len(frac_digits))
        if match["sign"] == "-":
            mantissa = -mantissa
        suffix = match["suffix"] or ""
        if suffix.endswith("i"):
            power = _BINARY_SUFFIXES.index(suffix)
            return cls(mantissa * 1024**power, QuantityFormat.BINARY_SI)
        if suffix in _DECIMAL_SUFFIXES:
            return cls(mantissa * Fraction(10) ** _DECIMAL_SUFFIXES[suffix])
        exponent = int(suffix[1:])
        if abs(exponent) > _MAX_EXPONENT:
            raise QuantityError(f'invalid quantity "{text}": exponent out of range')
        return cls(mantissa * Fraction(10) ** exponent, QuantityFormat.DECIMAL_EXPONENT)

    def __str__(self) -> str:
        value = self.value
        if value == 0:
            return "0"
        fmt = self.format
        if fmt is QuantityFormat.BINARY_SI:
            # Like apimachinery: small or fractional binary values print as DecimalSI
            # so that nothing is rounded and "512" does not become "0.5Ki".
            if -1024 < value < 1024 or value.denominator != 1:
                fmt = QuantityFormat.DECIMAL_SI
            else:
                return _binary_string(int(value))
        mantissa, exponent = _decimal_parts(value)
        if fmt is QuantityFormat.DECIMAL_EXPONENT:
            return f"{mantissa}e{exponent}" if exponent else str(mantissa)
        if exponent > 18:
            # apimachinery would drop the suffix here (printing a wrong value);
            # staying at "E" keeps the string faithful.
            mantissa *= 10 ** (exponent - 18)
            exponent = 18
        return f"{mantissa}{_SUFFIX_BY_DECIMAL_EXPONENT[exponent]}"

    def __repr__(self) -> str:
        return f"Quantity({str(self)!r})"


def _decimal_parts(value: Fraction) -> tuple[int, int]:
    """Integer mantissa and the largest exponent, a multiple of 3, that keeps it integral."""
    # Values are nano-rounded, so value × 10⁹ is always an integer.
    mantissa = int(value * _NANO)
    exponent = -9
    while mantissa % 10 == 0:
        mantissa //= 10
        exponent += 1
    while exponent % 3:
        mantissa *= 10
        exponent -= 1
    return mantissa, exponent


def _binary_string(value: int) -> str:
    power = 0
    while value % 1024 == 0 and power < len(_BINARY_SUFFIXES) - 1:
        value //= 1024
        power += 1
    return f"{value}{_BINARY_SUFFIXES[power]}"


def _ceil_away_from_zero(value: Fraction) -> int:
    magnitude = math.ceil(abs(value))
    return magnitude if value >= 0 else -magnitude


def scheduler_value(resource: str, quantity: Quantity) -> int:
    """The exact integer the scheduler accounts with: milli-units for cpu, base units otherwise."""
    scaled = quantity.value * 1000 if resource == "cpu" else quantity.value
    result = _ceil_away_from_zero(scaled)
    if not INT64_MIN <= result <= INT64_MAX:
        raise QuantityError(
            f'quantity "{quantity}" of resource "{resource}" does not fit in a signed '
            "64-bit integer"
        )
    return result


def _resource_quantity(resource: str, value: int) -> Quantity:
    if resource == "cpu":
        return Quantity(Fraction(value, 1000))
    if resource in _BINARY_RESOURCES or resource.startswith(_HUGEPAGES_PREFIX):
        return Quantity(value, QuantityFormat.BINARY_SI)
    return Quantity(value)


def format_resource(resource: str, value: int) -> str:
    """Canonical Kubernetes string of a scheduler value, as Kueue prints it."""
    return str(_resource_quantity(resource, value))


def _coerce(raw: Any) -> Quantity:
    if isinstance(raw, Quantity):
        return raw
    if isinstance(raw, str | int | float) and not isinstance(raw, bool):
        return Quantity.parse(raw)
    raise ValueError(f"invalid quantity {raw!r}: expected a string or a number")


QuantityField = Annotated[
    Quantity,
    PlainValidator(_coerce),
    PlainSerializer(str, return_type=str),
    WithJsonSchema({"anyOf": [{"type": "string"}, {"type": "number"}]}),
]
"""Pydantic field type: validates from str/int/float, serializes to the canonical string."""
