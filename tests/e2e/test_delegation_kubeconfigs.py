"""`--authentication-kubeconfig` and `--authorization-kubeconfig`
(docs/cluster.md#authentication-and-authorization-flags) against the real kube-apiserver, through
its aggregation layer.

Three ServiceAccounts, each with exactly one part of what the server needs:

* `main` (`--kubeconfig`): the controller ClusterRole only: no `system:auth-delegator`, no
  reader Role for `kube-system/extension-apiserver-authentication`;
* `authn` (`--authentication-kubeconfig`): that reader Role and `create tokenreviews`;
* `authz` (`--authorization-kubeconfig`): `create subjectaccessreviews`.

So every delegated call succeeds only if it is made with the identity its flag names: a
ConfigMap read by any other stops the process, a TokenReview or SAR by any other is a 500.
Without the flags the same main identity gives the documented failures, each naming
`--kubeconfig`'s identity and the grant it lacks.

kube-apiserver authorizes a request itself before proxying it, so a user it denies never
reaches us; our own SubjectAccessReview's 403 is shown on a request sent straight to our
server the way kube-apiserver sends it (front-proxy certificate, `X-Remote-*`).
"""

from __future__ import annotations

import contextlib
import http.client
import json
import re
import ssl
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.aggregated import GROUP, Aggregated, aggregated_server, lq_path
from tests.e2e.cluster import ClusterModeServer, controller_kubeconfig
from tests.e2e.harness import ControlPlane, Response, wait_for

NAMESPACE = "qs-split"
MAIN, AUTHN, AUTHZ = "split-main", "split-authn", "split-authz"
RBAC_API = "rbac.authorization.k8s.io/v1"
MAIN_READER_BINDING = "qs-split-main-auth-reader"
TEAM_A_QUEUE = lq_path("v1beta2", "team-a", "lq-a")
TEAM_B_QUEUE = lq_path("v1beta2", "team-b", "lq-c")
STARTUP_FAILURE_SECONDS = 90.0
METRICS_SECONDS = 30.0


@dataclass(frozen=True)
class Kubeconfigs:
    main: Path
    authn: Path
    authz: Path
    authz_token: str


def _metadata(name: str) -> dict[str, str]:
    return {"name": name, "namespace": NAMESPACE}


def _account(name: str) -> dict[str, str]:
    return {"kind": "ServiceAccount", **_metadata(name)}


def _cluster_role(name: str, group: str, resource: str) -> dict[str, Any]:
    return {
        "apiVersion": RBAC_API,
        "kind": "ClusterRole",
        "metadata": {"name": name},
        "rules": [{"apiGroups": [group], "resources": [resource], "verbs": ["create"]}],
    }


def _binding(kind: str, name: str, role_kind: str, role: str, account: str) -> dict[str, Any]:
    metadata = {"name": name, **({"namespace": "kube-system"} if kind == "RoleBinding" else {})}
    return {
        "apiVersion": RBAC_API,
        "kind": kind,
        "metadata": metadata,
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": role_kind, "name": role},
        "subjects": [_account(account)],
    }


def _main_reader_binding() -> dict[str, Any]:
    return _binding(
        "RoleBinding",
        MAIN_READER_BINDING,
        "Role",
        "extension-apiserver-authentication-reader",
        MAIN,
    )


def _apply(plane: ControlPlane, *docs: dict[str, Any]) -> None:
    plane.apply(json.dumps({"apiVersion": "v1", "kind": "List", "items": list(docs)}))


