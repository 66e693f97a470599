"""The conformance fixtures again, written in kueue.x-k8s.io/v1beta2 (docs/api-versions.md).

Each fixture's input is converted document by document (also the objects Scenario
events apply) to v1beta2, as a v1beta2 user would have written it, Configuration
included (`config.kueue.x-k8s.io/v1beta2`, written here from Kueue's rules, not by the
product's reader; a fixture without one gets the v1beta2 Configuration that says what
no Configuration says), and run three ways against the fixture's own v1beta1 run:

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


CONFIG_V1BETA1 = "config.kueue.x-k8s.io/v1beta1"
CONFIG_V1BETA2 = "config.kueue.x-k8s.io/v1beta2"
# v1beta1's defaults where v1beta2 has none, or other ones (docs/scheduling.md#configuration).
V1BETA1_PODS_READY_TIMEOUT = "5m"
V1BETA1_STRATEGIES = ["LessThanOrEqualToFinalShare", "LessThanInitialShare"]
NO_WAIT_FOR_PODS_READY: Json = {"featureGates": {"DisableWaitForPodsReady": True}}


def _is_zero(duration: Any) -> bool:
    return str(duration).rstrip("smhunµ") in ("0", "0.0", "")


def _configuration_to_v1beta2(document: Json, recovering: bool) -> Json:
    """A v1beta1 Configuration as a v1beta2 user writes it, or unchanged where v1beta2
    cannot say the same: `queueVisibility` (gone), a zero timeout (v1beta2 reads 0 as
    its default, 30 minutes), no recoveryTimeout while a workload waits for recovery
    (`recovering`; v1beta2's default is the timeout, and has no "none"). v1beta2 has no
    "off" for waitForPodsReady but Kueue's gate."""
    wait = document.get("waitForPodsReady") or {}
    enabled = bool(wait.get("enable"))
    if (
        "queueVisibility" in document
        or (enabled and _is_zero(wait.get("timeout")))
        or (enabled and recovering and "recoveryTimeout" not in wait)
    ):
        return document
    out = {k: v for k, v in document.items() if k not in ("waitForPodsReady", "fairSharing")}
    out["apiVersion"] = CONFIG_V1BETA2
    if enabled:
        out["waitForPodsReady"] = {
            "timeout": wait.get("timeout", V1BETA1_PODS_READY_TIMEOUT),
            "blockAdmission": wait.get("blockAdmission", True),
            **{k: wait[k] for k in ("requeuingStrategy", "recoveryTimeout") if k in wait},
        }
    else:
        gates = {**(document.get("featureGates") or {}), **NO_WAIT_FOR_PODS_READY["featureGates"]}
        out["featureGates"] = gates
    fair = document.get("fairSharing") or {}
    if fair.get("enable"):
        strategies = fair.get("preemptionStrategies") or V1BETA1_STRATEGIES
        out["fairSharing"] = {"preemptionStrategies": strategies}
    return out


def _waits_for_recovery(document: Any) -> bool:
    """A Workload whose pods were ready and are no longer (PodsReady False, WaitForRecovery)."""
    if not isinstance(document, dict) or document.get("kind") != "Workload":
        return False
    conditions = (document.get("status") or {}).get("conditions") or []
    return any(
        c.get("type") == "PodsReady" and c.get("reason") == "WaitForRecovery" for c in conditions
    )


def _to_v1beta2(document: Any, recovering: bool = False) -> Any:
    if not isinstance(document, dict):
        return document
    if document.get("apiVersion") == CONFIG_V1BETA1 and document.get("kind") == "Configuration":
        return _configuration_to_v1beta2(document, recovering)
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
    recovering = any(_waits_for_recovery(d) for d in documents)
    converted = [_to_v1beta2(d, recovering) for d in documents]
    if not any(isinstance(d, dict) and d.get("kind") == "Configuration" for d in converted):
        # Last, so that the documents before it keep their indexes in error messages.
        converted.append(
            {"apiVersion": CONFIG_V1BETA2, "kind": "Configuration", **NO_WAIT_FOR_PODS_READY}
        )
    target.write_text(yaml.safe_dump_all(converted, sort_keys=False), encoding="utf-8")
    return sum(1 for d in converted if isinstance(d, dict) and d.get("apiVersion") == KUEUE_V1BETA2)


def _configuration_versions(path: Path) -> list[str]:
    try:
        documents = list(yaml.load_all(path.read_text(encoding="utf-8"), Loader=_TextTimes))
    except yaml.YAMLError:
        return []
    return [
        d["apiVersion"]
        for d in documents
        if isinstance(d, dict) and d.get("kind") == "Configuration"
    ]


# The fixtures whose Configuration v1beta2 cannot say (see _configuration_to_v1beta2).
V1BETA1_CONFIGURATION_ONLY = {
    "094-queue-visibility-status",
    "144-podsready-timeout-zero",
    "145-podsready-timeout-zero-limit",
    "150-block-admission-never-unblocked",
}


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
    if _configuration_versions(directory / "input.yaml") or converted:
        expected_config = CONFIG_V1BETA1 if name in V1BETA1_CONFIGURATION_ONLY else CONFIG_V1BETA2
        assert _configuration_versions(v2_dir / "input.yaml") == [expected_config], name

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
