"""The conversion webhook inside the app: open to kube-apiserver, nothing else opened."""

from __future__ import annotations

import json

from tests.unit.visibility_server.http.support import app_for, client, get
from tests.unit.visibility_server.webhooks.test_conversion import V1, V2, body, queue


async def test_an_uncredentialed_review_is_converted_by_the_real_converter() -> None:
    app = app_for()
    async with client(app, headers={}) as c:
        response = await c.post("/convert", content=body([queue(V1, "a", cohort="c")]))
    assert response.status_code == 200
    converted = response.json()["response"]
    assert converted["result"] == {"status": "Success"}
    [obj] = converted["convertedObjects"]
    assert obj["apiVersion"] == V2
    assert obj["spec"]["cohortName"] == "c"


async def test_a_malformed_review_is_400_through_the_app() -> None:
    app = app_for()
    async with client(app, headers={}) as c:
        response = await c.post("/convert", content=b"{not json")
    assert response.status_code == 400
    assert response.json()["kind"] == "Status"


async def test_get_on_the_webhook_path_is_405_not_an_api_answer() -> None:
    response = await get(app_for(), "/convert", headers={})
    assert response.status_code == 405
    assert json.loads(response.content)["code"] == 405


async def test_other_paths_still_need_credentials() -> None:
    response = await get(app_for(), "/apis/visibility.kueue.x-k8s.io/v1beta2", headers={})
    assert response.status_code in (401, 403)
    opened = await get(app_for(), "/convert/", headers={})
    assert opened.status_code in (401, 403)
