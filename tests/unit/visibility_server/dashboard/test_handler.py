"""The dashboard under /dashboard: the page, its JSON, and what RBAC lets each caller see."""

from __future__ import annotations

import dataclasses
from types import MappingProxyType

from fastapi import FastAPI

from scheduler.core.blockers import Blocker
from scheduler.runtime.estimates import MICROS, AdmissionVelocity, ServedForecast
from scheduler.runtime.quota_snapshot import (
    ClusterQueueQuota,
    CohortQuota,
    QuotaSnapshot,
    ResourceUsage,
)
from scheduler.runtime.snapshot import Snapshot
from scheduler.runtime.workload_records import PendingEntry, WhyPending
from tests.unit.visibility_server.authz.builders import (
    VIS,
    binding,
    cluster_binding,
    cluster_role,
    rule,
    user,
)
from tests.unit.visibility_server.http.support import (
    ADMIN,
    ALICE,
    BOB,
    CAROL,
    NOW,
    SECOND,
    T0,
    V2,
    app_for,
    entry,
    get,
    make_snapshot,
)
from visibility_server.authz.embedded import EmbeddedBackend
from visibility_server.authz.pipeline import Authorizer
from visibility_server.authz.rbac import RBACAuthorizer

API = "/dashboard/api/v1"
DAVE = {"x-test-user": "dave"}  # every ClusterQueue, but not why-pending details
ERIN = {"x-test-user": "erin"}  # cq-a only, by name
WHY = WhyPending(
    reason="Pending",
    message="couldn't assign flavors to pod set main: insufficient unused quota for cpu "
    "in flavor default, 2 more needed",
    since=T0 + 5 * SECOND,
    blockers=(
        Blocker(
            "Quota",
            "insufficient unused quota for cpu in flavor default, 2 more needed",
            "default",
            "cpu",
            "2",
        ),
    ),
)


def _with_why(e: PendingEntry) -> PendingEntry:
    return PendingEntry.make(
        e.namespace, e.name, e.creation, e.owners, e.priority, e.local_queue, WHY.message, WHY
    )


def dashboard_snapshot() -> Snapshot:
    """cq-a (in cohort pool) with a-high, b-low (team-a) and c-mid (team-b); cq-b alone."""
    base = make_snapshot(
        {
            "cq-a": [
                entry("team-a", "a-high", "lq-a", 100, T0),
                _with_why(entry("team-b", "c-mid", "lq-c", 50, T0 + SECOND)),
                entry("team-a", "b-low", "lq-b", 10, T0 + 2 * SECOND),
            ],
            "cq-b": [],
        },
        {("team-b", "lq-idle"): "cq-b"},
    )
    cpu = ResourceUsage(
        "default", "cpu", nominal=4000, usage=6000, subtree_quota=4000, borrowing_limit=4000
    )
    gpu = ResourceUsage(
        "a100", "nvidia.com/gpu", nominal=4, usage=1, subtree_quota=4, lending_limit=2
    )
    quota = QuotaSnapshot(
        (
            ClusterQueueQuota("cq-a", "pool", True, (), "BestEffortFIFO", 3, (cpu, gpu)),
            ClusterQueueQuota("cq-b", "", False, ("Stopped",), "StrictFIFO", 0, ()),
        ),
        (CohortQuota("pool", "", (ResourceUsage("default", "cpu", 8000, 2000, 10000),)),),
    )
    # 60 admissions over the last ten minutes, frozen at NOW: ~0.1/s.
    velocity = AdmissionVelocity(
        at=int(NOW * MICROS), weight=60.0, window_seconds=600.0, tau_seconds=1e9
    )
    return dataclasses.replace(base, quota=quota, velocities=MappingProxyType({"cq-a": velocity}))


