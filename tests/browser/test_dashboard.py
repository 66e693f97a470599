"""The dashboard in headless Chromium against `serve --embedded manifests/samples --demo`.

The demo load keeps the queues moving, so comparisons with the API are made between
answers of the same snapshot (equal `resourceVersion`), retried until one is caught.
"""

from __future__ import annotations

import json
import os
import re
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests.browser.conftest import DemoServer

DOCS = Path(__file__).resolve().parents[2] / "docs"
# The screenshots in docs/ are refreshed on request only, so test runs leave the tree alone.
SCREENSHOTS_ENV = "QUEUESCOPE_UPDATE_SCREENSHOTS"
WAIT_MS = 30_000
MATCH_SECONDS = 120.0
API = "/apis/visibility.kueue.x-k8s.io/v1beta2"

PageAs = Callable[[str | None], Any]


def screenshot(page: Any, name: str, tmp_path: Path) -> None:
    folder = DOCS if os.environ.get(SCREENSHOTS_ENV) == "1" else tmp_path
    page.screenshot(path=str(folder / name), full_page=True)
    assert (folder / name).stat().st_size > 0


def shown(page: Any) -> tuple[str, list[tuple[str, str, int, int]]]:
    """The table's snapshot identity and rows, read in one step (a render is one task)."""
    version, found = page.evaluate(
        """() => [
            document.getElementById("pending").dataset.resourceVersion || "",
            [...document.querySelectorAll('[data-testid="pending-row"]')].map((r) => [
                r.dataset.namespace, r.dataset.name,
                Number(r.dataset.posCq), Number(r.dataset.posLq),
            ]),
        ]"""
    )
    return str(version), [(ns, name, int(cq), int(lq)) for ns, name, cq, lq in found]


def rows(page: Any) -> list[tuple[str, str, int, int]]:
    return shown(page)[1]


def fetch_json(page: Any, path: str) -> tuple[int, Any]:
    """GET from inside the page: the browser's own client certificate authenticates."""
    result = page.evaluate(
        """async (path) => {
            const r = await fetch(path, {cache: "no-store"});
            return [r.status, await r.text()];
        }""",
        path,
    )
    return int(result[0]), json.loads(result[1]) if result[1] else None


def api_positions(doc: dict[str, Any], count: int) -> list[tuple[str, str, int, int]]:
    return [
        (
            i["metadata"]["namespace"],
            i["metadata"]["name"],
            i["positionInClusterQueue"],
            i["positionInLocalQueue"],
        )
        for i in doc["items"][:count]
    ]


def test_the_page_renders_the_cohort_tree(
    page_as: PageAs, demo_server: DemoServer, tmp_path: Path
) -> None:
    page = page_as("admin")
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.goto(f"{demo_server.url}/dashboard?clusterQueue=research-a")
    page.wait_for_selector('[data-cq="research-a"]', timeout=WAIT_MS)
    for cohort in ("org", "research", "production"):
        assert page.query_selector(f'[data-cohort="{cohort}"]') is not None
    for cq in ("research-a", "research-b", "production"):
        card = page.query_selector(f'[data-cq="{cq}"]')
        assert card is not None
        assert card.query_selector(".bar") is not None, cq
    assert "signed in as queuescope-admin" in page.inner_text("#who")
    page.wait_for_selector('[data-testid="pending-row"]', timeout=WAIT_MS)
    assert page.is_hidden("#message")
    assert errors == []
    screenshot(page, "dashboard-admin.png", tmp_path)


def test_positions_match_the_api(page_as: PageAs, demo_server: DemoServer) -> None:
    page = page_as("admin")
    page.goto(f"{demo_server.url}/dashboard?clusterQueue=research-a")
    page.wait_for_selector('[data-testid="pending-row"]', timeout=WAIT_MS)
    deadline = time.monotonic() + MATCH_SECONDS
    while True:
        version, table = shown(page)
        status, doc = fetch_json(page, f"{API}/clusterqueues/research-a/pendingworkloads")
        assert status == 200
        if table and doc["metadata"]["resourceVersion"] == version:
            break  # the page shows the snapshot the API answers from
        assert time.monotonic() < deadline, "the queue never held still for one poll"
        time.sleep(0.3)
    assert table == api_positions(doc, len(table))
    # And the per-workload lookup agrees with the first row.
    namespace, name, position, _ = table[0]
    status, lookup = fetch_json(
        page, f"{API}/namespaces/{namespace}/workloads/{name}/pendingposition"
    )
    if status == 200 and lookup["metadata"]["resourceVersion"] == version:
        assert lookup["positionInClusterQueue"] == position


def test_updates_arrive_by_conditional_polling(page_as: PageAs, demo_server: DemoServer) -> None:
    page = page_as("admin")
    seen: list[tuple[str, int, str | None]] = []

    def on_response(response: Any) -> None:
        if "/dashboard/api/" in response.url:
            seen.append(
                (response.url, response.status, response.request.headers.get("if-none-match"))
            )

    page.on("response", on_response)
    page.goto(f"{demo_server.url}/dashboard?clusterQueue=research-a")
    page.wait_for_selector('[data-testid="pending-row"]', timeout=WAIT_MS)
    first = int(page.get_attribute("#status", "data-updates") or "0")
    # The demo keeps admitting and submitting: new data shows up without a reload.
    # (Polled from here: the page's CSP forbids evaluating strings, as it should.)
    deadline = time.monotonic() + 60
    while int(page.get_attribute("#status", "data-updates") or "0") <= first:
        assert time.monotonic() < deadline, "no update arrived"
        page.wait_for_timeout(500)
    conditional = [(url, code) for url, code, tag in seen if tag]
    assert conditional, seen
    assert all(code in (200, 304) for _, code in conditional)


