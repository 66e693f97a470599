"""Session fixtures of the real-cluster suite (docs/cluster.md#real-cluster-tests).

The binaries come from `tools/controlplane/build.py` (cached outside the repository, built
once). `QUEUESCOPE_E2E_REQUIRED=1` (set by `make test`, hence CI) makes a missing Go or a
failed build a test failure; without it, a missing toolchain skips the suite with the
reason. `QUEUESCOPE_CONTROLPLANE_BIN=DIR` uses etcd, kube-apiserver and kubectl from DIR
instead (binaries installed some other way).
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import sys
import time
from collections.abc import Callable, Generator, Iterator
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any, NoReturn

import pytest

from tests.e2e.aggregated import Aggregated, aggregated_server
from tests.e2e.cluster import ClusterModeServer
from tests.e2e.harness import LOG_FILES, ControlPlane, HarnessError, start_control_plane, tail
from tests.e2e.jobsets import JobSetController, running_jobset_controller
from tests.e2e.nodes import NodeAgents, node_agents

REPO = Path(__file__).resolve().parents[2]
BUILD_SCRIPT = REPO / "tools" / "controlplane" / "build.py"
REQUIRED_ENV = "QUEUESCOPE_E2E_REQUIRED"
BIN_ENV = "QUEUESCOPE_CONTROLPLANE_BIN"


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "realcluster: runs against a real etcd and kube-apiserver (tests/e2e)"
    )


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    here = Path(__file__).parent
    for item in items:
        if here in Path(str(item.path)).parents:
            item.add_marker(pytest.mark.realcluster)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    report = yield
    # A failing e2e test is diagnosed from the processes' logs: attach their last lines.
    if report.failed and item.get_closest_marker("realcluster") is not None:
        for label, path in LOG_FILES.items():
            report.sections.append((f"{label} log ({path})", tail(path)))
    return report


def required() -> bool:
    return os.environ.get(REQUIRED_ENV) == "1"


def _load_build_module() -> ModuleType:
    spec = importlib.util.spec_from_file_location("queuescope_controlplane_build", BUILD_SCRIPT)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load {BUILD_SCRIPT}")
    module = importlib.util.module_from_spec(spec)
    # dataclasses resolve the module by name while the class body runs.
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def _unavailable(reason: str) -> NoReturn:
    if required():
        pytest.fail(f"{REQUIRED_ENV}=1 and the e2e control plane is unavailable: {reason}")
    pytest.skip(f"e2e control plane unavailable ({reason}); set {REQUIRED_ENV}=1 to fail instead")


def _terminal_writer(config: pytest.Config) -> Callable[[str], None]:
    """Progress lines straight to the terminal, past pytest's output capture."""
    reporter = config.pluginmanager.getplugin("terminalreporter")
    capture = config.pluginmanager.getplugin("capturemanager")

    def write(message: str) -> None:
        with capture.global_and_fixture_disabled() if capture else contextlib.nullcontext():
            if reporter is not None:
                reporter.write_line(f"controlplane: {message}")
            else:
                print(f"controlplane: {message}", file=sys.stderr, flush=True)

    return write


@pytest.fixture(scope="session")
def toolchain(request: pytest.FixtureRequest) -> Any:
    """The build module's Toolchain: paths of etcd, kube-apiserver and kubectl."""
    build = _load_build_module()
    override = os.environ.get(BIN_ENV)
    if override:
        kube, etcd = build.versions()
        found = build.Toolchain(Path(override), kube, etcd)
        missing = [str(b) for b in found.binaries if not os.access(b, os.X_OK)]
        if missing:
            _unavailable(f"{BIN_ENV}={override} lacks {', '.join(missing)}")
        return found
    # A cold build takes many minutes: its progress goes to the terminal, not the capture.
    try:
        return build.ensure_toolchain(log=_terminal_writer(request.config))
    except build.GoNotFoundError as err:
        _unavailable(str(err))
    except build.BuildError as err:
        pytest.fail(f"building the e2e control plane failed: {err}")


@pytest.fixture(scope="session")
def control_plane(
    toolchain: Any, tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest
) -> Iterator[ControlPlane]:
    """etcd and kube-apiserver, up and ready, with an admin kubeconfig; logs under the
    session's temporary folder (kept by pytest for the last runs)."""
    workdir = tmp_path_factory.mktemp("controlplane")
    started = time.monotonic()
    try:
        plane = start_control_plane(toolchain, workdir)
    except HarnessError as err:
        pytest.fail(str(err))
    _terminal_writer(request.config)(
        f"etcd and kube-apiserver up in {time.monotonic() - started:.1f}s at {plane.url}"
    )
    try:
        yield plane
    finally:
        plane.stop()


