"""What each overlay of manifests/overlays renders to with the real `kubectl kustomize`.

Needs a kubectl binary in QUEUESCOPE_KUBECTL (the control-plane toolchain's, see
tools/controlplane; `make test` sets it). Without one the module is skipped, unless
QUEUESCOPE_E2E_REQUIRED=1, which makes that a failure. The tree is copied and `queuescope
certs generate` writes the certificates into the copy, as an operator (or `make deploy`)
does before `kubectl apply -k`.
"""

from __future__ import annotations

import base64
import copy
import os
import shutil
import subprocess
import textwrap
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pytest
import yaml

from queuescope.cli import main as queuescope
from scheduler.api import Configuration, load_yaml
from scheduler.api.source import wire_version
from tests.unit.manifests.support import MANIFESTS, NAMESPACE, POD_LABELS, crds, folder_objects
from visibility_server.webhooks.conversion import CONVERTED_CRDS
from visibility_server.webhooks.registrations import WEBHOOK_CONFIGURATIONS

KUBECTL = os.environ.get("QUEUESCOPE_KUBECTL", "")
REQUIRED = os.environ.get("QUEUESCOPE_E2E_REQUIRED") == "1"

pytestmark = pytest.mark.skipif(
    not KUBECTL and not REQUIRED,
    reason="set QUEUESCOPE_KUBECTL to a kubectl binary to render the kustomizations",
)

Objects = list[dict[str, Any]]
Key = tuple[str, str, str | None]  # kind, name, namespace
APISERVICES = ("v1beta1.visibility.kueue.x-k8s.io", "v1beta2.visibility.kueue.x-k8s.io")
SECRET = "queuescope-visibility-tls"
PDB = ("PodDisruptionBudget", "queuescope-controller", NAMESPACE)


