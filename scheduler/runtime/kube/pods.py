"""The `pod` integration: single Pods as workloads (docs/cluster.md#plain-pods).

The mutating webhook holds a Pod labelled `kueue.x-k8s.io/queue-name` behind the
scheduling gate `kueue.x-k8s.io/admission`, with the finalizer and the label
`kueue.x-k8s.io/managed`. This controller watches those Pods (by the label) and, as
Kueue's does:

* makes the Pod's Workload (`pod-<name>-<hash>`, owned by the Pod);
* once the Workload is admitted, lifts the gate in one merge patch that also adds the
  assigned flavors' node labels and tolerations and the admission checks' pod set
  updates (a conflict there finishes the Workload `FailedToStart`);
* stops a running Pod whose Workload lost its admission: a `TerminationTarget`
  condition saying why, then a delete (a Pod cannot be suspended);
* finishes the Workload when the Pod succeeds or fails, or `OwnerNotFound` when it is
  deleted, and releases its finalizer once the finish cannot be lost.

Like the Job integration it reads only what the API server holds and runs only on the
leader. A pod group's Pods are reconciled together, as their group (`pod_groups.py`).
"""

from __future__ import annotations

import logging
from datetime import UTC, datetime
from typing import Final

from scheduler.api.base import format_timestamp
from scheduler.api.integrations import PLAIN_PODS, STATEFULSET_FRAMEWORK, Integrations
from scheduler.api.live import decode_live_as
from scheduler.api.plain_pod import (
    ADMISSION_GATE,
    MANAGED_LABEL,
    MANAGED_VALUE,
    POD_FINALIZER,
    TERMINATION_TARGET,
    Pod,
)
from scheduler.api.pod_admission import has_gate, suspending_parent
from scheduler.api.pod_status import ended, phase, ready
from scheduler.api.pod_workload import pod_to_workload
from scheduler.api.raw_object import metadata_of
from scheduler.api.workload import Workload
from scheduler.kubeapi.errors import Json, KubeError
from scheduler.runtime.commands import Finish, PodsReady
from scheduler.runtime.kube.integration import Integration
from scheduler.runtime.kube.leader_io import LeaderIO
from scheduler.runtime.kube.placement import (
    CheckUpdates,
    UpdateConflictError,
    map_patch,
    started_placement,
)
from scheduler.runtime.kube.pod_groups import (
    GROUP_KEY_PREFIX,
    PodGroupReconciler,
    group_of,
    is_group_workload,
)
from scheduler.runtime.kube.priorities import priority_classes
from scheduler.runtime.kube.records import Cached, WorkloadRecord
from scheduler.runtime.kube.resources import PODS, Resource

log = logging.getLogger(__name__)

OWNER_NOT_FOUND: Final = ("OwnerNotFound", "The workload's owner no longer exists")
NO_MATCHING_WORKLOAD: Final = (
    "NoMatchingWorkload",
    "Missing Workload; unable to restore pod templates",
)
NOT_ADMITTED: Final = ("NotAdmitted", "Not admitted by cluster queue")
FAILED_TO_START: Final = "FailedToStart"


def _admitted(workload: WorkloadRecord) -> bool:
    status = workload.status or {}
    return bool(status.get("admission")) and workload.condition("Admitted") is not None


