"""The dashboard's what-if form (visibility_server/dashboard/static/whatif.js) in headless
Chromium against `serve --embedded manifests/samples --demo`: the form POSTs to the API's
`whatif` subresource with the browser's client certificate, so RBAC decides as for kubectl.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests.browser.conftest import DemoServer
from tests.browser.test_dashboard import WAIT_MS, screenshot

PageAs = Callable[[str | None], Any]

JOB = """\
apiVersion: batch/v1
kind: Job
metadata: {name: probe, namespace: team-a}
spec:
  parallelism: 1
  template:
    spec:
      restartPolicy: Never
      containers:
      - name: c
        image: busybox
        resources: {requests: {cpu: 100m}}
"""
DECISIONS = {"Admitted", "Preempting", "Pending", "Queued", "Inadmissible"}


def _ask(page: Any, body: str) -> None:
    page.fill("#whatif-body", body)
    page.click("#whatif-form button[type=submit]")


def test_an_administrator_gets_an_answer(
    page_as: PageAs, demo_server: DemoServer, tmp_path: Path
) -> None:
    page = page_as("admin")
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.goto(f"{demo_server.url}/dashboard?localQueue=team-a/main")
    # The LocalQueue of the page's address fills the form.
    page.wait_for_selector("#whatif-form", timeout=WAIT_MS)
    assert page.input_value("#whatif-localqueue") == "team-a/main"
    _ask(page, JOB)
    page.wait_for_selector('[data-testid="whatif-answer"]', timeout=WAIT_MS)
    decision = page.inner_text('[data-field="decision"]')
    assert decision in DECISIONS
    assert page.inner_text('[data-field="workload"]').startswith("team-a/job-probe-")
    assert page.inner_text('[data-field="clusterqueue"]') == "research-a"
    assert "in the ClusterQueue" in page.inner_text('[data-field="position"]')
    assert errors == []
    screenshot(page, "dashboard-whatif.png", tmp_path)


def test_an_invalid_body_names_the_field(page_as: PageAs, demo_server: DemoServer) -> None:
    page = page_as("admin")
    page.goto(f"{demo_server.url}/dashboard?localQueue=team-a/main")
    page.wait_for_selector("#whatif-form", timeout=WAIT_MS)
    _ask(page, JOB.replace("parallelism: 1", "parallelism: many"))
    page.wait_for_selector('[data-testid="whatif-error"]', timeout=WAIT_MS)
    text = page.inner_text('[data-testid="whatif-error"]')
    assert text.startswith("422:")
    assert "spec.parallelism" in text


def test_a_user_without_the_what_if_rule_is_refused(
    page_as: PageAs, demo_server: DemoServer
) -> None:
    # alice may read team-a's queues (manifests/samples/70-rbac.yaml), not ask what-if.
    page = page_as("alice")
    page.goto(f"{demo_server.url}/dashboard?namespace=team-a&localQueue=team-a/main")
    page.wait_for_selector("#whatif-form", timeout=WAIT_MS)
    _ask(page, JOB)
    page.wait_for_selector('[data-testid="whatif-error"]', timeout=WAIT_MS)
    text = page.inner_text('[data-testid="whatif-error"]')
    assert text.startswith("403:")
    assert 'cannot create resource "localqueues/whatif"' in text