def authorizer() -> Authorizer:
    viewer = cluster_role(
        "cq-viewer",
        rule(["get"], [VIS], ["clusterqueues/pendingworkloads", "workloads/pendingposition"]),
    )
    cq_only = cluster_role("cq-only", rule(["get"], [VIS], ["clusterqueues/pendingworkloads"]))
    one_cq = cluster_role(
        "one-cq", rule(["get"], [VIS], ["clusterqueues/pendingworkloads"], names=["cq-a"])
    )
    lq_viewer = cluster_role(
        "lq-viewer",
        rule(["get"], [VIS], ["localqueues/pendingworkloads", "workloads/pendingposition"]),
    )
    return Authorizer(
        EmbeddedBackend(
            RBACAuthorizer.from_objects(
                [
                    viewer,
                    cq_only,
                    one_cq,
                    lq_viewer,
                    cluster_binding("alice", "cq-viewer", user("alice")),
                    cluster_binding("dave", "cq-only", user("dave")),
                    cluster_binding("erin", "one-cq", user("erin")),
                    binding("team-a", "bob", "ClusterRole", "lq-viewer", user("bob")),
                ]
            )
        )
    )


def app() -> FastAPI:
    return app_for(dashboard_snapshot(), authorizer=authorizer())


async def test_the_page_and_assets_are_static_and_need_no_rights() -> None:
    a = app()
    for headers in ({}, CAROL):
        page = await get(a, "/dashboard", headers)
        assert page.status_code == 200
        assert page.headers["content-type"] == "text/html; charset=utf-8"
        assert "default-src 'none'" in page.headers["content-security-policy"]
        assert b"/dashboard/static/app.js" in page.content
    assert (await get(a, "/dashboard/", {})).content == page.content
    script = await get(a, "/dashboard/static/app.js", {})
    assert script.headers["content-type"].startswith("text/javascript")
    assert b"If-None-Match" in script.content
    css = await get(a, "/dashboard/static/style.css", {})
    assert css.status_code == 200
    again = await get(a, "/dashboard/static/app.js", {"if-none-match": script.headers["etag"]})
    assert (again.status_code, again.content) == (304, b"")
    for missing in ("/dashboard/static/index.html", "/dashboard/static/", "/dashboard/x"):
        assert (await get(a, missing, {})).status_code == 404
    post = await get(a, "/dashboard", {}, method="POST")
    assert post.status_code == 405


async def test_the_dashboard_can_be_turned_off() -> None:
    off = app_for(dashboard_snapshot(), authorizer=authorizer(), dashboard=False)
    assert (await get(off, "/dashboard", ADMIN)).status_code == 404
    assert (await get(off, "/dashboard", {})).status_code == 403


async def test_json_needs_an_authenticated_caller() -> None:
    r = await get(app(), f"{API}/overview", {})
    assert r.status_code == 401
    assert r.json()["reason"] == "Unauthorized"


async def test_overview_for_a_cluster_wide_viewer() -> None:
    doc = (await get(app(), f"{API}/overview", ALICE)).json()
    assert doc["user"]["name"] == "alice"
    assert doc["allClusterQueues"] is True
    assert [c["name"] for c in doc["cohorts"]] == ["pool"]
    cq_a, cq_b = doc["clusterQueues"]
    assert (cq_a["name"], cq_a["cohort"], cq_a["pending"], cq_a["reserving"]) == (
        "cq-a",
        "pool",
        3,
        3,
    )
    assert cq_a["admissionsPerHour"] == 360.0
    cpu, gpu = cq_a["resources"]
    assert (cpu["nominal"], cpu["usage"], cpu["borrowed"], cpu["borrowingLimit"]) == (
        4000,
        6000,
        2000,
        4000,
    )
    assert cpu["display"] == {
        "nominal": "4",
        "usage": "6",
        "borrowed": "2",
        "lendable": "0",
        "subtreeQuota": "4",
        "borrowingLimit": "4",
        "lendingLimit": None,
    }
    assert (gpu["lendable"], gpu["lendingLimit"]) == (2, 2)
    assert (cq_b["active"], cq_b["inactiveReasons"]) == (False, ["Stopped"])
    # alice may not read LocalQueues: none listed.
    assert doc["localQueues"] == [] and doc["allLocalQueues"] is False


