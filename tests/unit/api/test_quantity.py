from __future__ import annotations

from fractions import Fraction

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import BaseModel, ValidationError

from scheduler.api.quantity import (
    Quantity,
    QuantityError,
    QuantityField,
    QuantityFormat,
    format_resource,
    scheduler_value,
)

INT64_MIN = -(2**63)
INT64_MAX = 2**63 - 1


@pytest.mark.parametrize(
    ("raw", "value"),
    [
        ("0", Fraction(0)),
        ("1", Fraction(1)),
        ("+1", Fraction(1)),
        ("-1", Fraction(-1)),
        (".5", Fraction(1, 2)),
        ("5.", Fraction(5)),
        ("1.5", Fraction(3, 2)),
        ("500m", Fraction(1, 2)),
        ("100M", Fraction(10**8)),
        ("1k", Fraction(1000)),
        ("3n", Fraction(3, 10**9)),
        ("7u", Fraction(7, 10**6)),
        ("2E", Fraction(2 * 10**18)),
        ("1Ki", Fraction(1024)),
        ("2Gi", Fraction(2 * 2**30)),
        ("1.5Gi", Fraction(3 * 2**29)),
        ("1Ei", Fraction(2**60)),
        ("1e3", Fraction(1000)),
        ("1E3", Fraction(1000)),
        ("1.5e-3", Fraction(3, 2000)),
        ("12e+6", Fraction(12 * 10**6)),
        ("1.e2", Fraction(100)),
        ("-0", Fraction(0)),
        ("007", Fraction(7)),
    ],
)
def test_parse_values(raw: str, value: Fraction) -> None:
    assert Quantity.parse(raw).value == value


@pytest.mark.parametrize(
    "raw",
    [
        "",
        " ",
        "1.2.3",
        "Gi",
        "1 Gi",
        " 1",
        "1 ",
        "1\n",
        "1KI",
        "1K",
        "1ki",
        "1Kii",
        "e3",
        "1e",
        "1e+",
        "1e3.5",
        "--1",
        "+-1",
        ".",
        "-.",
        "1m1",
        "abc",
        "inf",
        "nan",
        "0x10",
        "1_000",
        "\u0661",  # ARABIC-INDIC DIGIT ONE is a digit to Python but not to Kubernetes
        "1e1001",
    ],
)
def test_parse_rejects(raw: str) -> None:
    with pytest.raises(QuantityError) as caught:
        Quantity.parse(raw)
    assert f'"{raw}"' in str(caught.value)


def test_parse_rejects_non_numbers() -> None:
    with pytest.raises(QuantityError):
        Quantity.parse(True)
    with pytest.raises(QuantityError):
        Quantity.parse(float("inf"))
    with pytest.raises(QuantityError):
        Quantity.parse(float("nan"))


def test_parse_numbers() -> None:
    assert Quantity.parse(3).value == 3
    assert Quantity.parse(10**30).value == 10**30
    assert Quantity.parse(1.5).value == Fraction(3, 2)
    # repr(0.1) is "0.1", so floats are taken as written rather than as binary doubles.
    assert Quantity.parse(0.1).value == Fraction(1, 10)
    assert Quantity.parse(1e-05).value == Fraction(1, 100000)


def test_sub_nano_values_round_up_away_from_zero() -> None:
    assert Quantity.parse("1e-12").value == Fraction(1, 10**9)
    assert Quantity.parse("-1e-12").value == Fraction(-1, 10**9)
    assert Quantity.parse("1.0000000001").value == Fraction(1_000_000_001, 10**9)
    assert str(Quantity.parse("0.0000000001")) == "1n"


@pytest.mark.parametrize(
    ("raw", "canonical"),
    [
        ("0", "0"),
        ("0Gi", "0"),
        ("0e5", "0"),
        ("1", "1"),
        ("+1", "1"),
        ("1000", "1k"),
        ("1500", "1500"),
        ("1500000", "1500k"),
        ("1.5", "1500m"),
        (".5", "500m"),
        ("0.1", "100m"),
        ("0.0001", "100u"),
        ("100M", "100M"),
        ("1000M", "1G"),
        ("2000E", "2000E"),
        ("1e21", "1e21"),
        ("-1.5", "-1500m"),
        ("1Ki", "1Ki"),
        ("1024Ki", "1Mi"),
        ("1.5Gi", "1536Mi"),
        ("0.5Ki", "512"),  # binary values below 1024 print as DecimalSI
        ("0.1Ki", "102400m"),  # and so do non-integral ones
        ("-1Ki", "-1Ki"),
        ("1024Ei", "1024Ei"),
        ("1e3", "1e3"),
        ("1E3", "1e3"),
        ("12e+6", "12e6"),
        ("1.5e-3", "1500e-6"),
        ("1e1", "10"),
        ("1e-1", "100e-3"),
        ("1E", "1E"),
    ],
)
def test_canonical_string(raw: str, canonical: str) -> None:
    assert str(Quantity.parse(raw)) == canonical


