"""Kueue's resource transformations on a pod's effective request
(docs/scheduling.md#resource-transformations)."""

from __future__ import annotations

from fractions import Fraction

from scheduler.api.transformations import Transformation, transform

GPU = "nvidia.com/gpu"
CORES = "nvidia.com/gpucores"
MEM = "nvidia.com/gpumem"


def hami(input_name: str, output: str, *, retain: bool = False) -> Transformation:
    """The HAMi example's: per vGPU amounts charged as totals over the vGPUs."""
    return Transformation(input_name, retain, GPU, ((output, Fraction(1)),))


def test_a_request_no_transformation_names_is_left_alone() -> None:
    assert transform({"cpu": 500, "memory": 1024}, [hami(CORES, "total")]) == {
        "cpu": 500,
        "memory": 1024,
    }


def test_replace_with_multiply_by_charges_the_total_over_the_vgpus() -> None:
    per_pod = {GPU: 2, CORES: 30, MEM: 1024, "cpu": 100}
    charged = transform(
        per_pod,
        [hami(CORES, "nvidia.com/total-gpucores"), hami(MEM, "nvidia.com/total-gpumem")],
    )
    assert charged == {
        "cpu": 100,
        GPU: 2,
        "nvidia.com/total-gpucores": 60,
        "nvidia.com/total-gpumem": 2048,
    }
    assert list(charged) == sorted(charged)


def test_retain_keeps_the_input_as_requested_and_the_multiplier_reaches_only_outputs() -> None:
    charged = transform({GPU: 2, CORES: 30}, [hami(CORES, "total", retain=True)])
    assert charged == {GPU: 2, CORES: 30, "total": 60}


def test_without_the_multiplier_requested_the_input_counts_alone() -> None:
    assert transform({CORES: 30}, [hami(CORES, "total")]) == {"total": 30}


def test_outputs_add_up_and_fractions_are_exact_then_rounded_up() -> None:
    mig = Transformation(
        "nvidia.com/mig-1g.5gb",
        False,
        "",
        (("example.com/accelerator-memory", Fraction(5 * 2**30)), ("cpu", Fraction(1, 3))),
    )
    other = Transformation(
        "nvidia.com/mig-2g.10gb",
        False,
        "",
        (("example.com/accelerator-memory", Fraction(10 * 2**30)),),
    )
    charged = transform(
        {"nvidia.com/mig-1g.5gb": 1, "nvidia.com/mig-2g.10gb": 2, "cpu": 1000}, [mig, other]
    )
    # 1 × 5Gi + 2 × 10Gi; cpu 1000m requested + 1/3 cpu made (334m, rounded up).
    assert charged == {"cpu": 1334, "example.com/accelerator-memory": 25 * 2**30}


def test_an_allowance_cancels_an_output_but_never_goes_below_zero() -> None:
    credit = Transformation("example.com/credit", False, "", (("cpu-credits", Fraction(-5)),))
    debit = Transformation("example.com/debit", False, "", (("cpu-credits", Fraction(2)),))
    assert transform({"example.com/credit": 1, "example.com/debit": 1}, [credit, debit]) == {
        "cpu-credits": 0
    }
    assert transform({"example.com/debit": 3, "example.com/credit": 1}, [credit, debit]) == {
        "cpu-credits": 1
    }


def test_cpu_is_read_back_from_milli_units() -> None:
    per_cpu = Transformation("cpu", True, "", (("example.com/cpu-weight", Fraction(10)),))
    assert transform({"cpu": 1500}, [per_cpu]) == {"cpu": 1500, "example.com/cpu-weight": 15}
