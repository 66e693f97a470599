"""kubeconfig files with everything embedded (`*-data` fields), so that one file is all
kubectl needs to reach the embedded server (docs/product.md#command-line)."""

from __future__ import annotations

import base64
from typing import Any

import yaml

from visibility_server.tls.authority import CertifiedKey

DEFAULT_CLUSTER_NAME = "queuescope"


def render_kubeconfig(
    *,
    server: str,
    ca_pem: bytes,
    client: CertifiedKey,
    user: str,
    cluster: str = DEFAULT_CLUSTER_NAME,
) -> bytes:
    """A kubeconfig with one cluster, one user and one context `USER@CLUSTER`, current."""
    context = f"{user}@{cluster}"
    doc: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {
                "name": cluster,
                "cluster": {"server": server, "certificate-authority-data": _b64(ca_pem)},
            }
        ],
        "users": [
            {
                "name": user,
                "user": {
                    "client-certificate-data": _b64(client.cert_pem),
                    "client-key-data": _b64(client.key_pem),
                },
            }
        ],
        "contexts": [{"name": context, "context": {"cluster": cluster, "user": user}}],
        "current-context": context,
        "preferences": {},
    }
    text = yaml.safe_dump(doc, sort_keys=False, default_flow_style=False)
    return text.encode()


def kubeconfig_server(data: bytes) -> str | None:
    """The server URL of the current context's cluster, or None if it cannot be told."""
    try:
        doc = yaml.safe_load(data)
    except yaml.YAMLError:
        return None
    if not isinstance(doc, dict):
        return None
    current = doc.get("current-context")
    contexts = [_field(c, "context") for c in _items(doc, "contexts") if c.get("name") == current]
    if not contexts:
        return None
    cluster_name = contexts[0].get("cluster")
    for cluster in _items(doc, "clusters"):
        if cluster.get("name") == cluster_name:
            server = _field(cluster, "cluster").get("server")
            return server if isinstance(server, str) else None
    return None


def _field(item: dict[str, Any], key: str) -> dict[str, Any]:
    value = item.get(key)
    return value if isinstance(value, dict) else {}


def _items(doc: dict[str, Any], key: str) -> list[dict[str, Any]]:
    value = doc.get(key)
    if not isinstance(value, list):
        return []
    return [item for item in value if isinstance(item, dict)]


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")
