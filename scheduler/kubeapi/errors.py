"""The one error of a call to kube-apiserver, for cluster mode and the visibility server."""

from __future__ import annotations

from typing import Any

Json = dict[str, Any]


class KubeError(Exception):
    """A non-2xx answer (status > 0) or no answer at all (status 0: connection failure,
    timeout, a broken stream); `body` is the decoded answer, a Kubernetes `Status` as a
    rule."""

    def __init__(self, status: int, reason: str, body: Json | None = None) -> None:
        self.status = status
        self.reason = reason
        self.body = body or {}
        super().__init__(f"{status} {reason}: {self.message}".rstrip(": "))

    @property
    def message(self) -> str:
        """The `message` of the Status body, "" when there is none."""
        value = self.body.get("message") if isinstance(self.body, dict) else None
        return value if isinstance(value, str) else ""

    @property
    def status_reason(self) -> str:
        """The `reason` of the Kubernetes Status body (`Conflict`, `Expired`, ...)."""
        value = self.body.get("reason", "")
        return value if isinstance(value, str) else ""

    @property
    def transient(self) -> bool:
        """Worth retrying: transport errors, throttling and server errors."""
        return self.status in {0, 429} or self.status >= 500

    @property
    def detail(self) -> str:
        """What an operator reads: why there was no answer, or what kube-apiserver said."""
        if self.status == 0:
            return self.reason
        return f"kube-apiserver answered {self.status}: {self.message or self.reason}"


__all__ = ["Json", "KubeError"]
