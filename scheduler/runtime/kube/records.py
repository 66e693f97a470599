"""What cluster mode keeps of each Workload the API server holds.

The store used to cache whole Workloads as the JSON dicts the server sent: several
kilobytes each, most of the memory that grows with the number of Workloads
(docs/benchmarks.md, "Cluster-mode memory"). The scheduling core decodes each object
once into its own records; beside them the store keeps only what its readers use:

* the status writers: the resourceVersion (the write's precondition), `spec.active`
  and the status as the server holds it (to compare with the core's);
* the store itself: a digest of everything but the status, to tell an echo of a status
  write (nothing for the core) from a change the core must decode again;
* the Job integration: the owner references, the `kueue.x-k8s.io/job-uid` label, and
  the first pod set's name, node selector, tolerations, labels and annotations (restored
  on the Job when it is suspended again; the base the admission checks' pod set updates
  are merged over).

Anything else is read from the API server when it is needed.
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass, field
from typing import Any

import orjson

from scheduler.api.job_reclaimable import INDEXED
from scheduler.core.workload import JOB_UID_LABEL, OwnerRef
from scheduler.kubeapi.errors import Json
from scheduler.runtime.kube.normalize import normalized
from scheduler.runtime.kube.resources import (
    JOBS,
    JOBSETS,
    PODS,
    STATEFULSETS,
    WORKLOADS,
    Resource,
    object_key,
    resource_version,
)

# Metadata a status write changes without changing anything the core reads.
_VOLATILE_META = frozenset(("resourceVersion", "managedFields", "generation"))
_NO_OWNERS: tuple[OwnerRef, ...] = ()


def _dict(value: object) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def content_digest(obj: Json) -> int:
    """A digest of the object without its status and the metadata a status write
    bumps: equal digests mean the core has nothing new to decode."""
    meta = {k: v for k, v in _dict(obj.get("metadata")).items() if k not in _VOLATILE_META}
    content = {**{k: v for k, v in obj.items() if k != "status"}, "metadata": meta}
    try:
        data = orjson.dumps(content, option=orjson.OPT_SORT_KEYS)
    except TypeError:  # an integer beyond 64 bits
        data = json.dumps(content, sort_keys=True, default=str).encode()
    return hash(data)


def owners_of(meta: dict[str, Any]) -> tuple[OwnerRef, ...]:
    """An object's owner references, from its metadata."""
    refs = meta.get("ownerReferences")
    if not isinstance(refs, list) or not refs:
        return _NO_OWNERS
    return tuple(
        OwnerRef(
            sys.intern(str(r.get("apiVersion", ""))),
            sys.intern(str(r.get("kind", ""))),
            str(r.get("name", "")),
            str(r.get("uid", "")),
        )
        for r in refs
        if isinstance(r, dict)
    )


def owner_of(owners: tuple[OwnerRef, ...], resource: Resource) -> OwnerRef | None:
    """The first owner of `resource`'s kind and API version (a kind alone is not
    enough: other groups have kinds called Job too)."""
    return next(
        (o for o in owners if o.kind == resource.kind and o.api_version == resource.api_version),
        None,
    )


@dataclass(frozen=True, slots=True)
class TemplateBase:
    """A pod set's name and what the Job (JobSet) integration puts back on a suspended
    Job's template (replicated Job's), without the empty values our model renders (a toleration's
    `value: ""`): the Job comes back from the server without them, so the raw template
    would never compare equal."""

    pod_set: str = "main"
    node_selector: dict[str, Any] = field(default_factory=dict)
    tolerations: list[Any] = field(default_factory=list)
    labels: dict[str, Any] = field(default_factory=dict)
    annotations: dict[str, Any] = field(default_factory=dict)


EMPTY_TEMPLATE = TemplateBase()


def _templates(spec: dict[str, Any]) -> tuple[TemplateBase, ...]:
    """Every pod set's TemplateBase, in order; empty when the Workload has one pod set
    that holds nothing but the default name (most Workloads: kept as nothing)."""
    pod_sets = spec.get("podSets")
    if not isinstance(pod_sets, list) or not pod_sets:
        return ()
    found = []
    for pod_set in pod_sets:
        entry = _dict(pod_set)
        template = _dict(entry.get("template"))
        pod, meta = _dict(template.get("spec")), _dict(template.get("metadata"))
        found.append(
            TemplateBase(
                pod_set=str(entry.get("name", "main")),
                node_selector=normalized(pod.get("nodeSelector")) or {},
                tolerations=normalized(pod.get("tolerations")) or [],
                labels=_dict(meta.get("labels")),
                annotations=_dict(meta.get("annotations")),
            )
        )
    return () if found == [EMPTY_TEMPLATE] else tuple(found)


