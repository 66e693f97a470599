"""The outcome of an authorization check."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Decision:
    """Allowed or not, and why.

    For a denial, a non-empty `reason` is appended to the 403 message (as
    kube-apiserver appends a SubjectAccessReview's `status.reason`); for an allow it
    is only informative (logs, tests).
    """

    allowed: bool
    reason: str = ""

    @classmethod
    def allow(cls, reason: str = "") -> Decision:
        return cls(True, reason)

    @classmethod
    def deny(cls, reason: str = "") -> Decision:
        return cls(False, reason)


__all__ = ["Decision"]
