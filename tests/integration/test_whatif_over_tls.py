"""[EXT] what-if over real TLS (docs/visibility-api.md#what-if): the app with the runtime's
dry run (`WhatIfService`) over a real core scheduler, authenticated as kube-apiserver's
aggregator and authorized by embedded RBAC; every error code of the contract."""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator
from typing import Any, Final

import pytest
import pytest_asyncio
import yaml

from scheduler.runtime.what_if import WhatIfService
from tests.integration.realserver import (
    VIS,
    RealServer,
    Reply,
    Request,
    aggregator,
    serve,
)
from tests.unit.core.builders import (
    Cluster,
    flavor,
    local_queue,
    namespace,
    simple_cq,
    workload,
)
from tests.unit.visibility_server.authz.builders import (
    binding,
    cluster_binding,
    cluster_role,
    rule,
    user,
)
from visibility_server.authz.embedded import EmbeddedBackend
from visibility_server.authz.pipeline import Authorizer
from visibility_server.authz.rbac import RBACAuthorizer
from visibility_server.http.ratelimit import RateLimit

pytestmark = pytest.mark.asyncio(loop_scope="module")

G: Final = f"/apis/{VIS}"
PATH: Final = f"{G}/v1beta2/namespaces/team-a/localqueues/lq-a/whatif"
JSON: Final = ("Content-Type", "application/json")

# alice may ask what-if in team-a and list workloads there; bob may only read pending
# workloads (no what-if); eve may ask in team-a but list workloads nowhere.
ALICE: Final = aggregator("alice", ["system:authenticated"])
BOB: Final = aggregator("bob", ["system:authenticated"])
EVE: Final = aggregator("eve", ["system:authenticated"])
LIMITED: Final = aggregator("limited", ["system:authenticated"])


def _rbac() -> RBACAuthorizer:
    whatif = cluster_role(
        "whatif",
        rule(["get"], [VIS], ["localqueues/pendingworkloads"]),
        rule(["create"], [VIS], ["localqueues/whatif"]),
    )
    reader = cluster_role("reader", rule(["get"], [VIS], ["localqueues/pendingworkloads"]))
    lister = cluster_role("lister", rule(["list"], ["kueue.x-k8s.io"], ["workloads"]))
    return RBACAuthorizer.from_objects(
        [
            whatif,
            reader,
            lister,
            binding("team-a", "alice-whatif", "ClusterRole", "whatif", user("alice")),
            binding("team-a", "alice-list", "ClusterRole", "lister", user("alice")),
            binding("team-a", "eve-whatif", "ClusterRole", "whatif", user("eve")),
            binding("team-a", "limited-whatif", "ClusterRole", "whatif", user("limited")),
            binding("team-a", "bob-read", "ClusterRole", "reader", user("bob")),
            cluster_binding("nobody", "whatif", user("nobody-at-all")),
        ]
    )


def _cluster() -> Cluster:
    c = Cluster()
    c.apply(
        namespace("team-a"),
        namespace("team-b"),
        flavor("default"),
        simple_cq("cq-a", 6, preemption={"withinClusterQueue": "LowerPriority"}),
        local_queue("team-a", "lq-a", "cq-a"),
        local_queue("team-b", "lq-b", "cq-a"),
        workload("team-a", "low-a", "lq-a", {"cpu": "2"}, priority=1),
        workload("team-b", "low-b", "lq-b", {"cpu": "2"}, priority=1),
    )
    c.cycles(2)  # one head per cycle
    assert c.admitted("team-a/low-a")
    assert c.admitted("team-b/low-b")
    c.advance(60)
    return c


@contextlib.asynccontextmanager
async def _serve(limit: RateLimit) -> AsyncIterator[RealServer]:
    service = WhatIfService(_cluster().s, lambda: ({}, {}))
    async with serve(
        authorizer=Authorizer(EmbeddedBackend(_rbac())), what_if=service, what_if_limit=limit
    ) as real:
        yield real


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def server() -> AsyncIterator[RealServer]:
    async with _serve(RateLimit(rate=1000, burst=1000)) as real:
        yield real


def _job(cpu: str = "1", **extra: Any) -> bytes:
    job: dict[str, Any] = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "train", "namespace": "team-a"},
        "spec": {
            "parallelism": 1,
            "template": {
                "spec": {
                    "restartPolicy": "Never",
                    "containers": [
                        {"name": "c", "image": "busybox", "resources": {"requests": {"cpu": cpu}}}
                    ],
                }
            },
        },
    }
    job.update(extra)
    return yaml.safe_dump(job).encode()