def _compact_version(version: str) -> int | str:
    """A resourceVersion as an int when it is one written plainly (kube-apiserver's
    are etcd revisions): 28-32 bytes instead of 50-60 for the string. Opaque to
    clients, so anything else is kept as it came."""
    if version.isdigit() and version.isascii() and str(int(version)) == version:
        return int(version)
    return version


@dataclass(slots=True)
class WorkloadRecord:
    """One Workload as the API server holds it, in a few hundred bytes."""

    key: str  # namespace/name
    uid: str
    version: int | str  # the resourceVersion, compacted (`resource_version` gives it back)
    active: bool  # spec.active
    status: Json | None  # as the server holds it; None when it holds none (or an empty one)
    owners: tuple[OwnerRef, ...]
    job_uid: str | None  # the kueue.x-k8s.io/job-uid label
    # Every pod set's, in order; empty: one pod set with nothing but the defaults.
    templates: tuple[TemplateBase, ...]
    digest: int  # content_digest: all but the status

    @classmethod
    def of(cls, obj: Json) -> WorkloadRecord:
        """The record of a Workload as the server sent it (tolerant of missing parts:
        the core's decoding is where a malformed object is reported)."""
        meta = _dict(obj.get("metadata"))
        spec = _dict(obj.get("spec"))
        namespace, name = meta.get("namespace"), str(meta.get("name", ""))
        key = f"{namespace}/{name}" if namespace else name
        status = obj.get("status")
        job_uid = _dict(meta.get("labels")).get(JOB_UID_LABEL)
        return cls(
            key=key,
            uid=str(meta.get("uid", "")),
            version=_compact_version(str(meta.get("resourceVersion", ""))),
            active=spec.get("active", True) is not False,
            status=status if isinstance(status, dict) and status else None,
            owners=owners_of(meta),
            job_uid=str(job_uid) if job_uid else None,
            templates=_templates(spec),
            digest=content_digest(obj),
        )

    @property
    def resource_version(self) -> str:
        return str(self.version)

    def owner(self, resource: Resource) -> OwnerRef | None:
        """The owner of that kind (the batch/v1 Job of the Job integration)."""
        return owner_of(self.owners, resource)

    @property
    def pod_set_templates(self) -> tuple[TemplateBase, ...]:
        """Every pod set's TemplateBase, in order (the defaults' for a plain one)."""
        return self.templates or (EMPTY_TEMPLATE,)

    @property
    def placement(self) -> tuple[dict[str, Any], list[Any]] | None:
        """The first pod set's node selector and tolerations, if it sets either."""
        t = self.pod_set_templates[0]
        if not (t.node_selector or t.tolerations):
            return None
        return t.node_selector, t.tolerations

    @property
    def check_states(self) -> list[Json]:
        """`status.admissionChecks` as the server holds it (written by check controllers)."""
        states = (self.status or {}).get("admissionChecks")
        return [s for s in states if isinstance(s, dict)] if isinstance(states, list) else []

    @property
    def namespace(self) -> str:
        return self.key.partition("/")[0]

    @property
    def name(self) -> str:
        return self.key.partition("/")[2]

    def condition(self, type_: str) -> Json | None:
        """The condition of this type if it is True."""
        for c in (self.status or {}).get("conditions") or []:
            if isinstance(c, dict) and c.get("type") == type_ and c.get("status") == "True":
                return c
        return None

    def status_body(self, status: Json) -> Json:
        """The body of a write to the status subresource: the server takes only the
        status from it (and the resourceVersion as precondition), so nothing else of
        the object is needed."""
        return {
            "apiVersion": WORKLOADS.api_version,
            "kind": WORKLOADS.kind,
            "metadata": {
                "name": self.name,
                "namespace": self.namespace,
                "uid": self.uid,
                "resourceVersion": self.resource_version,
            },
            "status": status,
        }


Cached = Json | WorkloadRecord  # what a reflector's cache holds for one object

_JOB_META = ("name", "namespace", "uid", "resourceVersion", "generation", "labels")
_JOB_TEMPLATE_META = ("labels", "annotations")
_JOB_ANNOTATIONS = (
    "kueue.x-k8s.io/job-min-parallelism",
    "kueue.x-k8s.io/job-completions-equal-parallelism",
)
_JOB_POD = ("nodeSelector", "tolerations")
_JOB_STATUS = ("ready", "succeeded", "startTime", "completedIndexes", "failedIndexes")
_JOB_ENDS = frozenset(("Complete", "Failed"))


def _picked(value: object, fields: tuple[str, ...]) -> dict[str, Any]:
    source = _dict(value)
    return {k: source[k] for k in fields if k in source}


