"""Turn API objects into the core's plain records and apply them to a Scheduler.

This is the one place that knows both the pydantic API model and the core's
dataclasses; everything after it reads plain attributes.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Container, Sequence
from typing import Any

import orjson

from scheduler.api import (
    AdmissionCheck,
    ClusterQueue,
    Cohort,
    Configuration,
    LocalQueue,
    Namespace,
    ResourceFlavor,
    Workload,
)
from scheduler.api.config import IGNORE_UNDECLARED
from scheduler.api.quantity import Quantity, scheduler_value
from scheduler.api.requests import limits_exceeded, pod_requests
from scheduler.api.transformations import RETAIN, Transformation, transform
from scheduler.core.admission_checks import (
    merge_controller_states,
    reconcile_checks,
    sync_listed_checks,
)
from scheduler.core.clock import Instant, instant_from_datetime
from scheduler.core.conditions import Condition, Conditions
from scheduler.core.config import QueueVisibility, SchedulerConfig, WaitForPodsReady
from scheduler.core.model import (
    AdmissionCheckInfo,
    ClusterQueueInfo,
    FlavorInfo,
    LocalQueueInfo,
    PreemptionPolicy,
    ResourceGroupInfo,
)
from scheduler.core.quota import ResourceQuota
from scheduler.core.resources import FlavorResource
from scheduler.core.scheduler import QUEUE_PLUGIN_ANNOTATION, CohortInfo, Scheduler
from scheduler.core.visibility import owner_references
from scheduler.core.workload import (
    EMPTY_MAPPING,
    Admission,
    CheckStatus,
    Kept,
    PodSetAssignment,
    PodSetSpec,
    RequeueState,
    StoredObject,
    WorkloadState,
)


def _opt(resource: str, q: Quantity | None) -> int | None:
    return None if q is None else scheduler_value(resource, q)


def _quotas(
    groups: Sequence[Any],
) -> tuple[tuple[ResourceGroupInfo, ...], dict[FlavorResource, ResourceQuota]]:
    infos: list[ResourceGroupInfo] = []
    quotas: dict[FlavorResource, ResourceQuota] = {}
    for group in groups:
        infos.append(
            ResourceGroupInfo(
                covered=tuple(group.covered_resources),
                flavors=tuple(f.name for f in group.flavors),
            )
        )
        for flavor in group.flavors:
            for rq in flavor.resources:
                quotas[(flavor.name, rq.name)] = ResourceQuota(
                    nominal=scheduler_value(rq.name, rq.nominal_quota),
                    borrowing_limit=_opt(rq.name, rq.borrowing_limit),
                    lending_limit=_opt(rq.name, rq.lending_limit),
                )
    return tuple(infos), quotas


def _weight(q: Quantity) -> float:
    return float(q.value)


def cluster_queue_info(obj: ClusterQueue) -> ClusterQueueInfo:
    spec = obj.spec
    groups, quotas = _quotas(spec.resource_groups)
    pre = spec.preemption
    return ClusterQueueInfo(
        name=obj.metadata.name,
        cohort=spec.cohort or None,
        groups=groups,
        quotas=quotas,
        strategy=spec.queueing_strategy,
        queue_plugin=obj.metadata.annotations.get(QUEUE_PLUGIN_ANNOTATION),
        namespace_selector=spec.namespace_selector,
        when_can_borrow=spec.flavor_fungibility.when_can_borrow,
        when_can_preempt=spec.flavor_fungibility.when_can_preempt,
        fungibility_preference=spec.flavor_fungibility.preference,
        preemption=PreemptionPolicy(
            within_cluster_queue=pre.within_cluster_queue,
            reclaim_within_cohort=pre.reclaim_within_cohort,
            borrow_within_cohort=pre.borrow_within_cohort.policy,
            max_priority_threshold=pre.borrow_within_cohort.max_priority_threshold,
        ),
        stop_policy=spec.stop_policy,
        weight=_weight(spec.fair_sharing.weight),
        admission_checks=tuple(obj.admission_check_names),
        check_flavors=_check_flavors(obj),
    )


def _check_flavors(obj: ClusterQueue) -> tuple[tuple[str, tuple[str, ...]], ...]:
    strategy = obj.spec.admission_checks_strategy
    rules: dict[str, tuple[str, ...]] = {name: () for name in obj.spec.admission_checks}
    if strategy is not None:
        for rule in strategy.admission_checks:
            rules.setdefault(rule.name, tuple(rule.on_flavors))
    return tuple(rules.items())


def admission_check_info(obj: AdmissionCheck) -> AdmissionCheckInfo:
    return AdmissionCheckInfo(
        name=obj.metadata.name,
        controller=obj.spec.controller_name if obj.spec is not None else "",
        active=obj.active,
    )


def cohort_info(obj: Cohort) -> CohortInfo:
    _, quotas = _quotas(obj.spec.resource_groups)
    return CohortInfo(
        name=obj.metadata.name,
        parent=obj.spec.parent or None,
        quotas=quotas,
        weight=_weight(obj.spec.fair_sharing.weight),
    )


def flavor_info(obj: ResourceFlavor) -> FlavorInfo:
    return FlavorInfo(
        name=obj.metadata.name,
        node_labels=dict(obj.spec.node_labels),
        taints=tuple(t.to_dict() for t in obj.spec.node_taints),
        tolerations=tuple(t.to_dict() for t in obj.spec.tolerations),
    )


def local_queue_info(obj: LocalQueue) -> LocalQueueInfo:
    return LocalQueueInfo(
        namespace=obj.metadata.namespace or "default",
        name=obj.metadata.name,
        cluster_queue=obj.spec.cluster_queue,
        stop_policy=obj.spec.stop_policy,
    )


def scheduler_config(obj: Configuration | None) -> SchedulerConfig:
    if obj is None:
        return SchedulerConfig()
    w = obj.wait_for_pods_ready
    wait = WaitForPodsReady()
    if obj.waits_for_pods_ready:
        rs = w.requeuing_strategy
        wait = WaitForPodsReady(
            enable=True,
            timeout_micros=w.timeout,
            block_admission=w.block_admission,
            recovery_timeout_micros=w.recovery_timeout,
            timestamp=rs.timestamp,
            backoff_limit_count=rs.backoff_limit_count,
            backoff_base_seconds=rs.backoff_base_seconds,
            backoff_max_seconds=rs.backoff_max_seconds,
        )
    visibility = None
    qv = obj.queue_visibility
    if qv is not None:
        visibility = QueueVisibility(
            update_interval_seconds=qv.update_interval_seconds,
            cluster_queue_max_count=qv.cluster_queues.max_count,
            local_queue_max_count=(qv.local_queues.max_count if qv.local_queues else None),
            local_queue_max_position=(qv.local_queues.max_position if qv.local_queues else 10),
        )
    fs = obj.fair_sharing
    return SchedulerConfig(
        wait_for_pods_ready=wait,
        queue_visibility=visibility,
        fair_sharing=bool(fs is not None and fs.enable),
        fair_sharing_strategies=tuple(fs.preemption_strategies) if fs is not None else (),
        exclude_resource_prefixes=tuple(obj.resources.exclude_resource_prefixes)
        if obj.resources is not None
        else (),
        transformations=_transformations(obj),
        ignore_undeclared_resources=obj.resources.quota_check_strategy == IGNORE_UNDECLARED,
    )


def _transformations(obj: Configuration) -> tuple[Transformation, ...]:
    if obj.resources is None:
        return ()
    return tuple(
        Transformation(
            input=t.input,
            retain=t.strategy == RETAIN,
            multiply_by=t.multiply_by,
            outputs=tuple((name, q.value) for name, q in sorted(t.outputs.items())),
        )
        for t in obj.resources.transformations
    )


def _instant(value: Any, default: Instant) -> Instant:
    return default if value is None else instant_from_datetime(value)


# Pod sets by content. Workloads made from one template (the Jobs of one CronJob, a
# sweep) share one PodSetSpec, one tuple of them and one JSON text of them: less memory
# per pending workload, and equal pod sets are the same object, which the nomination
# cache keys on. Never mutated once built. A tuple's key holds the ids of specs that
# the tuple keeps alive, so an id is never reused while its key is stored.
_POD_SETS: dict[tuple[object, ...], tuple[PodSetSpec, bytes]] = {}
_POD_SET_TUPLES: dict[tuple[int, ...], tuple[tuple[PodSetSpec, ...], bytes]] = {}
_POD_SETS_MAX = 10_000  # past this the tables start over (sharing is an optimization)


def _pod_set(ps: Any, dumped: dict[str, Any], config: SchedulerConfig) -> tuple[PodSetSpec, bytes]:
    text = orjson.dumps(dumped)
    key = (text, config.exclude_resource_prefixes, config.transformations)
    found = _POD_SETS.get(key)
    if found is None:
        if len(_POD_SETS) >= _POD_SETS_MAX:
            _POD_SETS.clear()
            _POD_SET_TUPLES.clear()
        pod_spec = ps.template.spec
        spec = PodSetSpec(
            name=ps.name,
            count=ps.count,
            min_count=ps.min_count,
            per_pod=transform(
                pod_requests(pod_spec, config.exclude_resource_prefixes), config.transformations
            ),
            pod_spec=dumped["template"]["spec"],
            tolerations=[t.to_dict() for t in pod_spec.tolerations],
            limits_exceeded=limits_exceeded(pod_spec),
        )
        found = (spec, text)
        _POD_SETS[key] = found
    return found


def _pod_sets(
    obj: Workload, dumped: list[dict[str, Any]], config: SchedulerConfig
) -> tuple[tuple[PodSetSpec, ...], bytes]:
    parts = [_pod_set(ps, d, config) for ps, d in zip(obj.spec.pod_sets, dumped, strict=True)]
    key = tuple(id(spec) for spec, _ in parts)
    found = _POD_SET_TUPLES.get(key)
    if found is None:
        found = (tuple(spec for spec, _ in parts), b"[" + b",".join(t for _, t in parts) + b"]")
        _POD_SET_TUPLES[key] = found
    return found


def workload_state(
    obj: Workload, config: SchedulerConfig, default_time: Instant, *, keep_object: bool = True
) -> WorkloadState:
    """The core's record of a Workload; with `keep_object` it also keeps the object's
    JSON for output (the simulator), otherwise only its owner references, as `raw`
    itself (the runtime: less memory, and no serialization of the whole object on
    every arrival)."""
    meta = obj.metadata
    body: dict[str, Any] | None = None
    if keep_object:
        body = obj.model_dump(mode="json", by_alias=True, exclude_none=True)
        body.pop("status", None)
        dumped_pod_sets = body["spec"]["podSets"]
    else:
        dumped_pod_sets = [
            ps.model_dump(mode="json", by_alias=True, exclude_none=True) for ps in obj.spec.pod_sets
        ]
    pod_sets, pod_sets_json = _pod_sets(obj, dumped_pod_sets, config)
    owners = owner_references(obj)
    raw: Kept = owners if body is None else StoredObject(body, pod_sets_json, owners)
    status = obj.status
    conditions = Conditions(
        [
            Condition(
                type=c.type,
                status=c.status,
                reason=c.reason,
                message=c.message,
                last_transition=_instant(c.last_transition_time, default_time),
                observed_generation=c.observed_generation,
            )
            for c in status.conditions
        ]
    )
    admission = None
    if status.admission is not None:
        admission = Admission(
            cluster_queue=status.admission.cluster_queue,
            pod_sets=[
                PodSetAssignment(
                    name=a.name,
                    flavors=dict(a.flavors),
                    resource_usage={r: scheduler_value(r, q) for r, q in a.resource_usage.items()},
                    count=a.count if a.count is not None else _pod_set_count(obj, a.name),
                )
                for a in status.admission.pod_set_assignments
            ],
        )
    requeue = None
    if status.requeue_state is not None:
        requeue = RequeueState(
            count=status.requeue_state.count,
            requeue_at=(
                None
                if status.requeue_state.requeue_at is None
                else instant_from_datetime(status.requeue_state.requeue_at)
            ),
        )
    finished = conditions.is_true("Finished")
    checks = tuple(
        sorted(
            (
                CheckStatus(
                    name=c.name,
                    state=c.state,
                    last_transition=instant_from_datetime(c.last_transition_time),
                    message=c.message,
                    requeue_after_seconds=c.requeue_after_seconds,
                    retry_count=c.retry_count,
                    pod_set_updates=tuple(
                        u.model_dump(mode="json", by_alias=True, exclude_none=True)
                        for u in c.pod_set_updates or ()
                    ),
                )
                for c in status.admission_checks
            ),
            key=lambda c: c.name,
        )
    )
    spec = obj.spec
    # Strings many workloads repeat are interned, empty maps shared: less per workload.
    return WorkloadState(
        namespace=sys.intern(meta.namespace or "default"),
        name=meta.name,
        uid=meta.uid or "",
        creation=_instant(meta.creation_timestamp, default_time),
        labels=dict(meta.labels) if meta.labels else EMPTY_MAPPING,
        queue_name=sys.intern(spec.queue_name),
        priority=spec.priority or 0,
        priority_class_name=sys.intern(spec.priority_class_name),
        priority_class_source=sys.intern(spec.priority_class_source),
        active=obj.spec.active,
        pod_sets=pod_sets,
        maximum_execution_time_seconds=obj.spec.maximum_execution_time_seconds,
        accumulated_execution_seconds=status.accumulated_past_exexcution_time_seconds or 0,
        conditions=conditions,
        admission=admission,
        requeue_state=requeue,
        reclaimable={r.name: r.count for r in status.reclaimable_pods}
        if status.reclaimable_pods
        else EMPTY_MAPPING,
        finished=finished,
        admission_checks=checks,
        raw=raw,
    )


def _pod_set_count(obj: Workload, name: str) -> int:
    for ps in obj.spec.pod_sets:
        if ps.name == name:
            return ps.count
    return 0


def apply_object(
    s: Scheduler, obj: Any, default_time: Instant | None = None, *, keep_status: bool = False
) -> None:
    """Create or update one object in the scheduler (Workloads keep their core status
    when the object carries none, or always with `keep_status`)."""
    if isinstance(obj, Namespace):
        s.set_namespace(obj.metadata.name, dict(obj.metadata.labels))
    elif isinstance(obj, ResourceFlavor):
        s.set_flavor(flavor_info(obj), obj.metadata.name)
    elif isinstance(obj, ClusterQueue):
        s.set_cluster_queue(cluster_queue_info(obj))
        sync_listed_checks(s, obj.metadata.name)
    elif isinstance(obj, Cohort):
        s.set_cohort(cohort_info(obj))
    elif isinstance(obj, LocalQueue):
        s.set_local_queue(local_queue_info(obj))
    elif isinstance(obj, AdmissionCheck):
        s.set_admission_check(admission_check_info(obj))
    elif isinstance(obj, Workload):
        wl = workload_state(
            obj,
            s.config,
            s.now() if default_time is None else default_time,
            keep_object=s._keep_objects,
        )
        old = s._workloads.get(wl.key)
        carries_none = obj.status.admission is None and not obj.status.conditions
        if old is not None and (keep_status or carries_none):
            # An update that carries no status keeps what the scheduler wrote, except
            # the check states an external controller set (docs/scheduling.md#admission-checks).
            theirs = wl.admission_checks
            _carry_status(old, wl)
            wl.admission_checks = merge_controller_states(old.admission_checks, theirs)
        s.set_workload(wl)
        reconcile_checks(s, wl)


def _carry_status(old: WorkloadState, new: WorkloadState) -> None:
    new.conditions = old.conditions
    new.admission = old.admission
    new.requeue_state = old.requeue_state
    new.resource_requests = old.resource_requests
    new.finished = old.finished
    new.admission_checks = old.admission_checks
    new.accumulated_execution_seconds = old.accumulated_execution_seconds
    new.why = old.why
    new.preempted_by = old.preempted_by
    new.last_assignment = None
    if not new.reclaimable:
        new.reclaimable = dict(old.reclaimable)


def _deleters(s: Scheduler) -> dict[str, tuple[Container[str], Callable[[str], object]]]:
    """Per kind: where objects are kept (by name or namespace/name) and how one is deleted."""
    return {
        "ResourceFlavor": (s._flavors, lambda name: s.set_flavor(None, name)),
        "ClusterQueue": (s._cluster_queues, s.delete_cluster_queue),
        "Cohort": (s._cohorts, s.delete_cohort),
        "LocalQueue": (s._local_queues, s.delete_local_queue),
        "Workload": (s._workloads, s.delete_workload),
        "AdmissionCheck": (s._admission_checks, s.delete_admission_check),
    }


_NAMESPACED_KINDS = frozenset({"LocalQueue", "Workload"})


def delete_object(s: Scheduler, kind: str, namespace: str | None, name: str) -> bool:
    if kind == "Namespace":
        return s._namespaces.pop(name, None) is not None
    deleter = _deleters(s).get(kind)
    if deleter is None:
        return False
    present, delete = deleter
    key = f"{namespace or 'default'}/{name}" if kind in _NAMESPACED_KINDS else name
    if key not in present:
        return False
    delete(key)
    return True