async def test_overview_for_a_namespaced_user() -> None:
    a = app()
    doc = (await get(a, f"{API}/overview", BOB)).json()
    assert (doc["clusterQueues"], doc["cohorts"], doc["localQueues"]) == ([], [], [])
    team_a = (await get(a, f"{API}/overview?namespace=team-a", BOB)).json()
    assert [(q["namespace"], q["name"], q["pending"]) for q in team_a["localQueues"]] == [
        ("team-a", "lq-a", 1),
        ("team-a", "lq-b", 1),
    ]
    team_b = (await get(a, f"{API}/overview?namespace=team-b", BOB)).json()
    assert team_b["localQueues"] == []


async def test_overview_for_a_named_cluster_queue_only() -> None:
    doc = (await get(app(), f"{API}/overview", ERIN)).json()
    assert doc["allClusterQueues"] is False
    assert [c["name"] for c in doc["clusterQueues"]] == ["cq-a"]
    assert doc["cohorts"] == []  # totals would include queues erin may not see


async def test_admin_sees_every_local_queue() -> None:
    doc = (await get(app(), f"{API}/overview", ADMIN)).json()
    assert [(q["namespace"], q["name"]) for q in doc["localQueues"]] == [
        ("team-a", "lq-a"),
        ("team-a", "lq-b"),
        ("team-b", "lq-c"),
        ("team-b", "lq-idle"),
    ]


async def test_cluster_queue_pending_matches_the_api() -> None:
    a = app()
    api = (await get(a, f"{V2}/clusterqueues/cq-a/pendingworkloads", ALICE)).json()
    doc = (await get(a, f"{API}/clusterqueues/cq-a/pending", ALICE)).json()
    assert doc["total"] == 3 and doc["clusterQueue"] == "cq-a"
    assert doc["resourceVersion"] == api["metadata"]["resourceVersion"]
    assert [
        (i["namespace"], i["name"], i["positionInClusterQueue"], i["positionInLocalQueue"])
        for i in doc["items"]
    ] == [
        (
            i["metadata"]["namespace"],
            i["metadata"]["name"],
            i["positionInClusterQueue"],
            i["positionInLocalQueue"],
        )
        for i in api["items"]
    ]
    head, middle, last = doc["items"]
    assert "whyPending" not in head  # never tried
    assert middle["whyPending"] == {
        "reason": "Pending",
        "message": WHY.message,
        "lastTransitionTime": "2026-01-01T00:00:05Z",
        "blockers": [
            {
                "kind": "Quota",
                "flavor": "default",
                "resource": "cpu",
                "amount": "2",
                "message": WHY.blockers[0].message,
            }
        ],
    }
    # 0.1 admissions/s: position 1 waits two admissions, position 2 three.
    assert middle["estimatedWait"]["seconds"] == 20
    assert last["estimatedWait"]["seconds"] == 30
    assert middle["estimatedWait"]["method"] == "DecayedAdmissionRate"
    wait = last["estimatedWait"]
    assert wait["lowSeconds"] < wait["seconds"] < wait["highSeconds"]
    limited = (await get(a, f"{API}/clusterqueues/cq-a/pending?limit=1", ALICE)).json()
    assert (limited["total"], len(limited["items"])) == (3, 1)


async def test_details_need_the_pendingposition_right() -> None:
    doc = (await get(app(), f"{API}/clusterqueues/cq-a/pending", DAVE)).json()
    assert len(doc["items"]) == 3
    assert all("whyPending" not in i and "estimatedWait" not in i for i in doc["items"])


async def test_cluster_queue_rights_are_the_api_rights() -> None:
    a = app()
    denied = await get(a, f"{API}/clusterqueues/cq-a/pending", BOB)
    assert denied.status_code == 403
    api = await get(a, f"{V2}/clusterqueues/cq-a/pendingworkloads", BOB)
    assert denied.json()["message"] == api.json()["message"]
    assert (await get(a, f"{API}/clusterqueues/cq-b/pending", ERIN)).status_code == 403
    assert (await get(a, f"{API}/clusterqueues/nope/pending", ALICE)).status_code == 404


