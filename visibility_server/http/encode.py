"""Serializers: compact and pretty JSON (orjson) and YAML the way kube-apiserver writes it.

Compact JSON ends with exactly one newline (Go's `json.Encoder` does); pretty JSON is
indented by two spaces and has no trailing newline (kube-apiserver's pretty path uses
`json.MarshalIndent`). Key order is the insertion order of the dicts, which the
renderers build in Go's field order.

YAML: kube-apiserver converts its JSON to YAML through go-yaml, which writes block
style, indents by two, does not indent sequences under a key, and sorts map keys with
its own "natural" order (runs of digits compare as numbers, letters sort after
non-letters). `go_yaml_key` reproduces that order so YAML reads the same as
`kubectl -o yaml` would.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import Any

import orjson
import yaml


def json_compact(obj: Any) -> bytes:
    return orjson.dumps(obj) + b"\n"


def json_pretty(obj: Any) -> bytes:
    return orjson.dumps(obj, option=orjson.OPT_INDENT_2)


def _digit_run(chars: str, start: int, value: int) -> tuple[int, int]:
    """(value, end) after folding the run of digits at `start` into `value`, as Go does
    (`rune - '0'`, which is only meaningful for ASCII, exactly like go-yaml)."""
    end = start
    while end < len(chars) and chars[end].isdecimal():
        value = value * 10 + ord(chars[end]) - 48
        end += 1
    return value, end


def _go_yaml_less(a: str, b: str) -> bool:
    """go-yaml v2's `keyList.Less` for two string keys."""
    for i in range(min(len(a), len(b))):
        if a[i] == b[i]:
            continue
        a_letter, b_letter = a[i].isalpha(), b[i].isalpha()
        if a_letter and b_letter:
            return a[i] < b[i]
        if a_letter or b_letter:
            return b_letter
        a_num = b_num = 0
        if a[i] == "0" or b[i] == "0":
            # A zero inside a number with a non-zero prefix: both sides keep a leading 1
            # so that the comparison below stays numeric.
            j = i - 1
            while j >= 0 and a[j].isdecimal():
                if a[j] != "0":
                    a_num = b_num = 1
                    break
                j -= 1
        a_num, a_end = _digit_run(a, i, a_num)
        b_num, b_end = _digit_run(b, i, b_num)
        if a_num != b_num:
            return a_num < b_num
        if a_end != b_end:
            return a_end < b_end
        return a[i] < b[i]
    return len(a) < len(b)


def _compare(a: str, b: str) -> int:
    if _go_yaml_less(a, b):
        return -1
    if _go_yaml_less(b, a):
        return 1
    return 0


go_yaml_key = functools.cmp_to_key(_compare)


class _GoStyleDumper(yaml.SafeDumper):
    """SafeDumper whose mappings come out in go-yaml's key order."""


def _represent_mapping(dumper: yaml.SafeDumper, data: Mapping[str, Any]) -> yaml.Node:
    items = sorted(data.items(), key=lambda kv: go_yaml_key(str(kv[0])))
    return dumper.represent_mapping("tag:yaml.org,2002:map", items)


_GoStyleDumper.add_representer(dict, _represent_mapping)


def to_yaml(obj: Any) -> bytes:
    text = yaml.dump(
        obj,
        Dumper=_GoStyleDumper,
        default_flow_style=False,
        indent=2,
        allow_unicode=True,
        sort_keys=False,
        # No folding of long strings: a message stays on one line.
        width=2**31 - 1,
    )
    return text.encode()
