"""Taints and tolerations (core/v1), shared by ResourceFlavors and pod templates."""

from __future__ import annotations

from typing import Any

from scheduler.api.base import ApiModel, Int64, Timestamp


class Taint(ApiModel):
    key: str
    value: str = ""
    # Required by Kubernetes; validated (not typed as an enum) so that a bad value
    # gets Kubernetes' "Unsupported value" message with the allowed list.
    effect: str
    time_added: Timestamp | None = None

    def to_dict(self) -> dict[str, Any]:
        """camelCase plain dict, the shape the core's selector functions take."""
        return super().to_dict()


class Toleration(ApiModel):
    key: str = ""
    operator: str = ""
    value: str = ""
    effect: str = ""
    toleration_seconds: Int64 | None = None

    def to_dict(self) -> dict[str, Any]:
        """camelCase plain dict, the shape the core's selector functions take."""
        return super().to_dict()