class PodController(Integration):
    def __init__(
        self,
        io: LeaderIO,
        integrations: Integrations = PLAIN_PODS,
        *,
        retry_delay: float = 1.0,
    ) -> None:
        self.groups = PodGroupReconciler(self)
        super().__init__(io, PODS, retry_delay=retry_delay)
        self.integrations = integrations

    # -- events ----------------------------------------------------------------------
    def on_change(self, resource: Resource, new: Cached | None, old: Cached | None) -> None:
        """A group Pod's change is its group's (docs/cluster.md#pod-groups)."""
        if resource.kind == PODS.kind and not isinstance(new, WorkloadRecord):
            pod_new = new if isinstance(new, dict) else None
            pod_old = old if isinstance(old, dict) else None
            touched = self.groups.index.observe(pod_new, pod_old)
            if touched:
                for group in touched:
                    self.enqueue(GROUP_KEY_PREFIX + group)
                return
        super().on_change(resource, new, old)

    def _on_workload(self, record: WorkloadRecord, *, deleted: bool) -> None:
        if is_group_workload(record):
            self.enqueue(GROUP_KEY_PREFIX + record.key)  # named after its group
            return
        super()._on_workload(record, deleted=deleted)

    def mine(self, pod: Json) -> bool:
        """Labelled managed, and a plain Pod only if plain Pods are integrated: with
        `deployment` alone, Kueue's Pod controller skips Pods no parent marked."""
        if (metadata_of(pod).get("labels") or {}).get(MANAGED_LABEL) != MANAGED_VALUE:
            return False
        return self.integrations.plain or bool(suspending_parent(pod))

    def make_workload(self, obj: Json) -> Workload:
        pod = decode_live_as(Pod, obj, source="v1/pods")
        return pod_to_workload(pod, *priority_classes(self.io.store))

    # -- reconcile -------------------------------------------------------------------
    async def reconcile(self, key: str) -> None:
        if key.startswith(GROUP_KEY_PREFIX):
            await self.groups.reconcile(key.removeprefix(GROUP_KEY_PREFIX))
            return
        namespace, _, name = key.partition("/")
        pod = self.io.store.get(PODS, key)
        if pod is None:
            self._finish_orphans(namespace, name)
        elif self.mine(pod):
            group = group_of(pod)
            if group is not None:
                self.enqueue(GROUP_KEY_PREFIX + group)
            elif suspending_parent(pod) != STATEFULSET_FRAMEWORK:
                await self._reconcile_single(pod)
            # else: a StatefulSet's Pod not yet in its group (statefulsets.py marks it)

    async def _reconcile_single(self, pod: Json) -> None:
        meta = metadata_of(pod)
        workload = self.workload_of(pod)
        if meta.get("deletionTimestamp"):
            # Deleted at any stage: the Workload is finished, the Pod let go at once.
            if workload is not None:
                self.finish(workload, *OWNER_NOT_FOUND)
            await self.release(pod)
            return
        if ended(pod):
            await self._ended(pod, workload)
            return
        gated = has_gate(pod)
        if workload is None:
            if gated:
                await self.create_workload(str(meta["namespace"]), str(meta["name"]))
            else:
                await self.stop_unmatched(pod)
            return
        if workload.condition("Finished") is None:
            await self._follow(pod, workload, gated=gated)

    async def _follow(self, pod: Json, workload: WorkloadRecord, *, gated: bool) -> None:
        """A live Pod with a live Workload: start it once admitted, report it ready,
        stop it once the admission is gone; while it waits, its Workload follows its
        queue-name label."""
        if await self.follow_priority_class(pod, workload):
            return
        if _admitted(workload):
            if gated:
                await self.ungate(pod, workload)
            elif ready(pod) and workload.condition("PodsReady") is None:
                core = self.io.engine.scheduler.workload(workload.key)
                if core is not None and not core.conditions.is_true("PodsReady"):
                    self.io.engine.submit(PodsReady(workload.key))
        elif not gated:
            await self.stop_unadmitted(pod, workload)
        else:
            await self.follow_labels(pod, workload)

    async def stop_unadmitted(self, pod: Json, workload: WorkloadRecord) -> None:
        """Stop a running Pod whose Workload holds no admission, saying why."""
        evicted = workload.condition("Evicted")
        if evicted is None:
            await self.stop(pod, *NOT_ADMITTED)
        else:
            reason = f"WorkloadEvictedDueTo{evicted.get('reason', '')}"
            await self.stop(pod, reason, str(evicted.get("message", "")))

    async def stop_unmatched(self, pod: Json) -> None:
        """Stop a running Pod that has no Workload."""
        await self.stop(pod, *NO_MATCHING_WORKLOAD)

    def finish(
        self, workload: WorkloadRecord, reason: str, message: str, *, failed: bool = False
    ) -> bool:
        """Ask the core to finish the Workload; whether it is still to be written."""
        if workload.condition("Finished") is not None:
            return False
        core = self.io.engine.scheduler.workload(workload.key)
        if core is None:
            return False  # the core never took it (undecodable): nothing to wait for
        if not core.finished:
            self.io.engine.submit(Finish(workload.key, failed, reason, message))
        return True

    async def _ended(self, pod: Json, workload: WorkloadRecord | None) -> None:
        """The Pod succeeded or failed: finish its Workload, and once the server holds
        that (the Workload's change brings the Pod back here), release the Pod. A Pod
        its parent marked has no finalizer: its Workload is finished all the same."""
        held = POD_FINALIZER in (metadata_of(pod).get("finalizers") or [])
        if not held and not suspending_parent(pod):
            return  # released already
        if workload is not None:
            ended_as = phase(pod)
            message = str((pod.get("status") or {}).get("message", ""))
            if self.finish(workload, ended_as, message, failed=ended_as == "Failed") or not held:
                return
            self.tell(pod, "FinishedWorkload", f"Workload '{workload.key}' is declared finished")
        await self.release(pod)

    def _finish_orphans(self, namespace: str, pod_name: str) -> None:
        """The Pod is gone without this controller seeing it end (it was not watched,
        or another party released it): its Workload is finished, as Kueue does."""
        for workload in self.io.store.workloads():
            owner = workload.owner(PODS)
            if (
                workload.namespace == namespace
                and owner is not None
                and owner.name == pod_name
                and not is_group_workload(workload)  # its group's to finish
            ):
                self.finish(workload, *OWNER_NOT_FOUND)

    async def ungate(self, pod: Json, workload: WorkloadRecord, pod_set: str = "main") -> None:
        """Lift the admission gate, placing the Pod on the flavors of its pod set (one
        merge patch at the Pod's resourceVersion: kube-apiserver lets a gated Pod's node
        selector grow, and the gate goes in the same write)."""
        meta, spec = metadata_of(pod), pod.get("spec") or {}
        selector: dict[str, str] = dict(spec.get("nodeSelector") or {})
        tolerations: list[Json] = list(spec.get("tolerations") or [])
        labels: dict[str, str] = dict(meta.get("labels") or {})
        annotations: dict[str, str] = dict(meta.get("annotations") or {})
        try:
            updates = started_placement(
                self.io.store,
                workload,
                pod_set,
                self.queue_of(workload),
                CheckUpdates(labels, annotations, selector, tolerations),
            )
        except UpdateConflictError as err:
            # Kueue cannot start such a Pod either; its Workload ends (docs/cluster.md#plain-pods).
            self.stats.errors += 1
            self.finish(workload, FAILED_TO_START, str(err), failed=True)
            return
        gates = [g for g in spec.get("schedulingGates") or [] if g.get("name") != ADMISSION_GATE]
        spec_patch: Json = {"schedulingGates": gates or None}
        node_selector = map_patch(selector, updates.node_selector)
        if node_selector:
            spec_patch["nodeSelector"] = node_selector
        if updates.tolerations != tolerations:
            spec_patch["tolerations"] = updates.tolerations
        meta_patch: Json = {"resourceVersion": meta.get("resourceVersion")}
        for field, current, wanted in (
            ("labels", labels, updates.labels),
            ("annotations", annotations, updates.annotations),
        ):
            if current != wanted:
                meta_patch[field] = map_patch(current, wanted)
        await self.io.limiter.acquire()
        result = await self.io.rest.merge_patch(
            PODS.item(str(meta["name"]), str(meta["namespace"])),
            {"metadata": meta_patch, "spec": spec_patch},
        )
        self.io.store.observe(PODS, result)
        self.stats.started += 1
        cq = ((workload.status or {}).get("admission") or {}).get("clusterQueue", "")
        log.info("event=pod-started pod=%s/%s", meta["namespace"], meta["name"])
        self.tell(result, "Started", f"Admitted by clusterQueue {cq}")

    async def stop(self, pod: Json, reason: str, message: str) -> None:
        """A running Pod cannot be suspended: say why in its `TerminationTarget`
        condition, then delete it (its finalizer holds it until its Workload is
        finished)."""
        meta = metadata_of(pod)
        name, namespace = str(meta["name"]), str(meta["namespace"])
        condition = {
            "type": TERMINATION_TARGET,
            "status": "True",
            "reason": reason,
            "message": message,
            "lastTransitionTime": format_timestamp(datetime.now(UTC)),
        }
        await self.io.limiter.acquire()
        try:
            await self.io.rest.strategic_merge_patch(
                PODS.item(name, namespace, "status"), {"status": {"conditions": [condition]}}
            )
            await self.io.limiter.acquire()
            await self.io.rest.delete(
                PODS.item(name, namespace), {"preconditions": {"uid": meta.get("uid")}}
            )
        except KubeError as err:
            if err.status != 404:
                raise
            return
        self.stats.stopped += 1
        log.info("event=pod-stopped pod=%s/%s reason=%s", namespace, name, reason)
        self.tell(pod, "Stopped", message)

    async def release(self, pod: Json) -> None:
        """Remove the integration's finalizer (at the Pod's resourceVersion: a
        finalizer another party added meanwhile is kept)."""
        meta = metadata_of(pod)
        finalizers = list(meta.get("finalizers") or [])
        if POD_FINALIZER not in finalizers:
            return
        kept = [f for f in finalizers if f != POD_FINALIZER]
        await self.io.limiter.acquire()
        try:
            result = await self.io.rest.merge_patch(
                PODS.item(str(meta["name"]), str(meta["namespace"])),
                {
                    "metadata": {
                        "resourceVersion": meta.get("resourceVersion"),
                        "finalizers": kept or None,
                    }
                },
            )
        except KubeError as err:
            if err.status != 404:
                raise
            return
        self.stats.released += 1
        if not metadata_of(result).get("deletionTimestamp"):
            # A Pod being deleted goes once released: its last state would outlive the
            # watch's deletion if observed after it.
            self.io.store.observe(PODS, result)
