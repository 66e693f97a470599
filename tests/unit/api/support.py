"""Helpers for the API tests: decode YAML text, collect the errors of a document."""

from __future__ import annotations

import textwrap

import pytest

from scheduler.api import ApiError, ApiObject, FieldError, KubeObject, load_yaml


def decode(text: str) -> ApiObject:
    """The single object of a YAML document."""
    decoded = load_yaml(textwrap.dedent(text), "test.yaml")
    assert len(decoded) == 1
    return decoded[0].obj


def decode_kube(text: str) -> KubeObject:
    """The single object of a YAML document, which has metadata."""
    obj = decode(text)
    assert isinstance(obj, KubeObject)
    return obj


def rejection(text: str) -> ApiError:
    with pytest.raises(ApiError) as info:
        load_yaml(textwrap.dedent(text), "test.yaml")
    return info.value


def errors(text: str) -> list[FieldError]:
    return list(rejection(text).errors)


def has_error(text: str, path: str, fragment: str) -> None:
    """The document is rejected with an error at `path` whose detail contains `fragment`."""
    found = errors(text)
    assert any(e.path == path and fragment in e.detail for e in found), "\n".join(
        str(e) for e in found
    )
