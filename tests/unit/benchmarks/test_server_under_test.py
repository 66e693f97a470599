"""The benchmark server starts on the real serve path, fed and answering its figures.

It patches names the serve path looks up at run time (the store class, the app factory).
When those move, every in-process benchmark breaks at once; this test catches it in CI
instead of at the next `make bench`.
"""

from __future__ import annotations

import pytest

from benchmarks import server_under_test
from benchmarks.harness import BenchServer, server_ready
from queuescope import engine_serving

PENDING = 300


def test_the_fed_server_answers_pages_and_its_own_figures() -> None:
    with BenchServer(PENDING, feed="decode") as server:
        stats = server.get_json("/bench/stats")
        assert stats["synced"] is True
        assert stats["view_entries"] + stats["engine"]["admitted"] == PENDING
        assert stats["rss_after_feed"] > stats["rss_before_feed"] > 0
        # Ready means the forecast worker (on by default) has had its first refresh.
        assert stats["forecasts"]["running"] is True
        assert stats["forecasts"]["refreshes"] >= 1
        assert stats["forecasts"]["chunks_sent"] >= 1
        page = server.get_json(
            "/apis/visibility.kueue.x-k8s.io/v1beta2/clusterqueues/bench/pendingworkloads"
            "?limit=5&offset=0"
        )
        baseline = server.get_json("/bench/baseline/clusterqueues/bench/pendingworkloads?limit=5")
        ours = [(i["metadata"]["namespace"], i["metadata"]["name"]) for i in page["items"]]
        theirs = [(i["metadata"]["namespace"], i["metadata"]["name"]) for i in baseline["items"]]
        assert len(ours) == 5
        assert ours == theirs


def test_a_name_that_moved_fails_loudly() -> None:
    with pytest.raises(RuntimeError, match="no longer defines create_application"):
        server_under_test.replace_global(engine_serving, "create_application", object())


def _stats(forecasts: dict[str, object]) -> dict[str, object]:
    return {
        "synced": True,
        "generation": 3,
        "view_entries": PENDING - 1,
        "engine": {"admitted": 1},
        "forecasts": forecasts,
    }


def test_ready_waits_for_the_first_forecast_refresh() -> None:
    assert not server_ready(_stats({"running": True, "refreshes": 0}), PENDING)
    assert server_ready(_stats({"running": True, "refreshes": 1}), PENDING)
    assert server_ready(_stats({"running": False, "refreshes": 0}), PENDING)
    not_all_listed = _stats({"running": False}) | {"view_entries": PENDING - 2}
    assert not server_ready(not_all_listed, PENDING)
