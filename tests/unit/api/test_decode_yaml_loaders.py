"""libyaml's loader reads scenarios, PyYAML's pure-Python one stays the reference: the
same texts are accepted, into the same objects, and refused with the same error (file,
document, line)."""

from __future__ import annotations

from typing import Any

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from scheduler.api import ApiError, load_yaml
from scheduler.api import decode as decode_module

pytestmark = pytest.mark.skipif(
    not getattr(yaml, "__with_libyaml__", False), reason="PyYAML built without libyaml"
)

MANIFESTS = """\
apiVersion: v1
kind: Namespace
metadata: {name: team-a, labels: {tier: "gold"}}
---
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: ResourceFlavor
metadata:
  name: default
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: ClusterQueue
metadata: {name: cq}
spec:
  namespaceSelector: {}
  resourceGroups:
  - coveredResources: ["cpu", "memory"]
    flavors:
    - name: default
      resources:
      - {name: cpu, nominalQuota: 10}
      - name: memory
        nominalQuota: 64Gi
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: LocalQueue
metadata: {name: lq, namespace: team-a}
spec: {clusterQueue: cq}
---
apiVersion: v1
kind: List
items:
- apiVersion: kueue.x-k8s.io/v1beta1
  kind: Workload
  metadata: {name: w1, namespace: team-a}
  spec:
    queueName: lq
    podSets:
    - name: main
      count: 2
      template:
        spec:
          containers:
          - name: c
            resources: {requests: {cpu: "1"}}
"""


def _outcome(text: str) -> tuple[str, Any]:
    try:
        decoded = load_yaml(text, "m.yaml")
    except ApiError as err:
        return "error", (str(err), err.line, err.index, err.item)
    return "ok", [(d.index, d.item, d.obj.model_dump(mode="json")) for d in decoded]


def _pure_python_outcome(text: str, monkeypatch: pytest.MonkeyPatch) -> tuple[str, Any]:
    with monkeypatch.context() as patch:
        patch.setattr(decode_module, "_FastLoader", None)
        return _outcome(text)


def test_the_fast_loader_is_used() -> None:
    assert decode_module._FastLoader is not None
    assert issubclass(decode_module._FastLoader, yaml.CSafeLoader)


CASES = {
    "valid": MANIFESTS,
    "syntax error in a later document": MANIFESTS + "---\na: [1\n",
    "tab indentation": MANIFESTS.replace("  name: default", "\tname: default"),
    "duplicate key": MANIFESTS.replace("name: lq,", "name: lq, name: lq2,"),
    "unclosed quote": MANIFESTS.replace('"gold"', '"gold'),
    "control character": MANIFESTS.replace("team-a, labels", "team-a\x01, labels"),
    "bad alias": MANIFESTS + "---\na: *nowhere\n",
    "python tag": MANIFESTS + "---\na: !!python/name:os.system\n",
    "anchors and merge keys": "a: &x {b: 1}\n<<: *x\n",
    "not a mapping": MANIFESTS + "---\n- 1\n- 2\n",
    "invalid object": MANIFESTS.replace("count: 2", "count: -2"),
    "bad indentation": MANIFESTS.replace("    queueName: lq", "   queueName: lq"),
    "directive": "%YAML 1.1\n---\n" + MANIFESTS,
    "unhashable key": MANIFESTS + "---\n? [a]\n: b\n",
    "question mark in a flow key": MANIFESTS.replace("{tier:", "{t?er:"),
    "byte order mark": "\ufeff" + MANIFESTS,
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_same_outcome_as_the_pure_python_loader(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    text = CASES[name]
    assert _outcome(text) == _pure_python_outcome(text, monkeypatch)


def test_error_after_documents_names_its_document_and_line() -> None:
    text = MANIFESTS + "---\na: [1\n"
    with pytest.raises(ApiError) as info:
        load_yaml(text, "m.yaml")
    lines = MANIFESTS.count("\n")
    assert info.value.index == 6
    assert info.value.line == lines + 3
    assert str(info.value).startswith(f"m.yaml: document 6: invalid YAML at line {lines + 3}")


def test_unhashable_key_is_an_api_error() -> None:
    with pytest.raises(ApiError) as info:
        load_yaml("a: 1\n? [a]\n: b\n", "k.yaml")
    assert (
        str(info.value)
        == "k.yaml: document 0: invalid YAML at line 2, column 3: found unhashable key"
    )


def test_duplicate_key_error_reads_as_before() -> None:
    with pytest.raises(ApiError) as info:
        load_yaml("apiVersion: v1\nkind: Namespace\nmetadata: {name: a, name: b}\n", "d.yaml")
    assert str(info.value) == (
        'd.yaml: document 0: invalid YAML at line 3, column 21: duplicate key "name"'
    )
    assert info.value.line == 3


# What an edit may put in: YAML's indicators, whitespace, a character to escape.
EDITS = ["", " ", "\t", "\r", "\n", ":", "-", "?", ",", "[", "]", "{", "}", "#", "&", "*"]
EDITS += ["!", "|", ">", "'", '"', "%", "@", "`", "\\", "é", "\x85", "\ufeff", "a: b"]


@settings(max_examples=300, deadline=None)
@given(
    edits=st.lists(
        st.tuples(
            st.integers(min_value=0, max_value=len(MANIFESTS) - 1),
            st.sampled_from(list(EDITS)),
        ),
        min_size=1,
        max_size=3,
    )
)
def test_edited_manifests_give_the_same_outcome(edits: list[tuple[int, str]]) -> None:
    text = MANIFESTS
    for wanted, replacement in edits:
        at = min(wanted, len(text) - 1)
        text = text[:at] + replacement + text[at + 1 :]
    fast = _outcome(text)
    original = decode_module._FastLoader
    decode_module._FastLoader = None
    try:
        reference = _outcome(text)
    finally:
        decode_module._FastLoader = original
    assert fast == reference