async def test_local_queue_pending_for_its_namespace_only() -> None:
    a = app()
    doc = (await get(a, f"{API}/namespaces/team-a/localqueues/lq-b/pending", BOB)).json()
    assert doc["localQueue"] == {"namespace": "team-a", "name": "lq-b"}
    ((item),) = doc["items"]
    assert (item["name"], item["positionInClusterQueue"], item["positionInLocalQueue"]) == (
        "b-low",
        2,
        0,
    )
    assert item["estimatedWait"]["seconds"] == 30
    other = await get(a, f"{API}/namespaces/team-b/localqueues/lq-c/pending", BOB)
    assert other.status_code == 403
    missing = await get(a, f"{API}/namespaces/team-a/localqueues/nope/pending", BOB)
    assert missing.status_code == 404
    assert missing.json()["details"]["kind"] == "localqueue"


async def test_conditional_polling() -> None:
    a = app()
    for path in (f"{API}/overview", f"{API}/clusterqueues/cq-a/pending"):
        first = await get(a, path, ALICE)
        etag = first.headers["etag"]
        assert first.headers["cache-control"] == "private, no-cache"
        again = await get(a, path, {**ALICE, "if-none-match": etag})
        assert (again.status_code, again.content, again.headers["etag"]) == (304, b"", etag)
    # What one caller sees is not another's: the tags differ.
    bob = await get(a, f"{API}/overview", BOB)
    assert bob.headers["etag"] != (await get(a, f"{API}/overview", ALICE)).headers["etag"]


async def test_bad_limit_and_unknown_paths() -> None:
    a = app()
    r = await get(a, f"{API}/clusterqueues/cq-a/pending?limit=x", ALICE)
    assert r.status_code == 400
    for path in (f"{API}/nope", f"{API}/clusterqueues/cq-a", f"{API}//overview"):
        assert (await get(a, path, ALICE)).status_code == 404


async def test_not_synced_is_503() -> None:
    snap = dataclasses.replace(dashboard_snapshot(), synced=False)
    r = await get(app_for(snap, authorizer=authorizer()), f"{API}/overview", ALICE)
    assert r.status_code == 503


async def test_position_lookup_carries_why_and_estimate() -> None:
    a = app()
    path = f"{V2}/namespaces/team-b/workloads/c-mid/pendingposition"
    body = (await get(a, path, ALICE)).json()
    assert body["whyPending"]["blockers"][0]["amount"] == "2"
    assert body["estimatedWait"]["seconds"] == 20
    assert body["message"] == WHY.message
    head = (await get(a, f"{V2}/namespaces/team-a/workloads/a-high/pendingposition", ALICE)).json()
    assert "whyPending" not in head and head["estimatedWait"]["seconds"] == 10


async def test_estimates_move_with_time_and_the_etag_follows() -> None:
    snap = dashboard_snapshot()
    path = f"{V2}/namespaces/team-a/workloads/b-low/pendingposition"
    later = NOW + 3600.0
    now_app = app_for(snap, authorizer=authorizer())
    later_app = app_for(snap, authorizer=authorizer(), clock=lambda: later)
    now_r, later_r = await get(now_app, path, ALICE), await get(later_app, path, ALICE)
    assert now_r.json()["positionInClusterQueue"] == later_r.json()["positionInClusterQueue"]
    assert now_r.headers["etag"] != later_r.headers["etag"]


async def test_pending_items_carry_the_served_forecast_with_the_details() -> None:
    forecast = ServedForecast("rate", T0, 7, T0 + 120 * SECOND, T0 + 60 * SECOND, T0 + 600 * SECOND)
    served = {("team-b", "c-mid"): forecast}
    a = app_for(
        dashboard_snapshot(), authorizer=authorizer(), forecasts=lambda ns, n: served.get((ns, n))
    )
    items = (await get(a, f"{API}/clusterqueues/cq-a/pending", ALICE)).json()["items"]
    by_name = {i["name"]: i for i in items}
    assert by_name["c-mid"]["estimatedStart"] == {
        "p50": "2026-01-01T00:02:00Z",
        "low": "2026-01-01T00:01:00Z",
        "high": "2026-01-01T00:10:00Z",
        "method": "rate",
        "madeAt": "2026-01-01T00:00:00Z",
        "snapshot": 7,
    }
    assert "estimatedStart" not in by_name["a-high"]
    # Like the other details, only for callers who may look the workload up.
    hidden = (await get(a, f"{API}/clusterqueues/cq-a/pending", DAVE)).json()["items"]
    assert all("estimatedStart" not in i for i in hidden)
