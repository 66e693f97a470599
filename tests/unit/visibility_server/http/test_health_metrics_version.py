"""`/healthz`, `/livez`, `/readyz`, `/metrics`, `/version`
(docs/visibility-api.md#health-metrics-and-version)."""

from __future__ import annotations

import pytest
from prometheus_client import CollectorRegistry

from tests.unit.visibility_server.http.support import (
    ADMIN,
    ALICE,
    CAROL,
    V2,
    VERSION_INFO,
    Holder,
    app_for,
    example_snapshot,
    get,
)
from visibility_server.http import HealthCheck
from visibility_server.http.health import READYZ_ONLY


@pytest.mark.parametrize("path", ["/healthz", "/livez", "/readyz"])
async def test_ok_for_anonymous(path: str) -> None:
    r = await get(app_for(), path, {})
    assert r.status_code == 200
    assert r.content == b"ok"
    assert r.headers["content-type"] == "text/plain; charset=utf-8"
    assert r.headers["x-content-type-options"] == "nosniff"


async def test_verbose() -> None:
    r = await get(app_for(), "/readyz?verbose", {})
    assert r.text == "[+]ping ok\n[+]informer-sync ok\nreadyz check passed\n"
    r = await get(app_for(), "/livez?verbose=1", {})
    assert r.text == "[+]ping ok\nlivez check passed\n"


async def test_readyz_fails_until_the_first_synced_snapshot_then_latches() -> None:
    holder = Holder(example_snapshot(synced=False))
    app = app_for(holder)
    r = await get(app, "/readyz", {})
    assert r.status_code == 500
    assert r.text == "[+]ping ok\n[-]informer-sync failed: reason withheld\nreadyz check failed\n"
    assert (await get(app, "/healthz", {})).status_code == 500
    assert (await get(app, "/livez", {})).status_code == 200
    assert (await get(app, "/readyz/informer-sync", {})).status_code == 500
    holder.current = example_snapshot()
    assert (await get(app, "/readyz", {})).status_code == 200
    holder.current = example_snapshot(synced=False)  # never flaps back
    assert (await get(app, "/readyz", {})).status_code == 200


async def test_runtime_checks_order_exclude_and_single() -> None:
    shutting_down = False
    checks = [
        HealthCheck("shutdown", lambda: not shutting_down, READYZ_ONLY),
        HealthCheck("event-loop", lambda: True),
        HealthCheck("authentication-config", lambda: True, frozenset({"readyz", "healthz"})),
    ]
    app = app_for(health_checks=checks)
    r = await get(app, "/readyz?verbose", {})
    assert r.text == (
        "[+]ping ok\n[+]event-loop ok\n[+]authentication-config ok\n[+]informer-sync ok\n"
        "[+]shutdown ok\nreadyz check passed\n"
    )
    assert (await get(app, "/healthz?verbose", {})).text.count("shutdown") == 0
    assert (await get(app, "/livez?verbose", {})).text == (
        "[+]ping ok\n[+]event-loop ok\nlivez check passed\n"
    )
    shutting_down = True
    assert (await get(app, "/readyz", {})).status_code == 500
    assert (await get(app, "/healthz", {})).status_code == 200
    r = await get(app, "/readyz?exclude=shutdown&exclude=nope&verbose", {})
    assert r.status_code == 200
    assert "[+]shutdown excluded: ok\n" in r.text
    assert 'warn: some health checks cannot be excluded: no matches for "nope"\n' in r.text
    assert (await get(app, "/readyz/shutdown", {})).status_code == 500
    assert (await get(app, "/readyz/ping", {})).content == b"ok"
    assert (await get(app, "/livez/shutdown", {})).status_code == 404
    assert (await get(app, "/readyz/ping/x", {})).status_code == 403  # not an allowed path
    assert (await get(app, "/readyz/ping/x", ADMIN)).status_code == 404


async def test_version() -> None:
    r = await get(app_for(), "/version", CAROL)
    assert r.status_code == 200
    assert r.json() == VERSION_INFO
    assert list(r.json()) == list(VERSION_INFO)
    assert (await get(app_for(), "/version", {})).status_code == 403  # anonymous: SAR


async def test_metrics() -> None:
    app = app_for()
    await get(app, f"{V2}/clusterqueues/cq-a/pendingworkloads")
    await get(app, f"{V2}/clusterqueues/nope/pendingworkloads")
    r = await get(app, "/metrics", ALICE)
    assert r.status_code == 200
    assert r.headers["content-type"] == "text/plain; version=0.0.4; charset=utf-8"
    text = r.text
    assert (
        'queuescope_visibility_requests_total{code="200",endpoint="clusterqueue",version="v1beta2"}'
        " 1.0" in text
    )
    assert 'code="404",endpoint="clusterqueue"' in text
    assert 'queuescope_visibility_request_duration_seconds_bucket{endpoint="clusterqueue"' in text
    # A forbidden caller is counted too, under the endpoint it did not reach.
    assert (await get(app, "/metrics", CAROL)).status_code == 403


async def test_one_registry_serves_several_apps() -> None:
    registry = CollectorRegistry()
    app_for(metrics_registry=registry)
    app_for(metrics_registry=registry)  # no duplicate-registration error
