"""`queuescope certs …` through the parser and `run_certs`, in temporary folders."""

from __future__ import annotations

import argparse
import base64
import shutil
import socket
import stat
from datetime import timedelta
from pathlib import Path

import pytest
import yaml
from cryptography import x509
from cryptography.hazmat.primitives.asymmetric import rsa

from queuescope.certs_cli import add_certs_parser, run_certs
from tests.unit.visibility_server.tls.support import (
    NOW,
    common_names,
    dns_sans,
    fingerprint,
    load_cert,
    organizations,
)
from visibility_server.certs import (
    create_ca,
    ensure_state_dir,
    issued_by,
    refresh_ca_bundle_patch,
    write_certified_key,
)
from visibility_server.webhooks.conversion import CONVERTED_CRDS
from visibility_server.webhooks.registrations import WEBHOOK_CONFIGURATIONS

APISERVICES = ["v1beta1.visibility.kueue.x-k8s.io", "v1beta2.visibility.kueue.x-k8s.io"]


def parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="queuescope")
    add_certs_parser(parser.add_subparsers(dest="command", required=True))
    return parser.parse_args(argv)


def run(*argv: str, days: int = 0) -> int:
    return run_certs(parse(["certs", *argv]), now=NOW + timedelta(days=days))


def bundles(directory: Path) -> dict[str, list[x509.Certificate]]:
    """The APIServices' bundles; the CRDs' conversion webhook and every admission webhook
    must carry the same one (so a rotation reaches them all at once)."""
    everything = list(yaml.safe_load_all((directory / "apiservice-cabundle.yaml").read_text()))
    docs = everything[: len(APISERVICES)]
    crds = everything[len(APISERVICES) : len(APISERVICES) + len(CONVERTED_CRDS)]
    admission = everything[len(APISERVICES) + len(CONVERTED_CRDS) :]
    assert [d["metadata"]["name"] for d in docs] == APISERVICES
    assert all(d["apiVersion"] == "apiregistration.k8s.io/v1" for d in docs)
    assert all(d["kind"] == "APIService" for d in docs)
    assert [d["metadata"]["name"] for d in crds] == list(CONVERTED_CRDS)
    for crd in crds:
        assert crd["kind"] == "CustomResourceDefinition"
        webhook = crd["spec"]["conversion"]["webhook"]["clientConfig"]
        assert webhook["caBundle"] == docs[0]["spec"]["caBundle"]
    assert [(d["kind"], d["metadata"]["name"]) for d in admission] == [
        (kind, name) for kind, name, _ in WEBHOOK_CONFIGURATIONS
    ]
    for config, (_, _, names) in zip(admission, WEBHOOK_CONFIGURATIONS, strict=True):
        assert [w["name"] for w in config["webhooks"]] == list(names)
        for webhook in config["webhooks"]:
            assert webhook["clientConfig"]["caBundle"] == docs[0]["spec"]["caBundle"]
    return {
        d["metadata"]["name"]: x509.load_pem_x509_certificates(
            base64.b64decode(d["spec"]["caBundle"])
        )
        for d in docs
    }


@pytest.fixture
def out(tmp_path: Path) -> Path:
    directory = tmp_path / "certs"
    assert run("generate", "--out", str(directory)) == 0
    return directory


def test_generate_then_verify(out: Path, capsys: pytest.CaptureFixture[str]) -> None:
    for name in ("ca.key", "tls.key"):
        assert stat.S_IMODE((out / name).stat().st_mode) == 0o600
    ca = load_cert(out / "ca.crt")
    assert issued_by(load_cert(out / "tls.crt"), ca)
    patch = (out / "apiservice-cabundle.yaml").read_text()
    encoded = base64.b64encode((out / "ca.crt").read_bytes()).decode()
    webhooks = sum(len(names) for _, _, names in WEBHOOK_CONFIGURATIONS)
    assert patch.count(encoded) == 2 + len(CONVERTED_CRDS) + webhooks, (
        "caBundle is base64(ca.crt) on both APIServices, every converting CRD and every "
        "admission webhook"
    )
    assert bundles(out) == {name: [ca] for name in APISERVICES}
    capsys.readouterr()
    assert run("verify", "--dir", str(out)) == 0
    captured = capsys.readouterr()
    assert captured.out.startswith(f"ok: {out / 'tls.crt'} is valid for DNS:")
    assert captured.err == ""


