"""The queue-flush benchmark runs end to end on a small queue and flushes what it parked."""

from __future__ import annotations

import re

import pytest

from benchmarks.queue_flush import main


def test_every_flush_sends_the_parked_workloads_back(capsys: pytest.CaptureFixture[str]) -> None:
    main(["--pending", "400", "--flushes", "2"])
    out = capsys.readouterr().out
    parked = re.search(r"parked: (\d+);", out)
    assert parked is not None and int(parked.group(1)) > 0
    flushes = re.findall(r"flush: .* QueueCounts\(active=(\d+), parked=(\d+), in_flight=0\)", out)
    assert len(flushes) == 2
    assert all(int(active) > 0 and parked == "0" for active, parked in flushes)
    assert "peak RSS" in out