async def _post(
    server: RealServer, identity: Any, body: bytes, path: str = PATH, *headers: tuple[str, str]
) -> Reply:
    request = Request("POST", path, (JSON, *headers), body)
    (reply,) = await server.client(identity).exchange(request)
    return reply


def _status(reply: Reply) -> dict[str, Any]:
    body = json.loads(reply.body)
    assert body["kind"] == "Status", body
    assert body["code"] == reply.status
    return dict(body)


async def test_a_job_that_fits_is_admitted_with_its_flavors(server: RealServer) -> None:
    reply = await _post(server, ALICE, _job("1"))
    assert reply.status == 200, reply.body
    body = json.loads(reply.body)
    assert body["kind"] == "WorkloadWhatIf"
    assert body["apiVersion"] == f"{VIS}/v1beta2"
    assert body["decision"] == "Admitted"
    assert body["admitted"] is True
    assert body["workload"]["clusterQueueName"] == "cq-a"
    assert body["workload"]["name"].startswith("job-train-")
    assert body["assignment"] == {
        "mode": "Fit",
        "podSets": [
            {
                "name": "main",
                "count": 1,
                "flavors": {"cpu": "default"},
                "resourceUsage": {"cpu": "1"},
            }
        ],
    }
    assert body["positionInClusterQueue"] == 0
    assert body["borrowing"] == []
    assert body["estimatedStart"]["method"] == "rate"
    assert body["estimatedStart"]["p50"] == body["evaluatedAt"]


async def test_a_workload_in_v1beta2_yaml_on_the_v1beta1_path(server: RealServer) -> None:
    doc = workload("team-a", "wl", None, {"cpu": "9"})
    doc["apiVersion"] = "kueue.x-k8s.io/v1beta2"
    reply = await _post(
        server, ALICE, yaml.safe_dump(doc).encode(), PATH.replace("v1beta2", "v1beta1")
    )
    assert reply.status == 200, reply.body
    body = json.loads(reply.body)
    assert body["apiVersion"] == f"{VIS}/v1beta1"
    assert body["decision"] == "Pending"
    assert body["workload"]["localQueueName"] == "lq-a"
    kinds = [b["kind"] for b in body["pendingReason"]["blockers"]]
    assert kinds == ["Capacity"], body["pendingReason"]


async def test_victims_are_named_only_where_the_caller_may_list(server: RealServer) -> None:
    # A Workload with a high priority needs both low-priority workloads out.
    wl = workload("team-a", "urgent", "lq-a", {"cpu": "6"}, priority=100)
    wl["metadata"].pop("creationTimestamp")
    for who, named, hidden in ((ALICE, ["low-a"], 1), (EVE, [], 2)):
        reply = await _post(server, who, json.dumps(wl).encode())
        assert reply.status == 200, reply.body
        body = json.loads(reply.body)
        assert body["decision"] == "Preempting"
        assert [v["name"] for v in body["preemption"]["victims"]] == named
        assert body["preemption"]["hiddenVictims"] == hidden
        assert "low-b" not in reply.body.decode()


async def test_a_caller_without_the_create_rule_gets_403_whether_or_not_the_queue_exists(
    server: RealServer,
) -> None:
    exists = await _post(server, BOB, _job())
    missing_path = PATH.replace("lq-a", "no-such-queue")
    missing = await _post(server, BOB, _job(), missing_path)
    assert exists.status == missing.status == 403
    a, b = _status(exists), _status(missing)
    assert a["message"] == (
        'localqueues.visibility.kueue.x-k8s.io "lq-a" is forbidden: User "bob" cannot create '
        'resource "localqueues/whatif" in API group "visibility.kueue.x-k8s.io" in the '
        'namespace "team-a"'
    )
    assert b["message"] == a["message"].replace('"lq-a"', '"no-such-queue"')
    # Bob may still read the pending workloads: the what-if rule is a separate one.
    (reply,) = await server.client(BOB).exchange(
        Request("GET", PATH.replace("whatif", "pendingworkloads"))
    )
    assert reply.status != 403