@pytest.fixture(scope="module")
def kubeconfigs(
    control_plane: ControlPlane, tmp_path_factory: pytest.TempPathFactory
) -> Kubeconfigs:
    plane = control_plane
    _apply(
        plane,
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}},
        *(
            {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": _metadata(n)}
            for n in (MAIN, AUTHN, AUTHZ)
        ),
    )
    # The controller ClusterRole comes with manifests/rbac, applied by the server's prepare;
    # a binding may name it before it exists.
    _apply(
        plane,
        _binding(
            "ClusterRoleBinding", "qs-split-main", "ClusterRole", "queuescope-controller", MAIN
        ),
        _cluster_role("qs-split-tokenreviews", "authentication.k8s.io", "tokenreviews"),
        _binding(
            "ClusterRoleBinding", "qs-split-authn", "ClusterRole", "qs-split-tokenreviews", AUTHN
        ),
        _binding(
            "RoleBinding",
            "qs-split-authn-auth-reader",
            "Role",
            "extension-apiserver-authentication-reader",
            AUTHN,
        ),
        _cluster_role(
            "qs-split-subjectaccessreviews", "authorization.k8s.io", "subjectaccessreviews"
        ),
        _binding(
            "ClusterRoleBinding",
            "qs-split-authz",
            "ClusterRole",
            "qs-split-subjectaccessreviews",
            AUTHZ,
        ),
    )
    folder = tmp_path_factory.mktemp("split")
    paths = {
        name: controller_kubeconfig(plane, folder / f"{name}.kubeconfig", name, NAMESPACE)
        for name in (MAIN, AUTHN, AUTHZ)
    }
    token = json.loads(paths[AUTHZ].read_text())["users"][0]["user"]["token"]
    return Kubeconfigs(paths[MAIN], paths[AUTHN], paths[AUTHZ], token)


def _server_type(main: Path, flags: list[str]) -> type[ClusterModeServer]:
    """`ClusterModeServer` running as `main` with `flags` added."""

    @dataclass
    class SplitIdentityServer(ClusterModeServer):
        def prepare(self) -> None:
            super().prepare()
            self.kubeconfig = main
            self.extra_args = list(flags)

    return SplitIdentityServer


def _flags(kubeconfigs: Kubeconfigs, *, authentication: bool, authorization: bool) -> list[str]:
    flags = []
    if authentication:
        flags += ["--authentication-kubeconfig", str(kubeconfigs.authn)]
    if authorization:
        flags += ["--authorization-kubeconfig", str(kubeconfigs.authz)]
    return flags


@contextlib.contextmanager
def _served(
    plane: ControlPlane, root: Path, kubeconfigs: Kubeconfigs, flags: list[str]
) -> Iterator[Aggregated]:
    with aggregated_server(plane, root, _server_type(kubeconfigs.main, flags)) as env:
        yield env


def _direct(env: Aggregated, path: str, token: str) -> Response:
    """GET straight to our server with a bearer token and no client certificate."""
    context = ssl.create_default_context(cadata=env.server.certs.ca_cert.read_text())
    conn = http.client.HTTPSConnection("127.0.0.1", env.server.port, context=context, timeout=30)
    try:
        conn.request("GET", path, headers={"Authorization": f"Bearer {token}"})
        return Response.read_from(conn.getresponse())
    finally:
        conn.close()


def _gauges(env: Aggregated) -> dict[str, float]:
    response = env.server.as_front_proxy("/metrics", "e2e-admin", ("system:masters",))
    assert response.status == 200, response.body[:300]
    pattern = r'^queuescope_delegated_auth_permitted\{resource="(\w+)"\} (\S+)$'
    return {
        match[1]: float(match[2])
        for match in re.finditer(pattern, response.body.decode(), re.MULTILINE)
    }


def _wait_gauges(env: Aggregated, expected: dict[str, float]) -> None:
    wait_for(
        lambda: True if _gauges(env) == expected else None,
        timeout=METRICS_SECONDS,
        what=f"queuescope_delegated_auth_permitted == {expected}",
        alive=env.server.check_alive,
    )


def _status(response: Response) -> dict[str, Any]:
    return dict(response.json())


