"""Discovery documents and their negotiation (docs/visibility-api.md#discovery)."""

from __future__ import annotations

import json

import pytest

from tests.unit.visibility_server.http.support import ADMIN, CAROL, V1, V2, G, app_for, get

V2_ACCEPT = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"
V2BETA1_ACCEPT = "application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList"
AGGREGATOR_ACCEPT = f"{V2_ACCEPT},{V2BETA1_ACCEPT}"

RESOURCE_LIST = {
    "kind": "APIResourceList",
    "apiVersion": "v1",
    "groupVersion": "visibility.kueue.x-k8s.io/v1beta2",
    "resources": [
        {
            "name": "clusterqueues",
            "singularName": "clusterqueue",
            "namespaced": False,
            "kind": "PendingWorkloadsSummary",
            "verbs": [],
        },
        {
            "name": "clusterqueues/pendingworkloads",
            "singularName": "",
            "namespaced": False,
            "kind": "PendingWorkloadsSummary",
            "verbs": ["get"],
        },
        {
            "name": "localqueues",
            "singularName": "localqueue",
            "namespaced": True,
            "kind": "PendingWorkloadsSummary",
            "verbs": [],
        },
        {
            "name": "localqueues/pendingworkloads",
            "singularName": "",
            "namespaced": True,
            "kind": "PendingWorkloadsSummary",
            "verbs": ["get"],
        },
    ],
}
POSITION_RESOURCES = [
    {
        "name": "workloads",
        "singularName": "workload",
        "namespaced": True,
        "kind": "PendingWorkloadPosition",
        "verbs": [],
    },
    {
        "name": "workloads/pendingposition",
        "singularName": "",
        "namespaced": True,
        "kind": "PendingWorkloadPosition",
        "verbs": ["get"],
    },
]
GROUP_BODY = {
    "name": "visibility.kueue.x-k8s.io",
    "versions": [
        {"groupVersion": "visibility.kueue.x-k8s.io/v1beta2", "version": "v1beta2"},
        {"groupVersion": "visibility.kueue.x-k8s.io/v1beta1", "version": "v1beta1"},
    ],
    "preferredVersion": {"groupVersion": "visibility.kueue.x-k8s.io/v1beta2", "version": "v1beta2"},
}


def compact(obj: object) -> bytes:
    return json.dumps(obj, separators=(",", ":")).encode() + b"\n"


async def test_api_resource_list_upstream_surface() -> None:
    r = await get(app_for(extensions=frozenset()), V2)
    assert r.status_code == 200
    assert r.content == compact(RESOURCE_LIST)
    assert "etag" not in r.headers


async def test_api_resource_list_with_pendingposition() -> None:
    r = await get(app_for(), V1)
    expected = {
        **RESOURCE_LIST,
        "groupVersion": "visibility.kueue.x-k8s.io/v1beta1",
        "resources": RESOURCE_LIST["resources"] + POSITION_RESOURCES,  # type: ignore[operator]
    }
    assert r.content == compact(expected)


async def test_api_resource_list_never_304() -> None:
    app = app_for()
    apis_etag = (await get(app, "/apis")).headers["etag"]
    for tag in (apis_etag, "*"):
        r = await get(app, V2, {**ADMIN, "if-none-match": tag})
        assert r.status_code == 200 and r.content


async def test_legacy_fallback_identity_gets_resource_list() -> None:
    r = await get(
        app_for(), V2, {"x-test-user": "system:kube-aggregator", "accept": "application/json"}
    )
    assert r.status_code == 200
    assert r.json()["kind"] == "APIResourceList"


async def test_api_group_and_group_list() -> None:
    app = app_for()
    assert (await get(app, G)).content == compact(
        {"kind": "APIGroup", "apiVersion": "v1", **GROUP_BODY}
    )
    r = await get(app, "/apis")
    assert r.content == compact(
        {"kind": "APIGroupList", "apiVersion": "v1", "groups": [GROUP_BODY]}
    )
    assert r.headers["content-type"] == "application/json"
    assert r.headers["vary"] == "Accept"


def _aggregated(api_version: str, with_position: bool) -> dict[str, object]:
    def kind(v: str, k: str) -> dict[str, str]:
        return {"group": "visibility.kueue.x-k8s.io", "version": v, "kind": k}

    def resource(v: str, name: str, singular: str, sub: str, scope: str, k: str) -> object:
        return {
            "resource": name,
            "responseKind": kind(v, k),
            "scope": scope,
            "singularResource": singular,
            "verbs": [],
            "subresources": [{"subresource": sub, "responseKind": kind(v, k), "verbs": ["get"]}],
        }

    versions = []
    for v in ("v1beta2", "v1beta1"):
        resources = [
            resource(
                v,
                "clusterqueues",
                "clusterqueue",
                "pendingworkloads",
                "Cluster",
                "PendingWorkloadsSummary",
            ),
            resource(
                v,
                "localqueues",
                "localqueue",
                "pendingworkloads",
                "Namespaced",
                "PendingWorkloadsSummary",
            ),
        ]
        if with_position:
            resources.append(
                resource(
                    v,
                    "workloads",
                    "workload",
                    "pendingposition",
                    "Namespaced",
                    "PendingWorkloadPosition",
                )
            )
        versions.append({"version": v, "freshness": "Current", "resources": resources})
    return {
        "kind": "APIGroupDiscoveryList",
        "apiVersion": f"apidiscovery.k8s.io/{api_version}",
        "metadata": {},
        "items": [{"metadata": {"name": "visibility.kueue.x-k8s.io"}, "versions": versions}],
    }


