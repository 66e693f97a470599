"""`kubectl pending`: the caller's pending workloads in a namespace, with positions,
estimated wait and why each one waits (docs/dashboard.md).

Installed as the console script `kubectl-pending`, so kubectl finds it on PATH. It
talks to the API server of the user's kubeconfig (`--kubeconfig`, `KUBECONFIG`,
`--context`) like any kubectl call, with the user's own credentials:

1. the LocalQueues of the namespace: `--localqueue` names, else the
   `localqueues.kueue.x-k8s.io` list of the namespace; a server without that resource
   (the embedded server, reached directly) is asked for its dashboard overview;
2. each LocalQueue's pending workloads, through the visibility API
   (`localqueues/{name}/pendingworkloads`): positions in the LocalQueue and ClusterQueue;
3. each workload's [EXT] `pendingposition`: why it waits, its estimated wait and the
   forecast worker's start band, `estimatedStart` (left blank when the caller may not
   read them; the START column counts from now, `-o wide` adds the band and how old
   the forecast is).

Exit codes: 0 done, 1 the server refused or failed, 2 unusable arguments.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
from collections.abc import Awaitable, Callable, Sequence
from datetime import UTC, datetime
from typing import Any, Final
from urllib.parse import quote

import yaml
from kubernetes_asyncio import client, config

from scheduler.kubeapi.client import KubeRest
from scheduler.kubeapi.errors import KubeError

EXIT_OK: Final = 0
EXIT_FAILURE: Final = 1
EXIT_USAGE: Final = 2
GROUP: Final = "visibility.kueue.x-k8s.io"
LOCAL_QUEUES: Final = "/apis/kueue.x-k8s.io/v1beta1/namespaces/{ns}/localqueues"
DASHBOARD_OVERVIEW: Final = "/dashboard/api/v1/overview"
CONCURRENCY: Final = 8

Json = dict[str, Any]
Fetch = Callable[[str], Awaitable[Json]]


class PluginError(Exception):
    """A failure to report on stderr, with the exit code to use."""

    def __init__(self, message: str, code: int = EXIT_FAILURE) -> None:
        super().__init__(message)
        self.code = code


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="kubectl pending",
        description="List your pending workloads in a namespace: positions in their "
        "LocalQueue and ClusterQueue, estimated wait and why they wait.",
        epilog="kubectl pending what-if -f FILE: what the next scheduling cycle would do "
        "with a Job or Workload before you create it (see what-if --help).",
    )
    p.add_argument("-n", "--namespace", default="", help="default: the context's namespace")
    p.add_argument(
        "-q",
        "--localqueue",
        action="append",
        default=[],
        metavar="NAME",
        help="only these LocalQueues (repeatable); default: every LocalQueue you may list",
    )
    p.add_argument("-o", "--output", choices=("table", "wide", "json", "yaml"), default="table")
    p.add_argument("--kubeconfig", default=None, help="default: $KUBECONFIG or ~/.kube/config")
    p.add_argument("--context", default=None)
    p.add_argument("--api-version", default="v1beta2", choices=("v1beta2", "v1beta1"))
    p.add_argument(
        "--limit", type=int, default=1000, help="at most this many per LocalQueue (default 1000)"
    )
    return p


# -- gathering ------------------------------------------------------------------------------


async def local_queue_names(fetch: Fetch, namespace: str) -> list[str]:
    """The namespace's LocalQueues: Kueue's list, or the embedded server's overview."""
    try:
        listing = await fetch(LOCAL_QUEUES.format(ns=quote(namespace, safe="")))
        return sorted(item["metadata"]["name"] for item in listing.get("items", []))
    except KubeError as err:
        if err.status not in (403, 404):
            raise PluginError(
                f"cannot list LocalQueues in namespace {namespace!r}: {err}"
            ) from None
        refused = err
    # Not served here, or not for this caller: the embedded server, reached directly,
    # serves only the visibility API (and authorizes before routing, hence 403).
    try:
        overview = await fetch(f"{DASHBOARD_OVERVIEW}?namespace={quote(namespace, safe='')}")
    except KubeError:
        raise PluginError(
            f"cannot list LocalQueues in namespace {namespace!r}: {refused}; "
            "name them with --localqueue"
        ) from None
    return sorted(q["name"] for q in overview.get("localQueues", []) if q["namespace"] == namespace)


