"""Content negotiation, pretty, YAML and Table (docs/visibility-api.md#content-negotiation)."""

from __future__ import annotations

import json
from typing import Any

import orjson
import pytest
import yaml

from scheduler.core.workload import OwnerRef
from tests.unit.visibility_server.http.support import (
    ADMIN,
    SECOND,
    T0,
    V2,
    app_for,
    entry,
    get,
    make_snapshot,
)
from visibility_server.http.encode import go_yaml_key, to_yaml
from visibility_server.http.negotiation import Media, negotiate, parse_accept, wants_pretty
from visibility_server.http.table import human_duration

CQ = f"{V2}/clusterqueues/cq-a/pendingworkloads"
LQ = f"{V2}/namespaces/team-a/localqueues/lq-a/pendingworkloads"
POS = f"{V2}/namespaces/team-a/workloads/a-low/pendingposition"
TABLE = "application/json;as=Table;v=v1;g=meta.k8s.io"
KUBECTL_TABLE = (
    "application/json;as=Table;v=v1;g=meta.k8s.io,"
    "application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json"
)
SUMMARY = frozenset({Media.JSON, Media.YAML, Media.TABLE})


@pytest.mark.parametrize(
    ("accept", "expected"),
    [
        ("application/json", Media.JSON),
        ("application/json, */*", Media.JSON),
        ("APPLICATION/JSON", Media.JSON),
        ("application/json;charset=utf-8", Media.JSON),
        ("application/*", Media.JSON),
        ("*/*", Media.JSON),
        ("application/yaml", Media.YAML),
        ("application/yaml;q=0.9,application/json;q=0.8", Media.YAML),
        ("application/json;q=0.8,application/yaml", Media.YAML),
        ("application/json;q=0.5,application/yaml;q=0.5", Media.JSON),
        (TABLE, Media.TABLE),
        ("application/json;g=meta.k8s.io;v=v1;as=Table", Media.TABLE),
        (KUBECTL_TABLE, Media.TABLE),
        ("application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/yaml", Media.YAML),
        ("application/vnd.kubernetes.protobuf,application/json", Media.JSON),
        ("application/cbor, application/json", Media.JSON),
        ("application/json;as=PartialObjectMetadataList;v=v1;g=meta.k8s.io,*/*", Media.JSON),
        ("application/yaml;as=Table;v=v1;g=meta.k8s.io,application/json", Media.JSON),
        ("application/json;q=0", None),
        ("text/html", None),
        ("application/vnd.kubernetes.protobuf", None),
        ("application/json;g=meta.k8s.io", None),
        ("garbage", None),
        ("application/json;q=abc", None),
    ],
)
def test_accept_table(accept: str, expected: Media | None) -> None:
    assert negotiate(parse_accept([accept]), SUMMARY) is expected


def test_no_accept_header_is_json() -> None:
    assert negotiate(None, SUMMARY) is Media.JSON


def test_table_is_only_offered_to_summaries() -> None:
    assert (
        negotiate(parse_accept([KUBECTL_TABLE]), frozenset({Media.JSON, Media.YAML})) is Media.JSON
    )


@pytest.mark.parametrize(
    ("query", "agent", "pretty"),
    [
        (None, "curl/8.5.0", True),
        (None, "Wget/1.21", True),
        (None, "Mozilla/5.0 (X11)", True),
        (None, "kubectl/v1.32.0", False),
        (None, "python-httpx/0.28", False),
        ("", "curl/8", True),  # an empty value does not decide
        ("0", "curl/8", False),
        ("false", "curl/8", False),
        ("yes", "curl/8", False),
    ]
    + [(v, "kubectl", True) for v in ("1", "t", "T", "TRUE", "true", "True")],
)
def test_pretty_rule(query: str | None, agent: str, pretty: bool) -> None:
    assert wants_pretty(query, agent) is pretty


def _owned_snapshot() -> Any:
    owner = OwnerRef("batch/v1", "Job", "train-a", "uid-1")
    return make_snapshot(
        {
            "cq-a": [
                entry(
                    "team-a", "job-train-a-5d2f1", "lq-a", 100, T0, (owner,), "waiting for quota"
                ),
                entry("team-a", "other", "lq-a", 50, T0 + 90 * SECOND),
            ]
        }
    )


