"""The conformance fixtures again, written in kueue.x-k8s.io/v1beta2 (docs/api-versions.md).

Each fixture's input is converted document by document (also the objects Scenario
events apply) to v1beta2, as a v1beta2 user would have written it, and run three ways
against the fixture's own v1beta1 run:

* printed as v1beta1 (`--api-version v1beta1`): byte for byte the v1beta1 run's output
  (same exit status; errors name the same documents);
* printed as v1beta2 (the default for v1beta2 input): exactly the v1beta1 run's output
  with each Kueue object converted to v1beta2;
* that v1beta2 output, converted back to v1beta1, meets every expectation of
  `expected.yaml` (pendingWorkloadsStatus, which v1beta2 does not have, is checked by
  the first run, and must be absent here).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from scheduler.api.conversion import convert_document
from scheduler.api.versions import CONVERTIBLE_KINDS, KUEUE_V1BETA1, KUEUE_V1BETA2
from scheduler.sim.api_version import in_api_version
from scheduler.sim.output import render_json
from tests.conformance.test_conformance import (
    Checker,
    _check_expectations,
    _index,
    _load_expected,
    _params,
    _run,
)

Json = dict[str, Any]


class _TextTimes(yaml.SafeLoader):
    """Timestamps stay strings, as they are in JSON (and on the wire)."""


_TextTimes.yaml_implicit_resolvers = {
    first: [(tag, regexp) for tag, regexp in resolvers if tag != "tag:yaml.org,2002:timestamp"]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}


def _to_v1beta2(document: Any) -> Any:
    if not isinstance(document, dict):
        return document
    if document.get("apiVersion") == KUEUE_V1BETA1 and document.get("kind") in CONVERTIBLE_KINDS:
        return convert_document(document, KUEUE_V1BETA2)
    if document.get("kind") == "Scenario":
        events = (document.get("spec") or {}).get("events") or []
        for event in events:
            if isinstance(event, dict) and "apply" in event:
                event["apply"] = _to_v1beta2(event["apply"])
    if document.get("apiVersion") == "v1" and document.get("kind") == "List":
        document["items"] = [_to_v1beta2(item) for item in document.get("items") or []]
    return document


def _write_v1beta2_input(directory: Path, target: Path) -> int:
    text = (directory / "input.yaml").read_text(encoding="utf-8")
    try:
        documents = list(yaml.load_all(text, Loader=_TextTimes))
    except yaml.YAMLError:
        target.write_text(text, encoding="utf-8")  # a fixture about broken YAML
        return 0
    converted = [_to_v1beta2(d) for d in documents]
    target.write_text(yaml.safe_dump_all(converted, sort_keys=False), encoding="utf-8")
    return sum(1 for d in converted if isinstance(d, dict) and d.get("apiVersion") == KUEUE_V1BETA2)


def _without_pending_status(expect: Json) -> Json:
    out = json.loads(json.dumps(expect))
    for section in ("clusterQueues", "localQueues"):
        for queue in (out.get(section) or {}).values():
            if isinstance(queue, dict):
                queue.pop("pendingWorkloadsStatus", None)
    return dict(out)


@pytest.mark.parametrize("directory", list(_params()))
def test_fixture_in_v1beta2(
    directory: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    name = directory.name
    expected = _load_expected(directory)
    args = [str(a) for a in expected.get("args") or []]
    v2_dir = tmp_path / name
    v2_dir.mkdir()
    converted = _write_v1beta2_input(directory, v2_dir / "input.yaml")

    original = _run(capsys, directory, args)
    as_v1 = _run(capsys, v2_dir, [*args, "--api-version", "v1beta1"])
    as_v2 = _run(capsys, v2_dir, args)

    assert as_v1.code == original.code, f"{name}: {as_v1.stderr}"
    assert as_v2.code == original.code, f"{name}: {as_v2.stderr}"
    if original.code != 0:
        # Same refusal of the same document (the message may name v1beta2's field).
        first_line = original.stderr.split(":", 2)
        v2_line = as_v2.stderr.replace(str(v2_dir), str(directory)).split(":", 2)
        assert v2_line[:2] == first_line[:2], f"{name}: {as_v2.stderr!r} vs {original.stderr!r}"
        return
    assert as_v1.stdout == original.stdout, f"{name}: v1beta2 input, v1beta1 output differs"
    original_doc = json.loads(original.stdout)
    assert as_v2.stdout == render_json(in_api_version(original_doc, KUEUE_V1BETA2))

    doc = json.loads(as_v2.stdout)
    if converted:
        assert any(item.get("apiVersion") == KUEUE_V1BETA2 for item in doc["items"]), name
    back = {
        **doc,
        "items": [
            convert_document(item, KUEUE_V1BETA1, keep=False)
            if item.get("apiVersion") == KUEUE_V1BETA2
            else item
            for item in doc["items"]
        ],
    }
    for item in doc["items"]:
        assert "pendingWorkloadsStatus" not in (item.get("status") or {}), name
    check = Checker(f"{name} (v1beta2)")
    expect = expected.get("expect") or {}
    _check_expectations(check, _without_pending_status(expect), _index(back))
    check.report()
