"""OpenAPI v2 and v3 (docs/visibility-api.md#openapi-documents): valid documents whose every `$ref`
resolves."""

from __future__ import annotations

import email.utils
import hashlib
from typing import Any

import pytest

from tests.unit.visibility_server.authz.builders import VIS
from tests.unit.visibility_server.http.support import ADMIN, CAROL, NOW, app_for, get

V3 = f"/openapi/v3/apis/{VIS}"


def refs(node: Any) -> list[str]:
    """Every `$ref` value anywhere in a JSON document."""
    found: list[str] = []
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "$ref":
                found.append(value)
            else:
                found.extend(refs(value))
    elif isinstance(node, list):
        for value in node:
            found.extend(refs(value))
    return found


def resolve(document: dict[str, Any], ref: str) -> Any:
    assert ref.startswith("#/"), f"not a local reference: {ref}"
    node: Any = document
    for raw in ref[2:].split("/"):
        part = raw.replace("~1", "/").replace("~0", "~")
        assert isinstance(node, dict) and part in node, f"dangling $ref {ref}"
        node = node[part]
    return node


def assert_refs_resolve(document: dict[str, Any], prefix: str) -> int:
    all_refs = refs(document)
    for ref in all_refs:
        assert ref.startswith(prefix), ref
        resolve(document, ref)
    return len(all_refs)


@pytest.mark.parametrize("extensions", [frozenset(), frozenset({"pendingposition", "longpoll"})])
async def test_v2_document(extensions: frozenset[str]) -> None:
    r = await get(app_for(extensions=extensions), "/openapi/v2", CAROL)
    assert r.status_code == 200
    assert r.headers["content-type"] == "application/json"
    doc = r.json()
    assert doc["swagger"] == "2.0"
    assert doc["info"] == {"title": "queuescope visibility API", "version": "v0.1.0"}
    assert assert_refs_resolve(doc, "#/definitions/") > 0
    for v in ("v1beta2", "v1beta1"):
        for model in ("PendingWorkloadsSummary", "PendingWorkload"):
            assert f"io.k8s.kueue.visibility.{v}.{model}" in doc["definitions"]
        summary = doc["definitions"][f"io.k8s.kueue.visibility.{v}.PendingWorkloadsSummary"]
        assert summary["x-kubernetes-group-version-kind"] == [
            {"group": VIS, "kind": "PendingWorkloadsSummary", "version": v}
        ]
        op = doc["paths"][f"/apis/{VIS}/{v}/clusterqueues/{{name}}/pendingworkloads"]["get"]
        assert op["x-kubernetes-action"] == "get"
        assert op["responses"]["200"]["schema"] == {
            "$ref": f"#/definitions/io.k8s.kueue.visibility.{v}.PendingWorkloadsSummary"
        }
        assert "401" in op["responses"]
        params = {p["name"]: p for p in op["parameters"]}
        assert params["offset"]["type"] == "integer" and params["offset"]["format"] == "int64"
        assert params["limit"]["format"] == "int64" and "pretty" in params
        assert ("waitSeconds" in params) == ("longpoll" in extensions)
        lq = f"/apis/{VIS}/{v}/namespaces/{{namespace}}/localqueues/{{name}}/pendingworkloads"
        assert {p["name"] for p in doc["paths"][lq]["get"]["parameters"]} >= {"namespace", "name"}
        position = f"io.queuescope.visibility.{v}.PendingWorkloadPosition"
        assert (position in doc["definitions"]) == ("pendingposition" in extensions)
    for name in ("ObjectMeta", "OwnerReference", "ManagedFieldsEntry", "FieldsV1", "Time"):
        assert f"io.k8s.apimachinery.pkg.apis.meta.v1.{name}" in doc["definitions"]


async def test_v3_root_lists_only_our_group_versions_with_hashes() -> None:
    app = app_for()
    root = (await get(app, "/openapi/v3", CAROL)).json()
    assert list(root) == ["paths"]
    assert list(root["paths"]) == [f"apis/{VIS}/v1beta1", f"apis/{VIS}/v1beta2"]
    for key, entry in root["paths"].items():
        url = entry["serverRelativeURL"]
        path, _, query = url.partition("?")
        assert path == f"/openapi/v3/{key}"
        body = (await get(app, path, CAROL)).content
        assert query == "hash=" + hashlib.sha512(body).hexdigest().upper()


@pytest.mark.parametrize("version", ["v1beta2", "v1beta1"])
async def test_v3_documents(version: str) -> None:
    doc = (await get(app_for(), f"{V3}/{version}", CAROL)).json()
    assert doc["openapi"] == "3.0.0"
    assert assert_refs_resolve(doc, "#/components/schemas/") > 0
    assert all(f"/{version}/" in path for path in doc["paths"])
    assert not any(
        name.startswith("io.k8s.kueue") and f".{version}." not in name
        for name in doc["components"]["schemas"]
    )


async def test_v3_hash_caching() -> None:
    app = app_for()
    root = (await get(app, "/openapi/v3")).json()
    url = root["paths"][f"apis/{VIS}/v1beta2"]["serverRelativeURL"]
    r = await get(app, url)
    assert r.status_code == 200
    assert r.headers["cache-control"] == "public, immutable"
    expires = email.utils.parsedate_to_datetime(r.headers["expires"]).timestamp()
    assert expires == pytest.approx(NOW + 365 * 86400, abs=1)
    stale = await get(app, f"{V3}/v1beta2?hash=ABC")
    assert stale.status_code == 200  # [DIFF] no 301 to the current URL
    assert stale.headers["cache-control"] == "no-cache"
    assert stale.content == r.content
    assert (await get(app, f"{V3}/v1beta2")).headers["cache-control"] == "no-cache"


@pytest.mark.parametrize("path", ["/openapi/v2", "/openapi/v3", f"{V3}/v1beta2"])
async def test_openapi_etag_and_304(path: str) -> None:
    app = app_for()
    etag = (await get(app, path)).headers["etag"]
    r = await get(app, path, {**ADMIN, "if-none-match": etag})
    assert r.status_code == 304 and r.content == b""


@pytest.mark.parametrize(
    "path", [f"{V3}/v1alpha1", "/openapi/v3/apis", "/openapi/v3/api/v1", "/openapi/v1", "/openapi"]
)
async def test_unknown_openapi_paths_are_404(path: str) -> None:
    assert (await get(app_for(), path)).status_code == 404


async def test_no_fastapi_documents() -> None:
    app = app_for()
    for path in ("/docs", "/redoc", "/openapi.json", "/docs/oauth2-redirect"):
        assert (await get(app, path)).status_code == 404


async def test_documents_pass_openapi_spec_validator() -> None:
    validator = pytest.importorskip("openapi_spec_validator")
    app = app_for()
    validator.validate((await get(app, "/openapi/v2")).json())
    validator.validate((await get(app, f"{V3}/v1beta2")).json())
