"""Fixtures of the real-socket integration tests (`realserver`)."""

from __future__ import annotations

from tests.integration.realserver import real_server

__all__ = ["real_server"]
