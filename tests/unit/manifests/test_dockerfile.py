"""The Dockerfile agrees with pyproject.toml and with the Deployment."""

from __future__ import annotations

import json
import re
import tomllib
from dataclasses import dataclass, field
from typing import Any

from packaging.specifiers import SpecifierSet
from packaging.utils import canonicalize_name

from tests.unit.manifests.support import MANIFESTS, REPO, find, folder_objects

DOCKERFILE = REPO / "Dockerfile"
PYPROJECT: dict[str, Any] = tomllib.loads((REPO / "pyproject.toml").read_text())


@dataclass
class Stage:
    base: str
    name: str | None
    instructions: list[tuple[str, str]] = field(default_factory=list)

    def all(self, keyword: str) -> list[str]:
        return [value for key, value in self.instructions if key == keyword]


def _logical_lines(text: str) -> list[str]:
    lines: list[str] = []
    current = ""
    for raw in text.splitlines():
        stripped = raw.strip()
        if not current and (not stripped or stripped.startswith("#")):
            continue
        if stripped.startswith("#"):
            continue  # a comment inside a continued instruction
        if stripped.endswith("\\"):
            current += stripped[:-1] + " "
            continue
        lines.append(current + stripped)
        current = ""
    return lines


def _parse() -> tuple[dict[str, str], list[Stage]]:
    args: dict[str, str] = {}
    stages: list[Stage] = []
    for line in _logical_lines(DOCKERFILE.read_text()):
        keyword, _, value = line.partition(" ")
        keyword = keyword.upper()
        if keyword == "ARG" and not stages:
            name, _, default = value.partition("=")
            args[name] = default
        elif keyword == "FROM":
            parts = value.split()
            base = re.sub(r"\$\{(\w+)\}", lambda m: args[m.group(1)], parts[0])
            alias = parts[2] if len(parts) == 3 and parts[1].upper() == "AS" else None
            stages.append(Stage(base, alias))
        else:
            assert stages, f"{keyword} before FROM"
            stages[-1].instructions.append((keyword, value.strip()))
    return args, stages


ARGS, STAGES = _parse()
FINAL = STAGES[-1]


def _container() -> dict[str, Any]:
    deployment = find(folder_objects(MANIFESTS / "deploy"), "Deployment", "queuescope-controller")
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    result: dict[str, Any] = container
    return result


def test_multi_stage_on_python_slim() -> None:
    assert len(STAGES) >= 2
    for stage in STAGES:
        assert re.fullmatch(r"python:\d+\.\d+-slim", stage.base), stage.base
    assert any(src.startswith("--from=") for src in FINAL.all("COPY")), (
        "the final stage copies the built environment"
    )


def test_python_version_satisfies_requires_python() -> None:
    requires = SpecifierSet(PYPROJECT["project"]["requires-python"])
    for stage in STAGES:
        version = re.fullmatch(r"python:(\d+\.\d+)-slim", stage.base)
        assert version is not None
        assert version.group(1) in requires
    # Both stages must use the same interpreter: the virtual environment is copied across.
    assert len({stage.base for stage in STAGES}) == 1


def test_builder_installs_this_package() -> None:
    name = canonicalize_name(PYPROJECT["project"]["name"]).replace("-", "_")
    builder = STAGES[0]
    runs = " ".join(builder.all("RUN"))
    assert "pip wheel" in runs
    assert re.search(rf"pip install \S*/{name}-\*\.whl", runs), runs
    copied = " ".join(builder.all("COPY"))
    for pattern in PYPROJECT["tool"]["setuptools"]["packages"]["find"]["include"]:
        package = pattern.rstrip("*")
        assert re.search(rf"\b{package}\b", copied), f"{package} is not copied into the build"
    assert PYPROJECT["project"]["readme"] in copied


def test_final_stage_runs_as_non_root_with_no_build_steps() -> None:
    users = FINAL.all("USER")
    assert users, "the final stage sets USER"
    user, _, group = users[-1].partition(":")
    assert user.isdigit() and int(user) != 0, "a numeric non-root UID (runAsNonRoot checks it)"
    assert not group or (group.isdigit() and int(group) != 0)
    assert not FINAL.all("RUN"), "no package installs or compilers in the final image"
    pod = find(folder_objects(MANIFESTS / "deploy"), "Deployment", "queuescope-controller")
    security = pod["spec"]["template"]["spec"]["securityContext"]
    assert security["runAsUser"] == int(user)


def test_entrypoint_is_the_console_script_and_cmd_is_serve() -> None:
    (entrypoint,) = FINAL.all("ENTRYPOINT")
    (cmd,) = FINAL.all("CMD")
    scripts = PYPROJECT["project"]["scripts"]
    assert json.loads(entrypoint) == ["queuescope"]
    assert "queuescope" in scripts
    assert json.loads(cmd) == ["serve"]
    assert _container()["args"][0] == "serve"


def test_expose_matches_the_container_port() -> None:
    exposed = {int(p.split("/")[0]) for value in FINAL.all("EXPOSE") for p in value.split()}
    assert exposed == {p["containerPort"] for p in _container()["ports"]}


def test_image_tag_is_the_project_version() -> None:
    assert _container()["image"] == f"queuescope:{PYPROJECT['project']['version']}"


def test_dockerignore_keeps_what_the_build_copies() -> None:
    lines = [
        line.strip()
        for line in (REPO / ".dockerignore").read_text().splitlines()
        if line.strip() and not line.startswith("#")
    ]
    assert lines[0] == "*"  # allow-list: nothing else reaches the build context
    kept = {line[1:].rstrip("/") for line in lines if line.startswith("!")}
    copied = {
        word.rstrip("/")
        for value in STAGES[0].all("COPY")
        for word in value.split()[:-1]
        if not word.startswith("--")
    }
    assert copied <= kept
