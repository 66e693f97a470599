"""Namespace, Deployment, Service, APIServices, the components and the overlays' own
files (docs/cluster.md#manifests). What the overlays render to is in test_kustomize.py."""

from __future__ import annotations

import argparse
from typing import Any, cast

import pytest
import yaml

from queuescope.serve import add_serve_parser
from tests.unit.manifests.support import (
    MANIFESTS,
    NAMESPACE,
    POD_LABELS,
    SERVICE_ACCOUNT,
    documents,
    find,
    folder_objects,
)
from visibility_server.certs import APISERVICE_NAMES, DEFAULT_NAMESPACE, DEFAULT_SERVICE

DEPLOY = folder_objects(MANIFESTS / "deploy")
APISERVICES = folder_objects(MANIFESTS / "apiservice")
HA = folder_objects(MANIFESTS / "components" / "ha")
APF = folder_objects(MANIFESTS / "components" / "apf")
OVERLAYS = MANIFESTS / "overlays"
DEFAULT = documents(OVERLAYS / "default" / "kustomization.yaml")[0]
APP_ONLY = documents(OVERLAYS / "app-only" / "kustomization.yaml")[0]
E2E = documents(OVERLAYS / "e2e" / "kustomization.yaml")[0]
BASES = ["../../crds", "../../rbac", "../../deploy", "../../apiservice"]
# overlays/default also installs the admission webhooks; overlays/e2e does not (the tests
# register them against their own server, tests/e2e/test_webhooks.py).
DEFAULT_BASES = [*BASES, "../../webhooks"]

TLS_DIR = "/var/run/queuescope/tls"
SECRET = "queuescope-visibility-tls"
SERVICE = "queuescope-visibility"

# `queuescope serve` flags the Deployment passes that serve.py does not define yet.
MISSING_SERVE_FLAGS: set[str] = set()


def _deployment() -> dict[str, Any]:
    return find(DEPLOY, "Deployment", "queuescope-controller")


def _pod() -> dict[str, Any]:
    spec: dict[str, Any] = _deployment()["spec"]["template"]["spec"]
    return spec


def _container() -> dict[str, Any]:
    (container,) = _pod()["containers"]
    result: dict[str, Any] = container
    return result


