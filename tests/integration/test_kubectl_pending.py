"""`kubectl pending` against `serve --embedded` over real TLS, with the kubeconfigs the
server writes: the admin's and a minted namespaced user's. Through `kubectl` itself
(the plugin found on PATH) and as the console script."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from tests.integration.test_embedded_server import (  # noqa: F401 (the fixture)
    Server,
    _kubectl,
    server,
)

PLUGIN = Path(sys.executable).with_name("kubectl-pending")


def pending(
    kubeconfig: Path, *args: str, via_kubectl: bool = False
) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PATH": f"{PLUGIN.parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    if via_kubectl:
        env["KUBECONFIG"] = str(kubeconfig)  # kubectl passes no flags before a plugin name
        argv = [_kubectl(), "pending", *args]
    else:
        env.pop("KUBECONFIG", None)
        argv = [str(PLUGIN), "--kubeconfig", str(kubeconfig), *args]
    return subprocess.run(argv, capture_output=True, text=True, timeout=60, env=env, check=False)


def rows(result: subprocess.CompletedProcess[str]) -> list[dict[str, Any]]:
    assert result.returncode == 0, result.stderr
    doc = json.loads(result.stdout)
    assert doc["kind"] == "PendingWorkloadList"
    return list(doc["items"])


def test_admin_lists_a_namespace(server: Server) -> None:  # noqa: F811
    found = rows(pending(server.state / "kubeconfig", "-n", "team-b", "-o", "json"))
    assert [
        (r["name"], r["localQueue"], r["positionInLocalQueue"], r["positionInClusterQueue"])
        for r in found
    ] == [("b-high", "main", 0, 1), ("b-low", "main", 1, 3)]
    for r in found:
        assert r["clusterQueue"] == "cq-a"
        # 2 cpus asked of a queue with 1: blocked by capacity, named precisely.
        (blocker,) = r["whyPending"]["blockers"]
        assert (blocker["kind"], blocker["flavor"], blocker["resource"], blocker["amount"]) == (
            "Capacity",
            "default",
            "cpu",
            "1",
        )
        assert "estimatedWait" not in r  # nothing was ever admitted: no rate to go by


def test_a_namespaced_user_through_kubectl(server: Server) -> None:  # noqa: F811
    alice = server.state / "users" / "alice.kubeconfig"
    table = pending(alice, "-n", "team-a", via_kubectl=True)
    assert table.returncode == 0, table.stderr
    lines = table.stdout.splitlines()
    assert lines[0].split()[:4] == ["NAME", "LOCALQUEUE", "POS(LQ)", "POS(CQ)"]
    assert [line.split()[:4] for line in lines[1:]] == [
        ["a-high", "main", "0", "0"],
        ["a-low", "main", "1", "2"],
    ]
    assert all("Pending: cpu in default: over the maximum 1" in line for line in lines[1:])
    yaml_out = pending(alice, "-n", "team-a", "-o", "yaml", via_kubectl=True)
    assert yaml_out.returncode == 0 and "kind: PendingWorkloadList" in yaml_out.stdout


def test_other_namespaces_stay_hidden(server: Server) -> None:  # noqa: F811
    alice = server.state / "users" / "alice.kubeconfig"
    # The overview lists no LocalQueue of team-b for alice: nothing to show.
    assert rows(pending(alice, "-n", "team-b", "-o", "json")) == []
    # Naming the LocalQueue gets the API's own refusal.
    named = pending(alice, "-n", "team-b", "-q", "main")
    assert named.returncode == 1
    assert 'User "alice" cannot get resource "localqueues/pendingworkloads"' in named.stderr
