"""Links between the repository's Markdown pages resolve: the file exists and, for
`page.md#anchor`, the page has a heading with that GitHub anchor. Code comments point
at these anchors (`docs/scheduling.md#admission-loop`), so a renamed heading must fail
here rather than leave dangling pointers."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGES = sorted([*ROOT.glob("docs/*.md"), ROOT / "README.md"])
LINK = re.compile(r"\]\(([^)\s]+)\)")
HEADING = re.compile(r"^(#{1,6}) (.+?)\s*$")
FENCE = "```"


def anchor(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def anchors_of(page: Path) -> set[str]:
    seen: dict[str, int] = {}
    out: set[str] = set()
    in_code = False
    for line in page.read_text(encoding="utf-8").splitlines():
        if line.startswith(FENCE):
            in_code = not in_code
            continue
        match = HEADING.match(line)
        if in_code or match is None:
            continue
        base = anchor(match.group(2))
        count = seen.get(base, 0)
        seen[base] = count + 1
        out.add(base if count == 0 else f"{base}-{count}")
    return out


def links_of(page: Path) -> list[tuple[int, str]]:
    out: list[tuple[int, str]] = []
    in_code = False
    for number, line in enumerate(page.read_text(encoding="utf-8").splitlines(), 1):
        if line.startswith(FENCE):
            in_code = not in_code
            continue
        if in_code:
            continue
        out.extend((number, m.group(1)) for m in LINK.finditer(line))
    return out


def test_anchor_rule() -> None:
    assert anchor("Runs, removal and fill-back") == "runs-removal-and-fill-back"
    assert anchor("Example: dominant resource share") == "example-dominant-resource-share"
    assert anchor("`--log-format` and `QUEUESCOPE_*`") == "--log-format-and-queuescope_"


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_relative_links_resolve(page: Path) -> None:
    broken = []
    for number, target in links_of(page):
        if re.match(r"^[a-z][a-z0-9+.-]*:", target):
            continue  # https:, mailto:
        path, _, fragment = target.partition("#")
        linked = (page.parent / path).resolve() if path else page
        if not linked.exists():
            broken.append(f"line {number}: {target}: no such file")
        elif fragment and linked.suffix == ".md" and fragment not in anchors_of(linked):
            broken.append(f"line {number}: {target}: no heading with that anchor")
    assert not broken, "\n".join(broken)


def test_contract_pages_exist_with_their_headings() -> None:
    """The pages code comments point into, with a few of the headings they name."""
    expected = {
        "docs/visibility-api.md": {"paths-served", "order-and-positions", "errors", "long-poll"},
        "docs/cluster.md": {"decision-pipeline", "tls-in-python", "manifests", "high-availability"},
        "docs/scheduling.md": {"admission-loop", "flavor-scan-resumption", "condition-messages"},
        "docs/simulate.md": {"command", "input-documents", "scenario", "output"},
        "docs/performance.md": {"benchmarks-and-targets", "rules-for-the-harness"},
        "docs/product.md": {"layers", "command-line", "set-up", "conventions"},
    }
    for page, headings in expected.items():
        missing = headings - anchors_of(ROOT / page)
        assert not missing, f"{page} lacks {sorted(missing)}"


SOURCES = [
    "scheduler",
    "visibility_server",
    "queuescope",
    "tools",
    "tests",
    "benchmarks",
    "manifests",
    "Makefile",
    "pyproject.toml",
    "Dockerfile",
]
POINTER = re.compile(r"docs/(?P<page>[\w-]+\.md)#(?P<anchor>[\w-]+)|(?<=, )#(?P<more>[\w-]+)")


def source_files() -> list[Path]:
    out: list[Path] = []
    for name in SOURCES:
        path = ROOT / name
        if path.is_file():
            out.append(path)
        elif path.is_dir():
            out.extend(
                p
                for p in sorted(path.rglob("*"))
                if p.is_file()
                and p.suffix in {".py", ".yaml", ".yml", ".toml", ".md", ""}
                and "__pycache__" not in p.parts
            )
    return out


def test_pointers_in_code_name_existing_headings() -> None:
    """`docs/<page>.md#<anchor>` in comments, docstrings, YAML and the Makefile (and the
    `, #<anchor>` that continues such a list) names a heading that exists."""
    known: dict[str, set[str]] = {}
    broken = []
    for path in source_files():
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            continue
        for number, line in enumerate(text.splitlines(), 1):
            page = None
            for match in POINTER.finditer(line):
                if match.group("page"):
                    page = match.group("page")
                    name = match.group("anchor")
                elif page is not None:
                    name = match.group("more")
                else:
                    continue
                doc = ROOT / "docs" / page
                if page not in known:
                    known[page] = anchors_of(doc) if doc.exists() else set()
                if name not in known[page]:
                    where = path.relative_to(ROOT).as_posix()
                    broken.append(f"{where}:{number}: docs/{page}#{name}")
    assert not broken, "\n".join(broken)
