"""The layer rules of docs/product.md, checked on the source: imports go downward only,
and the core reads time only from its injected clock."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

# The event loop and the HTTP and Kubernetes frameworks, which the pure layers never import.
FRAMEWORKS = ("asyncio", "kubernetes_asyncio", "fastapi", "uvicorn", "starlette")

# folder -> module prefixes it must never import
FORBIDDEN: dict[str, tuple[str, ...]] = {
    "scheduler/api": (
        "scheduler.core",
        "scheduler.forecast",
        "scheduler.runtime",
        "scheduler.sim",
        "visibility_server",
        "queuescope",
        *FRAMEWORKS,
    ),
    "scheduler/core": (
        "scheduler.forecast",
        "scheduler.runtime",
        "scheduler.sim",
        "visibility_server",
        "queuescope",
        *FRAMEWORKS,
        "time",
        "threading",
    ),
    # Forecasts run the core forward: as pure as the core; the runtime and the
    # simulator both call it.
    "scheduler/forecast": (
        "scheduler.runtime",
        "scheduler.sim",
        "visibility_server",
        "queuescope",
        *FRAMEWORKS,
        "time",
        "threading",
    ),
    "scheduler/sim": (
        "scheduler.runtime",
        "visibility_server",
        "queuescope",
        "asyncio",
        "kubernetes_asyncio",
        "fastapi",
        "time",
    ),
    # Trace importers: pure mapping from trace records to scenario documents.
    "scheduler/traces": (
        "scheduler.core",
        "scheduler.forecast",
        "scheduler.sim",
        "scheduler.runtime",
        "visibility_server",
        "queuescope",
        "asyncio",
        "time",
    ),
    # Language-level helpers (a typed read-only attribute): below every layer.
    "scheduler/lang": (
        "scheduler.api",
        "scheduler.core",
        "scheduler.forecast",
        "scheduler.kubeapi",
        "scheduler.runtime",
        "scheduler.sim",
        "scheduler.traces",
        "visibility_server",
        "queuescope",
        *FRAMEWORKS,
        "time",
    ),
    # The kube-apiserver client both sides share: below the runtime and the server.
    "scheduler/kubeapi": (
        "scheduler.core",
        "scheduler.sim",
        "scheduler.runtime",
        "visibility_server",
        "queuescope",
        "fastapi",
        "uvicorn",
        "starlette",
    ),
    # The server reads published snapshots and the API model; never scheduler internals.
    "visibility_server": (
        "scheduler.core",
        "scheduler.sim",
        "scheduler.runtime",
        "queuescope",
    ),
    # The runtime (cluster mode in runtime/kube included) drives the core; the
    # simulator is a sibling that drives it too, so the runtime never imports it.
    "scheduler/runtime": (
        "scheduler.sim",
        "fastapi",
        "uvicorn",
        "starlette",
        "visibility_server",
        "queuescope",
    ),
}

# Every folder of product code is under a rule (a subfolder through its parent).
PRODUCT_PACKAGES = ("scheduler", "visibility_server")
OUR_PREFIXES = ("scheduler", "visibility_server", "queuescope")

# Reading the wall clock through datetime is as forbidden as importing time.
CLOCK_CALLS = {"now", "utcnow", "today"}
CLOCK_OWNERS = {"datetime", "date"}
PURE_FOLDERS = (
    "scheduler/api",
    "scheduler/core",
    "scheduler/forecast",
    "scheduler/sim",
    "scheduler/traces",
)


def _modules(folder: str) -> list[Path]:
    return sorted((ROOT / folder).rglob("*.py"))


def _imports(tree: ast.AST) -> list[tuple[int, str]]:
    found: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.extend((node.lineno, alias.name) for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.append((node.lineno, node.module))
    return found


# The published read model is the one piece of the runtime the server may read: the
# snapshot and the modules of its parts (records, pages, quota, wait estimates).
ALLOWED = frozenset(
    {
        "scheduler.runtime.snapshot",
        "scheduler.runtime.workload_records",
        "scheduler.runtime.pages",
        "scheduler.runtime.quota_snapshot",
        "scheduler.runtime.estimates",
    }
)


def _hits(name: str, prefixes: tuple[str, ...]) -> bool:
    if name in ALLOWED:
        return False
    return any(name == p or name.startswith(p + ".") for p in prefixes)


@pytest.mark.parametrize("folder", sorted(FORBIDDEN))
def test_imports_go_downward_only(folder: str) -> None:
    violations = []
    for path in _modules(folder):
        tree = ast.parse(path.read_text(), str(path))
        for line, name in _imports(tree):
            if _hits(name, FORBIDDEN[folder]):
                violations.append(f"{path.relative_to(ROOT)}:{line} imports {name}")
    assert not violations, "layer rule broken:\n" + "\n".join(violations)


def _reads_wall_clock(node: ast.AST) -> bool:
    """`datetime.now()`, `datetime.datetime.utcnow()`, `date.today()`, ..."""
    if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Attribute):
        return False
    if node.func.attr not in CLOCK_CALLS:
        return False
    owner = node.func.value
    name = owner.id if isinstance(owner, ast.Name) else getattr(owner, "attr", "")
    return name in CLOCK_OWNERS


@pytest.mark.parametrize("folder", PURE_FOLDERS)
def test_pure_layers_never_read_the_wall_clock(folder: str) -> None:
    violations = []
    for path in _modules(folder):
        tree = ast.parse(path.read_text(), str(path))
        for node in ast.walk(tree):
            if _reads_wall_clock(node):
                violations.append(f"{path.relative_to(ROOT)}:{node.lineno} reads the wall clock")
    assert not violations, "the core must take time from its injected clock:\n" + "\n".join(
        violations
    )


def test_every_rule_names_folders_and_modules_that_exist() -> None:
    """A rule about a folder or a module that is not there passes without checking
    anything: every folder ruled on holds modules, every module of ours named exists."""
    for folder, prefixes in FORBIDDEN.items():
        assert _modules(folder), f"no modules under {folder}"
        for prefix in prefixes:
            if prefix.split(".")[0] in OUR_PREFIXES:
                path = ROOT / prefix.replace(".", "/")
                assert path.is_dir() or path.with_suffix(".py").is_file(), prefix


def test_every_product_folder_is_under_a_rule() -> None:
    ruled = [ROOT / folder for folder in FORBIDDEN]
    for package in PRODUCT_PACKAGES:
        for init in sorted((ROOT / package).rglob("__init__.py")):
            folder = init.parent
            if folder == ROOT / package and package == "scheduler":
                continue  # the namespace of the scheduler's layers, each ruled on
            assert any(folder == r or r in folder.parents for r in ruled), (
                f"{folder.relative_to(ROOT)} is under no layer rule"
            )


def test_the_checker_sees_a_violation(tmp_path: Path) -> None:
    """Guard against a checker that silently passes: a known-bad module must be caught."""
    bad = ast.parse("import asyncio\nfrom time import time\nx = datetime.now()\n")
    names = [n for _, n in _imports(bad)]
    assert _hits(names[0], FORBIDDEN["scheduler/core"])
    assert _hits(names[1], FORBIDDEN["scheduler/core"])
    assert any(_reads_wall_clock(n) for n in ast.walk(bad))
    injected = ast.parse("x = self.clock.now()\n")
    assert not any(_reads_wall_clock(n) for n in ast.walk(injected))
