#!/usr/bin/env python3
"""Build upstream Kueue's manager (`cmd/kueue`) once from its Go module, for benchmarks only.

    python tools/controlplane/kueue_manager.py          # build if needed; stdout: its path
    python tools/controlplane/kueue_manager.py --force  # build again

The memory and throughput benchmarks run it side by side with our server on the same
objects (docs/benchmarks.md); it is never shipped. Built like kueuectl (build.py): `go
install sigs.k8s.io/kueue/cmd/kueue@<version>` into a temporary GOBIN under `nice -n 10`,
then renamed into .../queuescope/controlplane/kueue-manager-<version>/bin/kueue with its
own `stamp.json` (written last) and `flock`, so concurrent callers build once.

`ensure_kueue_manager()` is importable (benchmarks load this file by path, as they load
build.py). Standard library only.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
# The sibling module, for its cache, lock and Go helpers (first on the path, before any
# installed package of the same name).
import build

VERSION = "v0.19.2"
PACKAGE = f"{build.KUEUE}/cmd/kueue"
RECIPE = 1
Log = Callable[[str], None]


def manager_path(version: str = VERSION) -> Path:
    return build.cache_root() / f"kueue-manager-{version}" / "bin" / "kueue"


def _stamp_fields(version: str) -> dict[str, object]:
    return {"recipe": RECIPE, "kueue": version, "package": PACKAGE}


def cached_manager(version: str = VERSION) -> Path | None:
    return build.cached_single(manager_path(version), _stamp_fields(version))


def _check_runs(binary: Path) -> None:
    """`kueue --help` lists its flags (it exits 0 or 2 depending on the flag library)."""
    try:
        result = subprocess.run(
            [str(binary), "--help"], capture_output=True, text=True, timeout=60, check=False
        )
    except (OSError, subprocess.TimeoutExpired) as err:
        raise build.BuildError(f"kueue does not run: {err}") from err
    if "-config" not in result.stdout + result.stderr:
        raise build.BuildError(
            f"kueue --help should list -config; it printed: {(result.stdout + result.stderr)[:500]}"
        )


def ensure_kueue_manager(
    *, version: str = VERSION, force: bool = False, log: Log = build.stderr
) -> Path:
    """Kueue's manager `version`, built from its module once and cached."""
    binary = manager_path(version)

    def build_into(go: str, go_version: str, work: Path, log_file: Path) -> None:
        ldflags = f"-s -w -X {build.KUEUE}/pkg/version.GitVersion={version}"
        build.run_logged(
            [go, "install", "-trimpath", f"-ldflags={ldflags}", f"{PACKAGE}@{version}"],
            cwd=work,
            log_file=log_file,
            what=f"building Kueue's manager {version}",
            log=log,
            env={**build.go_env(), "GOBIN": str(work), "GOFLAGS": "-mod=mod"},
        )
        _check_runs(work / "kueue")
        build.install_single(binary, work / "kueue", {**_stamp_fields(version), "go": go_version})

    return build.build_once(
        binary, lambda: cached_manager(version), build_into, force=force, log=log
    )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="kueue_manager.py", description=f"Build or reuse Kueue's manager {VERSION}."
    )
    parser.add_argument("--force", action="store_true", help="build even when cached")
    args = parser.parse_args(argv)
    try:
        print(ensure_kueue_manager(force=args.force))
    except build.BuildError as err:
        build.stderr(f"error: {err}")
        return (
            build.EXIT_NO_GO if isinstance(err, build.GoNotFoundError) else build.EXIT_BUILD_FAILED
        )
    return build.EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