async def test_pretty_is_the_same_document_indented() -> None:
    app = app_for(_owned_snapshot())
    compact = await get(app, CQ)
    pretty = await get(app, CQ + "?pretty=1")
    assert pretty.content == orjson.dumps(compact.json(), option=orjson.OPT_INDENT_2)
    assert not pretty.content.endswith(b"\n")
    assert compact.content.endswith(b"}\n") and not compact.content.endswith(b"\n\n")
    assert pretty.headers["etag"] != compact.headers["etag"]
    by_agent = await get(app, CQ, {**ADMIN, "user-agent": "curl/8.5.0"})
    assert by_agent.content == pretty.content


async def test_pretty_empty_and_large_pages() -> None:
    entries = [entry("ns", f"w{i}", "lq", 0, T0 + i) for i in range(6000)]
    app = app_for(make_snapshot({"cq-a": entries, "cq-e": []}))
    for path in (CQ + "?limit=6000", f"{V2}/clusterqueues/cq-e/pendingworkloads"):
        compact = await get(app, path)
        pretty = await get(app, path + ("&" if "?" in path else "?") + "pretty=true")
        assert pretty.content == orjson.dumps(compact.json(), option=orjson.OPT_INDENT_2)


async def test_yaml_summary_reads_as_kubectl_would() -> None:
    app = app_for(_owned_snapshot())
    compact = (await get(app, CQ)).json()
    r = await get(app, CQ, {**ADMIN, "accept": "application/yaml"})
    assert r.headers["content-type"] == "application/yaml"
    assert yaml.safe_load(r.text) == compact
    assert r.content == to_yaml(compact)
    assert r.text.startswith(
        "apiVersion: visibility.kueue.x-k8s.io/v1beta2\nitems:\n- localQueueName: lq-a\n"
    )
    assert "  metadata:\n    creationTimestamp: '2026-01-01T00:00:00Z'\n" in r.text
    assert "    ownerReferences:\n    - apiVersion: batch/v1\n      kind: Job\n" in r.text


async def test_yaml_large_and_empty_pages_match_a_whole_dump() -> None:
    entries = [entry("ns", f"w{i}", "lq", i % 7, T0 + i) for i in range(1100)]
    app = app_for(make_snapshot({"cq-a": entries, "cq-e": []}))
    for path in (CQ + "?limit=2000", f"{V2}/clusterqueues/cq-e/pendingworkloads"):
        body = (await get(app, path)).json()
        r = await get(app, path, {**ADMIN, "accept": "application/yaml"})
        assert r.content == to_yaml(body)


def test_go_yaml_key_order() -> None:
    keys = ["b", "a10", "a9", "a", "B", "x-1", "x1", "_", "v1beta2", "v1beta10", "v1alpha1"]
    assert sorted(keys, key=go_yaml_key) == [
        "_",
        "B",
        "a",
        "a9",
        "a10",
        "b",
        "v1alpha1",
        "v1beta2",
        "v1beta10",
        "x-1",
        "x1",
    ]  # fmt: skip  (a letter sorts after a non-letter)


async def test_table_default_metadata() -> None:
    app = app_for(_owned_snapshot())
    r = await get(app, CQ, {**ADMIN, "accept": KUBECTL_TABLE})
    assert r.status_code == 200
    assert r.headers["content-type"] == "application/json"
    table = r.json()
    assert list(table) == ["kind", "apiVersion", "metadata", "columnDefinitions", "rows"]
    assert table["kind"] == "Table" and table["apiVersion"] == "meta.k8s.io/v1"
    summary = (await get(app, CQ)).json()
    assert table["metadata"] == summary["metadata"]
    assert [c["name"] for c in table["columnDefinitions"]] == [
        "Name",
        "Namespace",
        "LocalQueue",
        "Priority",
        "Position in ClusterQueue",
        "Position in LocalQueue",
        "Age",
        "Owner",
    ]
    assert table["columnDefinitions"][0] == {
        "name": "Name",
        "type": "string",
        "format": "name",
        "description": "Name of the Workload",
        "priority": 0,
    }
    assert table["columnDefinitions"][-1]["priority"] == 1
    assert table["rows"][0] == {
        "cells": ["job-train-a-5d2f1", "team-a", "lq-a", 100, 0, 0, "5m", "Job/train-a"],
        "object": {
            "kind": "PartialObjectMetadata",
            "apiVersion": "meta.k8s.io/v1",
            "metadata": {
                "name": "job-train-a-5d2f1",
                "namespace": "team-a",
                "creationTimestamp": "2026-01-01T00:00:00Z",
            },
        },
    }
    assert table["rows"][1]["cells"] == ["other", "team-a", "lq-a", 50, 1, 1, "3m30s", ""]


