"""Objects from a live API server into the API model: `scheduler.api.live`, which the
validating webhook uses too (it sits in the API layer so the server may import it)."""

from __future__ import annotations

from scheduler.api.live import decode_live, prune

__all__ = ["decode_live", "prune"]