@pytest.mark.parametrize("with_position", [False, True])
async def test_aggregated_discovery_v2(with_position: bool) -> None:
    extensions = frozenset({"pendingposition"}) if with_position else frozenset()
    app = app_for(extensions=extensions)
    headers = {"x-test-user": "system:kube-aggregator", "x-test-groups": "system:masters"}
    r = await get(app, "/apis", {**headers, "accept": AGGREGATOR_ACCEPT})
    assert r.status_code == 200
    assert r.headers["content-type"] == V2_ACCEPT
    assert r.content == compact(_aggregated("v2", with_position))


@pytest.mark.parametrize(
    ("accept", "content_type", "kind"),
    [
        (V2_ACCEPT, V2_ACCEPT, "APIGroupDiscoveryList"),
        (
            "application/json;as=APIGroupDiscoveryList;v=v2;g=apidiscovery.k8s.io",
            V2_ACCEPT,
            "APIGroupDiscoveryList",
        ),
        (V2BETA1_ACCEPT, V2BETA1_ACCEPT, "APIGroupDiscoveryList"),
        (f"{V2BETA1_ACCEPT};q=0.5,{V2_ACCEPT}", V2_ACCEPT, "APIGroupDiscoveryList"),
        ("application/json", "application/json", "APIGroupList"),
        ("application/*", "application/json", "APIGroupList"),
        ("*/*", "application/json", "APIGroupList"),
        (None, "application/json", "APIGroupList"),
        ("application/yaml", "application/yaml", "APIGroupList"),
    ],
)
async def test_apis_negotiation(accept: str | None, content_type: str, kind: str) -> None:
    headers = {**ADMIN} if accept is None else {**ADMIN, "accept": accept}
    r = await get(app_for(), "/apis", headers)
    assert r.status_code == 200
    assert r.headers["content-type"] == content_type
    assert f"kind: {kind}" in r.text if "yaml" in content_type else r.json()["kind"] == kind
    if kind == "APIGroupDiscoveryList":
        assert (
            r.json()["apiVersion"]
            == "apidiscovery.k8s.io/" + content_type.split("v=")[1].split(";", maxsplit=1)[0]
        )


async def test_apis_future_version_only_is_406_json() -> None:
    accept = "application/json;g=apidiscovery.k8s.io;v=v3;as=APIGroupDiscoveryList"
    r = await get(app_for(), "/apis", {**ADMIN, "accept": accept})
    assert r.status_code == 406
    assert r.headers["content-type"] == "application/json"
    assert r.json()["reason"] == "NotAcceptable"


async def test_apis_etag_and_304() -> None:
    app = app_for()
    headers = {**ADMIN, "accept": AGGREGATOR_ACCEPT}
    first = await get(app, "/apis", headers)
    etag = first.headers["etag"]
    again = await get(app_for(), "/apis", headers)
    assert again.headers["etag"] == etag  # same bytes on every replica of a build
    r = await get(app, "/apis", {**headers, "if-none-match": etag})
    assert r.status_code == 304
    assert r.content == b""
    assert r.headers["etag"] == etag
    assert "location" not in r.headers
    # Another representation has another tag.
    plain = await get(app, "/apis", {**ADMIN, "if-none-match": etag})
    assert plain.status_code == 200 and plain.headers["etag"] != etag


@pytest.mark.parametrize("path", ["/apis/", f"{G}/", f"{V2}/", f"{V1}/"])
async def test_one_trailing_slash_on_discovery(path: str) -> None:
    app = app_for()
    r = await get(app, path, CAROL)
    assert r.status_code == 200
    assert r.content == (await get(app, path.rstrip("/"), CAROL)).content


@pytest.mark.parametrize(
    "path",
    [
        "/apis//",
        f"{G}//",
        f"{V2}//",
        f"{V2}/clusterqueues/cq-a/pendingworkloads/",
        f"{V2}/namespaces/team-a/localqueues/lq-a/pendingworkloads/",
        "/version/",
        "/metrics/",
        "/openapi/v2/",
        "/healthz/",
        f"{G}/v1/",
        "/apis/other.group/",
    ],
)
async def test_trailing_slash_elsewhere_is_404(path: str) -> None:
    assert (await get(app_for(), path)).status_code == 404


async def test_discovery_does_not_depend_on_snapshot() -> None:
    def no_snapshot() -> object:
        raise RuntimeError("no snapshot yet")

    app = app_for(no_snapshot)  # type: ignore[arg-type]
    for path in ("/apis", G, V2, V1):
        assert (await get(app, path, CAROL)).status_code == 200


async def test_discovery_pretty_and_yaml() -> None:
    app = app_for()
    r = await get(app, V2, {**ADMIN, "user-agent": "curl/8.0"})
    assert r.text.startswith('{\n  "kind": "APIResourceList"') and not r.text.endswith("\n")
    r = await get(app, V2, {**ADMIN, "accept": "application/yaml"})
    assert r.text.startswith("apiVersion: v1\ngroupVersion: visibility.kueue.x-k8s.io/v1beta2\n")
    assert "resources:\n- kind: PendingWorkloadsSummary\n  name: clusterqueues\n" in r.text


@pytest.mark.parametrize("path", ["/api", "/api/v1", "/apis/visibility.kueue.x-k8s.io/v1alpha1"])
async def test_other_api_paths_are_404(path: str) -> None:
    assert (await get(app_for(), path)).status_code == 404
