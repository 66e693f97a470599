"""Resolving queue implementations by name (KEP-2779 plugins)."""

from __future__ import annotations

import importlib.metadata
import sys
import textwrap
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from scheduler.core.queue import loader
from scheduler.core.queue.fifo import FifoQueue, best_effort_fifo, strict_fifo
from scheduler.core.queue.interface import PendingQueue, QueueEntry, QueueSettings
from scheduler.core.queue.loader import QueuePluginError, resolve_queue_factory

EXAMPLES = Path(__file__).resolve().parents[4] / "docs" / "examples"
PLUGIN = "shortest_first_queue:ShortestWaitFirstQueue"
SETTINGS = QueueSettings(cluster_queue="cq", strategy="BestEffortFIFO")


def entry(name: str, ts: int) -> QueueEntry:
    return QueueEntry(
        key=f"ns/{name}",
        namespace="ns",
        name=name,
        uid=f"uid-{name}",
        local_queue="lq",
        priority=0,
        timestamp=ts,
        revision=0,
        requeued_false=False,
        requeue_at=None,
    )


def pop_order(queue: PendingQueue) -> list[str]:
    for i, name in enumerate(["old", "mid", "new"]):
        queue.push(entry(name, ts=i), 0)
    popped: list[str] = []
    while (head := queue.pop(0)) is not None:
        popped.append(head.name)
    return popped


@pytest.fixture(autouse=True)
def fresh_cache() -> Iterator[None]:
    loader.clear_cache()
    yield
    loader.clear_cache()


@pytest.fixture
def examples_on_path(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(EXAMPLES))
    monkeypatch.delitem(sys.modules, "shortest_first_queue", raising=False)


@pytest.fixture
def write_module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Callable[[str, str], None]:
    monkeypatch.syspath_prepend(str(tmp_path))

    def write(name: str, source: str) -> None:
        (tmp_path / f"{name}.py").write_text(textwrap.dedent(source))
        monkeypatch.delitem(sys.modules, name, raising=False)

    return write


def test_builtin_names() -> None:
    assert resolve_queue_factory("StrictFIFO") is strict_fifo
    assert resolve_queue_factory("BestEffortFIFO") is best_effort_fifo
    queue = resolve_queue_factory("StrictFIFO")(SETTINGS)
    assert isinstance(queue, FifoQueue) and queue.strict


@pytest.mark.usefixtures("examples_on_path")
@pytest.mark.parametrize("name", [PLUGIN, "shortest_first_queue.ShortestWaitFirstQueue"])
def test_example_plugin_by_dotted_path_changes_pop_order(name: str) -> None:
    factory = resolve_queue_factory(name)
    assert resolve_queue_factory(name) is factory  # cached
    plugin_queue = factory(SETTINGS)
    assert isinstance(plugin_queue, PendingQueue)
    assert pop_order(best_effort_fifo(SETTINGS)) == ["old", "mid", "new"]
    assert pop_order(plugin_queue) == ["new", "mid", "old"]


@pytest.mark.usefixtures("examples_on_path")
def test_entry_point(monkeypatch: pytest.MonkeyPatch) -> None:
    eps = importlib.metadata.EntryPoints(
        [
            importlib.metadata.EntryPoint(
                name="ShortestWaitFirst", value=PLUGIN, group=loader.ENTRY_POINT_GROUP
            ),
            importlib.metadata.EntryPoint(
                name="Other", value="nowhere:Nothing", group="another.group"
            ),
        ]
    )

    # EntryPoints.select takes the same keyword filters as entry_points().
    monkeypatch.setattr(importlib.metadata, "entry_points", eps.select)
    factory = resolve_queue_factory("ShortestWaitFirst")
    assert pop_order(factory(SETTINGS)) == ["new", "mid", "old"]
    with pytest.raises(QueuePluginError, match="not found"):
        resolve_queue_factory("Other")


def test_entry_point_that_fails_to_load(monkeypatch: pytest.MonkeyPatch) -> None:
    eps = importlib.metadata.EntryPoints(
        [
            importlib.metadata.EntryPoint(
                name="Broken", value="qs_no_such_module:Q", group=loader.ENTRY_POINT_GROUP
            )
        ]
    )
    monkeypatch.setattr(importlib.metadata, "entry_points", eps.select)
    with pytest.raises(QueuePluginError, match="entry point 'qs_no_such_module:Q' failed"):
        resolve_queue_factory("Broken")


def test_function_factory_is_checked(write_module: Callable[[str, str], None]) -> None:
    write_module(
        "qs_function_plugins",
        """
        from scheduler.core.queue.fifo import FifoQueue

        def good(settings):
            return FifoQueue(settings, strategy="StrictFIFO")

        def bad(settings):
            return 42
        """,
    )
    good = resolve_queue_factory("qs_function_plugins:good")(SETTINGS)
    assert isinstance(good, FifoQueue) and good.strict
    bad = resolve_queue_factory("qs_function_plugins:bad")
    with pytest.raises(QueuePluginError, match="returned int, not a PendingQueue"):
        bad(SETTINGS)


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("", "empty"),
        ("Fancy", "'Fancy' not found"),
        ("qs_missing_module:Q", "no module named 'qs_missing_module'"),
        ("qs_missing_pkg.sub.Q", "no module named 'qs_missing_pkg.sub'"),
        ("scheduler.core.queue.fifo:Nope", "has no attribute 'Nope'"),
        ("scheduler.core.queue.fifo:STRICT_FIFO", "str object is not callable"),
        ("collections:OrderedDict", "OrderedDict is not a PendingQueue subclass"),
        ("scheduler.core.queue.interface:PendingQueue", "is abstract"),
        (":attr", "expected 'package.module:attr'"),
    ],
)
def test_errors(name: str, message: str) -> None:
    with pytest.raises(QueuePluginError, match=message):
        resolve_queue_factory(name)


def test_broken_plugin_module_reports_import_error(
    write_module: Callable[[str, str], None],
) -> None:
    write_module("qs_broken_plugin", "import qs_dependency_that_is_not_installed\n")
    with pytest.raises(
        QueuePluginError, match=r"cannot import module 'qs_broken_plugin'.*qs_dependency"
    ):
        resolve_queue_factory("qs_broken_plugin:Queue")
    write_module("qs_raising_plugin", "raise RuntimeError('boom')\n")
    with pytest.raises(QueuePluginError, match="RuntimeError: boom"):
        resolve_queue_factory("qs_raising_plugin.Queue")


def test_failures_are_not_cached(write_module: Callable[[str, str], None]) -> None:
    with pytest.raises(QueuePluginError):
        resolve_queue_factory("qs_late_plugin:Queue")
    write_module(
        "qs_late_plugin",
        "from scheduler.core.queue.fifo import FifoQueue as Queue\n",
    )
    assert resolve_queue_factory("qs_late_plugin:Queue") is FifoQueue


def test_plugin_error_is_a_value_error() -> None:
    assert issubclass(QueuePluginError, ValueError)
