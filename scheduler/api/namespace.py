"""Namespace (v1, docs/scheduling.md#namespaces): only its name and labels matter
(namespaceSelector)."""

from __future__ import annotations

from typing import Any, Literal

from scheduler.api.meta import KubeObject


class Namespace(KubeObject):
    api_version: Literal["v1"] = "v1"
    kind: Literal["Namespace"] = "Namespace"
    # Accepted, ignored (finalizers, phase): they do not affect admission.
    spec: dict[str, Any] | None = None
    status: dict[str, Any] | None = None
