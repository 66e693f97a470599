"""Kubernetes name and label validators.

Each validator returns a list of error strings (empty when valid) worded exactly
like k8s.io/apimachinery/pkg/util/validation, because those strings surface in
rejection messages that users compare with what kube-apiserver says.
"""

from __future__ import annotations

import re

__all__ = [
    "dns1123_label",
    "dns1123_subdomain",
    "label_key",
    "label_value",
    "qualified_name",
]

DNS1123_LABEL_MAX_LENGTH = 63
DNS1123_SUBDOMAIN_MAX_LENGTH = 253
QUALIFIED_NAME_MAX_LENGTH = 63
LABEL_VALUE_MAX_LENGTH = 63

_DNS1123_LABEL_FMT = "[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_DNS1123_LABEL_MSG = (
    "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', "
    "and must start and end with an alphanumeric character"
)
_DNS1123_SUBDOMAIN_FMT = _DNS1123_LABEL_FMT + r"(\." + _DNS1123_LABEL_FMT + ")*"
_DNS1123_SUBDOMAIN_MSG = (
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, "
    "'-' or '.', and must start and end with an alphanumeric character"
)
_QUALIFIED_NAME_FMT = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]"
_QUALIFIED_NAME_MSG = (
    "must consist of alphanumeric characters, '-', '_' or '.', "
    "and must start and end with an alphanumeric character"
)
_LABEL_VALUE_FMT = "(" + _QUALIFIED_NAME_FMT + ")?"
_LABEL_VALUE_MSG = (
    "a valid label must be an empty string or consist of alphanumeric characters, "
    "'-', '_' or '.', and must start and end with an alphanumeric character"
)

# re.ASCII keeps [a-z0-9] from matching non-ASCII letters or digits.
_DNS1123_LABEL_RE = re.compile(_DNS1123_LABEL_FMT, re.ASCII)
_DNS1123_SUBDOMAIN_RE = re.compile(_DNS1123_SUBDOMAIN_FMT, re.ASCII)
_QUALIFIED_NAME_RE = re.compile(_QUALIFIED_NAME_FMT, re.ASCII)
_LABEL_VALUE_RE = re.compile(_LABEL_VALUE_FMT, re.ASCII)


def _regex_error(msg: str, fmt: str, *examples: str) -> str:
    # Mirrors apimachinery's RegexError, including its doubled space before "or"
    # ("'my-name',  or '123-abc'"), which is part of the user-visible text.
    if not examples:
        return f"{msg} (regex used for validation is '{fmt}')"
    rendered = " or ".join(f"'{example}', " for example in examples)
    return f"{msg} (e.g. {rendered}regex used for validation is '{fmt}')"


def _max_len_error(length: int) -> str:
    return f"must be no more than {length} characters"


_EMPTY_ERROR = "must be non-empty"


def _byte_len(value: str) -> int:
    # Go measures string length in bytes.
    return len(value.encode("utf-8"))


def dns1123_label(value: str) -> list[str]:
    errors = []
    if _byte_len(value) > DNS1123_LABEL_MAX_LENGTH:
        errors.append(_max_len_error(DNS1123_LABEL_MAX_LENGTH))
    if not _DNS1123_LABEL_RE.fullmatch(value):
        errors.append(_regex_error(_DNS1123_LABEL_MSG, _DNS1123_LABEL_FMT, "my-name", "123-abc"))
    return errors


def dns1123_subdomain(value: str) -> list[str]:
    errors = []
    if _byte_len(value) > DNS1123_SUBDOMAIN_MAX_LENGTH:
        errors.append(_max_len_error(DNS1123_SUBDOMAIN_MAX_LENGTH))
    if not _DNS1123_SUBDOMAIN_RE.fullmatch(value):
        errors.append(_regex_error(_DNS1123_SUBDOMAIN_MSG, _DNS1123_SUBDOMAIN_FMT, "example.com"))
    return errors


def qualified_name(value: str) -> list[str]:
    errors: list[str] = []
    parts = value.split("/")
    if len(parts) == 1:
        name = parts[0]
    elif len(parts) == 2:
        prefix, name = parts
        if not prefix:
            errors.append("prefix part " + _EMPTY_ERROR)
        else:
            errors.extend("prefix part " + msg for msg in dns1123_subdomain(prefix))
    else:
        return [
            "a qualified name "
            + _regex_error(_QUALIFIED_NAME_MSG, _QUALIFIED_NAME_FMT, "MyName", "my.name", "123-abc")
            + " with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')"
        ]
    if not name:
        errors.append("name part " + _EMPTY_ERROR)
    elif _byte_len(name) > QUALIFIED_NAME_MAX_LENGTH:
        errors.append("name part " + _max_len_error(QUALIFIED_NAME_MAX_LENGTH))
    # Like apimachinery, an empty name reports both "non-empty" and the regex.
    if not _QUALIFIED_NAME_RE.fullmatch(name):
        errors.append(
            "name part "
            + _regex_error(_QUALIFIED_NAME_MSG, _QUALIFIED_NAME_FMT, "MyName", "my.name", "123-abc")
        )
    return errors


label_key = qualified_name


def label_value(value: str) -> list[str]:
    errors = []
    if _byte_len(value) > LABEL_VALUE_MAX_LENGTH:
        errors.append(_max_len_error(LABEL_VALUE_MAX_LENGTH))
    if not _LABEL_VALUE_RE.fullmatch(value):
        errors.append(
            _regex_error(_LABEL_VALUE_MSG, _LABEL_VALUE_FMT, "MyValue", "my_value", "12345")
        )
    return errors
