"""Server, TLS files and bearer token of the common kubeconfigs, read without kubernetes-asyncio.

Importing kubernetes-asyncio at all loads its whole generated client (every API and
model class): about 35 MiB of the server's resident memory, whatever is used of it
(docs/benchmarks.md, "Cluster memory, sixth round"). Cluster mode needs from it only the
server, the TLS files and the token, so the kubeconfigs that say no more than that (a
token or a token file, client certificate and key, the cluster's CA, `insecure-skip-tls-verify`,
`tls-server-name`) and the in-cluster configuration are read here, giving what
kubernetes-asyncio's loaders would put in its `Configuration`. Anything else (exec
plugins, auth providers, basic auth, a proxy, several files, a malformed or incomplete
file) gets None, and the caller goes through kubernetes-asyncio as before, which also
reports the errors.
"""

from __future__ import annotations

import atexit
import base64
import binascii
import contextlib
import os
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final

import yaml

BEARER: Final = "BearerToken"  # kubernetes-asyncio's name for the token's setting
TOKEN_FILE: Final = "/var/run/secrets/kubernetes.io/serviceaccount/token"
CA_FILE: Final = "/var/run/secrets/kubernetes.io/serviceaccount/ca.crt"

_CLUSTER_KEYS: Final = frozenset(
    {
        "server",
        "certificate-authority",
        "certificate-authority-data",
        "insecure-skip-tls-verify",
        "tls-server-name",
    }
)
_USER_KEYS: Final = frozenset(
    {
        "token",
        "tokenFile",
        "client-certificate",
        "client-certificate-data",
        "client-key",
        "client-key-data",
    }
)


@dataclass(slots=True)
class Endpoint:
    """The fields of kubernetes-asyncio's `Configuration` that `KubeRest` reads, with the
    same names and meanings; `api_key[BEARER]` holds the whole header value."""

    host: str
    ssl_ca_cert: str | None = None
    cert_file: str | None = None
    key_file: str | None = None
    verify_ssl: bool = True
    tls_server_name: str | None = None
    api_key: dict[str, str] = field(default_factory=dict)
    api_key_prefix: dict[str, str] = field(default_factory=dict)


class PlainApi:
    """What `KubeRest` needs of an `ApiClient`: the endpoint and the auth header."""

    def __init__(self, configuration: Endpoint) -> None:
        self.configuration = configuration

    async def update_params_for_auth(
        self, headers: dict[str, Any], queries: list[Any], auth_settings: list[str]
    ) -> None:
        cfg = self.configuration
        if BEARER not in auth_settings or BEARER not in cfg.api_key:
            return
        key, prefix = cfg.api_key[BEARER], cfg.api_key_prefix.get(BEARER)
        headers["authorization"] = f"{prefix} {key}" if prefix and key else key or None

    async def close(self) -> None:
        """Nothing to close: the connections are `KubeRest`'s."""


def in_cluster(
    environ: Mapping[str, str], token_file: str = TOKEN_FILE, ca_file: str = CA_FILE
) -> Endpoint | None:
    """A pod's ServiceAccount configuration; None when any part is missing or empty."""
    host, port = environ.get("KUBERNETES_SERVICE_HOST"), environ.get("KUBERNETES_SERVICE_PORT")
    if not host or not port:
        return None
    token = _read(token_file)
    if not token or not _read(ca_file):
        return None
    address = f"[{host}]:{port}" if ":" in host or "%" in host else f"{host}:{port}"
    return Endpoint(f"https://{address}", ssl_ca_cert=ca_file, api_key={BEARER: f"Bearer {token}"})


def from_kubeconfig(path: str) -> Endpoint | None:
    """The current context of one kubeconfig file, when it needs nothing more than this
    module reads; else None."""
    try:
        with open(path, encoding="utf-8") as f:
            doc = yaml.safe_load(f)
        return _current(doc, os.path.abspath(os.path.dirname(path)))
    except (OSError, UnicodeDecodeError, yaml.YAMLError, binascii.Error, ValueError):
        return None


