"""Helpers shared by the queuescope command-line tests."""

from __future__ import annotations

import json
from pathlib import Path


def kubeconfig(path: Path, token: str) -> str:
    doc = {
        "apiVersion": "v1",
        "kind": "Config",
        # Nothing is ever sent: loading a kubeconfig does not connect.
        "clusters": [{"name": "c", "cluster": {"server": "https://127.0.0.1:1"}}],
        "users": [{"name": "u", "user": {"token": token}}],
        "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}],
        "current-context": "c",
    }
    path.write_text(json.dumps(doc))
    return str(path)
