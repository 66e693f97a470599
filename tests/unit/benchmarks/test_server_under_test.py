"""The benchmark server starts on the real serve path, fed and answering its figures.

It patches names the serve path looks up at run time (the store class, the app factory).
When those move, every in-process benchmark breaks at once; this test catches it in CI
instead of at the next `make bench`.
"""

from __future__ import annotations

import pytest

from benchmarks import server_under_test
from benchmarks.harness import BenchServer
from queuescope import engine_serving

PENDING = 300


def test_the_fed_server_answers_pages_and_its_own_figures() -> None:
    with BenchServer(PENDING, feed="decode") as server:
        stats = server.get_json("/bench/stats")
        assert stats["synced"] is True
        assert stats["view_entries"] + stats["engine"]["admitted"] == PENDING
        assert stats["rss_after_feed"] > stats["rss_before_feed"] > 0
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
