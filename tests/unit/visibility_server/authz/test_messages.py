from __future__ import annotations

import pytest

from visibility_server.authz.attributes import request_attributes
from visibility_server.authz.goquote import go_quote
from visibility_server.authz.identity import ANONYMOUS, UserInfo
from visibility_server.authz.messages import forbidden_details, forbidden_message

G = "/apis/visibility.kueue.x-k8s.io/v1beta2"
ALICE = UserInfo("alice", groups=("system:authenticated",))


def test_cluster_scope() -> None:
    attrs = request_attributes("GET", f"{G}/clusterqueues/cq-a/pendingworkloads")
    assert forbidden_message(ALICE, attrs) == (
        'clusterqueues.visibility.kueue.x-k8s.io "cq-a" is forbidden: User "alice" cannot get '
        'resource "clusterqueues/pendingworkloads" in API group "visibility.kueue.x-k8s.io" '
        "at the cluster scope"
    )
    assert forbidden_details(attrs) == {
        "name": "cq-a",
        "group": "visibility.kueue.x-k8s.io",
        "kind": "clusterqueues",
    }
    assert list(forbidden_details(attrs)) == ["name", "group", "kind"]


def test_namespaced() -> None:
    attrs = request_attributes("GET", f"{G}/namespaces/team-b/localqueues/lq-b/pendingworkloads")
    assert forbidden_message(ALICE, attrs) == (
        'localqueues.visibility.kueue.x-k8s.io "lq-b" is forbidden: User "alice" cannot get '
        'resource "localqueues/pendingworkloads" in API group "visibility.kueue.x-k8s.io" '
        'in the namespace "team-b"'
    )


def test_pending_position() -> None:
    attrs = request_attributes("HEAD", f"{G}/namespaces/ns/workloads/wl/pendingposition")
    assert forbidden_message(ALICE, attrs) == (
        'workloads.visibility.kueue.x-k8s.io "wl" is forbidden: User "alice" cannot get '
        'resource "workloads/pendingposition" in API group "visibility.kueue.x-k8s.io" '
        'in the namespace "ns"'
    )


def test_non_resource() -> None:
    attrs = request_attributes("GET", "/metrics")
    assert forbidden_message(ANONYMOUS, attrs) == (
        'forbidden: User "system:anonymous" cannot get path "/metrics"'
    )
    assert forbidden_details(attrs) == {}


def test_collection_without_name() -> None:
    attrs = request_attributes("DELETE", f"{G}/clusterqueues")
    assert forbidden_message(ALICE, attrs) == (
        'clusterqueues.visibility.kueue.x-k8s.io is forbidden: User "alice" cannot '
        'deletecollection resource "clusterqueues" in API group "visibility.kueue.x-k8s.io" '
        "at the cluster scope"
    )
    assert forbidden_details(attrs) == {
        "group": "visibility.kueue.x-k8s.io",
        "kind": "clusterqueues",
    }


def test_core_group() -> None:
    attrs = request_attributes("GET", "/api/v1/namespaces/ns/pods/p")
    assert forbidden_message(ALICE, attrs) == (
        'pods "p" is forbidden: User "alice" cannot get resource "pods" in API group "" '
        'in the namespace "ns"'
    )
    assert forbidden_details(attrs) == {"name": "p", "kind": "pods"}


def test_reason_is_appended_unescaped() -> None:
    attrs = request_attributes("GET", f"{G}/clusterqueues/cq/pendingworkloads")
    reason = 'RBAC: clusterrole.rbac.authorization.k8s.io "a<b" not found'
    assert forbidden_message(ALICE, attrs, reason).endswith(
        'at the cluster scope: RBAC: clusterrole.rbac.authorization.k8s.io "a<b" not found'
    )


def test_html_escaping_only_inside_the_sentence() -> None:
    attrs = request_attributes("GET", f"{G}/clusterqueues/a<b>&c/pendingworkloads")
    user = UserInfo("<eve&>")
    assert forbidden_message(user, attrs) == (
        'clusterqueues.visibility.kueue.x-k8s.io "a<b>&c" is forbidden: User "&lt;eve&amp;&gt;" '
        'cannot get resource "clusterqueues/pendingworkloads" in API group '
        '"visibility.kueue.x-k8s.io" at the cluster scope'
    )
    path = request_attributes("GET", "/x%3Cy%3E")
    assert forbidden_message(user, path) == (
        'forbidden: User "&lt;eve&amp;&gt;" cannot get path "/x&lt;y&gt;"'
    )


@pytest.mark.parametrize(
    ("text", "quoted"),
    [
        ("", '""'),
        ("plain", '"plain"'),
        ('say "hi"', '"say \\"hi\\""'),
        ("back\\slash", '"back\\\\slash"'),
        ("tab\tnl\ncr\r", '"tab\\tnl\\ncr\\r"'),
        ("\a\b\f\v", '"\\a\\b\\f\\v"'),
        ("\x00\x1f\x7f", '"\\x00\\x1f\\x7f"'),
        ("é ü 日本", '"é ü 日本"'),
        ("\u200b", '"\\u200b"'),
        ("\u00a0", '"\\u00a0"'),
        ("\U0001f600", '"\U0001f600"'),
        ("\U000e0001", '"\\U000e0001"'),
        ("\ufffd", '"\ufffd"'),
        ("\udc80", '"\\x80"'),
        ("\ud800", '"\\xed\\xa0\\x80"'),
    ],
)
def test_go_quote(text: str, quoted: str) -> None:
    assert go_quote(text) == quoted
