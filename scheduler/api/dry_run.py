"""The errors of a dry-run request body (docs/visibility-api.md#what-if): what the runtime
raises and the server answers as a `Status`, so both sides share one type."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class FieldCause:
    field: str  # camelCase path, e.g. `spec.template.spec.containers[0].resources`
    message: str


class DryRunError(Exception):
    """A body the dry run refuses: `code` 400 (not one object) or 422 (not a valid Job or
    Workload for this LocalQueue, with the fields at fault)."""

    def __init__(self, code: int, message: str, causes: tuple[FieldCause, ...] = ()) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.causes = causes
