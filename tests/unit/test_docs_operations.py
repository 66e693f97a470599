"""docs/operations.md keeps up with the code it documents: every `serve` flag is in its
table, and the Make targets, Lease and manifests folders it names exist."""

from __future__ import annotations

import argparse
import re
from pathlib import Path

import pytest

from queuescope.serve import add_serve_parser

REPO = Path(__file__).resolve().parents[2]
DOC = (REPO / "docs" / "operations.md").read_text()


def _serve_flags() -> list[str]:
    parser = argparse.ArgumentParser()
    add_serve_parser(parser.add_subparsers())
    (serve,) = [
        action.choices["serve"]
        for action in parser._actions
        if isinstance(action, argparse._SubParsersAction)
    ]
    return sorted(
        option
        for action in serve._actions
        for option in action.option_strings
        if option.startswith("--") and option != "--help"
    )


def _documented(flag: str) -> bool:
    """`--flag` verbatim, or as the `-suffix` / `…-suffix` shorthand of a table row that
    groups flags sharing a prefix (`--requestheader-username-headers`, `-group-headers`)."""
    if re.search(rf"`{re.escape(flag)}[` ]", DOC):
        return True
    words = flag[2:].split("-")
    return any(
        re.search(rf"`(-|…-){re.escape('-'.join(words[i:]))}`", DOC) for i in range(1, len(words))
    )


@pytest.mark.parametrize("flag", _serve_flags())
def test_every_serve_flag_is_documented(flag: str) -> None:
    assert _documented(flag), f"{flag} is missing from docs/operations.md"


@pytest.mark.parametrize("name", re.findall(r"`(QUEUESCOPE_[A-Z_]+)`", DOC))
def test_documented_environment_twins_exist(name: str) -> None:
    sources = "".join(p.read_text() for p in (REPO / "queuescope").glob("serve*.py"))
    assert f'"{name.removeprefix("QUEUESCOPE_")}"' in sources, name


def test_the_make_targets_and_folders_it_names_exist() -> None:
    makefile = (REPO / "Makefile").read_text()
    for target in ("deploy", "undeploy"):
        assert re.search(rf"^{target}:", makefile, re.MULTILINE), target
    for folder in re.findall(r"`(?:manifests/)?((?:overlays|components)/[a-z-]+)`", DOC):
        assert (REPO / "manifests" / folder).is_dir(), folder
