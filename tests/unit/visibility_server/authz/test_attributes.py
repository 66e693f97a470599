from __future__ import annotations

import json

import pytest

from visibility_server.authz.attributes import (
    Attributes,
    request_attributes,
    subject_access_review,
)
from visibility_server.authz.identity import UserInfo

G = "/apis/visibility.kueue.x-k8s.io"
GROUP = "visibility.kueue.x-k8s.io"


def resource(verb: str, resource: str, **fields: str) -> Attributes:
    path = fields.pop("path")
    return Attributes(verb=verb, path=path, resource_request=True, resource=resource, **fields)


def non_resource(verb: str, path: str) -> Attributes:
    return Attributes(verb=verb, path=path, resource_request=False)


@pytest.mark.parametrize("version", ["v1beta2", "v1beta1"])
@pytest.mark.parametrize("method", ["GET", "HEAD"])
def test_pending_workloads_paths(version: str, method: str) -> None:
    path = f"{G}/{version}/clusterqueues/cq-a/pendingworkloads"
    assert request_attributes(method, path) == resource(
        "get",
        "clusterqueues",
        path=path,
        group=GROUP,
        version=version,
        subresource="pendingworkloads",
        name="cq-a",
    )
    path = f"{G}/{version}/namespaces/team-a/localqueues/lq-a/pendingworkloads"
    assert request_attributes(method, path) == resource(
        "get",
        "localqueues",
        path=path,
        namespace="team-a",
        group=GROUP,
        version=version,
        subresource="pendingworkloads",
        name="lq-a",
    )
    path = f"{G}/{version}/namespaces/team-a/workloads/wl/pendingposition"
    assert request_attributes(method, path) == resource(
        "get",
        "workloads",
        path=path,
        namespace="team-a",
        group=GROUP,
        version=version,
        subresource="pendingposition",
        name="wl",
    )


@pytest.mark.parametrize(
    "path",
    [
        "/apis",
        "/apis/",
        G,
        f"{G}/",
        f"{G}/v1beta2",
        f"{G}/v1beta2/",
        f"{G}/v1beta1",
        "/openapi/v2",
        "/openapi/v3",
        f"/openapi/v3{G}/v1beta2",
        "/healthz",
        "/livez",
        "/readyz",
        "/healthz/ping",
        "/readyz/informer-sync",
        "/metrics",
        "/version",
        "/api",
        "/api/v1",
        "/",
        "",
        "/dashboard/index.html",
    ],
)
def test_non_resource_paths(path: str) -> None:
    assert request_attributes("GET", path) == non_resource("get", path)
    assert request_attributes("HEAD", path).verb == "head"
    assert request_attributes("POST", path).verb == "post"


@pytest.mark.parametrize(
    ("method", "verb"),
    [
        ("GET", "get"),
        ("HEAD", "get"),
        ("POST", "create"),
        ("PUT", "update"),
        ("PATCH", "patch"),
        ("DELETE", "delete"),
        ("OPTIONS", ""),
        ("get", "get"),
    ],
)
def test_verbs_on_a_named_object(method: str, verb: str) -> None:
    attrs = request_attributes(method, f"{G}/v1beta2/clusterqueues/cq/pendingworkloads")
    assert attrs.verb == verb
    assert attrs.resource_request


@pytest.mark.parametrize(
    ("method", "verb"),
    [
        ("GET", "list"),
        ("HEAD", "list"),
        ("POST", "create"),
        ("PUT", "update"),
        ("PATCH", "patch"),
        ("DELETE", "deletecollection"),
    ],
)
def test_verbs_on_a_collection(method: str, verb: str) -> None:
    attrs = request_attributes(method, f"{G}/v1beta2/clusterqueues")
    assert attrs == resource(
        verb, "clusterqueues", path=f"{G}/v1beta2/clusterqueues", group=GROUP, version="v1beta2"
    )
    ns = request_attributes(method, f"{G}/v1beta2/namespaces/team-a/localqueues")
    assert (ns.verb, ns.namespace, ns.resource, ns.name) == (verb, "team-a", "localqueues", "")


def test_named_parent_without_subresource() -> None:
    attrs = request_attributes("GET", f"{G}/v1beta2/clusterqueues/cq")
    assert (attrs.verb, attrs.resource, attrs.name, attrs.subresource) == (
        "get",
        "clusterqueues",
        "cq",
        "",
    )


def test_namespaces_and_namespace_subresources() -> None:
    ns = request_attributes("GET", f"{G}/v1beta2/namespaces/team-a")
    assert (ns.verb, ns.namespace, ns.resource, ns.name) == (
        "get",
        "team-a",
        "namespaces",
        "team-a",
    )
    status = request_attributes("PUT", f"{G}/v1beta2/namespaces/team-a/status")
    assert (status.resource, status.name, status.subresource, status.namespace) == (
        "namespaces",
        "team-a",
        "status",
        "team-a",
    )
    listing = request_attributes("GET", f"{G}/v1beta2/namespaces")
    assert (listing.verb, listing.resource, listing.namespace) == ("list", "namespaces", "")