def test_format_family_is_remembered() -> None:
    assert Quantity.parse("1Ki").format is QuantityFormat.BINARY_SI
    assert Quantity.parse("1e3").format is QuantityFormat.DECIMAL_EXPONENT
    assert Quantity.parse("1k").format is QuantityFormat.DECIMAL_SI
    assert Quantity.parse("7").format is QuantityFormat.DECIMAL_SI


def test_equality_hash_and_order_by_value() -> None:
    assert Quantity.parse("1Ki") == Quantity.parse("1024")
    assert Quantity.parse("1e3") == Quantity.parse("1k")
    assert hash(Quantity.parse("1e3")) == hash(Quantity.parse("1k"))
    assert len({Quantity.parse("0.5"), Quantity.parse("500m")}) == 1
    assert Quantity.parse("999m") < Quantity.parse("1")
    assert Quantity.parse("1Ki") > Quantity.parse("1k")
    assert sorted([Quantity.parse("2"), Quantity.parse("-1"), Quantity.parse("1m")]) == [
        Quantity.parse("-1"),
        Quantity.parse("1m"),
        Quantity.parse("2"),
    ]
    assert Quantity.parse("1") != "1"


def test_immutable() -> None:
    quantity = Quantity.parse("1")
    with pytest.raises(AttributeError):
        quantity.value = Fraction(2)  # type: ignore[misc]
    with pytest.raises(AttributeError):
        del quantity.value


@pytest.mark.parametrize(
    ("resource", "raw", "expected"),
    [
        ("cpu", "500m", 500),
        ("cpu", "1.5", 1500),
        ("cpu", "2", 2000),
        ("cpu", "1e3", 1_000_000),
        ("cpu", "0.0001", 1),
        ("cpu", "1n", 1),
        ("cpu", "1.0001", 1001),
        ("cpu", "-0.0001", -1),
        ("cpu", "0", 0),
        ("memory", "2Gi", 2_147_483_648),
        ("memory", "0.1", 1),
        ("memory", "1Ki", 1024),
        ("memory", "100M", 100_000_000),
        ("memory", "500m", 1),
        ("memory", "-0.1", -1),
        ("memory", "1.5", 2),
        ("nvidia.com/gpu", "1e3", 1000),
        ("nvidia.com/gpu", ".5", 1),
        ("pods", "+1", 1),
        ("memory", "7Ei", 7 * 2**60),
        ("memory", "9223372036854775807", INT64_MAX),
        ("memory", "-9223372036854775808", INT64_MIN),
        ("cpu", "9223372036854775807m", INT64_MAX),
    ],
)
def test_scheduler_value(resource: str, raw: str, expected: int) -> None:
    assert scheduler_value(resource, Quantity.parse(raw)) == expected


@pytest.mark.parametrize(
    ("resource", "raw"),
    [
        ("memory", "8Ei"),
        ("memory", "9223372036854775808"),
        ("memory", "-9223372036854775809"),
        ("memory", "1e19"),
        ("cpu", "9223372036854775808m"),
        ("cpu", "1E"),
        ("cpu", "9223372036854776"),
    ],
)
def test_scheduler_value_rejects_int64_overflow(resource: str, raw: str) -> None:
    with pytest.raises(QuantityError, match="64-bit"):
        scheduler_value(resource, Quantity.parse(raw))


@pytest.mark.parametrize(
    ("resource", "value", "expected"),
    [
        ("cpu", 0, "0"),
        ("cpu", 1500, "1500m"),
        ("cpu", 2000, "2"),
        ("cpu", 100, "100m"),
        ("cpu", 1, "1m"),
        ("cpu", 1_000_000, "1k"),
        ("cpu", 1_500_000, "1500"),
        ("cpu", -250, "-250m"),
        ("memory", 0, "0"),
        ("memory", 512 * 2**20, "512Mi"),
        ("memory", 2**30, "1Gi"),
        ("memory", 1536 * 2**20, "1536Mi"),
        ("memory", 1000, "1k"),
        ("memory", 1500, "1500"),
        ("memory", 1, "1"),
        ("memory", -1024, "-1Ki"),
        # Like Kueue's BinarySI quantities: an integer >= 1024 prints in binary
        # form, whose suffix may be empty.
        ("memory", 2000, "2000"),
        ("memory", 1_500_000, "1500000"),
        ("ephemeral-storage", 10 * 2**30, "10Gi"),
        ("hugepages-2Mi", 2**21, "2Mi"),
        ("hugepages-1Gi", 1000, "1k"),
        ("nvidia.com/gpu", 4, "4"),
        ("nvidia.com/gpu", 1000, "1k"),
        ("nvidia.com/gpu", 1024, "1024"),
        ("nvidia.com/gpu", 1500, "1500"),
        ("nvidia.com/gpu", 1_500_000, "1500k"),
        ("pods", -3, "-3"),
        ("memory", INT64_MAX, "9223372036854775807"),
        ("nvidia.com/gpu", 10**18, "1E"),
    ],
)
def test_format_resource(resource: str, value: int, expected: str) -> None:
    assert format_resource(resource, value) == expected