async def test_an_allowed_caller_gets_the_same_404_as_get(server: RealServer) -> None:
    path = f"{G}/v1beta2/namespaces/team-a/localqueues/nope/whatif"
    (reply,) = await server.client(aggregator("admin", ["system:masters"])).exchange(
        Request("POST", path, (JSON,), _job())
    )
    assert reply.status == 404
    assert _status(reply)["message"] == 'localqueue.visibility.kueue.x-k8s.io "nope" not found'


@pytest.mark.parametrize(
    ("body", "code", "needle"),
    [
        (b"{not json: [", 400, "neither JSON nor YAML"),
        (b"- a\n- b\n", 400, "must be a JSON or YAML object"),
        (b"a: 1\n---\nb: 2\n", 400, "one object"),
        (b"a: &a [x, x]\nb: [*a, *a]\n", 400, "aliases"),
    ],
)
async def test_a_body_that_is_not_an_object_is_400(
    server: RealServer, body: bytes, code: int, needle: str
) -> None:
    reply = await _post(server, aggregator("admin", ["system:masters"]), body)
    assert reply.status == code
    status = _status(reply)
    assert status["reason"] == "BadRequest"
    assert needle in status["message"]


@pytest.mark.parametrize(
    ("mutate", "field"),
    [
        (lambda j: j["spec"].update(parallelism="many"), "spec.parallelism"),
        (lambda j: j["metadata"].update(namespace="team-b"), "metadata.namespace"),
        (
            lambda j: j["metadata"].update(labels={"kueue.x-k8s.io/queue-name": "other"}),
            "metadata.labels[kueue.x-k8s.io/queue-name]",
        ),
        (lambda j: j.update(kind="Deployment", apiVersion="apps/v1"), "kind"),
        (lambda j: j["spec"].update(surprise=1), "spec.surprise"),
    ],
)
async def test_an_invalid_job_is_422_naming_the_field(
    server: RealServer, mutate: Any, field: str
) -> None:
    job = yaml.safe_load(_job())
    mutate(job)
    reply = await _post(server, aggregator("admin", ["system:masters"]), json.dumps(job).encode())
    assert reply.status == 422, reply.body
    status = _status(reply)
    assert status["reason"] == "Invalid"
    fields = [c["field"] for c in status["details"]["causes"]]
    assert any(f.startswith(field) for f in fields), (fields, status["message"])


async def test_an_oversized_body_is_413(server: RealServer) -> None:
    padding = {"metadata": {"name": "big", "annotations": {"x": "y" * (1 << 20)}}}
    reply = await _post(server, ALICE, json.dumps(padding).encode())
    assert reply.status == 413
    assert _status(reply)["reason"] == "RequestEntityTooLarge"


async def test_other_methods_are_405_allowing_post(server: RealServer) -> None:
    (reply,) = await server.client(aggregator("admin", ["system:masters"])).exchange(
        Request("GET", PATH)
    )
    assert reply.status == 405
    assert reply.header("Allow") == "POST"


async def test_each_user_is_rate_limited_with_retry_after() -> None:
    # 2 at once, then one every 1000 s: never refilled during the test.
    async with _serve(RateLimit(rate=0.001, burst=2)) as server:
        first = [await _post(server, LIMITED, _job()) for _ in range(2)]
        assert [r.status for r in first] == [200, 200]
        limited = await _post(server, LIMITED, _job())
        assert limited.status == 429
        retry = limited.header("Retry-After")
        assert retry is not None
        assert 990 <= int(retry) <= 1000
        assert _status(limited)["details"]["retryAfterSeconds"] == int(retry)
        # Another user is not held back by it.
        assert (await _post(server, ALICE, _job())).status == 200


async def test_discovery_and_openapi_list_the_subresource(server: RealServer) -> None:
    admin = server.client(aggregator("admin", ["system:masters"]))
    (resources, v2) = await admin.exchange(
        Request("GET", f"{G}/v1beta2"), Request("GET", "/openapi/v2")
    )
    entries = {r["name"]: r for r in json.loads(resources.body)["resources"]}
    assert entries["localqueues/whatif"]["verbs"] == ["create"]
    assert entries["localqueues/whatif"]["kind"] == "WorkloadWhatIf"
    paths = json.loads(v2.body)["paths"]
    for version in ("v1beta1", "v1beta2"):
        op = paths[f"{G}/{version}/namespaces/{{namespace}}/localqueues/{{name}}/whatif"]
        assert set(op) == {"post"}
        assert op["post"]["x-kubernetes-action"] == "post"
