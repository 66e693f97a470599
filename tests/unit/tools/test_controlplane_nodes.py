"""tools/controlplane/build.py's Node agents (`--nodes`): when the cache is reused, when it
is not, and the version check between the two wrapper modules. No Go is run."""

from __future__ import annotations

import importlib.util
import json
import shutil
import sys
from pathlib import Path
from types import ModuleType

import pytest

BUILD_SCRIPT = Path(__file__).resolve().parents[3] / "tools" / "controlplane" / "build.py"


@pytest.fixture
def build(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    spec = importlib.util.spec_from_file_location("controlplane_build_under_test", BUILD_SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    monkeypatch.setenv("QUEUESCOPE_CACHE", str(tmp_path / "cache"))
    return module


def _install_fake(build: ModuleType) -> None:
    """Binaries and a stamp as a finished build leaves them."""
    target = build.planned_nodes()
    out = target.bin_dir.parent / "out"
    out.mkdir(parents=True)
    for binary in target.binaries:
        (out / binary.name).write_bytes(b"#!/bin/sh\n" + binary.name.encode())
        (out / binary.name).chmod(0o755)
    build._install_binaries(target.binaries, out, "go test", build._nodes_stamp_fields(target))


def test_a_complete_build_is_reused_and_named_after_both_versions(build: ModuleType) -> None:
    assert build.cached_nodes() is None
    _install_fake(build)
    found = build.cached_nodes()
    assert found is not None
    kube, _ = build.versions()
    assert found.bin_dir.parent.name == f"nodes-k8s-{kube}-kwok-{build.KWOK_VERSION}"
    stamp = json.loads((found.bin_dir.parent / "stamp.json").read_text())
    assert set(stamp["inputs"]) == {"nodes/go.mod", "nodes/go.sum"}
    assert set(stamp["sizes"]) == {"kube-controller-manager", "kube-scheduler", "kwok"}
    # ensure_nodes reuses it without looking for Go.
    assert build.ensure_nodes(log=lambda _: None) == found


@pytest.mark.parametrize("damage", ["truncate", "remove", "recipe"])
def test_a_damaged_or_outdated_build_is_not_reused(build: ModuleType, damage: str) -> None:
    _install_fake(build)
    target = build.planned_nodes()
    if damage == "truncate":
        target.kwok.write_bytes(b"")
    elif damage == "remove":
        target.kube_scheduler.unlink()
    else:
        stamp_path = target.bin_dir.parent / "stamp.json"
        stamp = json.loads(stamp_path.read_text())
        stamp["recipe"] = build.NODES_RECIPE - 1
        stamp_path.write_text(json.dumps(stamp))
    assert build.cached_nodes() is None


def test_the_nodes_module_must_name_the_apiserver_kubernetes_version(
    build: ModuleType, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    nodes = tmp_path / "nodes"
    shutil.copytree(build.NODES_MODULE, nodes)
    go_mod = nodes / "go.mod"
    kube, _ = build.versions()
    go_mod.write_text(go_mod.read_text().replace(kube, "v1.34.0"))
    monkeypatch.setattr(build, "NODES_MODULE", nodes)
    with pytest.raises(build.BuildError, match="--update-modules"):
        build._build_nodes(build.planned_nodes(), lambda _: None)
