"""What the integrations of kinds that wait suspended (`spec.suspend`) share: batch/v1
Jobs (`jobs.py`) and JobSets (`jobsets.py`), as Kueue's generic job reconciler serves
both (docs/cluster.md#jobsets).

An object labelled `kueue.x-k8s.io/queue-name` gets a Workload that it owns, one pod set
per pod template; it stays suspended until its Workload is admitted, is unsuspended with
each pod set's placement (the node selectors and tolerations of the assigned flavors,
Kueue's admission labels and the pod set updates its admission checks asked for,
docs/scheduling.md#admission-checks) written into its pod templates, reports `PodsReady`,
is suspended again with its templates restored when the Workload loses its admission
(preemption, eviction), and finishes its Workload when it ends.

The controller reads only what the API server holds (its objects and Workloads): an
object runs because an admission was *written*, never because the core decided one that
a crash could lose. Signals go to the engine as commands. Only the leader runs it.
"""

from __future__ import annotations

import logging
from abc import abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from scheduler.api import raw_object as raw
from scheduler.api.job import QUEUE_NAME_LABEL
from scheduler.kubeapi.errors import Json, KubeError
from scheduler.runtime.commands import Finish, PodsReady, SetReclaimable
from scheduler.runtime.kube.integration import Integration, generation
from scheduler.runtime.kube.leader_io import LeaderIO
from scheduler.runtime.kube.placement import (
    CheckUpdates,
    UpdateConflictError,
    started_placement,
)
from scheduler.runtime.kube.records import Cached, TemplateBase, WorkloadRecord
from scheduler.runtime.kube.resources import WORKLOADS, Resource, object_key

log = logging.getLogger(__name__)

# Kueue's words for an object stopped because its Workload no longer matches it, and for
# that Workload's deletion (docs/cluster.md#a-running-job-edited).
NO_MATCHING_WORKLOAD = (
    "No matching Workload; restoring pod templates according to existent Workload"
)
DELETED = "DeletedWorkload"


def admitted(workload: WorkloadRecord) -> bool:
    status = workload.status or {}
    return bool(status.get("admission")) and workload.condition("Admitted") is not None


def template_fields(template: Mapping[str, Any]) -> CheckUpdates:
    """What a pod template holds of what the integration writes."""
    meta, pod = raw.mapping(template.get("metadata")), raw.mapping(template.get("spec"))
    return CheckUpdates(
        labels=dict(raw.mapping(meta.get("labels"))),
        annotations=dict(raw.mapping(meta.get("annotations"))),
        node_selector=dict(raw.mapping(pod.get("nodeSelector"))),
        tolerations=list(pod.get("tolerations") or []),
    )


def _recorded(base: TemplateBase) -> CheckUpdates:
    return CheckUpdates(
        labels=dict(base.labels),
        annotations=dict(base.annotations),
        node_selector=dict(base.node_selector),
        tolerations=list(base.tolerations),
    )


@dataclass(frozen=True, slots=True)
class Change:
    """What to write to an object: `spec.suspend` and, with the Workload it is started on
    (or restored to), what each pod template holds of `templates` (in pod set order)."""

    suspend: bool
    workload: WorkloadRecord | None = None
    templates: list[CheckUpdates] | None = None


def running_counts(workload: Json) -> list[int]:
    """The pod counts an admitted Workload runs with: its admission's (a partial admission
    lowers them), else its pod sets'."""
    spec_counts = [
        raw.integer(raw.mapping(p).get("count"), 1)
        for p in raw.mapping(workload.get("spec")).get("podSets") or []
    ]
    admission = raw.mapping(raw.mapping(workload.get("status")).get("admission"))
    assigned = admission.get("podSetAssignments") or []
    return [
        raw.integer(raw.mapping(a).get("count"), count)
        for a, count in zip(assigned, spec_counts, strict=False)
    ] or spec_counts