@pytest.fixture(scope="module")
def aggregated(
    control_plane: ControlPlane, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Aggregated]:
    """Our server registered with both APIServices, one per test module (modules run one
    after another, so each owns the registration while it runs)."""
    root = tmp_path_factory.mktemp("aggregated")
    with aggregated_server(control_plane, root, ClusterModeServer) as env:
        yield env


def _built(request: pytest.FixtureRequest, ensure: str, what: str, *, logs: bool = True) -> Any:
    """`build.<ensure>()`: cached or built now, progress on the terminal (`logs`: it takes
    a `log`); no Go skips (or fails under QUEUESCOPE_E2E_REQUIRED=1), a failed build fails."""
    build = _load_build_module()
    try:
        if not logs:
            return getattr(build, ensure)()
        return getattr(build, ensure)(log=_terminal_writer(request.config))
    except build.GoNotFoundError as err:
        _unavailable(str(err))
    except build.BuildError as err:
        pytest.fail(f"building {what} failed: {err}")


@pytest.fixture(scope="session")
def kueuectl(request: pytest.FixtureRequest) -> Path:
    """kueuectl v0.19.2, built once from Kueue's module into the cache (build.py --kueuectl)."""
    path: Path = _built(request, "ensure_kueuectl", "kueuectl")
    return path


@pytest.fixture(scope="session")
def kueue_role_hash(request: pytest.FixtureRequest) -> Path:
    """Kueue's own role hash as a command, built once from Kueue's module into the cache
    (build.py --role-hash): pod specs as a JSON array on stdin, a hash a line out."""
    path: Path = _built(request, "ensure_role_hash", "Kueue's role hash")
    return path


@pytest.fixture(scope="session")
def node_toolchain(request: pytest.FixtureRequest) -> Any:
    """kube-controller-manager, kube-scheduler and kwok (build.py --nodes), built on first
    use: only the tests that need Pods ask for them."""
    return _built(request, "ensure_nodes", "kube-controller-manager, kube-scheduler and kwok")


@pytest.fixture(scope="module")
def nodes(
    control_plane: ControlPlane,
    node_toolchain: Any,
    tmp_path_factory: pytest.TempPathFactory,
    request: pytest.FixtureRequest,
) -> Iterator[NodeAgents]:
    """The Job controller, the scheduler and kwok's Nodes on the session's control plane,
    for one test module (docs/cluster.md#real-cluster-tests): the modules that do not ask
    for Pods never run them."""
    try:
        with node_agents(control_plane, node_toolchain, tmp_path_factory.mktemp("nodes")) as agents:
            _terminal_writer(request.config)(
                f"kube-controller-manager, kube-scheduler, kwok and {len(agents.nodes)} "
                f"Nodes up in {agents.startup_seconds:.1f}s"
            )
            yield agents
    except HarnessError as err:
        pytest.fail(f"the Node agents did not start: {err}")


@dataclass(frozen=True)
class JobSetToolchain:
    """The JobSet manager binary and JobSet's module source (its CRD and webhook
    manifests), both from Go's caches, never from the repository."""

    binary: Path
    module_dir: Path


@pytest.fixture(scope="session")
def jobset_toolchain(request: pytest.FixtureRequest) -> JobSetToolchain:
    """The JobSet controller v0.12.0 (the version Kueue v0.19.2 requires), built once from
    its module into the cache (build.py --jobset), and that module's folder."""
    binary: Path = _built(request, "ensure_jobset", "the JobSet controller")
    module_dir: Path = _built(request, "jobset_module_dir", "JobSet's module source", logs=False)
    return JobSetToolchain(binary, module_dir)


@pytest.fixture(scope="module")
def jobset_controller(
    control_plane: ControlPlane,
    nodes: NodeAgents,
    jobset_toolchain: JobSetToolchain,
    tmp_path_factory: pytest.TempPathFactory,
    request: pytest.FixtureRequest,
) -> Iterator[JobSetController]:
    """JobSet's CRD, controller and admission webhooks on the session's control plane for
    one test module (tests/e2e/jobsets.py); `nodes` runs the child Jobs' Pods. Removed
    again when the module ends, webhooks first."""
    try:
        with running_jobset_controller(
            control_plane,
            jobset_toolchain.binary,
            jobset_toolchain.module_dir,
            tmp_path_factory.mktemp("jobset"),
        ) as controller:
            _terminal_writer(request.config)(
                f"JobSet controller and webhooks up in {controller.startup_seconds:.1f}s"
            )
            yield controller
    except HarnessError as err:
        pytest.fail(f"the JobSet controller did not start: {err}")
