"""Pod groups in cluster mode (docs/cluster.md#pod-groups): the Pods naming one group
are one Workload, made once the group's total count of runnable Pods exists, named
after the group, owned by every Pod, with a pod set per role (`api/pod_group.py`).

The `pod` integration (`pods.py`) routes each group Pod here, under the group's key. As
Kueue's does, the group:

* waits, with an `ErrWorkloadCompose` Warning on its first Pod, while it has fewer
  runnable Pods than its count or its Pods disagree on their queue or their count;
  excess Pods are deleted (`ExcessPodDeleted`), failed ones let go of;
* once admitted, has every gated Pod started on its role's flavors, the Pods that
  replace failed ones included (a failed Pod is let go of once replaced), and gives the
  quota of its succeeded Pods back (`reclaimablePods`) unless it is a serving group;
* is stopped whole when its Workload loses its admission (each running Pod gets its
  `TerminationTarget` condition and is deleted);
* is held out of its queue while it misses Pods (Kueue's `WaitingForReplacementPods`),
  and its Workload is owned by each Pod that joins it;
* has its Workload follow its first Pod's priority class label, and, while it waits,
  its queue-name and maximum execution time labels (not a serving group's);
* is finished when all its Pods succeeded, or none is active and one says it is not to
  be retried (`Pods succeeded: n/count.`); a serving group never finishes;
* lets each Pod go once the Workload is finished, or at once when the Pod is being
  deleted; once none of its Pods is left, the garbage collector deletes the Workload.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Final

from scheduler.api import pod_group
from scheduler.api.decode import ApiError
from scheduler.api.live import decode_live_as
from scheduler.api.plain_pod import POD_FINALIZER, Pod
from scheduler.api.pod_admission import has_gate
from scheduler.api.pod_status import deleting, ended, ready, succeeded
from scheduler.api.pod_workload import pod_group_workload
from scheduler.core.workload import WAITING_FOR_REPLACEMENT_PODS
from scheduler.kubeapi.errors import Json, KubeError
from scheduler.runtime.commands import PodsReady, SetReclaimable, SetWaitingForReplacements
from scheduler.runtime.kube.events import Event, Regarding
from scheduler.runtime.kube.integration import COMPOSE_FAILED
from scheduler.runtime.kube.priorities import priority_classes
from scheduler.runtime.kube.records import WorkloadRecord
from scheduler.runtime.kube.resources import PODS, STATEFULSETS, WORKLOADS, object_key

if TYPE_CHECKING:
    from scheduler.runtime.kube.pods import PodController

log = logging.getLogger(__name__)

# A group's key in the `pod` integration's work queue: no Pod's name has a colon.
GROUP_KEY_PREFIX: Final = "group:"
SUCCEEDED: Final = "Succeeded"
EXCESS_POD_DELETED: Final = "ExcessPodDeleted"
OWNERS_ADDED: Final = "OwnerReferencesAdded"
NAME_CONFLICT: Final = "WorkloadNameConflict"


def group_of(pod: Json) -> str | None:
    """The key (namespace/group) of the group the Pod belongs to, None for none."""
    name = pod_group.group_name(pod)
    if not name:
        return None
    return f"{(pod.get('metadata') or {}).get('namespace', '')}/{name}"


def is_group_workload(record: WorkloadRecord) -> bool:
    """Is the Workload a pod group's? Owned by Pods without the `job-uid` label that a
    single Pod's Workload carries, or a StatefulSet's (docs/cluster.md#statefulsets)."""
    if is_prebuilt(record):
        return True
    return record.job_uid is None and record.owner(PODS) is not None


def is_prebuilt(record: WorkloadRecord) -> bool:
    """Made before its group's Pods, by their owner: a StatefulSet's."""
    return record.owner(STATEFULSETS) is not None


def _created(pod: Json) -> str:
    return str((pod.get("metadata") or {}).get("creationTimestamp") or "")


def _name(pod: Json) -> str:
    return str((pod.get("metadata") or {}).get("name", ""))


class GroupIndex:
    """Which Pods (their keys) the cache holds of each group."""

    def __init__(self) -> None:
        self._members: dict[str, set[str]] = {}

    def observe(self, new: Json | None, old: Json | None) -> set[str]:
        """Note a Pod's change; the groups it touched."""
        touched: set[str] = set()
        for pod, present in ((old, False), (new, True)):
            group = group_of(pod) if pod is not None else None
            if pod is None or group is None:
                continue
            touched.add(group)
            members = self._members.setdefault(group, set())
            if present:
                members.add(object_key(pod))
            else:
                members.discard(object_key(pod))
                if not members:
                    del self._members[group]
        return touched

    def members(self, group: str) -> list[str]:
        return sorted(self._members.get(group, ()))


class PodGroupReconciler:
    """Brings one pod group and its Workload in line, with the `pod` integration's own
    operations on each Pod (start, stop, let go)."""

    def __init__(self, pods: PodController) -> None:
        self.pods = pods
        self.index = GroupIndex()

    async def reconcile(self, group: str) -> None:
        pods = self.pods
        store = pods.io.store
        members = [
            pod
            for key in self.index.members(group)
            if (pod := store.get(PODS, key)) is not None and pods.mine(pod)
        ]
        workload = store.workload(group)
        if workload is not None and not is_group_workload(workload):
            await self._conflict(group, members)
            return
        for pod in members:
            if deleting(pod):
                await pods.release(pod)  # its group goes on without it
        live = [pod for pod in members if not deleting(pod)]
        if workload is None:
            await self._without_workload(group, live)
        elif workload.condition("Finished") is not None:
            for pod in live:
                await pods.release(pod)
        elif live:
            await self._with_workload(live, workload)
        elif is_prebuilt(workload):
            pass  # its owner replaces its Pods and owns its lifecycle (statefulsets.py)
        else:
            # No Pod left: the garbage collector deletes the Workload, its owners gone;
            # until then it is not queued again (it misses every Pod).
            self._missing({}, workload, fast=False)

    # -- without a Workload ------------------------------------------------------------
    async def _without_workload(self, group: str, live: list[Json]) -> None:
        """A running Pod with no Workload is stopped, as a single Pod is; a group of
        waiting Pods gets its Workload once it can."""
        running = [pod for pod in live if not has_gate(pod) and not ended(pod)]
        for pod in running:
            await self.pods.stop_unmatched(pod)
        if any(pod_group.prebuilt_workload(pod) for pod in live):
            return  # its Workload is its owner's to make (docs/cluster.md#statefulsets)
        # Pods that all ended (a finished group whose Workload was deleted) have nothing
        # left to run: no new Workload for them.
        if live and not running and not all(ended(pod) for pod in live):
            await self._compose(group, live)

    async def _compose(self, group: str, live: list[Json]) -> None:
        """Make the group's Workload if it can be made, else say why."""
        pods = self.pods
        first = live[0]
        for pod in live:
            if not pod_group.runnable_or_succeeded(pod):
                await pods.release(pod)  # a failed Pod counts for nothing
        try:
            why = pod_group.compose_error(live)
            total = pod_group.total_count(first)
        except pod_group.TotalCountError as err:
            why, total = str(err), 0
        if why is not None:
            self._warn(first, COMPOSE_FAILED, why)
            return
        runnable = [pod for pod in live if pod_group.runnable_or_succeeded(pod)]
        fast = pod_group.fast_admission(first)
        if not fast and len(runnable) > total:
            runnable = await self._delete_excess(runnable, total)
        wholes: dict[str, Json] = {}
        pairs: list[tuple[str, str]] = []
        for pod in runnable:
            found = await self._role(pod, wholes)
            if found is None:
                return  # deleted meanwhile: the watch brings the group back
            pairs.append((_name(pod), found))
        roles = pod_group.roles(pairs, total=total, fast=fast)
        namespace, _, name = group.partition("/")
        templates: list[tuple[pod_group.Role, Pod]] = []
        for role in roles:
            whole = wholes.get(role.template_pod) or await pods.whole(namespace, role.template_pod)
            if whole is None:
                return
            templates.append((role, decode_live_as(Pod, whole, source="v1/pods")))
        members = [(_name(pod), str(pod["metadata"].get("uid", ""))) for pod in runnable]
        try:
            workload = pod_group_workload(
                name, templates, members, *priority_classes(pods.io.store)
            )
        except ApiError as err:
            self._warn(first, COMPOSE_FAILED, "; ".join(str(e) for e in err.errors) or str(err))
            return
        await pods.submit_workload(workload, first)

    async def _role(self, pod: Json, wholes: dict[str, Json]) -> str | None:
        """The Pod's role: as the webhook stored it, or from its spec, read whole."""
        role = pod_group.pod_role(pod)
        if role is not None:
            return role
        meta = pod.get("metadata") or {}
        whole = await self.pods.whole(str(meta.get("namespace", "")), _name(pod))
        if whole is None:
            return None
        wholes[_name(pod)] = whole
        return pod_group.role_of_whole(whole)

    async def _delete_excess(self, runnable: list[Json], keep: int) -> list[Json]:
        """Delete the Pods beyond the first `keep` (Kueue's order: those holding the
        finalizer, started, older first); the kept ones."""

        def rank(pod: Json) -> tuple[bool, bool, str]:
            finalizers = (pod.get("metadata") or {}).get("finalizers") or []
            return (POD_FINALIZER not in finalizers, has_gate(pod), _created(pod))

        ordered = sorted(runnable, key=rank)
        for pod in ordered[keep:]:
            await self._delete(pod)
        return ordered[:keep]

    async def _delete(self, pod: Json) -> None:
        pods = self.pods
        await pods.release(pod)
        meta = pod.get("metadata") or {}
        await pods.io.limiter.acquire()
        try:
            await pods.io.rest.delete(
                PODS.item(_name(pod), str(meta.get("namespace", ""))),
                {"preconditions": {"uid": meta.get("uid")}},
            )
        except KubeError as err:
            if err.status not in (404, 409):
                raise
            return
        pods.tell(pod, EXCESS_POD_DELETED, "Excess pod deleted")

    async def _conflict(self, group: str, members: list[Json]) -> None:
        """A Workload of the group's name that no group made: the group is never
        admitted, and its Pods that cannot run are let go (so that they can be deleted)."""
        if not members:
            return
        name = group.partition("/")[2]
        self._warn(
            members[0],
            NAME_CONFLICT,
            f'A Workload named "{name}" already exists but is not a pod group workload; '
            "this pod group cannot be admitted",
        )
        for pod in members:
            if not pod_group.runnable_or_succeeded(pod):
                await self.pods.release(pod)

    def _warn(self, pod: Json, reason: str, message: str) -> None:
        self.pods.stats.errors += 1
        log.error(
            "event=pod-group-refused pod=%s reason=%s error=%s", object_key(pod), reason, message
        )
        self.pods.tell(pod, reason, message, warning=True)

    # -- with a Workload ---------------------------------------------------------------
    async def _with_workload(self, live: list[Json], workload: WorkloadRecord) -> None:
        pods = self.pods
        try:
            message = pod_group.finished_message(live)
        except pod_group.TotalCountError:
            message = None  # the webhook refuses such Pods; one stored before waits
        if message is not None:
            pods.finish(workload, SUCCEEDED, message)
            return
        by_role = await self._by_role(live)
        live = await self._drop_excess(live, by_role, workload)
        await self._own(live, workload)
        first = live[0]
        if await pods.follow_priority_class(first, workload):
            return  # the Workload's change brings the group back
        if not pod_group.is_serving(first):
            # While it waits, the Workload follows the first Pod's queue and maximum
            # execution time labels, as Kueue's (a serving group keeps its queue).
            await pods.follow_labels(first, workload)
        status = workload.status or {}
        if workload.condition("Admitted") is not None and status.get("admission"):
            await self._run(live, by_role, workload)
        else:
            await self._hold(live, workload)
        self._missing(by_role, workload, fast=pod_group.fast_admission(first))

    async def _drop_excess(
        self, live: list[Json], by_role: dict[str, list[Json]], workload: WorkloadRecord
    ) -> list[Json]:
        """A role with more runnable Pods than its pod set counts has the extra ones
        deleted (`ExcessPodDeleted`), as Kueue does with a group that grew after its
        Workload was made (a StatefulSet scaled through its scale subresource,
        docs/cluster.md#statefulsets): they would run on quota nobody reserved. The
        Pods kept, in `live`'s order; `by_role` is pruned alike."""
        core = self.pods.io.engine.scheduler.workload(workload.key)
        if core is None:
            return live
        dropped: set[str] = set()
        for pod_set in core.pod_sets:
            members = by_role.get(pod_set.name, [])
            runnable = [pod for pod in members if pod_group.runnable_or_succeeded(pod)]
            if len(runnable) <= pod_set.count:
                continue
            kept = await self._delete_excess(runnable, pod_set.count)
            dropped.update(_name(pod) for pod in runnable if pod not in kept)
            by_role[pod_set.name] = [pod for pod in members if _name(pod) not in dropped]
        return [pod for pod in live if _name(pod) not in dropped] if dropped else live

    async def _by_role(self, live: list[Json]) -> dict[str, list[Json]]:
        by_role: dict[str, list[Json]] = {}
        wholes: dict[str, Json] = {}
        for pod in live:
            role = await self._role(pod, wholes)
            if role is not None:
                by_role.setdefault(role, []).append(pod)
        return by_role

    async def _own(self, live: list[Json], workload: WorkloadRecord) -> None:
        """Every Pod of the group owns its Workload: one that replaced another is added
        (Kueue's `OwnerReferencesAdded`), so that the garbage collector keeps the
        Workload while any member lives."""
        owned = {owner.uid for owner in workload.owners}
        added = [pod for pod in live if str(pod["metadata"].get("uid", "")) not in owned]
        if not added:
            return
        refs = [
            {"apiVersion": o.api_version, "kind": o.kind, "name": o.name, "uid": o.uid}
            for o in workload.owners
        ] + [
            {"apiVersion": "v1", "kind": "Pod", "name": _name(pod), "uid": pod["metadata"]["uid"]}
            for pod in added
        ]
        patch = {
            "metadata": {"resourceVersion": workload.resource_version, "ownerReferences": refs}
        }
        await self.pods.patch_workload(workload, patch)
        regarding = Regarding.of(WORKLOADS, workload.namespace, workload.name, workload.uid)
        note = f"Added {len(added)} owner reference(s)"
        self.pods.io.record(Event(regarding, OWNERS_ADDED, note))

    def _missing(
        self, by_role: dict[str, list[Json]], workload: WorkloadRecord, *, fast: bool
    ) -> None:
        """Tell the core whether the group misses Pods of a role (Kueue's
        `WaitingForReplacementPods`: a group missing Pods is not queued); with fast
        admission only a role without any Pod is missing."""
        core = self.pods.io.engine.scheduler.workload(workload.key)
        if core is None:
            return
        absent = 0
        for pod_set in core.pod_sets:
            runnable = sum(
                1 for pod in by_role.get(pod_set.name, ()) if pod_group.runnable_or_succeeded(pod)
            )
            if fast:
                absent += 1 if pod_set.count > 0 and runnable == 0 else 0
            else:
                absent += max(0, pod_set.count - runnable)
        waiting = core.conditions.is_true(WAITING_FOR_REPLACEMENT_PODS)
        if (absent > 0) != waiting:
            self.pods.io.engine.submit(SetWaitingForReplacements(workload.key, absent > 0))

    async def _run(
        self, live: list[Json], by_role: dict[str, list[Json]], workload: WorkloadRecord
    ) -> None:
        """Admitted: start every gated Pod on its role's flavors, let go of the failed
        Pods their replacements stand for, report the group ready once all its Pods are
        and the quota its succeeded Pods no longer need."""
        pods = self.pods
        assignments = (workload.status or {}).get("admission", {}).get("podSetAssignments", [])
        counts = {str(a.get("name")): int(a.get("count") or 0) for a in assignments}
        await self._start(by_role, workload, counts)
        for role, members in by_role.items():
            runnable = sum(1 for pod in members if pod_group.runnable_or_succeeded(pod))
            if runnable >= counts.get(role, 0):
                for pod in members:
                    if not pod_group.runnable_or_succeeded(pod):
                        await pods.release(pod)  # replaced
        core = pods.io.engine.scheduler.workload(workload.key)
        if core is None:
            return
        ready_count = sum(1 for pod in live if ready(pod) or succeeded(pod))
        if ready_count >= sum(counts.values()) and not core.conditions.is_true("PodsReady"):
            pods.io.engine.submit(PodsReady(workload.key))
        if not pod_group.is_serving(live[0]):
            # A succeeded Pod's quota goes back at once (Kueue's reclaimablePods).
            done = tuple(
                (role, n)
                for role, members in sorted(by_role.items())
                if (n := sum(1 for pod in members if succeeded(pod)))
            )
            if dict(done) != dict(core.reclaimable):
                pods.io.engine.submit(SetReclaimable(workload.key, done))

    async def _start(
        self, by_role: dict[str, list[Json]], workload: WorkloadRecord, counts: dict[str, int]
    ) -> None:
        """Start every gated Pod that can run on its role's pod set."""
        for role, members in by_role.items():
            for pod in members:
                if not has_gate(pod) or not pod_group.runnable_or_succeeded(pod):
                    continue
                if role in counts:
                    await self.pods.ungate(pod, workload, role)
                else:
                    why = f"podSetInfo with the name '{role}' is not found"
                    self._warn(pod, COMPOSE_FAILED, why)

    async def _hold(self, live: list[Json], workload: WorkloadRecord) -> None:
        """Not admitted: every running Pod is stopped, saying why."""
        for pod in live:
            if not has_gate(pod) and not ended(pod):
                await self.pods.stop_unadmitted(pod, workload)