def test_extra_segments_are_ignored() -> None:
    attrs = request_attributes("GET", f"{G}/v1beta2/clusterqueues/cq/pendingworkloads/x/y")
    assert (attrs.name, attrs.subresource) == ("cq", "pendingworkloads")


def test_trailing_slash_is_trimmed_like_kube_apiserver() -> None:
    path = f"{G}/v1beta2/clusterqueues/cq/pendingworkloads/"
    attrs = request_attributes("GET", path)
    assert (attrs.verb, attrs.name, attrs.subresource, attrs.path) == (
        "get",
        "cq",
        "pendingworkloads",
        path,
    )


def test_special_verbs() -> None:
    watch = request_attributes("GET", f"{G}/v1beta2/watch/namespaces/team-a/localqueues")
    assert (watch.verb, watch.namespace, watch.resource) == ("watch", "team-a", "localqueues")
    proxy = request_attributes("GET", f"{G}/v1beta2/proxy/clusterqueues/cq/pendingworkloads")
    assert (proxy.verb, proxy.resource, proxy.name, proxy.subresource) == (
        "proxy",
        "clusterqueues",
        "cq",
        "",
    )
    alone = request_attributes("GET", f"{G}/v1beta2/watch")
    assert (alone.verb, alone.resource) == ("list", "watch")


def test_core_group_paths() -> None:
    attrs = request_attributes("GET", "/api/v1/namespaces/ns/pods/p/log")
    assert (attrs.group, attrs.version, attrs.namespace, attrs.resource) == ("", "v1", "ns", "pods")
    assert (attrs.name, attrs.subresource) == ("p", "log")


def test_percent_decoding() -> None:
    attrs = request_attributes(
        "GET", f"{G}/v1beta2/namespaces/t%2Da/localqueues/a%20b/pendingworkloads"
    )
    assert (attrs.namespace, attrs.name) == ("t-a", "a b")
    assert attrs.path == f"{G}/v1beta2/namespaces/t-a/localqueues/a b/pendingworkloads"
    # decoded once, as a whole (an encoded slash separates segments, as in Go's URL.Path)
    once = request_attributes("GET", f"{G}/v1beta2/clusterqueues/a%252F/pendingworkloads")
    assert once.name == "a%2F"
    split = request_attributes("GET", f"{G}/v1beta2/clusterqueues/a%2Fb/pendingworkloads")
    assert (split.name, split.subresource) == ("a", "b")
    assert request_attributes("GET", "/metr%69cs") == non_resource("get", "/metrics")


def test_query_is_ignored() -> None:
    attrs = request_attributes("GET", f"{G}/v1beta2/clusterqueues/cq/pendingworkloads?limit=1")
    assert attrs.path == f"{G}/v1beta2/clusterqueues/cq/pendingworkloads"


def test_keys() -> None:
    a = request_attributes("GET", f"{G}/v1beta2/clusterqueues/cq/pendingworkloads")
    b = request_attributes("HEAD", f"{G}/v1beta2/clusterqueues/cq/pendingworkloads/")
    assert a.key == b.key  # same SAR, different path
    assert a.key != request_attributes("GET", f"{G}/v1beta1/clusterqueues/cq/pendingworkloads").key
    assert request_attributes("GET", "/metrics").key != request_attributes("HEAD", "/metrics").key


def test_sar_spec_resource_exact_json() -> None:
    alice = UserInfo(
        "alice",
        groups=("team-a-devs", "system:authenticated"),
        extra={"authentication.kubernetes.io/credential-id": ("X509SHA256=abc",)},
    )
    attrs = request_attributes(
        "GET", f"{G}/v1beta2/namespaces/team-a/localqueues/lq-a/pendingworkloads"
    )
    body = json.dumps(subject_access_review(alice, attrs), separators=(",", ":"))
    assert body == (
        '{"apiVersion":"authorization.k8s.io/v1","kind":"SubjectAccessReview","spec":'
        '{"resourceAttributes":{"namespace":"team-a","verb":"get",'
        '"group":"visibility.kueue.x-k8s.io","version":"v1beta2","resource":"localqueues",'
        '"subresource":"pendingworkloads","name":"lq-a"},"user":"alice",'
        '"groups":["team-a-devs","system:authenticated"],'
        '"extra":{"authentication.kubernetes.io/credential-id":["X509SHA256=abc"]}}}'
    )


def test_sar_spec_leaves_empty_fields_out() -> None:
    attrs = request_attributes("GET", f"{G}/v1beta2/clusterqueues")
    spec = attrs.to_sar_spec(UserInfo("bob", uid="42"))
    assert spec == {
        "resourceAttributes": {
            "verb": "list",
            "group": GROUP,
            "version": "v1beta2",
            "resource": "clusterqueues",
        },
        "user": "bob",
        "uid": "42",
    }
    spec = request_attributes("GET", "/metrics").to_sar_spec(UserInfo("system:anonymous"))
    assert spec == {
        "nonResourceAttributes": {"path": "/metrics", "verb": "get"},
        "user": "system:anonymous",
    }
