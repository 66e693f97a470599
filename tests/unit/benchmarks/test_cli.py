from __future__ import annotations

import argparse

import pytest

from benchmarks.__main__ import parser
from benchmarks.cluster_sync import cluster_sync
from benchmarks.suite import BENCHMARKS, _memory_command, depths

EXPECTED = {
    "visibility-latency",
    "visibility-throughput",
    "scheduler-throughput",
    "loop-lag",
    "memory",
    "snapshot",
    "cluster-sync",
    "forecast-accuracy",
}


def test_every_benchmark_of_the_spec_is_registered() -> None:
    assert set(BENCHMARKS) == EXPECTED


def test_cluster_sync_runs_the_real_control_plane_at_the_spec_sizes() -> None:
    bench = BENCHMARKS["cluster-sync"]
    assert bench.run is cluster_sync
    assert not bench.unavailable
    full = bench.resolve(argparse.Namespace(quick=False))
    assert (full.workloads, full.admit, full.qps) == (10_000, 2_000, 200.0)
    quick = bench.resolve(argparse.Namespace(quick=True))
    assert quick.workloads < full.workloads


@pytest.mark.parametrize(
    ("text", "sizes"),
    [
        ("1k,10k,100k,1M", [1000, 10_000, 100_000, 1_000_000]),
        ("500", [500]),
        (" 2k , 3 ", [2000, 3]),
    ],
)
def test_depths(text: str, sizes: list[int]) -> None:
    assert depths(text) == sizes


@pytest.mark.parametrize("text", ["", "ten", "1.5k", "1k,,2k"])
def test_depths_rejects(text: str) -> None:
    with pytest.raises(argparse.ArgumentTypeError):
        depths(text)


def _resolved(argv: list[str]) -> argparse.Namespace:
    args = parser().parse_args(argv)
    return BENCHMARKS[args.name].resolve(args)


def test_sizes_default_to_full_or_quick() -> None:
    full = _resolved(["visibility-latency"])
    assert full.depths == [1000, 10_000, 100_000, 1_000_000]
    assert full.requests == 1000
    quick = _resolved(["visibility-latency", "--quick"])
    assert quick.depths == [1000, 100_000]
    assert quick.requests == 300


def test_an_explicit_size_wins_over_quick() -> None:
    args = _resolved(["visibility-latency", "--quick", "--depths", "10k", "--requests", "7"])
    assert args.depths == [10_000]
    assert args.requests == 7
    assert args.baseline_requests == 20  # still the quick default


def test_command_shows_the_sizes_that_ran() -> None:
    args = _resolved(["snapshot", "--quick", "--trials", "3"])
    assert BENCHMARKS["snapshot"].command(args) == (
        "python -m benchmarks snapshot --quick --pending 100000 --trials 3"
    )


def test_every_available_benchmark_has_help_with_its_sizes(
    capsys: pytest.CaptureFixture[str],
) -> None:
    for name, bench in BENCHMARKS.items():
        with pytest.raises(SystemExit) as exit_info:
            parser().parse_args([name, "--help"])
        assert exit_info.value.code == 0
        text = capsys.readouterr().out
        assert "--quick" in text
        for size in bench.sizes:
            assert f"--{size.flag}" in text


def test_memory_cluster_is_a_switch_with_its_own_sizes_and_command() -> None:
    args = _resolved(["memory", "--cluster", "--workloads", "10k,100k"])
    assert args.cluster and not args.no_upstream
    assert args.workloads == [10_000, 100_000]
    assert _memory_command(args) == (
        "python -m benchmarks memory --cluster --workloads 10000,100000 --qps 200.0"
    )
    embedded = _resolved(["memory", "--quick"])
    assert not embedded.cluster
    assert _memory_command(embedded) == (
        "python -m benchmarks memory --quick --decoded 10000 --bulk 100000"
    )