async def gather(
    fetch: Fetch, namespace: str, queues: Sequence[str], version: str, limit: int
) -> list[Json]:
    """Every pending workload of `queues`, with its position lookup folded in."""
    base = f"/apis/{GROUP}/{version}/namespaces/{quote(namespace, safe='')}"
    rows: list[Json] = []
    for queue in queues:
        try:
            summary = await fetch(
                f"{base}/localqueues/{quote(queue, safe='')}/pendingworkloads?limit={limit}"
            )
        except KubeError as err:
            if err.status == 404 and len(queues) > 1:
                # Listed by Kueue, not (yet) known to the visibility server: go on.
                print(f"warning: LocalQueue {namespace}/{queue}: {err}", file=sys.stderr)
                continue
            raise PluginError(f"LocalQueue {namespace}/{queue}: {err}") from None
        for item in summary.get("items", []):
            meta = item["metadata"]
            rows.append(
                {
                    "namespace": meta["namespace"],
                    "name": meta["name"],
                    "localQueue": item["localQueueName"],
                    "priority": item["priority"],
                    "positionInClusterQueue": item["positionInClusterQueue"],
                    "positionInLocalQueue": item["positionInLocalQueue"],
                    "creationTimestamp": meta.get("creationTimestamp", ""),
                }
            )
    gate = asyncio.Semaphore(CONCURRENCY)

    async def details(row: Json) -> None:
        path = f"{base}/workloads/{quote(row['name'], safe='')}/pendingposition"
        async with gate:
            try:
                found = await fetch(path)
            except KubeError as err:
                if err.status in (403, 404):
                    return  # not allowed to see the details, or admitted meanwhile
                raise PluginError(f"workload {namespace}/{row['name']}: {err}") from None
        if not found.get("pending"):
            return
        row["clusterQueue"] = found.get("clusterQueueName", "")
        for key in ("estimatedWait", "estimatedStart", "whyPending"):
            if key in found:
                row[key] = found[key]

    await asyncio.gather(*(details(row) for row in rows))
    rows.sort(key=lambda r: (r["localQueue"], r["positionInLocalQueue"]))
    return rows


# -- output ---------------------------------------------------------------------------------


def _duration(seconds: float) -> str:
    """kubectl's short style: 45s, 5m, 3h2m, 2d."""
    s = max(0, round(seconds))
    if s < 60:
        return f"{s}s"
    m = s // 60
    if m < 60:
        return f"{m}m"
    h = m // 60
    if h < 48:
        return f"{h}h{m % 60}m" if m % 60 else f"{h}h"
    return f"{h // 24}d"


def _instant(timestamp: str) -> datetime:
    return datetime.strptime(timestamp, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC)


def _age(timestamp: str, now: datetime) -> str:
    if not timestamp:
        return ""
    return _duration((now - _instant(timestamp)).total_seconds())


def _blocker(b: Json) -> str:
    kind = b.get("kind")
    if kind == "Quota":
        return f"{b['resource']} in {b['flavor']}: {b['amount']} more needed"
    if kind == "Capacity":
        return f"{b['resource']} in {b['flavor']}: over the maximum {b['amount']}"
    return str(b.get("message", ""))


def _why(row: Json) -> str:
    why = row.get("whyPending")
    if why is None:
        return "<not tried yet>" if "clusterQueue" in row else "<unknown>"
    blockers = "; ".join(_blocker(b) for b in why.get("blockers", []))
    return f"{why['reason']}: {blockers}" if blockers else str(why["reason"])


def _wait(row: Json, *, wide: bool) -> str:
    wait = row.get("estimatedWait")
    if wait is None:
        return "<unknown>"
    text = f"~{_duration(wait['seconds'])}"
    if wide:
        text += f" ({_duration(wait['lowSeconds'])}-{_duration(wait['highSeconds'])})"
    return text


