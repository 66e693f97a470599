"""Every core test runs with the nomination cache in verify mode: each cache hit is
recomputed and must equal the cached result (scheduler/core/nomination.py)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from scheduler.core import nomination


@pytest.fixture(autouse=True)
def verify_nomination_cache(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setattr(nomination, "VERIFY", True)
    yield
