"""The freeze policy: the heap is frozen once per `freeze_after` new snapshot entries."""

from __future__ import annotations

import gc

from scheduler.runtime.collector import FreezePolicy


def test_freezes_once_per_threshold_and_never_when_off() -> None:
    frozen_before = gc.get_freeze_count()
    try:
        policy = FreezePolicy(100)
        keep = [[i] for i in range(50)]  # tracked objects that exist at the freeze
        assert not policy.built(60)
        assert policy.built(60)
        assert (policy.freezes, policy.pending) == (1, 0)
        assert gc.get_freeze_count() >= frozen_before + len(keep)
        assert not policy.built(99)
        off = FreezePolicy(None)
        assert not off.built(10**9)
        assert off.freezes == 0
    finally:
        gc.unfreeze()