def _non_empty(**parts: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in parts.items() if v}


def _slim_status(obj: Json, fields: tuple[str, ...], conditions: frozenset[str]) -> Json:
    """Of `obj`'s status, `fields` and the conditions of the types `conditions`."""
    status = _dict(obj.get("status"))
    slim = _picked(status, fields)
    kept = [
        c
        for c in status.get("conditions") or []
        if isinstance(c, dict) and c.get("type") in conditions
    ]
    if kept:
        slim["conditions"] = kept
    return slim


def _slim(obj: Json, resource: Resource, meta: tuple[str, ...], spec: Json, status: Json) -> Json:
    """A slim object of `resource`'s shape: `meta` of its metadata, and the non-empty
    slim spec and status."""
    return {
        "apiVersion": obj.get("apiVersion", resource.api_version),
        "kind": obj.get("kind", resource.kind),
        "metadata": _picked(obj.get("metadata"), meta),
        **_non_empty(spec=spec, status=status),
    }


def _keep_controller(obj: Json, slim: Json, kind: str) -> None:
    """Keep `obj`'s controller reference in `slim` if its controller is of `kind`."""
    owners = _dict(obj.get("metadata")).get("ownerReferences") or []
    controller = [
        _picked(ref, ("apiVersion", "kind", "name", "uid", "controller"))
        for ref in owners
        if isinstance(ref, dict) and ref.get("controller") is True and ref.get("kind") == kind
    ]
    if controller:
        slim["metadata"]["ownerReferences"] = controller


def slim_job(obj: Json) -> Json:
    """What the Job integration reads of a Job, as a Job-shaped dict: its identity,
    generation (docs/cluster.md#a-waiting-job-edited) and labels, `spec.suspend` and
    `spec.parallelism`, `completions` and whether it is Indexed, the pod template's labels,
    annotations, node selector and tolerations (what it patches), of the status the ready
    and succeeded counts, an Indexed Job's completed and failed indexes (its reclaimable
    Pods), the start time and the conditions that end it, and its controller's reference if a
    JobSet controls it (docs/cluster.md#jobsets); empty parts are left out (the
    integration reads every part with a default). The pod template's containers, most
    of a Job, are read from the API server the one time they are needed, to create its
    Workload (`jobs.py`). Every Job of the cluster is listed, labelled for a queue or not
    (docs/operations.md#memory-to-plan-for)."""
    spec = _dict(obj.get("spec"))
    template = _dict(spec.get("template"))
    slim_status = _slim_status(obj, _JOB_STATUS, _JOB_ENDS)
    slim_template = _non_empty(
        metadata=_picked(template.get("metadata"), _JOB_TEMPLATE_META),
        spec=_picked(template.get("spec"), _JOB_POD),
    )
    slim_spec = _picked(spec, ("suspend", "parallelism", "completions"))
    if spec.get("completionMode") == INDEXED:
        # Only an Indexed Job's is read; the default's string would cost every Job.
        slim_spec["completionMode"] = INDEXED
    if slim_template:
        slim_spec["template"] = slim_template
    slim = _slim(obj, JOBS, _JOB_META, slim_spec, slim_status)
    # Only Kueue's partial admission annotations are read (docs/cluster.md#partial-admission).
    annotations = _picked(_dict(obj.get("metadata")).get("annotations"), _JOB_ANNOTATIONS)
    if annotations:
        slim["metadata"]["annotations"] = annotations
    # A JobSet's Job is the JobSet's workload, not its own (docs/cluster.md#jobsets).
    _keep_controller(obj, slim, JOBSETS.kind)
    return slim


_POD_META = (
    "name",
    "namespace",
    "uid",
    "creationTimestamp",
    "resourceVersion",
    "labels",
    "annotations",
    "finalizers",
    "deletionTimestamp",
)
_POD_SPEC = ("schedulingGates", "nodeSelector", "tolerations", "nodeName")
_POD_STATUS = ("phase", "message")
_POD_CONDITIONS = frozenset(("Ready",))
_LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"


def slim_pod(obj: Json) -> Json:
    """What the `pod` integration reads of a Pod it manages, as a Pod-shaped dict: its
    identity and creation time, labels, annotations, finalizers and deletion, the
    scheduling gates, node selector and tolerations (what it patches), its node (a pod
    group's Pod being deleted before it has one will never run), its controlling
    StatefulSet's reference, its phase and message, and whether it is Ready. Its
    containers are read from the API server the one time they are needed, to create its
    Workload (`pods.py`)."""
    status = _slim_status(obj, _POD_STATUS, _POD_CONDITIONS)
    slim = _slim(obj, PODS, _POD_META, _picked(obj.get("spec"), _POD_SPEC), status)
    # Which StatefulSet's Pod it is (docs/cluster.md#statefulsets): about 0.5 KiB, paid
    # by those Pods only (docs/benchmarks.md, "What StatefulSets cost a slim Pod").
    _keep_controller(obj, slim, "StatefulSet")
    annotations = slim["metadata"].get("annotations")
    if isinstance(annotations, dict) and _LAST_APPLIED in annotations:
        # A copy of the whole Pod as `kubectl apply` wrote it: as large as the rest, and
        # never what an admission check's update sets.
        slim["metadata"]["annotations"] = {
            k: v for k, v in annotations.items() if k != _LAST_APPLIED
        }
    return slim