def _current(doc: Any, base: str) -> Endpoint | None:
    if not isinstance(doc, dict) or not isinstance(doc.get("current-context"), str):
        return None
    context = _named(doc.get("contexts"), doc["current-context"], "context")
    if context is None or not isinstance(context.get("user"), str):
        return None
    cluster = _named(doc.get("clusters"), context.get("cluster"), "cluster")
    user = _named(doc.get("users"), context["user"], "user")
    if cluster is None or user is None or not isinstance(cluster.get("server"), str):
        return None
    if not cluster.keys() <= _CLUSTER_KEYS or not user.keys() <= _USER_KEYS:
        return None
    endpoint = Endpoint(cluster["server"].rstrip("/"))
    token = user["token"] if "token" in user else _file_text(user.get("tokenFile"), base)
    if token is not None:
        if not isinstance(token, str) or not token:
            return None
        endpoint.api_key[BEARER] = f"Bearer {token}"
    if endpoint.host.startswith("https"):
        endpoint.ssl_ca_cert = _as_file(cluster, "certificate-authority", base)
        endpoint.cert_file = _as_file(user, "client-certificate", base)
        endpoint.key_file = _as_file(user, "client-key", base)
    if "insecure-skip-tls-verify" in cluster:
        endpoint.verify_ssl = not cluster["insecure-skip-tls-verify"]
    if "tls-server-name" in cluster:
        endpoint.tls_server_name = cluster["tls-server-name"]
    return endpoint


def _named(items: Any, name: Any, key: str) -> dict[str, Any] | None:
    """The one entry of a kubeconfig list called `name`, its `key` part."""
    if not isinstance(items, list) or not all(isinstance(i, dict) and "name" in i for i in items):
        return None
    found = [i for i in items if i["name"] == name]
    if len(found) != 1 or not isinstance(found[0].get(key), dict):
        return None
    entry: dict[str, Any] = found[0][key]
    return entry


def _file_text(name: Any, base: str) -> str | None:
    if name is None:
        return None
    if not isinstance(name, str):
        raise ValueError("not a file name")
    with open(os.path.normpath(os.path.join(base, name)), encoding="utf-8") as f:
        return f.read()


def _as_file(part: dict[str, Any], key: str, base: str) -> str | None:
    """A file holding `key`: its `-data` form (base64) written to a temporary file, else
    the file it names, relative to the kubeconfig's folder; it must exist."""
    data = part.get(f"{key}-data")
    if f"{key}-data" in part:
        if not isinstance(data, str) or not data:
            raise ValueError("empty data")
        return _temp_file(base64.standard_b64decode(data.encode()))
    if key not in part:
        return None
    if not isinstance(part[key], str):
        raise ValueError("not a file name")
    name = os.path.normpath(os.path.join(base, part[key]))
    if not os.path.isfile(name):
        raise ValueError("no such file")
    return name


_temp_files: dict[bytes, str] = {}


def _temp_file(content: bytes) -> str:
    """One file per distinct content for the life of the process (credentials are read
    again every minute), removed at exit."""
    if content not in _temp_files:
        if not _temp_files:
            atexit.register(_remove_temp_files)
        fd, name = tempfile.mkstemp()
        with os.fdopen(fd, "wb") as f:
            f.write(content)
        _temp_files[content] = name
    return _temp_files[content]


def _remove_temp_files() -> None:
    for name in _temp_files.values():
        with contextlib.suppress(OSError):
            os.remove(name)
    _temp_files.clear()


def _read(path: str) -> str | None:
    try:
        with open(path, encoding="utf-8") as f:
            return f.read()
    except OSError:
        return None


__all__ = ["BEARER", "Endpoint", "PlainApi", "from_kubeconfig", "in_cluster"]
