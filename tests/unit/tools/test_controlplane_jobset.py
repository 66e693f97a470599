"""tools/controlplane/build.py's JobSet controller (`--jobset`): when the cache is reused and
when it is not. No Go is run."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from types import ModuleType

import pytest

BUILD_SCRIPT = Path(__file__).resolve().parents[3] / "tools" / "controlplane" / "build.py"


@pytest.fixture
def build(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    spec = importlib.util.spec_from_file_location("controlplane_build_jobset", BUILD_SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    monkeypatch.setenv("QUEUESCOPE_CACHE", str(tmp_path / "cache"))
    # A build attempt would need Go: make it fail loudly instead of running one.
    monkeypatch.setenv("GO", str(tmp_path / "no-go"))
    return module


def _install_fake(build: ModuleType) -> Path:
    """A binary and a stamp as a finished build leaves them."""
    binary: Path = build.jobset_path()
    built = binary.parent.parent / "out" / "jobset"
    built.parent.mkdir(parents=True)
    built.write_bytes(b"#!/bin/sh\necho -config\n")
    built.chmod(0o755)
    stamp = {"recipe": build.JOBSET_RECIPE, "jobset": build.JOBSET_VERSION, "go": "go test"}
    build.install_single(binary, built, stamp)
    return binary


def test_a_complete_build_is_reused_and_named_after_the_version(
    build: ModuleType, capsys: pytest.CaptureFixture[str]
) -> None:
    assert build.cached_jobset() is None
    binary = _install_fake(build)
    assert binary.parent.parent.name == f"jobset-{build.JOBSET_VERSION}"
    stamp = json.loads((binary.parent.parent / "stamp.json").read_text())
    assert (stamp["jobset"], stamp["recipe"]) == (build.JOBSET_VERSION, build.JOBSET_RECIPE)
    # Reused without looking for Go, by the function and by the command line.
    assert build.ensure_jobset(log=lambda _: None) == binary
    assert build.main(["--jobset"]) == build.EXIT_OK
    assert capsys.readouterr().out.strip() == str(binary)


@pytest.mark.parametrize("damage", ["truncate", "remove", "recipe", "version"])
def test_a_damaged_or_outdated_build_is_not_reused(build: ModuleType, damage: str) -> None:
    binary = _install_fake(build)
    stamp_path = binary.parent.parent / "stamp.json"
    stamp = json.loads(stamp_path.read_text())
    if damage == "truncate":
        binary.write_bytes(b"")
    elif damage == "remove":
        binary.unlink()
    elif damage == "recipe":
        stamp["recipe"] = build.JOBSET_RECIPE - 1
    else:
        stamp["jobset"] = "v0.11.0"
    stamp_path.write_text(json.dumps(stamp))
    assert build.cached_jobset() is None
