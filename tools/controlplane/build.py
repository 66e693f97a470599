#!/usr/bin/env python3
"""Build etcd, kube-apiserver and kubectl once, from their Go modules, into a cache outside
the repository, and reuse them afterwards (docs/cluster.md#real-cluster-tests,
docs/product.md#set-up).

    python tools/controlplane/build.py               # build if needed, say where
    python tools/controlplane/build.py --print-dir   # the same; stdout is only the bin dir
    python tools/controlplane/build.py --check       # exit 0 when cached, 1 when not; no build
    python tools/controlplane/build.py --kueuectl    # kueuectl instead; stdout is its path
    python tools/controlplane/build.py --nodes       # kube-controller-manager, kube-scheduler
                                                     # and kwok; stdout is their bin dir
    python tools/controlplane/build.py --jobset      # the JobSet controller (tests only);
                                                     # stdout is its path

Sources are the wrapper modules next to this file, with their go.sum committed so that
every machine builds the same dependency graph:

    kube/   requires k8s.io/kubernetes and replaces each staging module k8s.io/<m> v0.0.0
            by its published v0.<minor>.<patch>; `go install pkg@version` cannot do this
            (it refuses modules with replace directives), a wrapper module can
    etcd/   a `main` calling the server's own entry point, etcdmain.Main
    nodes/  like kube/, for kube-controller-manager and kube-scheduler (same version)

Cache: ${QUEUESCOPE_CACHE:-${XDG_CACHE_HOME:-~/.cache}}/queuescope/controlplane/
k8s-<ver>-etcd-<ver>/bin/{etcd,kube-apiserver,kubectl}, with `stamp.json` written last
(versions, SHA-256 of the module files, the Go version, the binaries' SHA-256). A stamp that
matches the current module files means "reuse"; anything else means "build again". Builds
are serialised by a file lock, run in a temporary copy of the modules, and are installed
by rename, so a concurrent reader never sees half a binary. Go's own module and build
caches are used as configured (GOMODCACHE, GOCACHE): a rebuild after a version bump only
compiles what changed.

kueuectl (Kueue's command line, a real client for the e2e suite) is built the same way
from Kueue's own module, which needs no wrapper (`go install sigs.k8s.io/kueue/cmd/
kueuectl@<version>`), into .../queuescope/controlplane/kueuectl-<version>/bin/kueuectl with
its own stamp and lock; about 3 minutes cold on two cores.

Standard library only: it runs before the project's virtual environment has anything.
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
KUBE_MODULE = HERE / "kube"
ETCD_MODULE = HERE / "etcd"
MODULE_FILES = ("go.mod", "go.sum", "main.go")

KUBERNETES = "k8s.io/kubernetes"
ETCD_SERVER = "go.etcd.io/etcd/server/v3"
KUBE_COMMANDS = ("k8s.io/kubernetes/cmd/kube-apiserver", "k8s.io/kubernetes/cmd/kubectl")
# The pod-running half (docs/cluster.md#real-cluster-tests): its own wrapper module, so the
# go.sum of the apiserver's never changes for it, and its own cache entry with kwok.
NODES_MODULE = HERE / "nodes"
NODES_COMMANDS = (
    "k8s.io/kubernetes/cmd/kube-controller-manager",
    "k8s.io/kubernetes/cmd/kube-scheduler",
)
# Bump when the build commands below change in a way that changes the binaries.
RECIPE = 1
STAMP = "stamp.json"
HEARTBEAT_SECONDS = 60.0
NICENESS = 10
LOG_TAIL_LINES = 40

EXIT_OK = 0
EXIT_BUILD_FAILED = 1
EXIT_NO_GO = 2
EXIT_NOT_CACHED = 1

Log = Callable[[str], None]


class BuildError(Exception):
    """The control plane could not be built; the message says why and what to do."""


class GoNotFoundError(BuildError):
    """No Go toolchain on PATH (or in $GO): nothing can be built."""


@dataclass(frozen=True)
class Toolchain:
    """The cached binaries and the versions they were built from."""

    bin_dir: Path
    kube_version: str
    etcd_version: str

    @property
    def etcd(self) -> Path:
        return self.bin_dir / "etcd"

    @property
    def kube_apiserver(self) -> Path:
        return self.bin_dir / "kube-apiserver"

    @property
    def kubectl(self) -> Path:
        return self.bin_dir / "kubectl"

    @property
    def binaries(self) -> tuple[Path, ...]:
        return (self.etcd, self.kube_apiserver, self.kubectl)


def stderr(message: str) -> None:
    print(f"controlplane: {message}", file=sys.stderr, flush=True)


def module_version(go_mod: Path, module: str) -> str:
    """The version `go_mod` requires of `module` (single-line or block `require`)."""
    pattern = re.compile(rf"^\s*(?:require\s+)?{re.escape(module)}\s+(v\S+)", re.MULTILINE)
    match = pattern.search(go_mod.read_text())
    if match is None:
        raise BuildError(f"{go_mod} does not require {module}")
    return match.group(1)


def versions() -> tuple[str, str]:
    """(kube version, etcd version), read from the wrapper modules: their single source."""
    return (
        module_version(KUBE_MODULE / "go.mod", KUBERNETES),
        module_version(ETCD_MODULE / "go.mod", ETCD_SERVER),
    )


def cache_root() -> Path:
    base = os.environ.get("QUEUESCOPE_CACHE") or os.environ.get("XDG_CACHE_HOME") or ""
    root = Path(base).expanduser() if base else Path.home() / ".cache"
    return root / "queuescope" / "controlplane"


def toolchain_dir() -> Path:
    kube, etcd = versions()
    return cache_root() / f"k8s-{kube}-etcd-{etcd}"


def planned_toolchain() -> Toolchain:
    """Where the binaries are (or will be once built)."""
    kube, etcd = versions()
    return Toolchain(toolchain_dir() / "bin", kube, etcd)


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def _inputs() -> dict[str, str]:
    """SHA-256 of every file of the wrapper modules: what a stamp must match."""
    found: dict[str, str] = {}
    for module in (KUBE_MODULE, ETCD_MODULE):
        for name in MODULE_FILES:
            path = module / name
            if path.exists():
                found[f"{module.name}/{name}"] = _sha256(path)
    return found


def _expected_stamp_fields() -> dict[str, object]:
    kube, etcd = versions()
    return {"recipe": RECIPE, "kubernetes": kube, "etcd": etcd, "inputs": _inputs()}


def _stamp_matches(home: Path, expected: dict[str, object], binaries: Sequence[Path]) -> bool:
    """Whether `home/stamp.json` records `expected` and every binary with its size."""
    try:
        stamp = json.loads((home / STAMP).read_text())
    except (OSError, ValueError):
        return False
    if not isinstance(stamp, dict):
        return False
    for key, value in expected.items():
        if stamp.get(key) != value:
            return False
    sizes = stamp.get("sizes")
    if not isinstance(sizes, dict):
        return False
    for binary in binaries:
        try:
            info = binary.stat()
        except OSError:
            return False
        if info.st_size != sizes.get(binary.name) or not os.access(binary, os.X_OK):
            return False
    return True


def cached() -> Toolchain | None:
    """The toolchain if a complete build for the current module files is in the cache."""
    planned = planned_toolchain()
    home = planned.bin_dir.parent
    return planned if _stamp_matches(home, _expected_stamp_fields(), planned.binaries) else None


@contextlib.contextmanager
def locked(path: Path, log: Log) -> Iterator[None]:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            log(f"another build holds {path}; waiting for it")
            fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def find_go() -> str:
    go = os.environ.get("GO") or shutil.which("go")
    if not go:
        raise GoNotFoundError(
            "Go toolchain not found (no `go` on PATH, $GO unset): building etcd and "
            "kube-apiserver needs Go >= 1.25 and access to the Go module proxy; install Go "
            "from https://go.dev/dl/ or put a previously built cache in place"
        )
    return go


def go_env() -> dict[str, str]:
    env = dict(os.environ)
    # Static binaries, independent of the host's libc; no go.work from a parent directory.
    env.update({"CGO_ENABLED": "0", "GOWORK": "off"})
    return env


def _elapsed(seconds: float) -> str:
    minutes, secs = divmod(round(seconds), 60)
    return f"{minutes}m{secs:02d}s" if minutes else f"{seconds:.1f}s"


def _tail(path: Path, lines: int = LOG_TAIL_LINES) -> str:
    try:
        text = path.read_text(errors="replace").splitlines()
    except OSError:
        return ""
    return "\n".join(text[-lines:])


def _niced(argv: Sequence[str]) -> list[str]:
    """`argv` under `nice -n 10` where there is a nice: a build on a machine shared with
    tests and servers yields the CPU to them."""
    nice = shutil.which("nice")
    return [nice, "-n", str(NICENESS), *argv] if nice else list(argv)


def run_logged(
    argv: Sequence[str], *, cwd: Path, log_file: Path, what: str, log: Log, env: dict[str, str]
) -> None:
    """Run one build command, output appended to `log_file`, with a heartbeat."""
    started = time.monotonic()
    log(f"{what} ...")
    argv = _niced(argv)
    with log_file.open("a") as out:
        out.write(f"\n$ (cd {cwd} && {' '.join(argv)})\n")
        out.flush()
        try:
            proc = subprocess.Popen(argv, cwd=cwd, stdout=out, stderr=subprocess.STDOUT, env=env)
        except OSError as err:
            raise BuildError(f"{what}: cannot run {argv[0]}: {err}") from err
        done = threading.Event()

        def heartbeat() -> None:
            while not done.wait(HEARTBEAT_SECONDS):
                log(f"  still {what} ({_elapsed(time.monotonic() - started)})")

        beat = threading.Thread(target=heartbeat, daemon=True)
        beat.start()
        try:
            code = proc.wait()
        except BaseException:
            proc.kill()
            proc.wait()
            raise
        finally:
            done.set()
            beat.join()
    if code != 0:
        raise BuildError(
            f"{what} failed (exit {code}); last lines of {log_file}:\n{_tail(log_file)}"
        )
    log(f"{what}: done in {_elapsed(time.monotonic() - started)}")


def _check_version(binary: Path, args: Sequence[str], wanted: str) -> None:
    try:
        result = subprocess.run(
            [str(binary), *args], capture_output=True, text=True, timeout=60, check=False
        )
    except (OSError, subprocess.TimeoutExpired) as err:
        raise BuildError(f"{binary.name} does not run: {err}") from err
    output = result.stdout + result.stderr
    if result.returncode != 0 or wanted not in output:
        raise BuildError(
            f"{binary.name} {' '.join(args)} should print {wanted!r}; it printed "
            f"(exit {result.returncode}): {output.strip()[:500]}"
        )


def _kube_ldflags(version: str) -> str:
    match = re.fullmatch(r"v(\d+)\.(\d+)\.\d+.*", version)
    if match is None:
        raise BuildError(f"unexpected Kubernetes version {version!r}")
    major, minor = match.groups()
    flags = ["-s", "-w"]
    # What hack/lib/version.sh sets; without it `/version` says v0.0.0-master.
    for package in ("k8s.io/component-base/version", "k8s.io/client-go/pkg/version"):
        for name, value in (
            ("gitVersion", version),
            ("gitMajor", major),
            ("gitMinor", minor),
            ("gitTreeState", "clean"),
        ):
            flags.append(f"-X {package}.{name}={value}")
    return " ".join(flags)


def describe_go(go: str) -> str:
    try:
        result = subprocess.run(
            [go, "version"], capture_output=True, text=True, timeout=120, check=False
        )
    except (OSError, subprocess.TimeoutExpired) as err:
        raise GoNotFoundError(f"{go} does not run: {err}") from err
    if result.returncode != 0:
        raise GoNotFoundError(f"`{go} version` failed: {(result.stderr or result.stdout).strip()}")
    return result.stdout.strip()


def _build(target: Toolchain, log: Log) -> None:
    go = find_go()
    go_version = describe_go(go)
    log(f"building etcd {target.etcd_version}, kube-apiserver and kubectl {target.kube_version}")
    log(f"with {go_version}; into {target.bin_dir}")
    log("a cold build downloads about 1 GB of modules and compiles for 15 to 30 minutes")
    started = time.monotonic()
    home = target.bin_dir.parent
    home.mkdir(parents=True, exist_ok=True)
    log_file = home / "build.log"
    log_file.write_text(f"{go_version}\n")
    log(f"build log: {log_file}")
    env = go_env()
    work = Path(tempfile.mkdtemp(prefix=".build-", dir=home))
    try:
        out = work / "out"
        out.mkdir()
        etcd_src, kube_src = work / "etcd", work / "kube"
        shutil.copytree(ETCD_MODULE, etcd_src)
        shutil.copytree(KUBE_MODULE, kube_src)
        common = [go, "build", "-mod=readonly", "-trimpath"]
        run_logged(
            [*common, "-ldflags=-s -w", "-o", str(out / "etcd"), "."],
            cwd=etcd_src,
            log_file=log_file,
            what=f"building etcd {target.etcd_version}",
            log=log,
            env=env,
        )
        kube_flags = f"-ldflags={_kube_ldflags(target.kube_version)}"
        run_logged(
            [*common, kube_flags, "-o", f"{out}/", *KUBE_COMMANDS],
            cwd=kube_src,
            log_file=log_file,
            what=f"building kube-apiserver and kubectl {target.kube_version}",
            log=log,
            env=env,
        )
        _check_version(out / "etcd", ["--version"], f"etcd Version: {target.etcd_version[1:]}")
        _check_version(out / "kube-apiserver", ["--version"], f"Kubernetes {target.kube_version}")
        _check_version(out / "kubectl", ["version", "--client"], target.kube_version)
        _install(target, out, go_version)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    log(f"built in {_elapsed(time.monotonic() - started)}")


def _install(target: Toolchain, out: Path, go_version: str) -> None:
    _install_binaries(target.binaries, out, go_version, _expected_stamp_fields())


def _install_binaries(
    binaries: Sequence[Path], out: Path, go_version: str, fields: dict[str, object]
) -> None:
    """Rename each built binary from `out` into place, then write the stamp (last)."""
    home = binaries[0].parent.parent
    stamp_path = home / STAMP
    stamp_path.unlink(missing_ok=True)
    binaries[0].parent.mkdir(parents=True, exist_ok=True)
    sizes: dict[str, int] = {}
    digests: dict[str, str] = {}
    for binary in binaries:
        built = out / binary.name
        sizes[binary.name] = built.stat().st_size
        digests[binary.name] = _sha256(built)
        os.replace(built, binary)
    stamp = {
        **fields,
        "go": go_version,
        "built": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "sizes": sizes,
        "sha256": digests,
    }
    partial = stamp_path.with_suffix(".tmp")
    partial.write_text(json.dumps(stamp, indent=2, sort_keys=True) + "\n")
    os.replace(partial, stamp_path)


def _go_output(argv: Sequence[str], *, cwd: Path, what: str) -> str:
    result = subprocess.run(
        argv, cwd=cwd, capture_output=True, text=True, env=go_env(), check=False
    )
    if result.returncode != 0:
        raise BuildError(f"{what} failed (exit {result.returncode}):\n{result.stderr.strip()}")
    return result.stdout


def staging_modules(kubernetes_go_mod: str) -> list[str]:
    """The modules k8s.io/kubernetes replaces by its own staging folders: read from its
    go.mod, never listed by hand (the set changes between releases)."""
    found = re.findall(
        r"^\s*(?:replace\s+)?(k8s\.io/\S+)\s+=>\s+\./staging/", kubernetes_go_mod, re.M
    )
    if not found:
        raise BuildError("k8s.io/kubernetes' go.mod replaces no staging module")
    return sorted(set(found))


def update_modules(
    kube_version: str, etcd_version: str, out: Path = HERE, log: Log = stderr
) -> None:
    """Rewrite the wrapper modules (go.mod, go.sum; etcd's main.go) for other versions.

    kube: require k8s.io/kubernetes at `kube_version` and replace each of its staging
    modules k8s.io/<m> by the published k8s.io/<m> v0.<minor>.<patch>, then `go get` both
    commands, which fills in go.sum. etcd: `go get` the server module and `go mod tidy`.
    Commit the result; `ensure_toolchain` builds from it with -mod=readonly.
    """
    match = re.fullmatch(r"v1\.(\d+\.\d+)", kube_version)
    if match is None:
        raise BuildError(f"expected a Kubernetes release like v1.35.4, got {kube_version!r}")
    staging_version = f"v0.{match.group(1)}"
    go = find_go()
    with tempfile.TemporaryDirectory(prefix="queuescope-modules-") as tmp:
        work = Path(tmp)
        info = json.loads(
            _go_output(
                [go, "mod", "download", "-json", f"{KUBERNETES}@{kube_version}"],
                cwd=work,
                what=f"downloading {KUBERNETES}@{kube_version}",
            )
        )
        upstream = Path(info["GoMod"]).read_text()
        directive = re.search(r"^go\s+(\S+)", upstream, re.M)
        go_line = f"go {directive.group(1) if directive else '1.25.0'}\n"
        replaces = "".join(f"\t{m} => {m} {staging_version}\n" for m in staging_modules(upstream))
        wrappers = (
            ("kube", "queuescope.invalid/controlplane", KUBE_COMMANDS),
            ("nodes", "queuescope.invalid/controlplane-nodes", NODES_COMMANDS),
        )
        for folder, module_path, commands in wrappers:
            wrapper = work / folder
            wrapper.mkdir()
            (wrapper / "go.mod").write_text(
                f"module {module_path}\n\n{go_line}\n"
                f"require {KUBERNETES} {kube_version}\n\nreplace (\n{replaces})\n"
            )
            names = " and ".join(c.rsplit("/", 1)[1] for c in commands)
            log(f"resolving {names} {kube_version}")
            _go_output(
                [go, "get", *(f"{cmd}@{kube_version}" for cmd in commands)],
                cwd=wrapper,
                what=f"go get ({folder})",
            )
        etcd = work / "etcd"
        etcd.mkdir()
        (etcd / "go.mod").write_text(f"module queuescope.invalid/etcd\n\n{go_line}")
        shutil.copy2(ETCD_MODULE / "main.go", etcd / "main.go")
        log(f"resolving etcd {etcd_version}")
        _go_output([go, "get", f"{ETCD_SERVER}@{etcd_version}"], cwd=etcd, what="go get (etcd)")
        _go_output([go, "mod", "tidy"], cwd=etcd, what="go mod tidy (etcd)")
        go_files: tuple[str, ...] = ("go.mod", "go.sum")
        modules: tuple[tuple[Path, tuple[str, ...]], ...] = (
            (work / "kube", go_files),
            (work / "nodes", go_files),
            (etcd, tuple(MODULE_FILES)),
        )
        for module, files in modules:
            target = out / module.name
            target.mkdir(parents=True, exist_ok=True)
            for file in files:
                shutil.copy2(module / file, target / file)
    log(f"wrote {out / 'kube'}, {out / 'nodes'} and {out / 'etcd'}; the cache names follow")


def ensure_toolchain(*, force: bool = False, log: Log = stderr) -> Toolchain:
    """The cached toolchain, built first when missing or stale (or when `force`).

    Raises GoNotFoundError when a build is needed and there is no Go, BuildError when the
    build fails.
    """
    started = time.monotonic()
    if not force and (found := cached()) is not None:
        log(f"using cached binaries in {found.bin_dir} ({_elapsed(time.monotonic() - started)})")
        return found
    target = planned_toolchain()
    with locked(target.bin_dir.parent.with_name(target.bin_dir.parent.name + ".lock"), log):
        # Whoever held the lock may just have built it.
        if not force and (found := cached()) is not None:
            log(f"using binaries built meanwhile in {found.bin_dir}")
            return found
        _build(target, log)
    return target


KUEUE = "sigs.k8s.io/kueue"
KUEUECTL_VERSION = "v0.19.2"
KUEUECTL_PACKAGE = f"{KUEUE}/cmd/kueuectl"
KUEUECTL_RECIPE = 1


def kueuectl_path(version: str = KUEUECTL_VERSION) -> Path:
    return cache_root() / f"kueuectl-{version}" / "bin" / "kueuectl"


def _kueuectl_stamp_fields(version: str) -> dict[str, object]:
    return {"recipe": KUEUECTL_RECIPE, "kueue": version}


def cached_single(binary: Path, fields: dict[str, object]) -> Path | None:
    """`binary` if its home's stamp records `fields` and its size (install_single)."""
    try:
        stamp = json.loads((binary.parent.parent / STAMP).read_text())
        size = binary.stat().st_size
    except (OSError, ValueError):
        return None
    if not isinstance(stamp, dict) or any(stamp.get(k) != v for k, v in fields.items()):
        return None
    return binary if size == stamp.get("size") and os.access(binary, os.X_OK) else None


def cached_kueuectl(version: str = KUEUECTL_VERSION) -> Path | None:
    return cached_single(kueuectl_path(version), _kueuectl_stamp_fields(version))


def _check_kueuectl_version(binary: Path, version: str, work: Path) -> None:
    # `kueuectl version` prints the client version, then asks a cluster for Kueue's
    # Deployment; pointed at an empty kubeconfig that second step fails, which is fine.
    (work / "kubeconfig").write_text("apiVersion: v1\nkind: Config\n")
    env = {**os.environ, "KUBECONFIG": str(work / "kubeconfig")}
    try:
        result = subprocess.run(
            [str(binary), "version"],
            capture_output=True,
            text=True,
            timeout=60,
            env=env,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as err:
        raise BuildError(f"kueuectl does not run: {err}") from err
    if f"Client Version: {version}" not in result.stdout:
        raise BuildError(
            f"kueuectl version should print 'Client Version: {version}'; it printed: "
            f"{(result.stdout + result.stderr).strip()[:500]}"
        )


def build_once(
    binary: Path,
    cached: Callable[[], Path | None],
    build_into: Callable[[str, str, Path, Path], None],
    *,
    force: bool,
    log: Log,
) -> Path:
    """`binary`, if `cached()` finds it (unless `force`), else built under the binary's
    home's lock: `build_into(go, go_version, work, log_file)` builds it in the temporary
    directory `work` and installs it with its stamp (written last)."""
    if not force and (found := cached()) is not None:
        return found
    home = binary.parent.parent
    with locked(home.with_name(home.name + ".lock"), log):
        if not force and (found := cached()) is not None:
            return found
        go = find_go()
        go_version = describe_go(go)
        home.mkdir(parents=True, exist_ok=True)
        log_file = home / "build.log"
        log_file.write_text(f"{go_version}\n")
        work = Path(tempfile.mkdtemp(prefix=".build-", dir=home))
        try:
            build_into(go, go_version, work, log_file)
        finally:
            shutil.rmtree(work, ignore_errors=True)
    return binary


def install_single(binary: Path, built: Path, stamp: dict[str, object]) -> None:
    """Rename `built` into `binary`'s place and write its stamp (with its size) last."""
    stamp_path = binary.parent.parent / STAMP
    stamp_path.unlink(missing_ok=True)
    binary.parent.mkdir(parents=True, exist_ok=True)
    size = built.stat().st_size
    os.replace(built, binary)
    partial = stamp_path.with_suffix(".tmp")
    partial.write_text(json.dumps({**stamp, "size": size}, indent=2, sort_keys=True) + "\n")
    os.replace(partial, stamp_path)


def ensure_kueuectl(
    *, version: str = KUEUECTL_VERSION, force: bool = False, log: Log = stderr
) -> Path:
    """kueuectl `version`, built from Kueue's module once and cached (see the docstring)."""
    binary = kueuectl_path(version)

    def build_into(go: str, go_version: str, work: Path, log_file: Path) -> None:
        ldflags = f"-s -w -X {KUEUE}/pkg/version.GitVersion={version}"
        run_logged(
            [go, "install", "-trimpath", f"-ldflags={ldflags}", f"{KUEUECTL_PACKAGE}@{version}"],
            cwd=work,
            log_file=log_file,
            what=f"building kueuectl {version}",
            log=log,
            env={**go_env(), "GOBIN": str(work), "GOFLAGS": "-mod=mod"},
        )
        _check_kueuectl_version(work / "kueuectl", version, work)
        stamp = {**_kueuectl_stamp_fields(version), "go": go_version}
        install_single(binary, work / "kueuectl", stamp)

    return build_once(binary, lambda: cached_kueuectl(version), build_into, force=force, log=log)


# Kueue's own role hash as a command (docs/cluster.md#pod-groups): `rolehash/` calls
# sigs.k8s.io/kueue/pkg/util/pod.GenerateRoleHash on pod specs read as JSON, the oracle
# the e2e suite checks the hashes of queuescope's webhook against. Its go.mod and go.sum
# pin Kueue; `go build` there, then cached like kueuectl. Tests only, never shipped.
ROLE_HASH_MODULE = HERE / "rolehash"
ROLE_HASH_INPUTS = ("go.mod", "go.sum", "main.go")
ROLE_HASH_RECIPE = 1


def role_hash_path() -> Path:
    digest = _sha256(ROLE_HASH_MODULE / "go.sum")[:12]
    return cache_root() / f"rolehash-{digest}" / "bin" / "rolehash"


def _role_hash_stamp_fields() -> dict[str, object]:
    inputs = {name: _sha256(ROLE_HASH_MODULE / name) for name in ROLE_HASH_INPUTS}
    return {"recipe": ROLE_HASH_RECIPE, "inputs": inputs}


def cached_role_hash() -> Path | None:
    return cached_single(role_hash_path(), _role_hash_stamp_fields())


def _check_role_hash(binary: Path) -> None:
    """An empty pod spec has a hash of 8 hex digits."""
    try:
        result = subprocess.run(
            [str(binary)], input="[{}]", capture_output=True, text=True, timeout=60, check=False
        )
    except (OSError, subprocess.TimeoutExpired) as err:
        raise BuildError(f"rolehash does not run: {err}") from err
    printed = result.stdout.strip()
    if result.returncode != 0 or len(printed) != 8:
        raise BuildError(f"rolehash should print one hash; it printed: {printed[:200]!r}")


def ensure_role_hash(*, force: bool = False, log: Log = stderr) -> Path:
    """The role hash command, built from `rolehash/` once and cached."""
    binary = role_hash_path()

    def build_into(go: str, go_version: str, work: Path, log_file: Path) -> None:
        out = work / "rolehash"
        run_logged(
            [go, "build", "-trimpath", "-ldflags=-s -w", "-o", str(out), "."],
            cwd=ROLE_HASH_MODULE,
            log_file=log_file,
            what="building Kueue's role hash (pkg/util/pod.GenerateRoleHash)",
            log=log,
            env={**go_env(), "GOFLAGS": "-mod=readonly"},
        )
        _check_role_hash(out)
        install_single(binary, out, {**_role_hash_stamp_fields(), "go": go_version})

    return build_once(binary, cached_role_hash, build_into, force=force, log=log)


KWOK = "sigs.k8s.io/kwok"
KWOK_VERSION = "v0.8.0"
KWOK_PACKAGE = f"{KWOK}/cmd/kwok"
# Bump when the build commands of the nodes half change in a way that changes the binaries.
NODES_RECIPE = 1


@dataclass(frozen=True)
class NodesToolchain:
    """kube-controller-manager and kube-scheduler (the apiserver's Kubernetes version) and
    kwok: what turns Jobs into Pods on fake Nodes for the tests that need pods."""

    bin_dir: Path
    kube_version: str
    kwok_version: str

    @property
    def kube_controller_manager(self) -> Path:
        return self.bin_dir / "kube-controller-manager"

    @property
    def kube_scheduler(self) -> Path:
        return self.bin_dir / "kube-scheduler"

    @property
    def kwok(self) -> Path:
        return self.bin_dir / "kwok"

    @property
    def binaries(self) -> tuple[Path, ...]:
        return (self.kube_controller_manager, self.kube_scheduler, self.kwok)


def planned_nodes(kwok_version: str = KWOK_VERSION) -> NodesToolchain:
    kube, _ = versions()
    home = cache_root() / f"nodes-k8s-{kube}-kwok-{kwok_version}"
    return NodesToolchain(home / "bin", kube, kwok_version)


def _nodes_stamp_fields(target: NodesToolchain) -> dict[str, object]:
    inputs = {
        f"nodes/{name}": _sha256(NODES_MODULE / name)
        for name in ("go.mod", "go.sum")
        if (NODES_MODULE / name).exists()
    }
    return {
        "recipe": NODES_RECIPE,
        "kubernetes": target.kube_version,
        "kwok": target.kwok_version,
        "inputs": inputs,
    }


def cached_nodes(kwok_version: str = KWOK_VERSION) -> NodesToolchain | None:
    planned = planned_nodes(kwok_version)
    fields = _nodes_stamp_fields(planned)
    return planned if _stamp_matches(planned.bin_dir.parent, fields, planned.binaries) else None


def _build_nodes(target: NodesToolchain, log: Log) -> None:
    # One Kubernetes version for the whole control plane: the controller-manager and the
    # scheduler must match the apiserver they talk to.
    nodes_kube = module_version(NODES_MODULE / "go.mod", KUBERNETES)
    if nodes_kube != target.kube_version:
        raise BuildError(
            f"{NODES_MODULE / 'go.mod'} requires {KUBERNETES} {nodes_kube} but "
            f"{KUBE_MODULE / 'go.mod'} requires {target.kube_version}; run "
            "build.py --update-modules to write both from one version"
        )
    go = find_go()
    go_version = describe_go(go)
    log(
        f"building kube-controller-manager and kube-scheduler {target.kube_version}, "
        f"kwok {target.kwok_version}; with {go_version}; into {target.bin_dir}"
    )
    started = time.monotonic()
    home = target.bin_dir.parent
    home.mkdir(parents=True, exist_ok=True)
    log_file = home / "build.log"
    log_file.write_text(f"{go_version}\n")
    work = Path(tempfile.mkdtemp(prefix=".build-", dir=home))
    try:
        out, src = work / "out", work / "nodes"
        out.mkdir()
        shutil.copytree(NODES_MODULE, src)
        run_logged(
            [
                go,
                "build",
                "-mod=readonly",
                "-trimpath",
                f"-ldflags={_kube_ldflags(target.kube_version)}",
                "-o",
                f"{out}/",
                *NODES_COMMANDS,
            ],
            cwd=src,
            log_file=log_file,
            what=f"building kube-controller-manager and kube-scheduler {target.kube_version}",
            log=log,
            env=go_env(),
        )
        # kwok's module has no replace directives: `go install pkg@version` builds it from
        # its own go.mod and go.sum, checked against the checksum database.
        run_logged(
            [
                go,
                "install",
                "-trimpath",
                f"-ldflags=-s -w -X {KWOK}/pkg/consts.Version={target.kwok_version}",
                f"{KWOK_PACKAGE}@{target.kwok_version}",
            ],
            cwd=work,
            log_file=log_file,
            what=f"building kwok {target.kwok_version}",
            log=log,
            env={**go_env(), "GOBIN": str(out), "GOFLAGS": "-mod=mod"},
        )
        wanted = f"Kubernetes {target.kube_version}"
        _check_version(out / "kube-controller-manager", ["--version"], wanted)
        _check_version(out / "kube-scheduler", ["--version"], wanted)
        _check_version(out / "kwok", ["--version"], target.kwok_version)
        _install_binaries(target.binaries, out, go_version, _nodes_stamp_fields(target))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    log(f"built in {_elapsed(time.monotonic() - started)}")


def ensure_nodes(
    *, kwok_version: str = KWOK_VERSION, force: bool = False, log: Log = stderr
) -> NodesToolchain:
    """kube-controller-manager, kube-scheduler and kwok, built once and cached (under their
    own lock, beside the apiserver's toolchain)."""
    if not force and (found := cached_nodes(kwok_version)) is not None:
        return found
    target = planned_nodes(kwok_version)
    home = target.bin_dir.parent
    with locked(home.with_name(home.name + ".lock"), log):
        if not force and (found := cached_nodes(kwok_version)) is not None:
            return found
        _build_nodes(target, log)
    return target


# The JobSet controller (sigs.k8s.io/jobset), at the version Kueue v0.19.2's go.mod
# requires, for the e2e tests of the `jobset` integration. Tests only, never shipped. Its
# CRD and webhook manifests are read from the module cache (jobset_module_dir), never
# copied into the repository.
JOBSET = "sigs.k8s.io/jobset"
JOBSET_VERSION = "v0.12.0"
JOBSET_RECIPE = 1


def jobset_path(version: str = JOBSET_VERSION) -> Path:
    return cache_root() / f"jobset-{version}" / "bin" / "jobset"


def _jobset_stamp_fields(version: str) -> dict[str, object]:
    return {"recipe": JOBSET_RECIPE, "jobset": version}


def cached_jobset(version: str = JOBSET_VERSION) -> Path | None:
    return cached_single(jobset_path(version), _jobset_stamp_fields(version))


def jobset_module_dir(version: str = JOBSET_VERSION) -> Path:
    """The JobSet module's source in Go's module cache (downloaded and checked against the
    checksum database if absent): what the binary is built from and where its CRD and
    webhook manifests are read."""
    go = find_go()
    # Outside any module (the temporary folder; go.work off): a plain download.
    with tempfile.TemporaryDirectory(prefix="queuescope-jobset-") as tmp:
        info = json.loads(
            _go_output(
                [go, "mod", "download", "-json", f"{JOBSET}@{version}"],
                cwd=Path(tmp),
                what=f"downloading {JOBSET}@{version}",
            )
        )
    found = info.get("Dir")
    if not isinstance(found, str) or not found or not (Path(found) / "go.mod").is_file():
        raise BuildError(f"go mod download {JOBSET}@{version} named no module directory: {info}")
    return Path(found)


def _check_jobset_runs(binary: Path) -> None:
    """`jobset --help` lists -config (Go's flag package prints to stderr and exits 0 or 2):
    the binary runs, and it is the manager."""
    try:
        result = subprocess.run(
            [str(binary), "--help"], capture_output=True, text=True, timeout=60, check=False
        )
    except (OSError, subprocess.TimeoutExpired) as err:
        raise BuildError(f"jobset does not run: {err}") from err
    printed = result.stdout + result.stderr
    if "-config" not in printed or "-health-probe-bind-address" not in printed:
        raise BuildError(f"jobset --help should list -config; it printed: {printed[:500]}")


def ensure_jobset(*, version: str = JOBSET_VERSION, force: bool = False, log: Log = stderr) -> Path:
    """The JobSet manager `version`, built from its module once and cached.

    The module's root is the manager's `package main`. Not `go install
    sigs.k8s.io/jobset@<version>`: that first asks the proxy for the module's version
    list (its deprecation check), which a mirror may refuse (this one answers 403 for
    jobset's), and then builds exactly what `go build` builds in the downloaded module:
    the module as the main one, its own go.mod and go.sum (no replace directives). So the
    build runs there, read-only (-mod=readonly: nothing is resolved anew or written)."""
    binary = jobset_path(version)

    def build_into(go: str, go_version: str, work: Path, log_file: Path) -> None:
        source = jobset_module_dir(version)
        # What JobSet's Makefile sets (no commit: the module cache has no git).
        ldflags = f"-s -w -X {JOBSET}/pkg/version.GitVersion={version}"
        out = work / "jobset"
        run_logged(
            [go, "build", "-mod=readonly", "-trimpath", f"-ldflags={ldflags}", "-o", str(out), "."],
            cwd=source,
            log_file=log_file,
            what=f"building the JobSet controller {version}",
            log=log,
            env={**go_env(), "GOFLAGS": "-mod=readonly"},
        )
        _check_jobset_runs(out)
        install_single(binary, out, {**_jobset_stamp_fields(version), "go": go_version})

    return build_once(binary, lambda: cached_jobset(version), build_into, force=force, log=log)


def _print_built(build: Callable[[], Path]) -> int:
    """Run `build`, print the path it returns; the exit code of main()."""
    try:
        print(build())
    except BuildError as err:
        stderr(f"error: {err}")
        return EXIT_NO_GO if isinstance(err, GoNotFoundError) else EXIT_BUILD_FAILED
    return EXIT_OK


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="build.py", description="Build or reuse etcd, kube-apiserver and kubectl."
    )
    action = parser.add_mutually_exclusive_group()
    action.add_argument(
        "--print-dir", action="store_true", help="print only the bin directory on stdout"
    )
    action.add_argument(
        "--check", action="store_true", help="exit 0 if the binaries are cached, 1 if not"
    )
    action.add_argument(
        "--kueuectl",
        action="store_true",
        help=f"build or reuse kueuectl {KUEUECTL_VERSION}; print only its path on stdout",
    )
    action.add_argument(
        "--role-hash",
        action="store_true",
        help="build or reuse Kueue's role hash command (tests only); print only its path",
    )
    action.add_argument(
        "--nodes",
        action="store_true",
        help=f"build or reuse kube-controller-manager, kube-scheduler and kwok {KWOK_VERSION}; "
        "print only their bin directory on stdout",
    )
    action.add_argument(
        "--jobset",
        action="store_true",
        help=f"build or reuse the JobSet controller {JOBSET_VERSION} (tests only); "
        "print only its path on stdout",
    )
    action.add_argument(
        "--update-modules",
        nargs=2,
        metavar=("KUBE_VERSION", "ETCD_VERSION"),
        help="rewrite the wrapper modules for other versions (then commit them); no build",
    )
    parser.add_argument("--modules-dir", type=Path, default=HERE, help=argparse.SUPPRESS)
    parser.add_argument("--force", action="store_true", help="build even when cached")
    args = parser.parse_args(argv)
    if args.update_modules:
        try:
            kube_version, etcd_version = args.update_modules
            update_modules(kube_version, etcd_version, out=args.modules_dir)
        except BuildError as err:
            stderr(f"error: {err}")
            return EXIT_NO_GO if isinstance(err, GoNotFoundError) else EXIT_BUILD_FAILED
        return EXIT_OK
    # The switches that build one thing and print only its path.
    single: dict[str, Callable[[], Path]] = {
        "kueuectl": lambda: ensure_kueuectl(force=args.force),
        "role_hash": lambda: ensure_role_hash(force=args.force),
        "nodes": lambda: ensure_nodes(force=args.force).bin_dir,
        "jobset": lambda: ensure_jobset(force=args.force),
    }
    for switch, build in single.items():
        if getattr(args, switch):
            return _print_built(build)
    if args.check:
        found = cached()
        print(found.bin_dir if found else f"not cached: {planned_toolchain().bin_dir}")
        return EXIT_OK if found else EXIT_NOT_CACHED
    try:
        toolchain = ensure_toolchain(force=args.force)
    except GoNotFoundError as err:
        stderr(f"error: {err}")
        return EXIT_NO_GO
    except BuildError as err:
        stderr(f"error: {err}")
        return EXIT_BUILD_FAILED
    except KeyboardInterrupt:
        stderr("interrupted")
        return 130
    if args.print_dir:
        print(toolchain.bin_dir)
    else:
        for binary in toolchain.binaries:
            stderr(f"  {binary}")
    return EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