def _kustomize(folder: Path) -> Objects:
    assert KUBECTL, "QUEUESCOPE_E2E_REQUIRED=1 needs QUEUESCOPE_KUBECTL"
    result = subprocess.run(
        [KUBECTL, "kustomize", str(folder)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    return [d for d in yaml.safe_load_all(result.stdout) if d]


def _key(obj: dict[str, Any]) -> Key:
    return obj["kind"], obj["metadata"]["name"], obj["metadata"].get("namespace")


def _keys(objects: Iterable[dict[str, Any]]) -> set[Key]:
    return {_key(o) for o in objects}


def _source(*folders: str) -> Objects:
    return [o for folder in folders for o in folder_objects(MANIFESTS / folder)]


def _one(objects: Objects, kind: str, name: str) -> dict[str, Any]:
    (match,) = [o for o in objects if o["kind"] == kind and o["metadata"]["name"] == name]
    return match


@pytest.fixture(scope="module")
def tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("kustomize") / "manifests"
    shutil.copytree(MANIFESTS, root, ignore=shutil.ignore_patterns("certs"))
    out = root / "overlays" / "default" / "certs"
    assert queuescope(["certs", "generate", "--out", str(out)]) == 0
    return root


@pytest.fixture(scope="module")
def rendered(tree: Path) -> dict[str, Objects]:
    return {name: _kustomize(tree / "overlays" / name) for name in ("default", "app-only", "e2e")}


@pytest.fixture(scope="module")
def ca_pem(tree: Path) -> bytes:
    return (tree / "overlays" / "default" / "certs" / "ca.crt").read_bytes()


# -- what each overlay contains, exactly -------------------------------------------------


def test_default_is_every_base_plus_ha_and_the_secret(rendered: dict[str, Objects]) -> None:
    expected = _keys(_source("crds", "rbac", "deploy", "apiservice", "webhooks"))
    expected |= {PDB, ("Secret", SECRET, NAMESPACE)}
    assert _keys(rendered["default"]) == expected
    assert sum(o["kind"] == "CustomResourceDefinition" for o in rendered["default"]) == len(crds())


def test_app_only_is_default_without_the_crds(rendered: dict[str, Objects]) -> None:
    without_crds = [o for o in rendered["default"] if o["kind"] != "CustomResourceDefinition"]
    assert rendered["app-only"] == without_crds  # same objects, same content, same order


def test_e2e_has_no_deployment_and_an_external_name_service(
    rendered: dict[str, Objects],
) -> None:
    objects = rendered["e2e"]
    deploy_kept = [o for o in _source("deploy") if o["kind"] != "Deployment"]
    assert _keys(objects) == _keys([*_source("crds", "rbac", "apiservice"), *deploy_kept])
    assert not {"Deployment", "Secret", "PodDisruptionBudget"} & {o["kind"] for o in objects}
    service = _one(objects, "Service", "queuescope-visibility")
    assert service["spec"] == {"type": "ExternalName", "externalName": "localhost"}
    for name in APISERVICES:
        spec = _one(objects, "APIService", name)["spec"]
        assert "caBundle" not in spec and "insecureSkipTLSVerify" not in spec


def test_e2e_takes_a_session_port_and_ca_on_top(tree: Path, ca_pem: bytes) -> None:
    """What the harness layers over overlays/e2e: its server's port and CA (kustomize
    takes the base by relative path only)."""
    session = tree.parent / "session"
    session.mkdir()
    bundle = base64.b64encode(ca_pem).decode()
    (session / "kustomization.yaml").write_text(
        textwrap.dedent(
            f"""\
            resources:
            - {os.path.relpath(tree / "overlays" / "e2e", session)}
            patches:
            - target: {{kind: APIService}}
              patch: |-
                - {{op: replace, path: /spec/service/port, value: 18443}}
                - {{op: add, path: /spec/caBundle, value: {bundle}}}
            """
        )
    )
    objects = _kustomize(session)
    for name in APISERVICES:
        spec = _one(objects, "APIService", name)["spec"]
        assert spec["service"] == {
            "name": "queuescope-visibility",
            "namespace": NAMESPACE,
            "port": 18443,
        }
        assert base64.b64decode(spec["caBundle"]) == ca_pem


# -- what must hold in every overlay ------------------------------------------------------


@pytest.mark.parametrize("overlay", ["default", "app-only", "e2e"])
def test_no_namespace_transformer(rendered: dict[str, Objects], overlay: str) -> None:
    """Every object keeps the namespace its source file states (or none); the
    kube-system RoleBinding stays in kube-system."""
    stated = {
        (o["kind"], o["metadata"]["name"]): o["metadata"].get("namespace")
        for o in _source("crds", "rbac", "deploy", "apiservice", "webhooks", "components/ha")
    }
    stated[("Secret", SECRET)] = NAMESPACE
    for obj in rendered[overlay]:
        kind, name, namespace = _key(obj)
        assert stated[(kind, name)] == namespace, (kind, name)
    reader = _one(rendered[overlay], "RoleBinding", "queuescope-auth-reader")
    assert reader["metadata"]["namespace"] == "kube-system"
    assert reader["subjects"] == [
        {"kind": "ServiceAccount", "name": "queuescope-controller", "namespace": NAMESPACE}
    ]


@pytest.mark.parametrize("overlay", ["default", "app-only", "e2e"])
def test_never_insecure_skip_tls_verify(rendered: dict[str, Objects], overlay: str) -> None:
    apiservices = [o for o in rendered[overlay] if o["kind"] == "APIService"]
    assert sorted(o["metadata"]["name"] for o in apiservices) == list(APISERVICES)
    for apiservice in apiservices:
        assert "insecureSkipTLSVerify" not in apiservice["spec"]


@pytest.mark.parametrize("overlay", ["default", "app-only"])
def test_cabundle_is_the_generated_ca(
    rendered: dict[str, Objects], overlay: str, ca_pem: bytes
) -> None:
    secret = _one(rendered[overlay], "Secret", SECRET)
    assert secret["type"] == "kubernetes.io/tls"
    assert secret["metadata"]["namespace"] == NAMESPACE
    assert set(secret["data"]) == {"tls.crt", "tls.key", "ca.crt"}  # never ca.key
    assert base64.b64decode(secret["data"]["ca.crt"]) == ca_pem
    for name in APISERVICES:
        spec = _one(rendered[overlay], "APIService", name)["spec"]
        assert base64.b64decode(spec["caBundle"]) == ca_pem


def test_the_converting_crds_trust_the_generated_ca(
    rendered: dict[str, Objects], ca_pem: bytes
) -> None:
    crds = {
        o["metadata"]["name"]: o
        for o in rendered["default"]
        if o["kind"] == "CustomResourceDefinition"
    }
    assert set(CONVERTED_CRDS) < set(crds)
    for name, crd in crds.items():
        conversion = crd["spec"]["conversion"]
        if name not in CONVERTED_CRDS:
            assert conversion == {"strategy": "None"}
            continue
        client = conversion["webhook"]["clientConfig"]
        assert base64.b64decode(client["caBundle"]) == ca_pem
        assert client["service"] == {
            "namespace": NAMESPACE,
            "name": "queuescope-visibility",
            "path": "/convert",
            "port": 443,
        }


@pytest.mark.parametrize("overlay", ["default", "app-only"])
def test_every_admission_webhook_trusts_the_generated_ca(
    rendered: dict[str, Objects], overlay: str, ca_pem: bytes
) -> None:
    """The caBundle patch merges into each webhook by name (docs/operations.md, "Admission
    webhooks"): all of them, and nothing else of the webhook changes."""
    for kind, name, names in WEBHOOK_CONFIGURATIONS:
        config = copy.deepcopy(_one(rendered[overlay], kind, name))  # the fixture is shared
        source = _one(_source("webhooks"), kind, name)
        assert [w["name"] for w in config["webhooks"]] == list(names)
        for webhook, written in zip(config["webhooks"], source["webhooks"], strict=True):
            client = webhook.pop("clientConfig")
            assert base64.b64decode(client.pop("caBundle")) == ca_pem
            assert client == written.pop("clientConfig")
            assert client["service"]["name"] == "queuescope-visibility"
            assert client["service"]["namespace"] == NAMESPACE
            assert webhook == written


@pytest.mark.parametrize("overlay", ["default", "app-only"])
def test_deployment_is_highly_available_and_mounts_the_secret(
    rendered: dict[str, Objects], overlay: str
) -> None:
    deployment = _one(rendered[overlay], "Deployment", "queuescope-controller")
    assert deployment["spec"]["replicas"] == 2
    pod = deployment["spec"]["template"]["spec"]
    assert pod["topologySpreadConstraints"][0]["topologyKey"] == "kubernetes.io/hostname"
    secrets = [v["secret"]["secretName"] for v in pod["volumes"] if "secret" in v]
    assert secrets == [SECRET]
    # The patch merged into the base: hardening and probes are still there.
    (container,) = pod["containers"]
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    assert container["readinessProbe"]["httpGet"]["path"] == "/readyz"
    pdb = _one(rendered[overlay], "PodDisruptionBudget", "queuescope-controller")
    assert pdb["spec"] == {"minAvailable": 1, "selector": {"matchLabels": POD_LABELS}}


# -- the optional components compose with the default overlay ----------------------------


def _default_with(tree: Path, component: str) -> Objects:
    overlay = tree / "overlays" / f"with-{component}"
    overlay.mkdir()
    (overlay / "kustomization.yaml").write_text(
        f"resources: [../default]\ncomponents: [../../components/{component}]\n"
    )
    return _kustomize(overlay)


def test_apf_component_adds_its_two_objects(tree: Path, rendered: dict[str, Objects]) -> None:
    objects = _default_with(tree, "apf")
    added = _keys(objects) - _keys(rendered["default"])
    assert added == {
        ("FlowSchema", "queuescope-visibility", None),
        ("PriorityLevelConfiguration", "queuescope-visibility", None),
    }


def test_self_managed_certs_component_adds_only_rbac(
    tree: Path, rendered: dict[str, Objects]
) -> None:
    objects = _default_with(tree, "self-managed-certs")
    added = _keys(objects) - _keys(rendered["default"])
    name = "queuescope-self-managed-certs"
    assert added == {
        ("Role", name, NAMESPACE),
        ("RoleBinding", name, NAMESPACE),
        ("ClusterRole", name, None),
        ("ClusterRoleBinding", name, None),
    }
    # It changes nothing else: no flag on the Deployment (the server has none yet).
    assert [o for o in objects if _key(o) not in added] == rendered["default"]


def test_configuration_component_runs_the_controller_with_kueues_configuration(
    tree: Path, rendered: dict[str, Objects]
) -> None:
    objects = _default_with(tree, "configuration")
    (config_map,) = [o for o in objects if o["kind"] == "ConfigMap"]
    name = config_map["metadata"]["name"]
    assert name.startswith("queuescope-config-")  # hashed: a new Configuration rolls the pods
    assert config_map["metadata"]["namespace"] == NAMESPACE
    added = _keys(objects) - _keys(rendered["default"])
    assert added == {("ConfigMap", name, NAMESPACE)}

    text = config_map["data"]["controller_manager_config.yaml"]
    (decoded,) = load_yaml(text, "controller_manager_config.yaml")
    assert isinstance(decoded.obj, Configuration)
    assert wire_version(decoded.obj) == "config.kueue.x-k8s.io/v1beta2"
    assert decoded.obj.waits_for_pods_ready

    deployment = _one(objects, "Deployment", "queuescope-controller")
    before = _one(rendered["default"], "Deployment", "queuescope-controller")
    pod, pod_before = deployment["spec"]["template"]["spec"], before["spec"]["template"]["spec"]
    (container,), (container_before,) = pod["containers"], pod_before["containers"]
    path = "/etc/queuescope/controller_manager_config.yaml"
    assert container["args"] == [*container_before["args"], f"--config={path}"]
    mount = {"name": "config", "mountPath": "/etc/queuescope", "readOnly": True}
    assert container["volumeMounts"] == [*container_before["volumeMounts"], mount]
    volume = {"name": "config", "configMap": {"name": name}}
    assert pod["volumes"] == [*pod_before["volumes"], volume]


@pytest.mark.parametrize("folder", ["crds", "rbac", "deploy", "apiservice"])
def test_each_base_renders_alone(folder: str) -> None:
    assert _keys(_kustomize(MANIFESTS / folder)) == _keys(_source(folder))