def _start(row: Json, *, wide: bool, now: datetime) -> str:
    """The forecast start from now (`due` once its median has passed); wide: the band
    and the forecast's age, so an old forecast is never read as a fresh one."""
    start = row.get("estimatedStart")
    if start is None:
        return "<unknown>"

    def until(field: str) -> str:
        seconds = (_instant(start[field]) - now).total_seconds()
        return _duration(seconds) if seconds > 0 else "0s"

    p50 = (_instant(start["p50"]) - now).total_seconds()
    text = f"~{_duration(p50)}" if p50 > 0 else "due"
    if wide:
        text += f" ({until('low')}-{until('high')}, {_age(start['madeAt'], now)} old)"
    return text


def table(rows: Sequence[Json], *, wide: bool, now: datetime) -> str:
    header = [
        "NAME",
        "LOCALQUEUE",
        "POS(LQ)",
        "POS(CQ)",
        "PRIORITY",
        "AGE",
        "WAIT",
        "START",
        "REASON",
    ]
    if wide:
        header.insert(2, "CLUSTERQUEUE")
    lines = [header]
    for r in rows:
        cells = [
            r["name"],
            r["localQueue"],
            str(r["positionInLocalQueue"]),
            str(r["positionInClusterQueue"]),
            str(r["priority"]),
            _age(r["creationTimestamp"], now),
            _wait(r, wide=wide),
            _start(r, wide=wide, now=now),
            _why(r),
        ]
        if wide:
            cells.insert(2, r.get("clusterQueue", ""))
        lines.append(cells)
    widths = [max(len(line[i]) for line in lines) for i in range(len(header) - 1)]
    return "\n".join(
        "   ".join(cell.ljust(w) for cell, w in zip(line[:-1], widths, strict=True))
        + "   "
        + line[-1]
        for line in lines
    )


def document(namespace: str, rows: Sequence[Json]) -> Json:
    return {"kind": "PendingWorkloadList", "namespace": namespace, "items": list(rows)}


def render(output: str, namespace: str, rows: Sequence[Json], now: datetime) -> str:
    if output == "json":
        return json.dumps(document(namespace, rows), indent=2)
    if output == "yaml":
        return yaml.safe_dump(document(namespace, rows), sort_keys=False).rstrip("\n")
    if not rows:
        return f"No pending workloads in namespace {namespace}."
    return table(rows, wide=output == "wide", now=now)


# -- the command ----------------------------------------------------------------------------


def context_namespace(kubeconfig: str | None, context: str | None) -> str:
    try:
        contexts, active = config.list_kube_config_contexts(config_file=kubeconfig)
    except Exception:
        return "default"
    chosen = next((c for c in contexts if c.get("name") == context), None) if context else active
    return str(((chosen or {}).get("context") or {}).get("namespace") or "default")


async def _run(args: argparse.Namespace) -> str:
    configuration = client.Configuration()
    try:
        await config.load_kube_config(
            config_file=args.kubeconfig,
            context=args.context,
            client_configuration=configuration,
        )
    except Exception as err:
        raise PluginError(f"cannot load the kubeconfig: {err}", EXIT_USAGE) from None
    namespace = args.namespace or context_namespace(args.kubeconfig, args.context)
    async with client.ApiClient(configuration) as api:
        rest = KubeRest(api)
        try:
            fetch = rest.get
            queues = sorted(set(args.localqueue)) or await local_queue_names(fetch, namespace)
            rows = await gather(fetch, namespace, queues, args.api_version, max(1, args.limit))
        finally:
            await rest.close()
    return render(args.output, namespace, rows, datetime.now(UTC))


def default_kubeconfig(args: argparse.Namespace) -> None:
    if args.kubeconfig is None and os.environ.get("KUBECONFIG"):
        args.kubeconfig = os.environ["KUBECONFIG"].split(os.pathsep)[0]


def main(argv: Sequence[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv[:1] == ["what-if"]:
        # The subcommand's module imports this one, hence the import here.
        from queuescope.kubectl_pending_whatif import main as what_if  # noqa: PLC0415

        return what_if(argv[1:])
    args = parser().parse_args(argv)
    default_kubeconfig(args)
    try:
        print(asyncio.run(_run(args)))
    except PluginError as err:
        print(f"error: {err}", file=sys.stderr)
        return err.code
    return EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
