"""Field paths of validation errors, printed as apimachinery prints them:
`spec.podSets[0].template`, `spec.resources.requests[cpu]`. Every validator builds the
paths it reports with these three; the messages are `common.py`'s."""

from __future__ import annotations


def child(path: str, name: str) -> str:
    return f"{path}.{name}" if path else name


def index(path: str, i: int) -> str:
    return f"{path}[{i}]"


def key(path: str, k: str) -> str:
    return f"{path}[{k}]"