_STS_META = (
    "name",
    "namespace",
    "uid",
    "resourceVersion",
    "generation",
    "labels",
    "deletionTimestamp",
)
_STS_STATUS = ("replicas", "readyReplicas")


def slim_statefulset(obj: Json) -> Json:
    """What the `statefulset` integration reads of a StatefulSet, as a StatefulSet-shaped
    dict: its identity, generation, labels and deletion, `spec.replicas`, its pod template's
    annotations (whether our webhook marked it) and its replica counts. The pod template
    is read from the API server the one time it is needed, to create its Workload
    (`statefulsets.py`)."""
    spec = _dict(obj.get("spec"))
    slim_spec: Json = _picked(spec, ("replicas",))
    template_meta = _picked(_dict(spec.get("template")).get("metadata"), ("annotations",))
    if template_meta:
        slim_spec["template"] = {"metadata": template_meta}
    status = _slim_status(obj, _STS_STATUS, frozenset())
    return _slim(obj, STATEFULSETS, _STS_META, slim_spec, status)


_JOBSET_STATUS_ENDS = frozenset(("Completed", "Failed"))
_REPLICATED_STATUS = ("name", "ready", "succeeded", "active")


def slim_jobset(obj: Json) -> Json:
    """What the `jobset.x-k8s.io/jobset` integration reads of a JobSet, as a JobSet-shaped
    dict: its identity, generation and labels, `spec.suspend`, each replicated Job's name,
    replicas, parallelism and completions and its pod template's labels, annotations,
    node selector and tolerations (what it compares and restores), and of the status
    the conditions that end it and each replicated Job's counts. The templates' pod
    specs are read from the API server when its Workload is made or its templates
    written (`jobsets.py`)."""
    spec = _dict(obj.get("spec"))
    replicated = []
    for entry in spec.get("replicatedJobs") or []:
        job_template = _dict(_dict(entry).get("template"))
        job_spec = _dict(job_template.get("spec"))
        pod_template = _dict(job_spec.get("template"))
        slim_job_spec = _picked(job_spec, ("parallelism", "completions"))
        slim_pod_template = _non_empty(
            metadata=_picked(pod_template.get("metadata"), _JOB_TEMPLATE_META),
            spec=_picked(pod_template.get("spec"), _JOB_POD),
        )
        if slim_pod_template:
            slim_job_spec["template"] = slim_pod_template
        slim_entry = _picked(entry, ("name", "replicas"))
        if slim_job_spec:
            slim_entry["template"] = {"spec": slim_job_spec}
        replicated.append(slim_entry)
    slim_spec = _picked(spec, ("suspend",))
    if replicated:
        slim_spec["replicatedJobs"] = replicated
    status = _slim_status(obj, (), _JOBSET_STATUS_ENDS)
    counts = [
        _picked(s, _REPLICATED_STATUS)
        for s in _dict(obj.get("status")).get("replicatedJobsStatus") or []
        if isinstance(s, dict)
    ]
    if counts:
        status["replicatedJobsStatus"] = counts
    return _slim(obj, JOBSETS, _JOB_META, slim_spec, status)


def keep(resource_kind: str, obj: Json) -> Cached:
    """What the cache keeps of an object: a record for a Workload, a slim Job-shaped
    dict for a Job (one per Workload where Jobs are used, and every other Job of the
    cluster), the object (without its managed fields) for the other kinds, which are
    few and read whole."""
    if resource_kind == WORKLOADS.kind:
        return WorkloadRecord.of(obj)
    if resource_kind == JOBS.kind:
        return slim_job(obj)
    if resource_kind == PODS.kind:
        return slim_pod(obj)
    if resource_kind == STATEFULSETS.kind:
        return slim_statefulset(obj)
    if resource_kind == JOBSETS.kind:
        return slim_jobset(obj)
    return obj


def cached_key(value: Cached) -> str:
    return value.key if isinstance(value, WorkloadRecord) else object_key(value)


def cached_version(value: Cached) -> str:
    return value.resource_version if isinstance(value, WorkloadRecord) else resource_version(value)
