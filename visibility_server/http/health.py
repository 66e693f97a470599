"""`/healthz`, `/livez`, `/readyz` in kube-apiserver's format
(docs/visibility-api.md#health-metrics-and-version).

Success is the 2-byte body `ok` (with `?verbose`, one `[+]<name> ok` line per check and
`<endpoint> check passed`). Failure is always verbose and HTTP 500 (not 503), reasons
withheld because these paths are public. `?exclude=<name>` skips a check and
`/<endpoint>/<name>` runs one.

The app owns `ping` and `informer-sync`; the runtime passes the others (`event-loop`,
`authentication-config`, `shutdown`) as `HealthCheck`s. `informer-sync` latches: once
the first synced snapshot is seen it never fails again, so a kube-apiserver or watch
outage cannot flap readiness (and with it the APIService and discovery).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Final

LIVEZ: Final = "livez"
READYZ: Final = "readyz"
HEALTHZ: Final = "healthz"
ALL_ENDPOINTS: Final = frozenset({LIVEZ, READYZ, HEALTHZ})
NOT_LIVENESS: Final = frozenset({READYZ, HEALTHZ})
READYZ_ONLY: Final = frozenset({READYZ})

# The order kube-apiserver-style output lists them in; unknown names follow.
CANONICAL_ORDER: Final = (
    "ping",
    "event-loop",
    "authentication-config",
    "informer-sync",
    "shutdown",
)
CONTENT_TYPE: Final = "text/plain; charset=utf-8"


@dataclass(frozen=True, slots=True)
class HealthCheck:
    """`check()` is True when healthy; `endpoints` are the endpoints that run it."""

    name: str
    check: Callable[[], bool]
    endpoints: frozenset[str] = ALL_ENDPOINTS


class SyncLatch:
    """True from the first time `synced()` is True on."""

    def __init__(self, synced: Callable[[], bool]) -> None:
        self._synced = synced
        self._seen = False

    def __call__(self) -> bool:
        if not self._seen and self._synced():
            self._seen = True
        return self._seen


def _quoted_list(names: Iterable[str]) -> str:
    return ",".join(f'"{name}"' for name in names)


class Health:
    def __init__(self, checks: Sequence[HealthCheck]) -> None:
        def rank(item: tuple[int, HealthCheck]) -> tuple[int, int]:
            index, check = item
            if check.name in CANONICAL_ORDER:
                return (CANONICAL_ORDER.index(check.name), index)
            return (len(CANONICAL_ORDER), index)

        ordered = [check for _, check in sorted(enumerate(checks), key=rank)]
        self._by_endpoint = {
            endpoint: [c for c in ordered if endpoint in c.endpoints] for endpoint in ALL_ENDPOINTS
        }

    def has_check(self, endpoint: str, name: str) -> bool:
        return any(c.name == name for c in self._by_endpoint[endpoint])

    def run(
        self, endpoint: str, *, only: str = "", verbose: bool = False, exclude: Sequence[str] = ()
    ) -> tuple[int, bytes]:
        """(HTTP status, body) of `/<endpoint>` or `/<endpoint>/<only>`."""
        checks = self._by_endpoint[endpoint]
        if only:
            checks = [c for c in checks if c.name == only]
        excluded = set(exclude)
        lines: list[str] = []
        failed = False
        for check in checks:
            if check.name in excluded:
                excluded.discard(check.name)
                lines.append(f"[+]{check.name} excluded: ok\n")
                continue
            try:
                healthy = check.check()
            except Exception:
                healthy = False
            if healthy:
                lines.append(f"[+]{check.name} ok\n")
            else:
                lines.append(f"[-]{check.name} failed: reason withheld\n")
                failed = True
        if excluded:
            lines.append(
                "warn: some health checks cannot be excluded: no matches for "
                f"{_quoted_list(sorted(excluded))}\n"
            )
        if failed:
            # Go's http.Error appends the newline.
            return 500, ("".join(lines) + f"{endpoint} check failed\n").encode()
        if not verbose:
            return 200, b"ok"
        return 200, ("".join(lines) + f"{endpoint} check passed\n").encode()