def test_generate_for_another_service(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "c"
    assert run("generate", "--namespace", "batch", "--service", "vis", "--out", str(out)) == 0
    assert "vis.batch.svc" in dns_sans(load_cert(out / "tls.crt"))
    assert run("verify", "--dir", str(out), "--namespace", "batch", "--service", "vis") == 0
    capsys.readouterr()
    assert run("verify", "--dir", str(out)) == 1
    err = capsys.readouterr().err
    assert "no SAN DNS:queuescope-visibility.queuescope-system.svc" in err


def test_generate_rsa(tmp_path: Path) -> None:
    out = tmp_path / "rsa"
    assert run("generate", "--out", str(out), "--key-type", "rsa-2048") == 0
    key = load_cert(out / "tls.crt").public_key()
    assert isinstance(key, rsa.RSAPublicKey) and key.key_size == 2048
    assert isinstance(load_cert(out / "ca.crt").public_key(), rsa.RSAPublicKey)
    assert run("verify", "--dir", str(out)) == 0
    # `rotate` keeps the key type it finds.
    assert run("rotate", "--dir", str(out)) == 0
    assert isinstance(load_cert(out / "tls.crt").public_key(), rsa.RSAPublicKey)


def test_a_tampered_key_fails_verify(out: Path, capsys: pytest.CaptureFixture[str]) -> None:
    stranger = create_ca(now=NOW)
    (out / "tls.key").write_bytes(stranger.key_pem)
    capsys.readouterr()
    assert run("verify", "--dir", str(out)) == 1
    assert "tls.key is not the private key of" in capsys.readouterr().err


def test_an_expired_certificate_fails_verify(out: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert run("verify", "--dir", str(out), days=400) == 1
    assert "expired at" in capsys.readouterr().err


def test_a_foreign_serving_certificate_fails_verify(
    out: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    other = out.parent / "other"
    assert run("generate", "--out", str(other)) == 0
    shutil.copy(other / "tls.crt", out / "tls.crt")
    shutil.copy(other / "tls.key", out / "tls.key")
    capsys.readouterr()
    assert run("verify", "--dir", str(out)) == 1
    err = capsys.readouterr().err
    assert "tls.crt is not signed by" in err
    assert "does not trust tls.crt" in err


def test_a_missing_file_fails_verify(out: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (out / "tls.key").unlink()
    capsys.readouterr()
    assert run("verify", "--dir", str(out)) == 1
    assert "tls.key: no such file" in capsys.readouterr().err


def test_verify_with_a_missing_kubeconfig_is_unusable_input(
    out: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    capsys.readouterr()
    assert run("verify", "--dir", str(out), "--kubeconfig", str(out / "nope")) == 2
    assert capsys.readouterr().err == f"error: {out / 'nope'}: no such file\n"


def test_verify_with_a_broken_kubeconfig_is_unusable_input(
    out: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    kubeconfig = out.parent / "kubeconfig"
    kubeconfig.write_text("apiVersion: v1\nkind: Config\nclusters: []\n")
    capsys.readouterr()
    assert run("verify", "--dir", str(out), "--kubeconfig", str(kubeconfig)) == 2
    assert f"error: {kubeconfig}: not a usable kubeconfig" in capsys.readouterr().err


def test_verify_with_an_unreachable_cluster_fails(
    out: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with socket.socket() as probe:  # a port nothing listens on once closed
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    kubeconfig = out.parent / "kubeconfig"
    kubeconfig.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "c", "cluster": {"server": f"https://127.0.0.1:{port}"}}],
                "users": [{"name": "u", "user": {"token": "t"}}],
                "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}],
                "current-context": "x",
            }
        )
    )
    capsys.readouterr()
    assert run("verify", "--dir", str(out), "--kubeconfig", str(kubeconfig)) == 1
    captured = capsys.readouterr()
    assert captured.err.startswith("error: cannot reach kube-apiserver"), captured.err
    assert captured.out == ""


def test_rotate_keeps_the_ca_and_changes_the_serving_certificate(out: Path) -> None:
    ca_before = (out / "ca.crt").read_bytes()
    patch_before = (out / "apiservice-cabundle.yaml").read_bytes()
    tls_before = load_cert(out / "tls.crt")
    assert run("rotate", "--dir", str(out), days=30) == 0
    tls_after = load_cert(out / "tls.crt")
    assert (out / "ca.crt").read_bytes() == ca_before
    assert (out / "apiservice-cabundle.yaml").read_bytes() == patch_before
    assert fingerprint(tls_after) != fingerprint(tls_before)
    assert tls_after.serial_number != tls_before.serial_number
    assert set(dns_sans(tls_after)) == set(dns_sans(tls_before))
    assert issued_by(tls_after, load_cert(out / "ca.crt"))
    assert run("verify", "--dir", str(out), days=30) == 0


def test_rotate_ca_begin_then_finish(out: Path, capsys: pytest.CaptureFixture[str]) -> None:
    old_ca = load_cert(out / "ca.crt")
    tls_before = (out / "tls.crt").read_bytes()

    assert run("rotate-ca", "begin", "--dir", str(out), days=1) == 0
    new_ca = load_cert(out / "ca.crt")
    assert fingerprint(new_ca) != fingerprint(old_ca)
    assert load_cert(out / "ca-previous.crt") == old_ca
    assert stat.S_IMODE((out / "ca-previous.key").stat().st_mode) == 0o600
    assert (out / "tls.crt").read_bytes() == tls_before
    assert bundles(out) == {name: [old_ca, new_ca] for name in APISERVICES}
    capsys.readouterr()
    assert run("verify", "--dir", str(out), days=1) == 0
    assert "CA rotation in progress" in capsys.readouterr().err

    assert run("rotate-ca", "finish", "--dir", str(out), days=2) == 0
    assert issued_by(load_cert(out / "tls.crt"), new_ca)
    assert bundles(out) == {name: [new_ca] for name in APISERVICES}
    assert not (out / "ca-previous.crt").exists()
    assert not (out / "ca-previous.key").exists()
    assert run("verify", "--dir", str(out), days=2) == 0


def test_rotate_during_a_ca_rotation_issues_from_the_new_ca(out: Path) -> None:
    assert run("rotate-ca", "begin", "--dir", str(out)) == 0
    new_ca = load_cert(out / "ca.crt")
    assert run("rotate", "--dir", str(out)) == 0
    rolled = (out / "tls.crt").read_bytes()
    assert issued_by(load_cert(out / "tls.crt"), new_ca)
    assert run("verify", "--dir", str(out)) == 0, "the old+new bundle trusts it"
    assert run("rotate-ca", "finish", "--dir", str(out)) == 0
    assert (out / "tls.crt").read_bytes() == rolled, "finish keeps an already rolled cert"


def test_rotation_state_conflicts_fail(out: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert run("rotate-ca", "finish", "--dir", str(out)) == 1
    assert "no CA rotation in progress" in capsys.readouterr().err
    assert run("rotate-ca", "begin", "--dir", str(out)) == 0
    assert run("rotate-ca", "begin", "--dir", str(out)) == 1
    assert "already in progress" in capsys.readouterr().err


def test_generate_refuses_to_overwrite(out: Path, capsys: pytest.CaptureFixture[str]) -> None:
    ca_before = (out / "ca.crt").read_bytes()
    capsys.readouterr()
    assert run("generate", "--out", str(out)) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--force" in err
    assert (out / "ca.crt").read_bytes() == ca_before
    assert run("generate", "--out", str(out), "--force") == 0
    assert (out / "ca.crt").read_bytes() != ca_before


@pytest.mark.parametrize(
    "argv",
    [
        ["generate", "--out", "{tmp}/x", "--namespace", "Not_A_Label"],
        ["generate", "--out", "{tmp}/file"],
        ["rotate", "--dir", "{tmp}/missing"],
        ["verify", "--dir", "{tmp}/missing"],
        ["rotate-ca", "begin", "--dir", "{tmp}"],
        ["client", "--state-dir", "{tmp}", "--user", "alice"],
    ],
)
def test_bad_input_exits_2_with_one_message(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str]
) -> None:
    (tmp_path / "file").write_text("")
    assert run(*(a.replace("{tmp}", str(tmp_path)) for a in argv)) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.startswith("error: ") and captured.err.count("\n") == 1


def test_rotate_on_a_tls_crt_without_a_service_san_needs_names(tmp_path: Path) -> None:
    ca = create_ca(now=NOW)
    write_certified_key(ca, tmp_path / "ca.crt", tmp_path / "ca.key")
    write_certified_key(ca, tmp_path / "tls.crt", tmp_path / "tls.key")  # no SANs at all
    assert run("rotate", "--dir", str(tmp_path)) == 2
    argv = ["rotate", "--dir", str(tmp_path), "--namespace", "ns", "--service", "svc"]
    assert run(*argv) == 0
    assert "svc.ns.svc" in dns_sans(load_cert(tmp_path / "tls.crt"))


def test_client_prints_the_kubeconfig_path(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    state = ensure_state_dir(tmp_path / "state", now=NOW)
    argv = ["client", "--state-dir", str(state.root), "--user", "alice"]
    assert run(*argv, "--group", "team-a-devs", "--group", "qa") == 0
    path = Path(capsys.readouterr().out.strip())
    assert path == state.user_kubeconfig("alice") and path.exists()
    cert = load_cert(state.user_cert("alice"))
    assert common_names(cert) == ["alice"]
    assert organizations(cert) == ["team-a-devs", "qa"]


def test_certs_needs_a_command() -> None:
    with pytest.raises(SystemExit) as info:
        parse(["certs"])
    assert info.value.code == 2


def test_a_patch_made_before_the_webhook_gets_the_crds_with_the_same_bundle(
    out: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    patch = out / "apiservice-cabundle.yaml"
    apiservices_only = [
        d for d in yaml.safe_load_all(patch.read_text()) if d["kind"] == "APIService"
    ]
    patch.write_text(yaml.safe_dump_all(apiservices_only))
    capsys.readouterr()
    run("verify", "--dir", str(out))
    err = capsys.readouterr().err
    assert "sets no webhook caBundle for " in err
    for missing in ("clusterqueues.kueue.x-k8s.io", "queuescope-validating", "queuescope-mutating"):
        assert missing in err
    before = bundles_of_apiservices(patch)
    assert refresh_ca_bundle_patch(out) is True
    assert bundles(out) == before
    assert refresh_ca_bundle_patch(out) is False  # already complete: left alone


def bundles_of_apiservices(patch: Path) -> dict[str, list[x509.Certificate]]:
    return {
        d["metadata"]["name"]: x509.load_pem_x509_certificates(
            base64.b64decode(d["spec"]["caBundle"])
        )
        for d in yaml.safe_load_all(patch.read_text())
        if d["kind"] == "APIService"
    }
