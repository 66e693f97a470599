"""`kubectl pending what-if -f job.yaml`: what the next scheduling cycle would do with a
Job or Workload, before it is created (docs/visibility-api.md#what-if).

It POSTs the file's object to the LocalQueue's `whatif` subresource through the API
server of the user's kubeconfig, with the user's own credentials, and prints the answer:
the decision, the position the workload would take, its flavors, borrowing, victims,
blockers and start estimate. The LocalQueue is `--localqueue`, else the object's own
(the Job's `kueue.x-k8s.io/queue-name` label, the Workload's `spec.queueName`); the
namespace is `-n`, else the object's, else the context's.

Exit codes: 0 answered, 1 the server refused or failed, 2 unusable arguments or file.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Final
from urllib.parse import quote

import yaml
from kubernetes_asyncio import client, config

from queuescope import kubectl_pending as listing
from scheduler.kubeapi.client import KubeRest
from scheduler.kubeapi.errors import KubeError

QUEUE_LABEL: Final = "kueue.x-k8s.io/queue-name"
Json = dict[str, Any]

_DECISIONS: Final = {
    "Admitted": "the next scheduling cycle would admit it now",
    "Preempting": "the next scheduling cycle would evict workloads to make room, then admit it",
    "Pending": "it would be examined now but would not fit",
    "Queued": "workloads ahead of it would be examined first",
    "Inadmissible": "it would not be queued as it is",
}


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="kubectl pending what-if",
        description="Ask what the next scheduling cycle would do with a Job or Workload "
        "if it were created now. Nothing is created.",
    )
    p.add_argument("-f", "--filename", required=True, help="a YAML or JSON file, or - for stdin")
    p.add_argument(
        "-n", "--namespace", default="", help="default: the object's, else the context's"
    )
    p.add_argument("-q", "--localqueue", default="", help="default: the object's queue name")
    p.add_argument("-o", "--output", choices=("text", "json", "yaml"), default="text")
    p.add_argument("--kubeconfig", default=None, help="default: $KUBECONFIG or ~/.kube/config")
    p.add_argument("--context", default=None)
    p.add_argument("--api-version", default="v1beta2", choices=("v1beta2", "v1beta1"))
    return p


def read_object(filename: str) -> Json:
    """The one object of the file; PluginError (exit 2) naming the file otherwise."""
    try:
        text = sys.stdin.read() if filename == "-" else Path(filename).read_text()
        documents = [d for d in yaml.safe_load_all(text) if d is not None]
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as err:
        raise listing.PluginError(f"{filename}: {err}", listing.EXIT_USAGE) from None
    if len(documents) != 1 or not isinstance(documents[0], dict):
        raise listing.PluginError(
            f"{filename}: expected one Job or Workload object, found {len(documents)} documents",
            listing.EXIT_USAGE,
        )
    return documents[0]


def queue_of(obj: Json) -> str:
    meta = obj.get("metadata") or {}
    if obj.get("kind") == "Job":
        return str((meta.get("labels") or {}).get(QUEUE_LABEL) or "")
    return str((obj.get("spec") or {}).get("queueName") or "")


def path_of(api_version: str, namespace: str, local_queue: str) -> str:
    return (
        f"/apis/{listing.GROUP}/{api_version}/namespaces/{quote(namespace, safe='')}"
        f"/localqueues/{quote(local_queue, safe='')}/whatif"
    )


# -- rendering -------------------------------------------------------------------------


def _flavors(assignment: Json) -> str:
    parts = []
    for ps in assignment.get("podSets") or []:
        usage = ps.get("resourceUsage") or {}
        resources = ", ".join(
            f"{r}={flavor} ({usage.get(r, '?')})" for r, flavor in sorted(ps["flavors"].items())
        )
        parts.append(f"{ps['name']} x{ps['count']}: {resources}")
    return "; ".join(parts)


def _victims(preemption: Json) -> str:
    shown = [
        f"{v['namespace']}/{v['name']} (priority {v['priority']}, {v['reason']})"
        for v in preemption.get("victims") or []
    ]
    hidden = int(preemption.get("hiddenVictims") or 0)
    if hidden:
        shown.append(f"{hidden} more in namespaces you may not list")
    return "; ".join(shown)


def _start(estimate: Json) -> str:
    if estimate["p50"] == estimate["madeAt"] == estimate["high"]:
        return f"now ({estimate['method']})"
    return (
        f"about {estimate['p50']}, between {estimate['low']} and {estimate['high']} "
        f"({estimate['method']})"
    )


def text(answer: Json) -> str:
    wl = answer["workload"]
    cq = wl.get("clusterQueueName", "")
    lines = [
        ("Workload", f"{wl['namespace']}/{wl['name']} (priority {wl['priority']})"),
        ("LocalQueue", f"{wl['localQueueName']}" + (f" -> ClusterQueue {cq}" if cq else "")),
        ("Decision", f"{answer['decision']}: {_DECISIONS.get(answer['decision'], '')}"),
    ]
    if "positionInClusterQueue" in answer:
        lines.append(
            (
                "Position",
                f"{answer['positionInClusterQueue']} of {answer['pendingWorkloadsInClusterQueue']}"
                f" in the ClusterQueue, {answer['positionInLocalQueue']} of "
                f"{answer['pendingWorkloadsInLocalQueue']} in the LocalQueue (0-based)",
            )
        )
    if answer.get("assignment", {}).get("podSets"):
        lines.append(("Flavors", _flavors(answer["assignment"])))
    if answer.get("borrowing"):
        borrowed = ", ".join(
            f"{b['amount']} {b['resource']} of flavor {b['flavor']}" for b in answer["borrowing"]
        )
        lines.append(("Borrowing", f"{borrowed} from the cohort"))
    if "preemption" in answer:
        lines.append(("Preempts", _victims(answer["preemption"])))
    reason = answer.get("pendingReason") or {}
    if reason.get("message"):
        lines.append(("Why", reason["message"]))
    if "estimatedStart" in answer:
        lines.append(("Start", _start(answer["estimatedStart"])))
    width = max(len(k) for k, _ in lines) + 1
    return "\n".join(f"{k + ':':<{width}} {v}" for k, v in lines)


def render(output: str, answer: Json) -> str:
    if output == "json":
        return json.dumps(answer, indent=2)
    if output == "yaml":
        return yaml.safe_dump(answer, sort_keys=False).rstrip("\n")
    return text(answer)


def _refusal(err: KubeError) -> listing.PluginError:
    body = err.body if isinstance(err.body, dict) else {}
    message = str(body.get("message") or err)
    causes = (body.get("details") or {}).get("causes") or []
    fields = [f"  {c.get('field', '')}: {c.get('message', '')}" for c in causes if c.get("field")]
    return listing.PluginError("\n".join([message, *fields]))


async def _run(args: argparse.Namespace) -> str:
    obj = read_object(args.filename)
    namespace = args.namespace or str((obj.get("metadata") or {}).get("namespace") or "")
    local_queue = args.localqueue or queue_of(obj)
    if not local_queue:
        raise listing.PluginError(
            "no LocalQueue: pass --localqueue, or set the Job's "
            f"{QUEUE_LABEL} label or the Workload's spec.queueName",
            listing.EXIT_USAGE,
        )
    configuration = client.Configuration()
    try:
        await config.load_kube_config(
            config_file=args.kubeconfig, context=args.context, client_configuration=configuration
        )
    except Exception as err:
        raise listing.PluginError(
            f"cannot load the kubeconfig: {err}", listing.EXIT_USAGE
        ) from None
    namespace = namespace or listing.context_namespace(args.kubeconfig, args.context)
    async with client.ApiClient(configuration) as api:
        rest = KubeRest(api)
        try:
            answer = await rest.create(path_of(args.api_version, namespace, local_queue), obj)
        except KubeError as err:
            raise _refusal(err) from None
        finally:
            await rest.close()
    return render(args.output, answer)


def main(argv: Sequence[str]) -> int:
    args = parser().parse_args(argv)
    listing.default_kubeconfig(args)
    try:
        print(asyncio.run(_run(args)))
    except listing.PluginError as err:
        print(f"error: {err}", file=sys.stderr)
        return err.code
    return listing.EXIT_OK
