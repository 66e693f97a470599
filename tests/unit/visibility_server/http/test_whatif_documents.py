"""[EXT] what-if in the static documents and the per-user rate limiter
(docs/visibility-api.md#what-if): discovery, both OpenAPI flavours, token buckets."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from tests.unit.visibility_server.authz.builders import VIS
from tests.unit.visibility_server.http.support import ADMIN, CAROL, app_for, get
from tests.unit.visibility_server.http.test_openapi import V3, assert_refs_resolve
from visibility_server.http.ratelimit import RateLimit, UserRateLimiter

EXTENSIONS = frozenset({"pendingposition", "longpoll", "whatif"})


class _NoBackend:
    """Never asked in these tests: only the documents are read."""

    def local_queue_exists(self, namespace: str, name: str) -> bool:
        raise AssertionError("not called")

    def decoder(self, namespace: str, local_queue: str) -> Callable[[bytes], Any]:
        raise AssertionError("not called")

    def answer(self, prepared: Any) -> dict[str, Any]:
        raise AssertionError("not called")


def _app(*, backend: bool = True) -> Any:
    return app_for(extensions=EXTENSIONS, what_if=_NoBackend() if backend else None)


async def test_the_resource_list_has_the_create_subresource() -> None:
    for version in ("v1beta2", "v1beta1"):
        doc = (await get(_app(), f"/apis/{VIS}/{version}", CAROL)).json()
        names = [r["name"] for r in doc["resources"]]
        assert names == sorted(names)
        entry = next(r for r in doc["resources"] if r["name"] == "localqueues/whatif")
        assert entry == {
            "name": "localqueues/whatif",
            "singularName": "",
            "namespaced": True,
            "kind": "WorkloadWhatIf",
            "verbs": ["create"],
        }


async def test_aggregated_discovery_lists_it_under_localqueues() -> None:
    accept = {"Accept": "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"}
    doc = (await get(_app(), "/apis", {**CAROL, **accept})).json()
    for version in doc["items"][0]["versions"]:
        lq = next(r for r in version["resources"] if r["resource"] == "localqueues")
        assert [(s["subresource"], s["verbs"]) for s in lq["subresources"]] == [
            ("pendingworkloads", ["get"]),
            ("whatif", ["create"]),
        ]
        assert lq["subresources"][1]["responseKind"] == {
            "group": VIS,
            "version": version["version"],
            "kind": "WorkloadWhatIf",
        }


async def test_without_a_backend_nothing_is_listed_or_served() -> None:
    app = _app(backend=False)
    doc = (await get(app, f"/apis/{VIS}/v1beta2", CAROL)).json()
    assert "localqueues/whatif" not in [r["name"] for r in doc["resources"]]
    path = f"/apis/{VIS}/v1beta2/namespaces/team-a/localqueues/lq-a/whatif"
    assert (await get(app, path, ADMIN, method="POST")).status_code == 404


async def test_both_openapi_documents_are_valid_with_it() -> None:
    validator = pytest.importorskip("openapi_spec_validator")
    app = _app()
    v2 = (await get(app, "/openapi/v2", CAROL)).json()
    validator.validate(v2)
    assert_refs_resolve(v2, "#/definitions/")
    for version in ("v1beta2", "v1beta1"):
        path = f"/apis/{VIS}/{version}/namespaces/{{namespace}}/localqueues/{{name}}/whatif"
        op = v2["paths"][path]["post"]
        assert op["responses"]["200"]["schema"] == {
            "$ref": f"#/definitions/io.queuescope.visibility.{version}.WorkloadWhatIf"
        }
        assert {"400", "403", "413", "422", "429"} <= set(op["responses"])
        v3 = (await get(app, f"{V3}/{version}", CAROL)).json()
        validator.validate(v3)
        assert_refs_resolve(v3, "#/components/schemas/")
        assert "requestBody" in v3["paths"][path]["post"]


def test_a_bucket_gives_its_burst_then_one_per_interval() -> None:
    now = [0.0]
    limiter = UserRateLimiter(RateLimit(rate=2.0, burst=3), lambda: now[0])
    assert [limiter.take("u") for _ in range(3)] == [0.0, 0.0, 0.0]
    assert limiter.take("u") == pytest.approx(0.5)  # a token every 0.5 s
    now[0] = 0.5
    assert limiter.take("u") == 0.0
    assert limiter.take("u") == pytest.approx(0.5)
    # Others have their own bucket; a long pause refills to the burst, never beyond.
    assert limiter.take("v") == 0.0
    now[0] = 100.0
    assert [limiter.take("u") for _ in range(4)] == [0.0, 0.0, 0.0, pytest.approx(0.5)]


def test_buckets_are_bounded_and_a_forgotten_user_starts_full() -> None:
    now = [0.0]
    limiter = UserRateLimiter(RateLimit(rate=0.001, burst=1, max_users=2), lambda: now[0])
    assert limiter.take("a") == 0.0
    assert limiter.take("a") > 0  # empty
    limiter.take("b")
    limiter.take("c")  # the third user pushes out the least recent, "a"
    assert limiter.take("a") == 0.0


def test_invalid_limits_are_refused() -> None:
    for bad in ({"rate": 0.0}, {"burst": 0}, {"max_users": 0}):
        with pytest.raises(ValueError, match="invalid rate limit"):
            RateLimit(**bad)
