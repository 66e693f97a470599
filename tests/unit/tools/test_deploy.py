"""tools/deploy.py (`make deploy`, `make undeploy`) against a fake kubectl that records
every call: the order of docs/cluster.md#install-upgrade-and-uninstall, the refusal next to Kueue,
and the certificates. What the overlays render to is tested with the real kubectl in
tests/unit/manifests."""

from __future__ import annotations

import importlib.util
import json
import shlex
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import yaml

REPO = Path(__file__).resolve().parents[3]
FAKE = Path(__file__).with_name("fake_kubectl.py")
V1BETA1 = "v1beta1.visibility.kueue.x-k8s.io"
V1BETA2 = "v1beta2.visibility.kueue.x-k8s.io"
OURS = {"name": "queuescope-visibility", "namespace": "queuescope-system", "port": 443}


def _load() -> ModuleType:
    spec = importlib.util.spec_from_file_location("deploy_tool", REPO / "tools" / "deploy.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("deploy_tool", module)  # dataclasses look the module up
    spec.loader.exec_module(module)
    return module


deploy = _load()


def _obj(kind: str, name: str, namespace: str | None = None, **extra: Any) -> dict[str, Any]:
    metadata: dict[str, Any] = {"name": name}
    if namespace:
        metadata["namespace"] = namespace
    return {"apiVersion": "v1", "kind": kind, "metadata": metadata, **extra}


def _apiservice(name: str, service: dict[str, Any] | None = OURS) -> dict[str, Any]:
    spec: dict[str, Any] = {"group": "visibility.kueue.x-k8s.io", "version": name.partition(".")[0]}
    if service is not None:
        spec["service"] = service
    return _obj("APIService", name, spec=spec)


APP = [
    _obj("Namespace", "queuescope-system"),
    _obj("ServiceAccount", "queuescope-controller", "queuescope-system"),
    _obj("RoleBinding", "queuescope-auth-reader", "kube-system"),
    _obj("Deployment", "queuescope-controller", "queuescope-system"),
    _obj("Service", "queuescope-visibility", "queuescope-system"),
    _obj("Secret", "queuescope-visibility-tls", "queuescope-system"),
    _obj("MutatingWebhookConfiguration", "queuescope-mutating"),
    _obj("ValidatingWebhookConfiguration", "queuescope-validating"),
    _apiservice(V1BETA1),
    _apiservice(V1BETA2),
]
LATE = ("APIService", "MutatingWebhookConfiguration", "ValidatingWebhookConfiguration")
CRD = _obj(
    "CustomResourceDefinition",
    "clusterqueues.kueue.x-k8s.io",
    spec={"versions": [{"name": "v1beta1"}, {"name": "v1beta2"}]},
)
WEBHOOKS = "validatingwebhookconfigurations,mutatingwebhookconfigurations"


class Cluster:
    """The fake kubectl's state file and what the tests read back from it."""

    def __init__(self, root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        self.file = root / "state.json"
        self.manifests = root / "manifests"
        for folder in ("overlays/default", "overlays/app-only", "crds"):
            (self.manifests / folder).mkdir(parents=True)
        self.write(
            {
                "calls": [],
                "fail": {},
                "apiservices": {},
                "rendered": {"default": [CRD, *APP], "app-only": APP},
            }
        )
        monkeypatch.setenv("FAKE_KUBECTL_STATE", str(self.file))

    def read(self) -> dict[str, Any]:
        state: dict[str, Any] = json.loads(self.file.read_text())
        return state

    def write(self, state: dict[str, Any]) -> None:
        self.file.write_text(json.dumps(state))

    def set(self, key: str, value: Any) -> None:
        state = self.read()
        state[key] = value
        self.write(state)

    @property
    def certs(self) -> Path:
        return self.manifests / "overlays" / "default" / "certs"

    def run(self, *args: str) -> int:
        kubectl = shlex.join([sys.executable, str(FAKE)])
        code: int = deploy.main(
            [*args, "--kubectl", kubectl, "--timeout", "7", "--manifests", str(self.manifests)]
        )
        return code

    def calls(self) -> list[list[str]]:
        return [c["args"] for c in self.read()["calls"]]

    def verbs(self) -> list[str]:
        """Each call as its first two words (`get apiservice`, `apply --server-side`...)."""
        return [" ".join(a[:2]) for a in self.calls()]

    def stdin_kinds(self, prefix: str) -> list[list[str]]:
        """The kinds sent on stdin by each call starting with `prefix`."""
        return [
            [d["kind"] for d in yaml.safe_load_all(c["stdin"]) if d]
            for c in self.read()["calls"]
            if " ".join(c["args"]).startswith(prefix)
        ]


@pytest.fixture
def cluster(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Cluster:
    return Cluster(tmp_path, monkeypatch)


def test_install_order(cluster: Cluster) -> None:
    assert cluster.run("install") == 0
    default = str(cluster.manifests / "overlays" / "default")
    assert cluster.verbs() == [
        "get apiservice",
        "get apiservice",
        f"get {WEBHOOKS}",
        "get deployments",
        f"kustomize {default}",
        "get crd",
        "apply --server-side",
        "wait --for=condition=Established",
        "apply --server-side",
        "-n queuescope-system",
        "apply --server-side",
        "apply --server-side",
        "wait --for=condition=Available",
    ]
    calls = cluster.calls()
    assert calls[3] == [
        "get",
        "deployments",
        "-A",
        "--field-selector=metadata.name=kueue-controller-manager",
        "-o",
        "json",
    ]
    assert calls[5] == ["get", "crd", CRD["metadata"]["name"], "--ignore-not-found", "-o", "json"]
    # The CRDs alone, taking over the fields another manager (Kueue's installer) owns.
    assert calls[6][:3] == ["apply", "--server-side", "--force-conflicts"]
    assert calls[7] == [
        "wait",
        "--for=condition=Established",
        f"crd/{CRD['metadata']['name']}",
        "--timeout=7s",
    ]
    assert not any("--force-conflicts" in calls[i] for i in (8, 10, 11))
    assert calls[9] == [
        "-n",
        "queuescope-system",
        "rollout",
        "status",
        "deployment/queuescope-controller",
        "--timeout=7s",
    ]
    assert calls[12] == [
        "wait",
        "--for=condition=Available",
        f"apiservice/{V1BETA1}",
        f"apiservice/{V1BETA2}",
        "--timeout=7s",
    ]
    crds, app, webhooks, apiservices = cluster.stdin_kinds("apply")
    assert crds == ["CustomResourceDefinition"]
    assert app == [o["kind"] for o in APP if o["kind"] not in LATE]
    # After the rollout: the webhooks fail closed, so never before our server runs.
    assert webhooks == ["MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"]
    assert apiservices == ["APIService", "APIService"]


def _webhook_config(service: dict[str, Any], groups: list[str]) -> dict[str, Any]:
    rule = {"apiGroups": groups, "resources": ["*"], "operations": ["CREATE"]}
    webhook = {"name": "w.example", "clientConfig": {"service": service}, "rules": [rule]}
    return _obj(
        "ValidatingWebhookConfiguration",
        "kueue-validating-webhook-configuration",
        webhooks=[webhook],
    )


@pytest.mark.parametrize(
    ("objects", "named"),
    [
        (
            {
                WEBHOOKS: [
                    _webhook_config(
                        {"namespace": "kueue-system", "name": "kueue-webhook-service"},
                        ["kueue.x-k8s.io"],
                    )
                ]
            },
            "ValidatingWebhookConfiguration kueue-validating-webhook-configuration",
        ),
        (
            {
                "deployments": [
                    _obj(
                        "Deployment",
                        "kueue-controller-manager",
                        "kueue-system",
                        spec={"replicas": 1},
                    )
                ]
            },
            "Deployment kueue-system/kueue-controller-manager has 1 replicas",
        ),
    ],
)
def test_install_refuses_while_kueue_runs(
    cluster: Cluster, capsys: pytest.CaptureFixture[str], objects: Any, named: str
) -> None:
    cluster.set("objects", objects)
    assert cluster.run("install") == 1
    err = capsys.readouterr().err
    assert named in err and "Kueue is still running: stop it first" in err
    assert not any(v.startswith("apply") for v in cluster.verbs())


def test_install_passes_a_stopped_kueue_and_other_webhooks(cluster: Cluster) -> None:
    cluster.set(
        "objects",
        {
            WEBHOOKS: [
                _webhook_config({"namespace": "other", "name": "jobs"}, ["batch"]),
                _webhook_config(OURS, ["kueue.x-k8s.io"]),
            ],
            "deployments": [
                _obj("Deployment", "kueue-controller-manager", "kueue-system", spec={"replicas": 0})
            ],
        },
    )
    assert cluster.run("install") == 0


def test_install_refuses_a_stored_version_it_does_not_serve(
    cluster: Cluster, capsys: pytest.CaptureFixture[str]
) -> None:
    live = {**CRD, "status": {"storedVersions": ["v1alpha1", "v1beta1"]}}
    cluster.set("objects", {"crd": [live]})
    assert cluster.run("install") == 1
    err = capsys.readouterr().err
    assert "clusterqueues.kueue.x-k8s.io has objects stored as v1alpha1" in err
    assert not any(v.startswith("apply") for v in cluster.verbs())
    cluster.set("objects", {"crd": [{**CRD, "status": {"storedVersions": ["v1beta1", "v1beta2"]}}]})
    assert cluster.run("install") == 0


def test_install_generates_certificates_once(cluster: Cluster) -> None:
    assert cluster.run("install") == 0
    files = {p.name for p in cluster.certs.iterdir()}
    assert {"ca.crt", "ca.key", "tls.crt", "tls.key", "apiservice-cabundle.yaml"} <= files
    ca = (cluster.certs / "ca.crt").read_bytes()
    # A second run (an upgrade, a retry) keeps the CA that the live caBundle trusts.
    cluster.set("apiservices", {V1BETA1: _apiservice(V1BETA1), V1BETA2: _apiservice(V1BETA2)})
    assert cluster.run("install") == 0
    assert (cluster.certs / "ca.crt").read_bytes() == ca


@pytest.mark.parametrize(
    ("service", "named"),
    [
        ({"name": "kueue-visibility-server", "namespace": "kueue-system"}, "kueue-system"),
        ({"name": "queuescope-visibility", "namespace": "elsewhere"}, "elsewhere"),
        (None, "kube-apiserver itself"),
    ],
)
def test_install_refuses_next_to_another_visibility_server(
    cluster: Cluster, capsys: pytest.CaptureFixture[str], service: Any, named: str
) -> None:
    cluster.set("apiservices", {V1BETA2: _apiservice(V1BETA2, service)})
    assert cluster.run("install") == 1
    err = capsys.readouterr().err
    assert f"APIService {V1BETA2} points at" in err and named in err
    assert "must not be installed next to it" in err
    assert cluster.verbs() == ["get apiservice", "get apiservice"]  # nothing applied
    assert not cluster.certs.exists()


def test_a_failed_rollout_never_registers_the_apiservices(
    cluster: Cluster, capsys: pytest.CaptureFixture[str]
) -> None:
    cluster.set("fail", {"-n queuescope-system rollout status": 1})
    assert cluster.run("install") == 1
    assert "rollout status deployment/queuescope-controller" in capsys.readouterr().err
    assert [k for k in cluster.stdin_kinds("apply") if set(LATE) & set(k)] == []
    assert cluster.verbs()[-1] == "-n queuescope-system"


def test_a_partial_certificate_folder_is_not_replaced(
    cluster: Cluster, capsys: pytest.CaptureFixture[str]
) -> None:
    cluster.certs.mkdir()
    (cluster.certs / "ca.key").write_text("a CA key someone still needs")
    assert cluster.run("install") == 1
    assert "already holds ca.key" in capsys.readouterr().err
    assert (cluster.certs / "ca.key").read_text() == "a CA key someone still needs"
    assert "apply --server-side" not in cluster.verbs()


def test_uninstall_deletes_the_apiservices_first_and_keeps_the_crds(cluster: Cluster) -> None:
    assert cluster.run("install") == 0
    cluster.set("apiservices", {V1BETA1: _apiservice(V1BETA1), V1BETA2: _apiservice(V1BETA2)})
    cluster.set("calls", [])
    assert cluster.run("uninstall") == 0
    calls = cluster.calls()
    deletes = [c for c in calls if c[0] == "delete"]
    # The webhooks first: with the server gone they would refuse Kueue writes.
    assert deletes[0] == [
        "delete",
        "mutatingwebhookconfiguration/queuescope-mutating",
        "validatingwebhookconfiguration/queuescope-validating",
        "--ignore-not-found",
    ]
    assert deletes[1] == ["delete", "apiservice", V1BETA1, V1BETA2, "--ignore-not-found"]
    assert deletes[2] == ["delete", "--ignore-not-found", "--timeout=7s", "-f", "-"]
    assert len(deletes) == 3  # no CRDs
    assert ["kustomize", str(cluster.manifests / "overlays" / "app-only")] in calls
    (kinds,) = cluster.stdin_kinds("delete --ignore-not-found")
    assert kinds == [o["kind"] for o in APP]
    assert "CustomResourceDefinition" not in kinds


def test_uninstall_deletes_the_crds_only_when_asked(cluster: Cluster) -> None:
    assert cluster.run("uninstall", "--delete-crds") == 0
    last = cluster.calls()[-1]
    assert last == [
        "delete",
        "--ignore-not-found",
        "--timeout=7s",
        "-k",
        str(cluster.manifests / "crds"),
    ]


def test_uninstall_leaves_a_foreign_apiservice_alone(
    cluster: Cluster, capsys: pytest.CaptureFixture[str]
) -> None:
    kueue = {"name": "kueue-visibility-server", "namespace": "kueue-system"}
    cluster.set(
        "apiservices", {V1BETA1: _apiservice(V1BETA1, kueue), V1BETA2: _apiservice(V1BETA2)}
    )
    assert cluster.run("uninstall") == 0
    assert ["delete", "apiservice", V1BETA2, "--ignore-not-found"] in cluster.calls()
    assert V1BETA1 in cluster.read()["apiservices"]
    assert f"leaving APIService {V1BETA1} alone" in capsys.readouterr().err


def test_uninstall_without_the_certificates_renders_a_copy(cluster: Cluster) -> None:
    assert cluster.run("uninstall") == 0
    (kustomize,) = [c for c in cluster.calls() if c[0] == "kustomize"]
    rendered = Path(kustomize[1])
    assert rendered.name == "app-only"
    assert cluster.manifests not in rendered.parents  # a temporary copy...
    assert not rendered.exists()  # ...removed afterwards
    assert not cluster.certs.exists()  # and nothing written into the checkout


def test_a_failing_apiservice_delete_stops_the_uninstall(cluster: Cluster) -> None:
    cluster.set("apiservices", {V1BETA2: _apiservice(V1BETA2)})
    cluster.set("fail", {"delete apiservice": 1})
    assert cluster.run("uninstall") == 1
    assert cluster.verbs()[-1] == "delete apiservice"  # the app is still there, serving


def test_bad_arguments_exit_2(cluster: Cluster) -> None:
    with pytest.raises(SystemExit) as exit_:
        deploy.main(["install", "--kubectl", "", "--manifests", str(cluster.manifests)])
    assert exit_.value.code == 2


@pytest.mark.parametrize(
    ("target", "variables", "expected"),
    [
        ("deploy", [], ["install", "--kubectl", "kubectl"]),
        ("undeploy", [], ["uninstall", "--kubectl", "kubectl"]),
        ("undeploy", ["DELETE_CRDS=yes"], ["uninstall", "--kubectl", "kubectl", "--delete-crds"]),
        ("undeploy", ["DELETE_CRDS=no"], ["uninstall", "--kubectl", "kubectl"]),
        (
            "deploy",
            ["KUBECTL=kubectl --context prod"],
            ["install", "--kubectl", "kubectl --context prod"],
        ),
    ],
)
def test_make_targets_call_the_script(
    target: str, variables: list[str], expected: list[str]
) -> None:
    result = subprocess.run(
        ["make", "-n", target, *variables], cwd=REPO, capture_output=True, text=True, check=True
    )
    (line,) = [line for line in result.stdout.splitlines() if "tools/deploy.py" in line]
    words = shlex.split(line)
    assert words[words.index("tools/deploy.py") + 1 :] == expected