class SuspendableController(Integration):
    """The flow of a kind that waits suspended; its subclass says how to read and write
    one (the hooks below)."""

    def __init__(self, io: LeaderIO, resource: Resource, *, retry_delay: float = 1.0) -> None:
        super().__init__(io, resource, retry_delay=retry_delay)
        # The uids of admitted Workloads found not to match their running object, on
        # their way out (_replace), and of those whose deletion is asked for, until the
        # watch shows them gone (a new one gets the same name); the leader's memory.
        self._not_matching: set[str] = set()
        self._deleting: set[str] = set()

    def on_change(self, resource: Resource, new: Cached | None, old: Cached | None) -> None:
        super().on_change(resource, new, old)
        if new is None and isinstance(old, WorkloadRecord):
            self._not_matching.discard(old.uid)
            self._deleting.discard(old.uid)

    # -- what a kind says ------------------------------------------------------------
    @abstractmethod
    def pod_templates(self, obj: Json) -> Sequence[Mapping[str, Any]]:
        """The (slim) object's pod templates, in pod set order."""

    @abstractmethod
    def ended(self, obj: Json) -> tuple[bool, bool]:
        """(finished, failed)."""

    @abstractmethod
    def pods_ready(self, obj: Json) -> bool:
        """Are its pods ready, as Kueue's PodsReady counts them?"""

    def reclaimable(self, obj: Json) -> dict[str, int] | None:
        """Pods per pod set whose quota goes back while it runs (None: never)."""
        return None

    def managed(self, obj: Json) -> bool:
        """Is the object this integration's to queue? (Its labels name a queue.)"""
        return QUEUE_NAME_LABEL in raw.labels_of(obj)

    @abstractmethod
    async def write(self, obj: Json, change: Change) -> Json:
        """Write the change; the object as written."""

    # -- reconcile -------------------------------------------------------------------
    async def reconcile(self, key: str) -> None:
        namespace, _, name = key.partition("/")
        obj = self.io.store.get(self.resource, key)
        if obj is None:
            await self._delete_orphans(namespace, name)
            return
        if not self.managed(obj):
            return
        workload = self.workload_of(obj)
        suspended = bool(raw.mapping(obj.get("spec")).get("suspend", False))
        finished, failed = self.ended(obj)
        if workload is None:
            if finished:
                return
            if not suspended:
                await self.set_suspended(obj, True, None, why="missing workload")
            await self.create_workload(namespace, name)
            return
        wl_key = workload.key
        core = self.io.engine.scheduler.workload(wl_key)
        if finished:
            if workload.condition("Finished") is None and core is not None and not core.finished:
                self.io.engine.submit(Finish(wl_key, failed=failed))
            return
        await self._follow(obj, workload, suspended=suspended)

    async def _follow(self, obj: Json, workload: WorkloadRecord, *, suspended: bool) -> None:
        """A live object with a live Workload: start it once admitted, report its pods
        ready, stop it once the admission is gone and put its templates back; while it
        waits, its Workload follows its queue-name label."""
        wl_key = workload.key
        core = self.io.engine.scheduler.workload(wl_key)
        if await self.follow_priority_class(obj, workload):
            return
        if admitted(workload):
            if workload.uid in self._not_matching:
                await self._replace(obj, workload, suspended=suspended)
                return
            if suspended:
                await self.set_suspended(obj, False, workload)
                return
            if core is None or await self._count_changed(obj, workload):
                return
            if (
                self.pods_ready(obj)
                and workload.condition("PodsReady") is None
                and not core.conditions.is_true("PodsReady")
            ):
                self.io.engine.submit(PodsReady(wl_key))
            reclaimable = self.reclaimable(obj)
            if reclaimable is not None and reclaimable != dict(core.reclaimable):
                counts = tuple(sorted(reclaimable.items()))
                self.io.engine.submit(SetReclaimable(wl_key, counts))
        elif not suspended:
            # The template of a running Job is immutable: suspend first, restore the
            # template once the Job is suspended (the next reconcile).
            evicted = workload.condition("Evicted")
            why = str(evicted.get("message", "")) if evicted else "Not admitted by cluster queue"
            await self.set_suspended(obj, True, None, why=why)
        elif self._placement_differs(obj, workload):
            await self.set_suspended(obj, True, workload)
        else:
            await self.follow_labels(obj, workload)
            await self.follow_spec(obj, workload)

    async def _count_changed(self, obj: Json, workload: WorkloadRecord) -> bool:
        """A running object edited since its Workload was made or last matched (a new
        `metadata.generation`: of a running Job only `parallelism` may change) whose pod
        counts no longer match its admitted Workload's: Kueue stops it and replaces its
        Workload (docs/cluster.md#a-running-job-edited). True if it is stopped."""
        key = object_key(obj)
        if self.matched.setdefault(key, generation(obj)) == generation(obj):
            return False
        meta = raw.metadata_of(obj)
        whole = await self.whole(str(meta.get("namespace", "")), str(meta.get("name", "")))
        wanted = self.composed(whole) if whole is not None else None
        if whole is None or wanted is None:
            return False
        current = await self.io.rest.get(WORKLOADS.item(workload.name, workload.namespace))
        if running_counts(current) == [p.count for p in wanted.spec.pod_sets]:
            self.matched[key] = generation(whole)
            return False
        log.info("event=%s-not-matching workload=%s", self.queue.what, workload.key)
        self._not_matching.add(workload.uid)
        await self.set_suspended(obj, True, None, why=NO_MATCHING_WORKLOAD)
        return True

    async def _replace(self, obj: Json, workload: WorkloadRecord, *, suspended: bool) -> None:
        """The not matching Workload's way out, one step per reconcile: the object
        suspended, its templates put back as that Workload recorded them, then the
        Workload deleted; the next reconcile makes the one that matches."""
        if not suspended:
            await self.set_suspended(obj, True, None, why=NO_MATCHING_WORKLOAD)
        elif self._placement_differs(obj, workload):
            await self.set_suspended(obj, True, workload)
        elif workload.uid not in self._deleting:
            await self.delete_workload(workload)
            self._deleting.add(workload.uid)
            self.matched.pop(object_key(obj), None)
            self.tell(obj, DELETED, f"Deleted not matching Workload: {workload.key}")

    async def set_suspended(
        self, obj: Json, suspend: bool, workload: WorkloadRecord | None, *, why: str = ""
    ) -> None:
        """Suspend the object (restoring `workload`'s templates, if given) or start it with
        `workload`'s placement; a running object stopped says `why` in its event."""
        templates: list[CheckUpdates] | None = None
        if workload is not None:
            templates = []
            for base in workload.pod_set_templates:
                if suspend:
                    templates.append(_recorded(base))
                    continue
                try:
                    templates.append(
                        started_placement(
                            self.io.store,
                            workload,
                            base.pod_set,
                            self.queue_of(workload),
                            _recorded(base),
                        )
                    )
                except UpdateConflictError as err:
                    # Kueue cannot start such an object either; it stays suspended, said
                    # in the log.
                    self.refused("start-refused", object_key(obj), err)
                    return
        result = await self.write(obj, Change(suspend, workload, templates))
        self.saw_write(obj, result)
        self.io.store.observe(self.resource, result)
        self._report(obj, result, workload, why)

    def _report(self, before: Json, after: Json, workload: WorkloadRecord | None, why: str) -> None:
        """Count, log and record (docs/cluster.md#events) an object suspended or started."""
        suspended = bool(raw.mapping(after.get("spec")).get("suspend"))
        log.info(
            "event=%s-%s %s=%s",
            self.queue.what,
            "suspended" if suspended else "started",
            self.queue.what,
            object_key(after),
        )
        if not suspended:
            self.stats.started += 1
            admission = ((workload.status if workload else None) or {}).get("admission") or {}
            note = f"Admitted by clusterQueue {admission.get('clusterQueue', '')}"
            self.tell(after, "Started", note)
            return
        self.stats.stopped += 1
        if not raw.mapping(before.get("spec")).get("suspend"):
            self.tell(after, "Stopped", why)

    def _placement_differs(self, obj: Json, workload: WorkloadRecord) -> bool:
        """Does a suspended object's template still carry a flavor's node selector or
        tolerations, or a label or annotation an admission check's pod set update added?"""
        for template, base in zip(
            self.pod_templates(obj), workload.pod_set_templates, strict=False
        ):
            current = template_fields(template)
            if current.node_selector != base.node_selector or current.tolerations != list(
                base.tolerations
            ):
                return True
            for now, recorded in (
                (current.labels, base.labels),
                (current.annotations, base.annotations),
            ):
                if any(recorded.get(k) != v for k, v in now.items()):
                    return True
        return False

    async def _delete_orphans(self, namespace: str, name: str) -> None:
        """A deleted object takes its Workload along (the garbage collector would, through
        the owner reference; doing it here also works where none runs)."""
        for workload in self.io.store.workloads():
            if workload.namespace != namespace:
                continue
            owner = workload.owner(self.resource)
            if owner is not None and owner.name == name:
                await self.delete_workload(workload)

    async def delete_workload(self, workload: WorkloadRecord) -> None:
        """Delete the Workload (gone already is fine)."""
        await self.io.limiter.acquire()
        try:
            await self.io.rest.delete(WORKLOADS.item(workload.name, workload.namespace))
        except KubeError as err:
            if err.status != 404:
                raise
