"""Fakes for the delegated-auth unit tests: a scripted kube-apiserver transport and a
clock whose sleeps advance it instantly."""

from __future__ import annotations

import asyncio
import json
from collections import deque
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from scheduler.kubeapi.client import Call as RestCall
from scheduler.kubeapi.client import Reply
from scheduler.kubeapi.errors import KubeError
from visibility_server.kube.retry import RetryPolicy

SAR_PATH: Final = "/apis/authorization.k8s.io/v1/subjectaccessreviews"
TOKEN_REVIEW_PATH: Final = "/apis/authentication.k8s.io/v1/tokenreviews"
SELF_SAR_PATH: Final = "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews"
CONFIGMAP_PATH: Final = (
    "/api/v1/namespaces/kube-system/configmaps/extension-apiserver-authentication"
)
CONFIGMAPS_PATH: Final = "/api/v1/namespaces/kube-system/configmaps"


class Timeout:
    """A scripted attempt that uses up its whole timeout and then fails."""


TIMEOUT: Final = Timeout()


def response(status: int, doc: object = None, **headers: str) -> Reply:
    body = b"" if doc is None else json.dumps(doc).encode()
    return Reply(status, body, dict(headers))


def status_error(code: int, message: str) -> Reply:
    """kube-apiserver's error body: a `Status`."""
    return response(
        code, {"kind": "Status", "apiVersion": "v1", "status": "Failure", "message": message}
    )


def created(status: Mapping[str, Any], **spec: Any) -> Reply:
    return response(201, {"kind": "Review", "spec": spec, "status": dict(status)})


FORBIDDEN: Final = status_error(
    403,
    'subjectaccessreviews.authorization.k8s.io is forbidden: User "system:serviceaccount:'
    'queuescope-system:queuescope-controller" cannot create resource "subjectaccessreviews" '
    'in API group "authorization.k8s.io" at the cluster scope',
)


class Refresher:
    """A credential refresher that counts its calls."""

    def __init__(self) -> None:
        self.calls = 0

    async def __call__(self) -> None:
        self.calls += 1


@dataclass
class FakeClock:
    now: float = 1000.0
    sleeps: list[float] = field(default_factory=list)
    # Raise StopWatching on the sleep after this many: how a test ends a `run()` loop.
    stop_after: int | None = None

    def __call__(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        if self.stop_after is not None and len(self.sleeps) >= self.stop_after:
            raise StopWatching
        self.sleeps.append(seconds)
        self.now += seconds
        await asyncio.sleep(0)  # let other tasks run, as a real sleep would

    def policy(self, *, rand: float = 0.0, **overrides: float) -> RetryPolicy:
        return RetryPolicy(sleep=self.sleep, clock=self, rand=lambda: rand, **overrides)


@dataclass(frozen=True)
class Call:
    method: str
    path: str
    query: tuple[tuple[str, str], ...]
    body: Mapping[str, Any] | None
    timeout: float


Outcome = Reply | Exception | Timeout
WatchScript = Sequence[object]  # events (dicts), ending optionally with an exception or response


class FakeTransport:
    """Answers each (method, path) from a script, in order; the last entry repeats."""

    def __init__(self, clock: FakeClock | None = None) -> None:
        self.clock = clock or FakeClock()
        self.calls: list[Call] = []
        self.watch_calls: list[tuple[str, tuple[tuple[str, str], ...]]] = []
        self._scripts: dict[tuple[str, str], deque[Outcome]] = {}
        self._watches: deque[WatchScript] = deque()

    def script(self, method: str, path: str, *outcomes: Outcome) -> None:
        self._scripts[(method, path)] = deque(outcomes)

    def script_watches(self, *streams: WatchScript) -> None:
        self._watches.extend(streams)

    def calls_to(self, path: str) -> list[Call]:
        return [call for call in self.calls if call.path == path]

    async def request(self, call: RestCall) -> Reply:
        method, path, timeout = call.method, call.path, call.timeout
        assert timeout is not None, f"{method} {path} without a deadline"
        self.calls.append(Call(method, path, tuple(call.query), call.body, timeout))
        script = self._scripts.get((method, path))
        if not script:
            raise AssertionError(f"unscripted request {method} {path}")
        outcome = script.popleft() if len(script) > 1 else script[0]
        if isinstance(outcome, Timeout):
            self.clock.now += timeout
            raise KubeError(0, f"kube-apiserver did not answer within {timeout:g}s")
        if isinstance(outcome, Exception):
            raise outcome
        return outcome

    async def watch(
        self, path: str, *, query: Sequence[tuple[str, str]], read_timeout: float
    ) -> AsyncIterator[Any]:
        self.watch_calls.append((path, tuple(query)))
        if not self._watches:
            # Nothing more scripted: end the test's run loop.
            raise StopWatching
        for item in self._watches.popleft():
            if isinstance(item, Reply):
                raise item.error()
            if isinstance(item, BaseException):
                raise item
            yield item


class StopWatching(BaseException):
    """Raised by the fake when the test has nothing more to stream: ends `run()`."""
