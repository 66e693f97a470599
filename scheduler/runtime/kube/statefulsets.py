"""The `statefulset` integration (docs/cluster.md#statefulsets): a StatefulSet that
names a LocalQueue is one prebuilt pod group Workload (`api/statefulset.py`).

The webhooks mark the StatefulSet's pod template (`kueue.x-k8s.io/pod-suspending-parent:
statefulset`, the queue name), so that the Pod webhook holds each of its Pods behind the
admission gate, without a finalizer (the StatefulSet replaces a deleted Pod). This
controller, as Kueue's StatefulSet reconcilers do:

* makes the Workload once the StatefulSet has replicas (`CreatedWorkload` on the
  StatefulSet), and has it follow the StatefulSet's replicas and queue name (while it
  holds no quota) and WorkloadPriorityClass;
* marks each of its Pods as a member of that Workload's group (`api/statefulset.py`
  `pod_marks`), after which the `pod` integration's group path (`pod_groups.py`)
  starts them once the Workload is admitted and stops them when it is evicted;
* puts the Workload on hold when the StatefulSet is scaled to zero (its quota goes
  back, it is not queued: Kueue's `QuotaReserved=False` reason `OnHold`), and lifts the
  hold when it is scaled up again.

The StatefulSet owns its Workload: the garbage collector deletes it with the
StatefulSet.
"""

from __future__ import annotations

import logging

from scheduler.api.integrations import STATEFULSET_FRAMEWORK
from scheduler.api.live import decode_live_as
from scheduler.api.plain_pod import SUSPENDING_PARENT
from scheduler.api.raw_object import metadata_of
from scheduler.api.statefulset import (
    SCALED_TO_ZERO,
    StatefulSet,
    controlling_statefulset,
    is_managed,
    pod_marks,
    replicas,
    statefulset_workload,
    statefulset_workload_name,
)
from scheduler.api.workload import Workload
from scheduler.kubeapi.errors import Json, KubeError
from scheduler.runtime.commands import SetOnHold
from scheduler.runtime.kube.integration import Integration
from scheduler.runtime.kube.leader_io import LeaderIO
from scheduler.runtime.kube.priorities import priority_classes
from scheduler.runtime.kube.records import Cached, WorkloadRecord
from scheduler.runtime.kube.resources import PODS, STATEFULSETS, Resource, object_key

log = logging.getLogger(__name__)


class StatefulSetController(Integration):
    def __init__(self, io: LeaderIO, *, retry_delay: float = 1.0) -> None:
        # The StatefulSet's key -> the keys of the Pods it controls that the cache holds.
        self._pods: dict[str, set[str]] = {}
        super().__init__(io, STATEFULSETS, retry_delay=retry_delay)

    # -- events ----------------------------------------------------------------------
    def on_change(self, resource: Resource, new: Cached | None, old: Cached | None) -> None:
        """A Pod its template marked brings its StatefulSet here (to be marked itself)."""
        if resource.kind != PODS.kind or isinstance(new, WorkloadRecord):
            super().on_change(resource, new, old)
            return
        for pod, present in ((old, False), (new, True)):
            owner = self._owner_key(pod) if isinstance(pod, dict) else None
            if owner is None or not isinstance(pod, dict):
                continue
            members = self._pods.setdefault(owner, set())
            if present:
                members.add(object_key(pod))
                self.enqueue(owner)
            else:
                members.discard(object_key(pod))
                if not members:
                    del self._pods[owner]

    @staticmethod
    def _owner_key(pod: Json) -> str | None:
        annotations = metadata_of(pod).get("annotations")
        if not isinstance(annotations, dict):
            return None
        if annotations.get(SUSPENDING_PARENT) != STATEFULSET_FRAMEWORK:
            return None
        owner = controlling_statefulset(pod)
        return None if owner is None else f"{metadata_of(pod).get('namespace', '')}/{owner[0]}"

    def make_workload(self, obj: Json) -> Workload:
        sts = decode_live_as(StatefulSet, obj, source="apps/v1/statefulsets")
        return statefulset_workload(sts, *priority_classes(self.io.store))

    # -- reconcile -------------------------------------------------------------------
    async def reconcile(self, key: str) -> None:
        sts = self.io.store.get(STATEFULSETS, key)
        if sts is None or not is_managed(sts) or metadata_of(sts).get("deletionTimestamp"):
            return  # a deleted one's Workload goes with it (the garbage collector)
        namespace, _, name = key.partition("/")
        wanted = statefulset_workload_name(name, str(metadata_of(sts).get("uid", "")))
        workload = self.io.store.workload(f"{namespace}/{wanted}")
        scale = replicas(sts)
        if workload is None:
            if scale > 0:
                await self.create_workload(namespace, name)
        else:
            await self._follow(sts, workload, scale)
        await self._mark_pods(sts, namespace)

    async def _follow(self, sts: Json, workload: WorkloadRecord, scale: int) -> None:
        """The Workload follows the StatefulSet: its priority class, its queue (while
        it holds no quota), and its scale (zero: on hold)."""
        if workload.condition("Finished") is not None:
            return
        if await self.follow_priority_class(sts, workload):
            return  # the Workload's change brings the StatefulSet back
        if scale > 0:
            # While it holds no quota its pod set follows the replicas (scaled up from
            # zero to another count, or through the scale subresource), then its queue.
            await self.follow_spec(sts, workload)
            workload = self.io.store.workload(workload.key) or workload
            await self.follow_labels(sts, workload)
        core = self.io.engine.scheduler.workload(workload.key)
        if core is None:
            return
        if scale == 0 and not (core.on_hold and core.admission is None):
            log.info("event=statefulset-on-hold workload=%s", workload.key)
            self.io.engine.submit(SetOnHold(workload.key, SCALED_TO_ZERO))
        elif scale > 0 and core.on_hold:
            log.info("event=statefulset-hold-lifted workload=%s", workload.key)
            self.io.engine.submit(SetOnHold(workload.key, None))

    async def _mark_pods(self, sts: Json, namespace: str) -> None:
        """Each Pod of the StatefulSet joins its Workload's group; its queue name
        follows the StatefulSet's."""
        uid = str(metadata_of(sts).get("uid", ""))
        for key in sorted(self._pods.get(object_key(sts), ())):
            pod = self.io.store.get(PODS, key)
            owner = controlling_statefulset(pod) if pod is not None else None
            if pod is None or owner is None or owner[1] != uid:
                continue  # gone, or a Pod of an earlier StatefulSet of the name
            meta = metadata_of(pod)
            if meta.get("deletionTimestamp"):
                continue
            marks = pod_marks(sts, pod)
            if not marks:
                continue
            await self.io.limiter.acquire()
            try:
                marked = await self.io.rest.merge_patch(
                    PODS.item(str(meta.get("name", "")), namespace),
                    {"metadata": {"resourceVersion": meta.get("resourceVersion"), **marks}},
                )
            except KubeError as err:
                if err.status not in (404, 409):
                    raise
                continue  # gone, or changed meanwhile: the watch brings it back
            self.io.store.observe(PODS, marked)
            log.info("event=statefulset-pod-marked pod=%s", object_key(marked))