def test_namespace_enforces_restricted_pod_security() -> None:
    namespace = find(DEPLOY, "Namespace", NAMESPACE)
    assert namespace["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "restricted"


def test_deployment_shape() -> None:
    deployment = _deployment()
    assert deployment["metadata"]["namespace"] == NAMESPACE
    spec = deployment["spec"]
    assert spec["replicas"] == 1  # 2 with the ha component
    assert spec["strategy"] == {
        "type": "RollingUpdate",
        "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0},
    }
    assert spec["selector"] == {"matchLabels": POD_LABELS}
    assert spec["template"]["metadata"]["labels"] == POD_LABELS
    assert _pod()["serviceAccountName"] == SERVICE_ACCOUNT
    assert _pod()["terminationGracePeriodSeconds"] == 30


def test_hardening() -> None:
    assert _pod()["securityContext"] == {
        "runAsNonRoot": True,
        "runAsUser": 65532,
        "runAsGroup": 65532,
        "fsGroup": 65532,
        "seccompProfile": {"type": "RuntimeDefault"},
    }
    assert _container()["securityContext"] == {
        "allowPrivilegeEscalation": False,
        "readOnlyRootFilesystem": True,
        "capabilities": {"drop": ["ALL"]},
    }
    assert _container()["resources"] == {
        "requests": {"cpu": "250m", "memory": "256Mi"},
        "limits": {"memory": "1Gi"},
    }


def test_volumes_mount_the_secret_as_a_directory() -> None:
    volumes = {v["name"]: v for v in _pod()["volumes"]}
    mounts = {m["mountPath"]: m for m in _container()["volumeMounts"]}
    tls = mounts[TLS_DIR]
    assert tls["readOnly"] is True
    assert "subPath" not in tls and "subPathExpr" not in tls  # subPath never sees updates
    assert volumes[tls["name"]]["secret"]["secretName"] == SECRET
    tmp = volumes[mounts["/tmp"]["name"]]
    assert tmp["emptyDir"] == {"sizeLimit": "64Mi"}
    for mount in _container()["volumeMounts"]:
        assert "subPath" not in mount


def test_env() -> None:
    env = {e["name"]: e for e in _container()["env"]}
    assert env["POD_NAME"]["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.name"
    assert env["POD_NAMESPACE"]["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.namespace"
    assert env["PYTHONDONTWRITEBYTECODE"]["value"] == "1"
    assert env["PYTHONUNBUFFERED"]["value"] == "1"


def test_args_and_port() -> None:
    args = _container()["args"]
    assert args == [
        "serve",
        "--listen=0.0.0.0:8443",
        f"--cert-dir={TLS_DIR}",
        "--leader-elect",
    ]
    assert _container()["ports"] == [{"name": "https", "containerPort": 8443, "protocol": "TCP"}]


class _NoAbbreviations(argparse.ArgumentParser):
    """A prefix of a real flag must not pass for the flag."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**{**kwargs, "allow_abbrev": False})


def _serve_parser() -> argparse.ArgumentParser:
    parser = _NoAbbreviations(prog="queuescope")
    sub = parser.add_subparsers(dest="command", parser_class=_NoAbbreviations)
    add_serve_parser(cast("argparse._SubParsersAction[argparse.ArgumentParser]", sub))
    return parser


def _flag_cases() -> list[Any]:
    cases = []
    for arg in _container()["args"][1:]:
        flag = arg.split("=", 1)[0]
        marks = (
            [pytest.mark.xfail(reason=f"serve has no {flag} yet", strict=True)]
            if flag in MISSING_SERVE_FLAGS
            else []
        )
        cases.append(pytest.param(arg, id=flag, marks=marks))
    return cases


@pytest.mark.parametrize("arg", _flag_cases())
def test_serve_knows_the_flag(arg: str) -> None:
    _, unknown = _serve_parser().parse_known_args(["serve", arg])
    assert unknown == []


@pytest.mark.parametrize(
    ("probe", "path", "period", "timeout", "failures"),
    [
        ("startupProbe", "/livez", 2, None, 60),
        ("livenessProbe", "/livez", 10, 3, 3),
        ("readinessProbe", "/readyz", 5, 3, 2),
    ],
)
def test_probes(probe: str, path: str, period: int, timeout: int | None, failures: int) -> None:
    spec = _container()[probe]
    assert spec["httpGet"] == {"path": path, "port": "https", "scheme": "HTTPS"}
    assert spec["periodSeconds"] == period
    assert spec.get("timeoutSeconds") == timeout
    assert spec["failureThreshold"] == failures


def test_service() -> None:
    service = find(DEPLOY, "Service", SERVICE)
    assert service["metadata"]["namespace"] == NAMESPACE
    spec = service["spec"]
    assert spec["type"] == "ClusterIP"
    assert "clusterIP" not in spec  # never headless
    assert spec["selector"] == POD_LABELS
    assert spec["ports"] == [
        {
            "name": "https",
            "port": 443,
            "targetPort": "https",
            "protocol": "TCP",
            "appProtocol": "https",
        }
    ]
    port_names = {p["name"] for p in _container()["ports"]}
    assert spec["ports"][0]["targetPort"] in port_names


def test_the_certificate_tooling_targets_this_service() -> None:
    assert (DEFAULT_NAMESPACE, DEFAULT_SERVICE) == (NAMESPACE, SERVICE)


@pytest.mark.parametrize(("version", "priority"), [("v1beta2", 100), ("v1beta1", 90)])
def test_apiservice(version: str, priority: int) -> None:
    name = f"{version}.visibility.kueue.x-k8s.io"
    apiservice = find(APISERVICES, "APIService", name)
    assert apiservice["apiVersion"] == "apiregistration.k8s.io/v1"
    spec = apiservice["spec"]
    assert "insecureSkipTLSVerify" not in spec
    assert "caBundle" not in spec  # set by the generated patch
    assert spec["group"] == "visibility.kueue.x-k8s.io"
    assert spec["version"] == version
    assert spec["groupPriorityMinimum"] == 100  # below the CRD groups' 1000
    assert spec["versionPriority"] == priority
    assert spec["service"] == {"name": SERVICE, "namespace": NAMESPACE, "port": 443}
    service = find(DEPLOY, "Service", SERVICE)
    assert spec["service"]["port"] in {p["port"] for p in service["spec"]["ports"]}


def test_the_cabundle_patch_targets_these_apiservices() -> None:
    assert set(APISERVICE_NAMES) == {a["metadata"]["name"] for a in APISERVICES}
    assert {"path": "certs/apiservice-cabundle.yaml"} in DEFAULT["patches"]


def test_default_makes_the_secret_the_deployment_mounts() -> None:
    (generator,) = DEFAULT["secretGenerator"]
    assert generator["name"] == SECRET
    assert generator["namespace"] == NAMESPACE
    assert generator["type"] == "kubernetes.io/tls"
    assert sorted(generator["files"]) == ["certs/ca.crt", "certs/tls.crt", "certs/tls.key"]
    # Rotation replaces the Secret in place and replicas hot-reload it
    # (docs/cluster.md#tls-and-certificates).
    assert generator["options"]["disableNameSuffixHash"] is True
    assert DEFAULT["resources"] == DEFAULT_BASES
    assert DEFAULT["components"] == ["../../components/ha"]


def test_app_only_is_default_without_the_crds() -> None:
    assert APP_ONLY["resources"] == ["../default"]
    (patch,) = APP_ONLY["patches"]
    assert patch["target"] == {"kind": "CustomResourceDefinition"}  # every CRD, by kind
    body = yaml.safe_load(patch["patch"])
    assert body["$patch"] == "delete"
    assert body["kind"] == "CustomResourceDefinition"
    assert set(APP_ONLY) == {"apiVersion", "kind", "resources", "patches"}


def test_e2e_overlay_has_no_deployment_and_an_external_name_service() -> None:
    assert E2E["resources"] == BASES
    assert "secretGenerator" not in E2E and "components" not in E2E
    patches = {p["path"]: documents(OVERLAYS / "e2e" / p["path"])[0] for p in E2E["patches"]}
    delete = patches["no-deployment.yaml"]
    assert (delete["$patch"], delete["kind"]) == ("delete", "Deployment")
    assert delete["metadata"] == {"name": "queuescope-controller", "namespace": NAMESPACE}
    service = patches["service-externalname.yaml"]
    assert service["metadata"] == {"name": SERVICE, "namespace": NAMESPACE}
    assert service["spec"] == {
        "$patch": "replace",
        "type": "ExternalName",
        "externalName": "localhost",
    }


def test_apf_component() -> None:
    level = find(APF, "PriorityLevelConfiguration", "queuescope-visibility")
    schema = find(APF, "FlowSchema", "queuescope-visibility")
    for obj in (level, schema):
        assert obj["apiVersion"] == "flowcontrol.apiserver.k8s.io/v1"
        assert "namespace" not in obj["metadata"]  # cluster-scoped
    assert level["spec"] == {
        "type": "Limited",
        "limited": {
            "nominalConcurrencyShares": 10,
            "lendablePercent": 90,
            "limitResponse": {
                "type": "Queue",
                "queuing": {"queues": 16, "handSize": 4, "queueLengthLimit": 50},
            },
        },
    }
    spec = schema["spec"]
    assert spec["priorityLevelConfiguration"] == {"name": "queuescope-visibility"}
    assert spec["matchingPrecedence"] == 9000
    assert spec["distinguisherMethod"] == {"type": "ByUser"}
    (rule,) = spec["rules"]
    assert rule["subjects"] == [
        {"kind": "Group", "group": {"name": "system:authenticated"}},
        {"kind": "Group", "group": {"name": "system:unauthenticated"}},
    ]
    assert rule["resourceRules"] == [
        {
            "verbs": ["*"],
            "apiGroups": ["visibility.kueue.x-k8s.io"],
            "resources": ["*"],
            "clusterScope": True,
            "namespaces": ["*"],
        }
    ]
    assert "nonResourceRules" not in rule


def test_ha_component() -> None:
    pdb = find(HA, "PodDisruptionBudget", "queuescope-controller")
    assert pdb["apiVersion"] == "policy/v1"
    assert pdb["metadata"]["namespace"] == NAMESPACE
    assert pdb["spec"] == {"minAvailable": 1, "selector": {"matchLabels": POD_LABELS}}
    patch = find(HA, "Deployment", "queuescope-controller")
    assert patch["spec"]["replicas"] == 2  # a PDB with minAvailable 1 needs two
    (spread,) = patch["spec"]["template"]["spec"]["topologySpreadConstraints"]
    assert spread == {
        "maxSkew": 1,
        "topologyKey": "kubernetes.io/hostname",
        "whenUnsatisfiable": "ScheduleAnyway",
        "labelSelector": {"matchLabels": POD_LABELS},
    }