# -- property tests ---------------------------------------------------------

_digits = st.text(alphabet="0123456789", min_size=1, max_size=12)
_suffixes = st.sampled_from(
    ["", "n", "u", "m", "k", "M", "G", "T", "P", "E", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei"]
)


@st.composite
def quantity_strings(draw: st.DrawFn) -> str:
    sign = draw(st.sampled_from(["", "+", "-"]))
    whole = draw(st.one_of(st.just(""), _digits))
    fraction = draw(st.one_of(st.none(), st.text(alphabet="0123456789", max_size=12)))
    if not whole and not fraction:
        whole = "0"
    number = whole if fraction is None else f"{whole}.{fraction}"
    if draw(st.booleans()):
        exponent = draw(st.integers(min_value=-30, max_value=30))
        marker = draw(st.sampled_from(["e", "E"]))
        plus = "+" if exponent >= 0 and draw(st.booleans()) else ""
        suffix = f"{marker}{plus}{exponent}"
    else:
        suffix = draw(_suffixes)
    return f"{sign}{number}{suffix}"


@given(quantity_strings())
def test_every_grammar_string_parses(raw: str) -> None:
    Quantity.parse(raw)


@given(quantity_strings())
def test_canonical_string_round_trips(raw: str) -> None:
    quantity = Quantity.parse(raw)
    assert Quantity.parse(str(quantity)) == quantity


@given(
    st.fractions(max_denominator=10**12),
    st.sampled_from(list(QuantityFormat)),
)
def test_constructed_quantities_round_trip(value: Fraction, fmt: QuantityFormat) -> None:
    quantity = Quantity(value, fmt)
    assert Quantity.parse(str(quantity)) == quantity


@given(
    st.sampled_from(["cpu", "memory", "nvidia.com/gpu", "ephemeral-storage", "hugepages-2Mi"]),
    st.integers(min_value=INT64_MIN, max_value=INT64_MAX),
)
def test_formatted_scheduler_values_round_trip(resource: str, value: int) -> None:
    assert scheduler_value(resource, Quantity.parse(format_resource(resource, value))) == value


@given(quantity_strings())
def test_scheduler_value_is_ceiling_away_from_zero(raw: str) -> None:
    quantity = Quantity.parse(raw)
    try:
        milli = scheduler_value("cpu", quantity)
    except QuantityError:
        return
    exact = quantity.value * 1000
    assert abs(milli) >= abs(exact)
    assert abs(milli) - abs(exact) < 1
    assert (milli > 0) == (exact > 0)


# -- pydantic ---------------------------------------------------------------


class _Holder(BaseModel):
    amount: QuantityField


@pytest.mark.parametrize(
    ("raw", "canonical"),
    [("1.5Gi", "1536Mi"), (2, "2"), (0.5, "500m"), ("1e3", "1e3")],
)
def test_pydantic_validates_and_serializes(raw: str | int | float, canonical: str) -> None:
    holder = _Holder.model_validate({"amount": raw})
    assert isinstance(holder.amount, Quantity)
    assert holder.model_dump() == {"amount": canonical}
    assert holder.model_dump_json() == f'{{"amount":"{canonical}"}}'
    assert _Holder.model_validate_json(holder.model_dump_json()) == holder


def test_pydantic_accepts_quantity_instances() -> None:
    quantity = Quantity.parse("3Ki")
    assert _Holder(amount=quantity).amount is quantity


@pytest.mark.parametrize("raw", ["1KI", "", None, True, [1]])
def test_pydantic_rejects(raw: object) -> None:
    with pytest.raises(ValidationError) as caught:
        _Holder.model_validate({"amount": raw})
    assert "invalid quantity" in str(caught.value)


def test_pydantic_json_schema() -> None:
    schema = _Holder.model_json_schema()
    assert schema["properties"]["amount"]["anyOf"][0] == {"type": "string"}
