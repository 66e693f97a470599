from __future__ import annotations

import pytest

from scheduler.api.names import (
    dns1123_label,
    dns1123_subdomain,
    label_key,
    label_value,
    qualified_name,
)

LABEL_REGEX_ERROR = (
    "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', "
    "and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', "
    "regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')"
)
SUBDOMAIN_REGEX_ERROR = (
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, "
    "'-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', "
    "regex used for validation is "
    r"'[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"
)
QUALIFIED_NAME_REGEX_ERROR = (
    "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an "
    "alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', "
    "regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')"
)
LABEL_VALUE_REGEX_ERROR = (
    "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or "
    "'.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or "
    "'my_value',  or '12345', regex used for validation is "
    "'(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')"
)


@pytest.mark.parametrize("value", ["a", "0", "my-name", "123-abc", "a" * 63, "a-b-c"])
def test_dns1123_label_valid(value: str) -> None:
    assert dns1123_label(value) == []


@pytest.mark.parametrize("value", ["", "-a", "a-", "A", "a.b", "a_b", "a b", "é", "a\n", "\u0661"])
def test_dns1123_label_invalid(value: str) -> None:
    assert dns1123_label(value) == [LABEL_REGEX_ERROR]


def test_dns1123_label_too_long() -> None:
    assert dns1123_label("a" * 64) == ["must be no more than 63 characters"]
    assert dns1123_label("-" * 64) == ["must be no more than 63 characters", LABEL_REGEX_ERROR]


@pytest.mark.parametrize(
    "value", ["a", "example.com", "a-b.c-d", "0.1", "a" * 253, ".".join(["a" * 63] * 4)[:253]]
)
def test_dns1123_subdomain_valid(value: str) -> None:
    assert dns1123_subdomain(value) == []


@pytest.mark.parametrize("value", ["", ".a", "a.", "a..b", "a.-b", "Example.com", "a_b", "a/b"])
def test_dns1123_subdomain_invalid(value: str) -> None:
    assert dns1123_subdomain(value) == [SUBDOMAIN_REGEX_ERROR]


def test_dns1123_subdomain_too_long() -> None:
    assert dns1123_subdomain("a" * 254) == ["must be no more than 253 characters"]


def test_length_is_measured_in_bytes_like_go() -> None:
    # Non-ASCII never matches anyway, but the length error must agree with Go.
    assert "must be no more than 63 characters" in dns1123_label("é" * 32)


@pytest.mark.parametrize(
    "value",
    [
        "a",
        "MyName",
        "my.name",
        "123-abc",
        "my_name",
        "kubernetes.io/hostname",
        "cloud.google.com/gke-nodepool",
        "a" * 63,
        "example.com/" + "a" * 63,
    ],
)
def test_qualified_name_valid(value: str) -> None:
    assert qualified_name(value) == []
    assert label_key(value) == []


def test_qualified_name_errors() -> None:
    assert qualified_name("") == [
        "name part must be non-empty",
        "name part " + QUALIFIED_NAME_REGEX_ERROR,
    ]
    assert qualified_name("-a") == ["name part " + QUALIFIED_NAME_REGEX_ERROR]
    assert qualified_name("a" * 64) == ["name part must be no more than 63 characters"]
    assert qualified_name("/a") == ["prefix part must be non-empty"]
    assert qualified_name("Example.com/a") == ["prefix part " + SUBDOMAIN_REGEX_ERROR]
    assert qualified_name("example.com/") == [
        "name part must be non-empty",
        "name part " + QUALIFIED_NAME_REGEX_ERROR,
    ]
    assert qualified_name("a/b/c") == [
        "a qualified name "
        + QUALIFIED_NAME_REGEX_ERROR
        + " with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')"
    ]


@pytest.mark.parametrize("value", ["", "a", "MyValue", "my_value", "12345", "a.b-c_d", "a" * 63])
def test_label_value_valid(value: str) -> None:
    assert label_value(value) == []


@pytest.mark.parametrize("value", ["-a", "a-", "_", "a b", "a/b", "é"])
def test_label_value_invalid(value: str) -> None:
    assert label_value(value) == [LABEL_VALUE_REGEX_ERROR]


def test_label_value_too_long() -> None:
    assert label_value("a" * 64) == ["must be no more than 63 characters"]