def test_polling_pauses_while_the_tab_is_hidden(page_as: PageAs, demo_server: DemoServer) -> None:
    page = page_as("admin")
    requests: list[float] = []
    page.on(
        "request",
        lambda r: requests.append(time.monotonic()) if "/dashboard/api/" in r.url else None,
    )
    page.goto(f"{demo_server.url}/dashboard")
    page.wait_for_selector('[data-cq="research-a"]', timeout=WAIT_MS)
    page.wait_for_timeout(3500)
    assert requests, "no poll at all"
    page.evaluate(
        """() => {
            Object.defineProperty(document, "hidden", {value: true, configurable: true});
            document.dispatchEvent(new Event("visibilitychange"));
        }"""
    )
    hidden_at = time.monotonic()
    page.wait_for_timeout(7000)  # more than two poll intervals
    assert not [t for t in requests if t > hidden_at + 0.5]
    assert "paused" in page.inner_text("#status")
    shown_at = time.monotonic()  # before: the poll starts within the call below
    page.evaluate(
        """() => {
            Object.defineProperty(document, "hidden", {value: false, configurable: true});
            document.dispatchEvent(new Event("visibilitychange"));
        }"""
    )
    page.wait_for_timeout(1500)
    assert [t for t in requests if t > shown_at], "polling did not resume"


def test_a_namespaced_user_sees_only_their_namespace(
    page_as: PageAs, demo_server: DemoServer, tmp_path: Path
) -> None:
    page = page_as("alice")
    page.goto(f"{demo_server.url}/dashboard?namespace=team-a&localQueue=team-a/main")
    page.wait_for_selector('[data-lq="team-a/main"]', timeout=WAIT_MS)
    queues = [e.get_attribute("data-lq") for e in page.query_selector_all("[data-lq]")]
    assert queues == ["team-a/gpu", "team-a/main"]
    assert page.query_selector_all("[data-cq]") == []  # no ClusterQueue rights
    assert page.query_selector_all("[data-cohort]") == []
    page.wait_for_selector('[data-testid="pending-row"]', timeout=60_000)
    assert {ns for ns, _, _, _ in rows(page)} == {"team-a"}
    screenshot(page, "dashboard-namespaced.png", tmp_path)
    # Asking for another namespace shows nothing, and its data is refused.
    page.goto(f"{demo_server.url}/dashboard?namespace=team-b")
    page.wait_for_selector("#local-queues .empty", timeout=WAIT_MS)
    assert page.query_selector_all("[data-lq]") == []
    status, _ = fetch_json(page, "/dashboard/api/v1/namespaces/team-b/localqueues/main/pending")
    assert status == 403
    status, _ = fetch_json(page, "/dashboard/api/v1/clusterqueues/research-b/pending")
    assert status == 403


def test_without_a_certificate_the_page_explains(page_as: PageAs, demo_server: DemoServer) -> None:
    page = page_as(None)
    page.goto(f"{demo_server.url}/dashboard")
    page.wait_for_selector("#message:not([hidden])", timeout=WAIT_MS)
    assert "not authenticated" in page.inner_text("#message")
    assert page.query_selector_all("[data-cq]") == []


def test_the_estimated_start_shows_the_forecast_and_its_age(
    page_as: PageAs, demo_server: DemoServer
) -> None:
    page = page_as("admin")
    page.goto(f"{demo_server.url}/dashboard?clusterQueue=research-a")
    # The first forecasts follow the first refresh that has the configuration.
    cell = page.wait_for_selector('[data-testid="estimated-start"]', timeout=MATCH_SECONDS * 1000)
    assert cell is not None
    row = page.evaluate(
        """(cell) => {
            const tr = cell.closest("tr");
            return [tr.dataset.namespace, tr.dataset.name, cell.innerText, cell.title];
        }""",
        cell,
    )
    namespace, name, text, title = row
    lines = text.splitlines()
    assert lines[0] == "due" or lines[0].startswith("~"), text
    assert lines[1].startswith("90%: "), text
    # The method whose band it is: the default's, or the fallback's where the forward
    # run did not reach (docs/forecasting.md#fallback).
    method = lines[2].split(", ")[0]
    assert method in ("forecast", "rate") and lines[2].endswith(" old"), text
    # The title names the forecast's instant and snapshot, as the lookup serves them.
    made = r", made at \d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ from snapshot \d+$"
    assert re.search(method + made, title), title
    status, lookup = fetch_json(
        page, f"{API}/namespaces/{namespace}/workloads/{name}/pendingposition"
    )
    if status == 200 and "estimatedStart" in lookup:  # it may have been admitted meanwhile
        start = lookup["estimatedStart"]
        assert set(start) == {"p50", "low", "high", "method", "madeAt", "snapshot"}
        assert start["low"] <= start["p50"] <= start["high"]