async def test_table_include_object() -> None:
    app = app_for(_owned_snapshot())
    headers = {**ADMIN, "accept": TABLE}
    summary = (await get(app, CQ)).json()
    none = (await get(app, CQ + "?includeObject=None", headers)).json()
    assert all(set(row) == {"cells"} for row in none["rows"])
    obj = await get(app, CQ + "?includeObject=Object", headers)
    assert [row["object"] for row in obj.json()["rows"]] == summary["items"]
    pretty = await get(app, CQ + "?includeObject=Object&pretty=1", headers)
    assert pretty.content == orjson.dumps(obj.json(), option=orjson.OPT_INDENT_2)
    unknown = await get(app, CQ + "?includeObject=Everything", headers)
    assert unknown.json() == (await get(app, CQ, headers)).json()
    tags = {
        (await get(app, CQ + f"?includeObject={v}", headers)).headers["etag"]
        for v in ("None", "Metadata", "Object")
    }
    assert len(tags) == 3


async def test_table_on_local_queue_and_paging() -> None:
    app = app_for(_owned_snapshot())
    r = await get(app, LQ + "?offset=1", {**ADMIN, "accept": TABLE})
    assert [row["cells"][0] for row in r.json()["rows"]] == ["other"]


async def test_table_is_not_offered_on_pendingposition() -> None:
    app = app_for()
    r = await get(app, POS, {**ADMIN, "accept": KUBECTL_TABLE})
    assert r.json()["kind"] == "PendingWorkloadPosition"
    assert (await get(app, POS, {**ADMIN, "accept": TABLE})).status_code == 406


async def test_table_yaml_and_pretty_are_the_same_table() -> None:
    app = app_for(_owned_snapshot())
    compact = (await get(app, CQ, {**ADMIN, "accept": TABLE})).json()
    pretty = await get(app, CQ + "?pretty=true", {**ADMIN, "accept": TABLE})
    assert pretty.content == orjson.dumps(compact, option=orjson.OPT_INDENT_2)


@pytest.mark.parametrize(
    ("seconds", "text"),
    [
        (-5, "<invalid>"),
        (-1.5, "0s"),
        (-0.5, "0s"),
        (0, "0s"),
        (45, "45s"),
        (119, "119s"),
        (120, "2m"),
        (150, "2m30s"),
        (599, "9m59s"),
        (600, "10m"),
        (3 * 3600 - 1, "179m"),
        (3 * 3600, "3h"),
        (3 * 3600 + 2 * 60, "3h2m"),
        (8 * 3600, "8h"),
        (47 * 3600 + 59 * 60, "47h"),
        (48 * 3600, "2d"),
        (2 * 86400 + 5 * 3600, "2d5h"),
        (8 * 86400, "8d"),
        (729 * 86400, "729d"),
        (730 * 86400, "2y"),
        (731 * 86400, "2y1d"),
        (8 * 365 * 86400, "8y"),
    ],
)
def test_human_duration(seconds: float, text: str) -> None:
    assert human_duration(int(seconds * 1_000_000)) == text


async def test_yaml_position_and_not_acceptable_yaml_openapi() -> None:
    app = app_for()
    r = await get(app, POS, {**ADMIN, "accept": "application/yaml"})
    assert yaml.safe_load(r.text)["positionInClusterQueue"] == 2
    assert (
        await get(app, "/openapi/v2", {**ADMIN, "accept": "application/yaml"})
    ).status_code == 406
    proto = "application/com.github.proto-openapi.spec.v2@v1.0+protobuf"
    assert (await get(app, "/openapi/v2", {**ADMIN, "accept": proto})).status_code == 406
    ok = await get(app, "/openapi/v2", {**ADMIN, "accept": f"{proto},application/json"})
    assert json.loads(ok.content)["swagger"] == "2.0"