def test_each_flag_gives_its_calls_their_own_identity(
    control_plane: ControlPlane, kubeconfigs: Kubeconfigs, tmp_path: Path
) -> None:
    """Started at all proves the ConfigMap was read as `authn` (main may not read it)."""
    flags = _flags(kubeconfigs, authentication=True, authorization=True)
    with _served(control_plane, tmp_path, kubeconfigs, flags) as env:
        # Through kube-apiserver: our SAR (as authz) allows alice her team's queue.
        allowed = env.get(TEAM_A_QUEUE, env.alice)
        assert allowed.status == 200, allowed.body[:300]
        assert [item["metadata"]["name"] for item in allowed.json()["items"]] == [
            "a-high",
            "a-low",
        ]
        denied = env.get(TEAM_B_QUEUE, env.alice)
        assert denied.status == 403, denied.body[:300]
        # Straight to us, as kube-apiserver would send it: our SAR's own 403.
        ours = env.server.as_front_proxy(TEAM_B_QUEUE, "alice", ("team-a-devs",))
        assert ours.status == 403, ours.body[:300]
        assert _status(ours)["message"] == (
            f'localqueues.{GROUP} "lq-c" is forbidden: User "alice" cannot get resource '
            f'"localqueues/pendingworkloads" in API group "{GROUP}" in the namespace "team-b"'
        )
        # A bearer token: TokenReview as authn (authz may not create them), then SAR as authz.
        reviewed = _direct(env, TEAM_A_QUEUE, kubeconfigs.authz_token)
        assert reviewed.status == 403, reviewed.body[:300]
        assert f'User "system:serviceaccount:{NAMESPACE}:{AUTHZ}"' in _status(reviewed)["message"]
        assert _direct(env, TEAM_A_QUEUE, "not-a-token").status == 401
        # The self-check asked each identity about its own permissions.
        _wait_gauges(env, {"subjectaccessreviews": 1.0, "tokenreviews": 1.0, "configmaps": 1.0})


def test_without_the_authorization_flag_the_main_identity_makes_the_sar(
    control_plane: ControlPlane, kubeconfigs: Kubeconfigs, tmp_path: Path
) -> None:
    flags = _flags(kubeconfigs, authentication=True, authorization=False)
    with _served(control_plane, tmp_path, kubeconfigs, flags) as env:
        failed = env.get(TEAM_A_QUEUE, env.alice)
        _assert_names_missing_delegator(failed, kubeconfigs.main)
        _wait_gauges(env, {"subjectaccessreviews": 0.0, "tokenreviews": 1.0, "configmaps": 1.0})


def test_without_the_flags_the_main_identity_gives_the_documented_failures(
    control_plane: ControlPlane, kubeconfigs: Kubeconfigs, tmp_path: Path
) -> None:
    # It may not read the ConfigMap: the process refuses to start, naming the grant.
    server = _server_type(kubeconfigs.main, [])(control_plane, tmp_path / "refused")
    server.prepare()
    result = subprocess.run(
        server.command(),
        env=server.environment(),
        capture_output=True,
        text=True,
        timeout=STARTUP_FAILURE_SECONDS,
        check=False,
    )
    output = result.stdout + result.stderr
    assert result.returncode == 1, output[-2000:]
    assert "event=authentication-lookup-failed" in output
    assert (
        f"bind the user of --kubeconfig {kubeconfigs.main} to the Role "
        '"extension-apiserver-authentication-reader" in kube-system'
    ) in output
    # Once it may, it starts, and every review ends in the 500 naming system:auth-delegator.
    _apply(control_plane, _main_reader_binding())
    try:
        with _served(control_plane, tmp_path / "served", kubeconfigs, []) as env:
            _assert_names_missing_delegator(env.get(TEAM_A_QUEUE, env.alice), kubeconfigs.main)
            token_failure = _direct(env, TEAM_A_QUEUE, kubeconfigs.authz_token)
            _assert_names_missing_delegator(token_failure, kubeconfigs.main)
            _wait_gauges(env, {"subjectaccessreviews": 0.0, "tokenreviews": 0.0, "configmaps": 1.0})
    finally:
        control_plane.kubectl(
            "delete", "rolebinding", MAIN_READER_BINDING, "-n", "kube-system", "--ignore-not-found"
        )


def _assert_names_missing_delegator(response: Response, main: Path) -> None:
    assert response.status == 500, response.body[:300]
    body = _status(response)
    assert body["reason"] == "InternalError"
    fix = f'bind the user of --kubeconfig {main} to the ClusterRole "system:auth-delegator"'
    assert fix in body["message"]
    assert fix in body["details"]["causes"][0]["message"]
