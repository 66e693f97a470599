"""Kueue v0.19.2's Grafana dashboards for pending workloads, unchanged, against queuescope
through the real kube-apiserver (docs/visibility-api.md#grafana-dashboards).

Kueue ships two dashboards (`site/static/examples/visibility/*-dashboard.json`) for
Grafana's Infinity data source, and the RBAC that lets Grafana's ServiceAccount
(`default/default`) read them (`grafana-*-reader.yaml`). This test applies that RBAC as
it is, takes a token of that ServiceAccount, and does what Grafana does with each
dashboard: it resolves the template variables from their URLs (the ClusterQueues, the
Namespaces, a Namespace's LocalQueues), fetches the panel's URL with them, takes the
rows at the panel's `root_selector` and reads every column's `selector` from each row.
Every column must resolve in every row, with the type the panel gives it, and the owner
column must name the Job of a Job's Workload.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping
from datetime import datetime
from typing import Any

import pytest

from tests.e2e.aggregated import Aggregated
from tests.e2e.cluster import wait_json
from tests.e2e.harness import ControlPlane
from tests.e2e.pods import KUEUE_EXAMPLES, PodJob

pytestmark = pytest.mark.realcluster

VISIBILITY = KUEUE_EXAMPLES / "visibility"
DASHBOARDS = (
    "pending-workloads-for-cluster-queue-visibility-dashboard.json",
    "pending-workloads-for-local-queue-visibility-dashboard.json",
)
# What the test picks for each variable among the values Grafana would offer.
CHOSEN = {"cluster_queue": "cq-a", "namespace": "team-a", "local_queue": "lq-a"}
IN_CLUSTER = "https://kubernetes.default.svc"
OWNER_COLUMN = "metadata.ownerReferences.0.name"


@pytest.fixture(scope="module")
def token(aggregated: Aggregated) -> Iterator[str]:
    """A token of Grafana's ServiceAccount, with Kueue's reader roles bound to it."""
    plane = aggregated.plane
    # A cluster's every namespace has it; this control plane runs no controller making it.
    account = {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "default"}}
    plane.kubectl("apply", "-n", "default", "-f", "-", input=json.dumps(account))
    for reader in ("grafana-cluster-queue-reader.yaml", "grafana-local-queue-reader.yaml"):
        plane.kubectl("apply", "-f", str(VISIBILITY / reader))
    plane.apply(PodJob("dashboard-job", "team-a", "lq-a", cpu="2").manifest())
    yield plane.kubectl("create", "token", "default", "-n", "default").stdout.strip()
    # Later modules count cq-a's pending Workloads: the Job's goes with it, now.
    plane.kubectl("delete", "job", "dashboard-job", "-n", "team-a")
    for workload in plane.get_json("workloads.kueue.x-k8s.io", "-n", "team-a")["items"]:
        owners = workload["metadata"].get("ownerReferences") or []
        if any(o.get("name") == "dashboard-job" for o in owners):
            name = workload["metadata"]["name"]
            plane.kubectl(
                "delete", "workloads.kueue.x-k8s.io", name, "-n", "team-a", "--ignore-not-found"
            )
    for reader in ("grafana-cluster-queue-reader.yaml", "grafana-local-queue-reader.yaml"):
        plane.kubectl("delete", "-f", str(VISIBILITY / reader), check=False)


def fetch(plane: ControlPlane, url: str, token: str, values: Mapping[str, str]) -> Any:
    """What the Infinity data source gets for `url`, the variables filled in, as the
    ServiceAccount."""
    for name, value in values.items():
        url = url.replace(f"${{{name}}}", value).replace(f"${name}", value)
    assert url.startswith(IN_CLUSTER), url
    assert "$" not in url, f"an unresolved variable in {url}"
    path = url.removeprefix(IN_CLUSTER)
    response = plane.request(path, headers={"Authorization": f"Bearer {token}"})
    assert response.status == 200, (path, response.status, response.body[:500])
    return json.loads(response.body)


def select(row: Any, selector: str) -> Any:
    """A column selector as the Infinity backend parser reads it: dotted keys, numbers
    indexing lists; None where the path ends."""
    value = row
    for part in selector.split("."):
        if isinstance(value, list) and part.isdigit():
            value = value[int(part)] if int(part) < len(value) else None
        elif isinstance(value, dict):
            value = value.get(part)
        else:
            return None
    return value


def rows(doc: Any, query: Mapping[str, Any]) -> list[Any]:
    found = select(doc, query["root_selector"]) if query.get("root_selector") else doc
    assert isinstance(found, list), query
    return found


def variables(plane: ControlPlane, token: str, dashboard: Mapping[str, Any]) -> dict[str, str]:
    """Each template variable's values from its own query (in order: a later URL may use
    an earlier variable); the test's choice must be among them."""
    values: dict[str, str] = {}
    for variable in dashboard["templating"]["list"]:
        query = variable["query"]["infinityQuery"]
        [column] = query["columns"]
        offered = [
            select(r, column["selector"])
            for r in rows(fetch(plane, query["url"], token, values), query)
        ]
        name = variable["name"]
        assert CHOSEN[name] in offered, (name, offered)
        values[name] = CHOSEN[name]
    return values


def check_column(column: Mapping[str, Any], value: Any) -> None:
    kind = column["type"]
    if kind == "number":
        assert isinstance(value, int), (column, value)
    elif kind == "timestamp":
        assert isinstance(value, str) and datetime.fromisoformat(value.replace("Z", "+00:00"))
    else:
        assert isinstance(value, str | int), (column, value)


@pytest.mark.parametrize("name", DASHBOARDS)
def test_kueues_dashboard_shows_every_column(aggregated: Aggregated, token: str, name: str) -> None:
    plane = aggregated.plane
    dashboard = json.loads((VISIBILITY / name).read_text())
    wait_json(
        plane,
        "the Job's Workload pending in cq-a",
        lambda doc: any(
            (w["metadata"].get("ownerReferences") or [{}])[0].get("name") == "dashboard-job"
            for w in doc["items"]
        ),
        "workloads.kueue.x-k8s.io",
        "-n",
        "team-a",
    )
    values = variables(plane, token, dashboard)
    [panel] = dashboard["panels"]
    [target] = panel["targets"]
    assert target["source"] == "url" and target["parser"] == "backend"
    assert re.fullmatch(r".*/pendingworkloads", target["url"]), target["url"]
    shown = rows(fetch(plane, target["url"], token, values), target)
    assert shown, "the panel has rows"
    owners = []
    for row in shown:
        for column in target["columns"]:
            value = select(row, column["selector"])
            if column["selector"] == OWNER_COLUMN:
                owners.append(value)  # a Workload applied without an owner has none
                continue
            assert value is not None, (column["selector"], row)
            check_column(column, value)
        assert row["localQueueName"] == ("lq-a" if "local" in name else row["localQueueName"])
    assert "dashboard-job" in owners, owners
