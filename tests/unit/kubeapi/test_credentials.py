"""The kubeconfigs read without kubernetes-asyncio give what its loaders give, field by
field and header by header; every other kubeconfig is left to them (None)."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import pytest
from kubernetes_asyncio import client, config

from scheduler.kubeapi.credentials import BEARER, Endpoint, PlainApi, from_kubeconfig, in_cluster

FIELDS = ("host", "ssl_ca_cert", "cert_file", "key_file", "verify_ssl", "tls_server_name")


def write(path: Path, cluster: dict[str, Any], user: dict[str, Any] | None) -> str:
    doc: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "c", "cluster": cluster}],
        "users": [] if user is None else [{"name": "u", "user": user}],
        "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u", "namespace": "n"}}],
        "current-context": "x",
    }
    path.write_text(json.dumps(doc))
    return str(path)


def content(name: str | None) -> bytes | None:
    return None if name is None else Path(name).read_bytes()


async def library(path: str) -> Any:
    target = client.Configuration()
    await config.load_kube_config(config_file=path, client_configuration=target)
    return target


async def header(api: Any) -> dict[str, Any]:
    headers: dict[str, Any] = {}
    await api.update_params_for_auth(headers, [], [BEARER])
    return headers


async def assert_same(ours: Endpoint | None, theirs: Any) -> None:
    """Same fields (files compared by content: -data is written to temporary files by
    both) and the same header sent."""
    assert ours is not None
    for name in FIELDS:
        mine, lib = getattr(ours, name), getattr(theirs, name)
        if name.endswith(("cert", "_file")):
            assert content(mine) == content(lib), name
        else:
            assert mine == lib, name
    # The library's ApiClient loads the CA at once (these are not real PEM files): its
    # header is made from the same credentials over plain HTTP.
    credentials = client.Configuration(host="http://unused")
    credentials.api_key, credentials.api_key_prefix = theirs.api_key, theirs.api_key_prefix
    assert await header(PlainApi(ours)) == await header(client.ApiClient(credentials))


def b64(data: bytes) -> str:
    return base64.standard_b64encode(data).decode()


@pytest.fixture
def pem_files(tmp_path: Path) -> Path:
    (tmp_path / "ca.crt").write_bytes(b"ca-pem")
    (tmp_path / "tls.crt").write_bytes(b"client-pem")
    (tmp_path / "tls.key").write_bytes(b"key-pem")
    (tmp_path / "token").write_text("from-file\n")
    return tmp_path


CASES: dict[str, tuple[dict[str, Any], dict[str, Any]]] = {
    "token, CA as data": (
        {"server": "https://127.0.0.1:6443/", "certificate-authority-data": b64(b"ca-pem")},
        {"token": "abc"},
    ),
    "client certificate as files, relative": (
        {"server": "https://kube:6443", "certificate-authority": "ca.crt"},
        {"client-certificate": "tls.crt", "client-key": "tls.key"},
    ),
    "client certificate as data, token file": (
        {"server": "https://kube", "tls-server-name": "api.internal"},
        {
            "client-certificate-data": b64(b"c"),
            "client-key-data": b64(b"k"),
            "tokenFile": "token",
        },
    ),
    "insecure, plain http": (
        {"server": "http://127.0.0.1:8080", "insecure-skip-tls-verify": True},
        {"token": "t"},
    ),
    "no credentials": ({"server": "https://kube", "certificate-authority": "ca.crt"}, {}),
}


@pytest.mark.parametrize("case", CASES)
async def test_a_common_kubeconfig_reads_as_kubernetes_asyncio_reads_it(
    pem_files: Path, case: str
) -> None:
    cluster, user = CASES[case]
    path = write(pem_files / "kubeconfig", cluster, user)
    await assert_same(from_kubeconfig(path), await library(path))


@pytest.mark.parametrize(
    ("cluster", "user"),
    [
        ({"server": "https://k"}, {"exec": {"command": "get-token", "apiVersion": "v1"}}),
        ({"server": "https://k"}, {"auth-provider": {"name": "oidc", "config": {}}}),
        ({"server": "https://k"}, {"username": "a", "password": "b"}),
        ({"server": "https://k", "proxy-url": "http://proxy"}, {"token": "t"}),
        ({"server": "https://k", "certificate-authority": "missing.crt"}, {"token": "t"}),
        ({"server": "https://k"}, {"token": ""}),
        ({"server": "https://k"}, None),  # the context's user is not listed
        ({}, {"token": "t"}),  # no server
    ],
)
def test_anything_else_is_left_to_kubernetes_asyncio(
    tmp_path: Path, cluster: dict[str, Any], user: dict[str, Any] | None
) -> None:
    assert from_kubeconfig(write(tmp_path / "kubeconfig", cluster, user)) is None


def test_a_file_that_is_no_kubeconfig_is_left_to_kubernetes_asyncio(tmp_path: Path) -> None:
    (tmp_path / "k").write_text("[not: a mapping")
    assert from_kubeconfig(str(tmp_path / "k")) is None
    (tmp_path / "k").write_text(json.dumps({"current-context": "x", "contexts": []}))
    assert from_kubeconfig(str(tmp_path / "k")) is None


@pytest.mark.parametrize("host", ["10.0.0.1", "fd00::1"])
async def test_in_cluster_reads_as_kubernetes_asyncio_reads_it(pem_files: Path, host: str) -> None:
    environ = {"KUBERNETES_SERVICE_HOST": host, "KUBERNETES_SERVICE_PORT": "443"}
    token, ca = str(pem_files / "token"), str(pem_files / "ca.crt")
    theirs = client.Configuration()
    config.load_incluster_config(
        client_configuration=theirs, token_filename=token, cert_filename=ca, environ=environ
    )
    await assert_same(in_cluster(environ, token, ca), theirs)


def test_in_cluster_without_its_parts_is_left_to_kubernetes_asyncio(pem_files: Path) -> None:
    token, ca = str(pem_files / "token"), str(pem_files / "ca.crt")
    environ = {"KUBERNETES_SERVICE_HOST": "10.0.0.1", "KUBERNETES_SERVICE_PORT": "443"}
    assert in_cluster({**environ, "KUBERNETES_SERVICE_PORT": ""}, token, ca) is None
    assert in_cluster(environ, str(pem_files / "missing"), ca) is None
    (pem_files / "empty").write_text("")
    assert in_cluster(environ, token, str(pem_files / "empty")) is None


async def test_the_header_carries_a_prefix_when_one_is_set() -> None:
    endpoint = Endpoint("https://k", api_key={BEARER: "abc"}, api_key_prefix={BEARER: "Bearer"})
    assert await header(PlainApi(endpoint)) == {"authorization": "Bearer abc"}
    assert await header(PlainApi(Endpoint("https://k"))) == {}
