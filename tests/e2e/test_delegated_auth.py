"""Delegated authentication and authorization against a real kube-apiserver (docs/cluster.md
docs/cluster.md#the-authentication-configmap, #authenticator-chain, #decision-pipeline, #self-check,
scenario E10), with `visibility_server.kube` acting as our own ServiceAccount.

The ServiceAccount gets the grants of `manifests/rbac/` (the `system:auth-delegator`
ClusterRoleBinding and the `extension-apiserver-authentication-reader` RoleBinding in
kube-system), read from those files with only names and subject changed, so deleting the
ClusterRoleBinding here cannot disturb another test of the session. Its token comes from
`kubectl create token` and reaches kube-apiserver through a kubeconfig, as in a pod.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Any, TypeVar

import httpx
import pytest
import yaml
from cryptography import x509
from cryptography.hazmat.primitives import serialization
from kubernetes_asyncio.config import new_client_from_config
from prometheus_client import CollectorRegistry
from starlette.types import Receive, Scope, Send

from scheduler.kubeapi.client import KubeRest
from scheduler.runtime.pages import build_view
from scheduler.runtime.snapshot import Snapshot
from tests.e2e.harness import FRONT_PROXY_CLIENT, ControlPlane
from visibility_server.authn.config import AuthenticationConfig
from visibility_server.authz.attributes import request_attributes
from visibility_server.authz.identity import authenticated_user
from visibility_server.authz.pipeline import Authorizer
from visibility_server.http import create_app
from visibility_server.http.credentials import PEER_CERT_EXTENSION
from visibility_server.kube.configmap import (
    AuthenticationConfigWatcher,
    ConfigMapRef,
    read_authentication_config,
)
from visibility_server.kube.delegated import DelegatedAuth, KubeIdentity
from visibility_server.kube.metrics import PERMITTED_METRIC
from visibility_server.kube.sar import SubjectAccessReviewBackend
from visibility_server.kube.tokenreview import TokenReviewClient

T = TypeVar("T")

REPO = Path(__file__).resolve().parents[2]
RBAC = REPO / "manifests" / "rbac"
GROUP = "visibility.kueue.x-k8s.io"
NAMESPACE = "qs-delegated"
SERVICE_ACCOUNT = "delegated-auth"
GET_ONLY_ACCOUNT = "delegated-auth-get-only"
DELEGATOR_BINDING = "qs-delegated-auth-delegator"
READER_BINDING = "qs-delegated-auth-reader"
TEAM = "qs-delegated-team-a"
OTHER_TEAM = "qs-delegated-team-b"
ALICE = "delegated-alice"  # lq-viewer in TEAM only
BOB = "delegated-bob"  # no grant at all
LQ_VIEWER = "queuescope-pending-workloads-lq-viewer"
COPY = "authn-copy"  # a copy of the authentication ConfigMap the watch tests may edit
COPY_REF = ConfigMapRef(NAMESPACE, COPY)
EVENTUAL_SECONDS = 60.0


@dataclass(frozen=True)
class Identity:
    kubeconfig: Path
    get_only_kubeconfig: Path
    token: str
    get_only_token: str


def _resource(path: Path, name: str) -> dict[str, Any]:
    """A manifest of manifests/rbac/, renamed and bound to our test ServiceAccount."""
    doc: dict[str, Any] = yaml.safe_load(path.read_text())
    doc["metadata"]["name"] = name
    doc["subjects"] = [{"kind": "ServiceAccount", "name": SERVICE_ACCOUNT, "namespace": NAMESPACE}]
    return doc


def _apply(plane: ControlPlane, *docs: dict[str, Any]) -> None:
    plane.apply(json.dumps({"apiVersion": "v1", "kind": "List", "items": list(docs)}))


def _delegator_binding() -> dict[str, Any]:
    return _resource(RBAC / "auth-delegator.yaml", DELEGATOR_BINDING)


def _kubeconfig(plane: ControlPlane, path: Path, token: str) -> Path:
    ca = base64.b64encode(plane.cluster_ca_file.read_bytes()).decode()
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {"name": "e2e", "cluster": {"server": plane.url, "certificate-authority-data": ca}}
        ],
        "users": [{"name": "sa", "user": {"token": token}}],
        "contexts": [{"name": "e2e", "context": {"cluster": "e2e", "user": "sa"}}],
        "current-context": "e2e",
    }
    path.write_text(json.dumps(config))
    path.chmod(0o600)
    return path


def _role(name: str, verbs: list[str]) -> dict[str, Any]:
    return {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "Role",
        "metadata": {"name": name, "namespace": NAMESPACE},
        "rules": [
            {
                "apiGroups": [""],
                "resources": ["configmaps"],
                "resourceNames": [COPY],
                "verbs": verbs,
            }
        ],
    }


def _role_binding(
    namespace: str, name: str, kind: str, role: str, subject: dict[str, str]
) -> dict[str, Any]:
    return {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "RoleBinding",
        "metadata": {"name": name, "namespace": namespace},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": kind, "name": role},
        "subjects": [subject],
    }


def _account(name: str) -> dict[str, str]:
    return {"kind": "ServiceAccount", "name": name, "namespace": NAMESPACE}


@pytest.fixture(scope="module")
def identity(control_plane: ControlPlane, tmp_path_factory: pytest.TempPathFactory) -> Identity:
    plane = control_plane
    namespaces = [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}
        for ns in (NAMESPACE, TEAM, OTHER_TEAM)
    ]
    accounts = [
        {
            "apiVersion": "v1",
            "kind": "ServiceAccount",
            "metadata": {"name": n, "namespace": NAMESPACE},
        }
        for n in (SERVICE_ACCOUNT, GET_ONLY_ACCOUNT)
    ]
    _apply(plane, *namespaces, *accounts)
    plane.kubectl("apply", "-f", str(RBAC / "user-roles.yaml"))
    real = plane.get_json("configmap", "-n", "kube-system", "extension-apiserver-authentication")
    _apply(
        plane,
        _delegator_binding(),
        _resource(RBAC / "auth-reader.yaml", READER_BINDING),
        _role_binding(
            TEAM,
            "alice-lq-viewer",
            "ClusterRole",
            LQ_VIEWER,
            {"kind": "User", "apiGroup": "rbac.authorization.k8s.io", "name": ALICE},
        ),
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": COPY, "namespace": NAMESPACE},
            "data": real["data"],
        },
        _role("authn-copy-watcher", ["get", "list", "watch"]),
        _role("authn-copy-getter", ["get"]),
        _role_binding(
            NAMESPACE, "authn-copy-watcher", "Role", "authn-copy-watcher", _account(SERVICE_ACCOUNT)
        ),
        _role_binding(
            NAMESPACE, "authn-copy-getter", "Role", "authn-copy-getter", _account(GET_ONLY_ACCOUNT)
        ),
    )
    folder = tmp_path_factory.mktemp("delegated")
    tokens = {
        account: plane.kubectl(
            "create", "token", account, "-n", NAMESPACE, "--duration=2h"
        ).stdout.strip()
        for account in (SERVICE_ACCOUNT, GET_ONLY_ACCOUNT)
    }
    return Identity(
        _kubeconfig(plane, folder / "sa.kubeconfig", tokens[SERVICE_ACCOUNT]),
        _kubeconfig(plane, folder / "get-only.kubeconfig", tokens[GET_ONLY_ACCOUNT]),
        tokens[SERVICE_ACCOUNT],
        tokens[GET_ONLY_ACCOUNT],
    )


@contextlib.asynccontextmanager
async def _client(kubeconfig: Path) -> AsyncIterator[KubeRest]:
    client = await new_client_from_config(config_file=str(kubeconfig))
    rest = KubeRest(client)
    try:
        yield rest
    finally:
        await rest.close()
        await client.close()


@pytest.fixture
async def api(identity: Identity) -> AsyncIterator[KubeRest]:
    async with _client(identity.kubeconfig) as client:
        yield client


@pytest.fixture
async def get_only_api(identity: Identity) -> AsyncIterator[KubeRest]:
    async with _client(identity.get_only_kubeconfig) as client:
        yield client


async def eventually(probe: Callable[[], Awaitable[T | None]], what: str) -> T:
    """Poll `probe` until it returns something other than None (generous timeout)."""
    deadline = asyncio.get_running_loop().time() + EVENTUAL_SECONDS
    last: object = None
    while True:
        last = await probe()
        if last is not None:
            return last
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.25)


def _pem_set(certs: tuple[x509.Certificate, ...]) -> set[bytes]:
    return {c.public_bytes(serialization.Encoding.DER) for c in certs}


def _file_certs(path: Path) -> set[bytes]:
    return _pem_set(tuple(x509.load_pem_x509_certificates(path.read_bytes())))


# -- docs/cluster.md#the-authentication-configmap: the ConfigMap -----------------------------------


async def test_startup_read_gives_the_clusters_front_proxy_configuration(
    control_plane: ControlPlane, api: KubeRest
) -> None:
    config = await read_authentication_config(api)
    assert _pem_set(config.requestheader_cas) == _file_certs(control_plane.front_proxy_ca_file)
    assert _pem_set(config.client_cas) == _file_certs(control_plane.certs.path("client-ca.crt"))
    assert config.allowed_names == (FRONT_PROXY_CLIENT,)
    assert config.username_headers == ("X-Remote-User",)
    assert config.group_headers == ("X-Remote-Group",)
    assert config.extra_headers_prefixes == ("X-Remote-Extra-",)
    assert config.uid_headers == ("X-Remote-Uid",)


async def test_the_watch_delivers_changes(control_plane: ControlPlane, api: KubeRest) -> None:
    initial = await read_authentication_config(api, where=COPY_REF)
    seen: list[AuthenticationConfig] = []
    watcher = AuthenticationConfigWatcher(api, seen.append, current=initial, where=COPY_REF)
    task = asyncio.create_task(watcher.run())
    try:
        names = ["front-proxy-client", "second-proxy"]
        await _patch_copy_until_seen(control_plane, seen, names)
        assert not watcher.polling
        assert seen[-1].requestheader_cas == initial.requestheader_cas
        # Unusable content keeps the current configuration; the next good one arrives.
        _patch_copy(control_plane, {"requestheader-allowed-names": "not json"})
        await _patch_copy_until_seen(control_plane, seen, ["front-proxy-client"])
        assert all(config.allowed_names != () for config in seen)
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


async def test_without_list_and_watch_the_configmap_is_polled(
    control_plane: ControlPlane, get_only_api: KubeRest
) -> None:
    initial = await read_authentication_config(get_only_api, where=COPY_REF)
    seen: list[AuthenticationConfig] = []
    watcher = AuthenticationConfigWatcher(
        get_only_api,
        seen.append,
        current=initial,
        poll_interval=0.5,
        where=COPY_REF,
    )
    task = asyncio.create_task(watcher.run())
    try:
        await _patch_copy_until_seen(control_plane, seen, ["polled-proxy"])
        assert watcher.polling
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        _patch_copy(
            control_plane, {"requestheader-allowed-names": json.dumps([FRONT_PROXY_CLIENT])}
        )


def _patch_copy(plane: ControlPlane, data: dict[str, str]) -> None:
    plane.kubectl(
        "patch",
        "configmap",
        COPY,
        "-n",
        NAMESPACE,
        "--type=merge",
        "-p",
        json.dumps({"data": data}),
    )


async def _patch_copy_until_seen(
    plane: ControlPlane, seen: list[AuthenticationConfig], names: list[str]
) -> None:
    _patch_copy(plane, {"requestheader-allowed-names": json.dumps(names)})

    async def arrived() -> bool | None:
        return True if seen and seen[-1].allowed_names == tuple(names) else None

    await eventually(arrived, f"allowed names {names} from the watch")


# -- docs/cluster.md#decision-pipeline: SubjectAccessReview ----------------------------------------


def _pending(namespace: str, version: str = "v1beta2") -> str:
    return f"/apis/{GROUP}/{version}/namespaces/{namespace}/localqueues/lq-a/pendingworkloads"


async def test_subject_access_reviews_allow_and_deny(identity: Identity, api: KubeRest) -> None:
    backend = SubjectAccessReviewBackend(api)
    alice = authenticated_user(ALICE, groups=["team-a-devs"])
    allowed = await backend.review(alice, request_attributes("GET", _pending(TEAM)))
    assert allowed.allowed
    # kube-apiserver's RBAC names the binding that allowed it: our SAR carried the spec.
    assert "alice-lq-viewer" in allowed.reason
    assert not (
        await backend.review(alice, request_attributes("GET", _pending(OTHER_TEAM)))
    ).allowed
    bob = authenticated_user(BOB)
    assert not (await backend.review(bob, request_attributes("GET", _pending(TEAM)))).allowed
    cluster_queue = f"/apis/{GROUP}/v1beta2/clusterqueues/cq-a/pendingworkloads"
    assert not (await backend.review(alice, request_attributes("GET", cluster_queue))).allowed
    assert not (await backend.review(alice, request_attributes("GET", "/metrics"))).allowed
    # A group grant reaches the same decision through the SAR's `groups`.
    masters_like = authenticated_user("someone", groups=["system:masters"])
    assert (await backend.review(masters_like, request_attributes("GET", cluster_queue))).allowed


# -- docs/cluster.md#authenticator-chain: TokenReview ----------------------------------------------


async def test_token_reviews(identity: Identity, api: KubeRest) -> None:
    reviewer = TokenReviewClient(api)
    user = await reviewer.review(identity.token)
    assert user is not None
    assert user.name == f"system:serviceaccount:{NAMESPACE}:{SERVICE_ACCOUNT}"
    assert "system:serviceaccounts" in user.groups
    assert f"system:serviceaccounts:{NAMESPACE}" in user.groups
    assert user.uid
    assert await reviewer.review("not-a-token") is None
    assert await reviewer.review(identity.token[:-4] + "AAAA") is None


# -- docs/cluster.md#self-check and E10: the self-check, and a missing system:auth-delegator -------


class _WithPeerCert:
    """What our uvicorn protocol does on a TLS connection: the peer certificate in scope."""

    def __init__(self, app: Any, der: bytes) -> None:
        self._app = app
        self._der = der

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            scope = {
                **scope,
                "extensions": {**(scope.get("extensions") or {}), PEER_CERT_EXTENSION: self._der},
            }
        await self._app(scope, receive, send)


def _snapshot() -> Snapshot:
    return Snapshot(
        generation=1,
        synced=True,
        views=MappingProxyType({"cq-a": build_view("cq-a", [])}),
        local_queues=MappingProxyType({(TEAM, "lq-a"): "cq-a", (OTHER_TEAM, "lq-a"): "cq-a"}),
        workloads=MappingProxyType({}),
    )


VERSION_INFO = {"major": "0", "minor": "1", "gitVersion": "v0.1.0", "platform": "linux/amd64"}


async def test_self_check_and_a_missing_auth_delegator_binding(
    control_plane: ControlPlane, identity: Identity, api: KubeRest
) -> None:
    registry = CollectorRegistry()
    delegated = DelegatedAuth(KubeIdentity(api), registry=registry)
    await delegated.load()
    checked = await delegated.self_check.check_once()
    assert checked == {"subjectaccessreviews": True, "tokenreviews": True, "configmaps": True}
    assert _gauge(registry, "subjectaccessreviews") == 1
    assert _gauge(registry, "tokenreviews") == 1

    app = create_app(
        snapshot=_snapshot,
        authenticator=delegated.authenticator,
        authorizer=Authorizer(delegated.sar_backend),
        version_info=VERSION_INFO,
        metrics_registry=registry,
    )
    der = x509.load_pem_x509_certificate(
        control_plane.certs.path("front-proxy-client.crt").read_bytes()
    ).public_bytes(serialization.Encoding.DER)
    transport = httpx.ASGITransport(app=_WithPeerCert(app, der))
    aggregator = {"X-Remote-User": ALICE, "X-Remote-Group": "team-a-devs"}
    async with httpx.AsyncClient(transport=transport, base_url="https://visibility") as client:
        assert (await client.get(_pending(TEAM), headers=aggregator)).status_code == 200
        denied = await client.get(_pending(OTHER_TEAM), headers=aggregator)
        assert denied.status_code == 403
        assert denied.json()["message"] == (
            f'localqueues.{GROUP} "lq-a" is forbidden: User "{ALICE}" cannot get resource '
            f'"localqueues/pendingworkloads" in API group "{GROUP}" in the namespace "{OTHER_TEAM}"'
        )
        bearer = {"Authorization": f"Bearer {identity.token}"}
        # The ServiceAccount itself may not read pending workloads: TokenReview, then SAR.
        assert (await client.get(_pending(TEAM), headers=bearer)).status_code == 403
        assert (
            await client.get(_pending(TEAM), headers={"Authorization": "Bearer nope"})
        ).status_code == 401

        control_plane.kubectl("delete", "clusterrolebinding", DELEGATOR_BINDING)
        try:

            async def internal_error() -> httpx.Response | None:
                # A user not seen before: no cached decision hides the change.
                response = await client.get(
                    _pending(TEAM), headers={**aggregator, "X-Remote-Group": "probe"}
                )
                return response if response.status_code == 500 else None

            failed = await eventually(internal_error, "500 once system:auth-delegator is gone")
            body = failed.json()
            assert body["reason"] == "InternalError"
            assert "system:auth-delegator" in body["message"]
            assert "system:auth-delegator" in body["details"]["causes"][0]["message"]
            assert _gauge(registry, "subjectaccessreviews") == 0
            # A token not reviewed before (a reviewed one stays cached for 10 s).
            fresh = {"Authorization": f"Bearer {identity.get_only_token}"}
            token_failure = await client.get(_pending(TEAM), headers=fresh)
            assert token_failure.status_code == 500
            assert "system:auth-delegator" in token_failure.json()["message"]
            assert _gauge(registry, "tokenreviews") == 0
            assert await delegated.self_check.check_once() == {
                "subjectaccessreviews": False,
                "tokenreviews": False,
                "configmaps": True,  # the reader RoleBinding is still there
            }
            # Discovery needs no SAR: it keeps answering.
            discovery = await client.get(f"/apis/{GROUP}/v1beta2", headers=aggregator)
            assert discovery.status_code == 200
        finally:
            _apply(control_plane, _delegator_binding())

        async def allowed_again() -> bool | None:
            response = await client.get(
                _pending(TEAM), headers={**aggregator, "X-Remote-Group": "again"}
            )
            return True if response.status_code == 200 else None

        await eventually(allowed_again, "200 once system:auth-delegator is bound again")
        assert _gauge(registry, "subjectaccessreviews") == 1


def _gauge(registry: CollectorRegistry, resource: str) -> float | None:
    return registry.get_sample_value(PERMITTED_METRIC, {"resource": resource})
