"""The sample RBAC manifests, decoded as `serve --embedded` decodes them."""

from __future__ import annotations

from pathlib import Path

import pytest

from scheduler.api.decode import load_documents
from visibility_server.authz.attributes import request_attributes
from visibility_server.authz.embedded import EmbeddedBackend
from visibility_server.authz.identity import UserInfo, authenticated_user
from visibility_server.authz.messages import forbidden_message
from visibility_server.authz.pipeline import Authorizer
from visibility_server.authz.rbac import RBACAuthorizer

SAMPLE = Path(__file__).resolve().parents[4] / "manifests" / "samples" / "70-rbac.yaml"
G = "/apis/visibility.kueue.x-k8s.io/v1beta2"


@pytest.fixture(scope="module")
def rbac() -> RBACAuthorizer:
    return RBACAuthorizer.from_objects(d.obj for d in load_documents([str(SAMPLE)]))


def lq(namespace: str) -> str:
    return f"{G}/namespaces/{namespace}/localqueues/lq/pendingworkloads"


@pytest.mark.parametrize("alice", [UserInfo("alice"), authenticated_user("alice")])
def test_alice_sees_team_a_local_queues_only(rbac: RBACAuthorizer, alice: UserInfo) -> None:
    assert rbac.authorize(alice, request_attributes("GET", lq("team-a"))).allowed
    assert not rbac.authorize(alice, request_attributes("GET", lq("team-b"))).allowed
    cq = request_attributes("GET", f"{G}/clusterqueues/cq/pendingworkloads")
    assert not rbac.authorize(alice, cq).allowed


def test_batch_admins_see_cluster_queues(rbac: RBACAuthorizer) -> None:
    admin = authenticated_user("carol", groups=["batch-admins"])
    cq = request_attributes("GET", f"{G}/clusterqueues/cq/pendingworkloads")
    decision = rbac.authorize(admin, cq)
    assert decision.allowed
    assert decision.reason == (
        'RBAC: allowed by ClusterRoleBinding "batch-admins-see-clusterqueues" of ClusterRole '
        '"queuescope-clusterqueue-viewer" to Group "batch-admins"'
    )
    # the ClusterRole grants only the pending-workloads subresource of ClusterQueues
    assert not rbac.authorize(admin, request_attributes("GET", lq("team-a"))).allowed


async def test_through_the_pipeline(rbac: RBACAuthorizer) -> None:
    authz = Authorizer(EmbeddedBackend(rbac))
    alice = authenticated_user("alice")
    attrs = request_attributes("GET", lq("team-b").replace("/lq/", "/lq-b/"))
    decision = await authz.authorize(alice, attrs)
    assert not decision.allowed
    assert forbidden_message(alice, attrs, decision.reason) == (
        'localqueues.visibility.kueue.x-k8s.io "lq-b" is forbidden: User "alice" cannot get '
        'resource "localqueues/pendingworkloads" in API group "visibility.kueue.x-k8s.io" '
        'in the namespace "team-b"'
    )
    assert (await authz.authorize(alice, request_attributes("GET", lq("team-a")))).allowed
