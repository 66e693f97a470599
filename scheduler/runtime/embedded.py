"""The embedded store: the cluster's objects come from manifest files (`serve --embedded`).

At start-up every file is loaded (the same kinds as the simulator), applied to the
engine in dependency order, and the engine is told it is synced. An invalid file then
stops start-up with one message naming file, document and field.

While running, the files are polled: a file whose (mtime, size) changed is read and
hashed, and only a new content is parsed. The wanted objects of all files are then
compared with what was applied: changed documents update their objects, new ones
create theirs, and objects whose document or file disappeared are deleted. A file
that no longer parses is reported in the log with file, document and field, and the
objects it defined stay as they were until it is fixed: a running server never exits
because of a bad manifest. An update that breaks an immutability rule is reported and
not applied, as `kubectl apply` would be refused.

Kinds: Namespace, ResourceFlavor, AdmissionCheck, Cohort, ClusterQueue, LocalQueue, Workload
and Jobs (as the Workload the Job integration creates) go to the scheduler, and so do Pods
and StatefulSets when the Configuration turns the `pod` or `statefulset` integration on
(docs/simulate.md#statefulsets); priority classes resolve their
priorities; RBAC objects are kept for the server's authorizer
(:meth:`EmbeddedStore.rbac_objects`, with a change callback); a Configuration is only
read at start-up (:func:`find_configuration`); a Scenario is ignored with a warning.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, TypeAlias

from scheduler.api import (
    ApiError,
    ClusterRole,
    ClusterRoleBinding,
    Configuration,
    Decoded,
    LocalQueue,
    PriorityClass,
    Role,
    RoleBinding,
    Scenario,
    Workload,
    WorkloadPriorityClass,
    load_documents,
    load_yaml,
    validate_update,
)
from scheduler.api.decode import YAML_SUFFIXES
from scheduler.api.integrations import enabled_integrations
from scheduler.core.clock import Clock
from scheduler.runtime.commands import ApplyObject, DeleteObject, MarkSynced
from scheduler.runtime.engine import Engine
from scheduler.runtime.manifests import (
    APPLY_RANK,
    SCHEDULER_KINDS,
    FirstSight,
    ObjectKey,
    object_key,
    prepare,
)

log = logging.getLogger(__name__)

RbacObject: TypeAlias = Role | ClusterRole | RoleBinding | ClusterRoleBinding
RBAC_KINDS = (Role, ClusterRole, RoleBinding, ClusterRoleBinding)
_RACY_NS = 2_000_000_000


def find_configuration(paths: Sequence[str]) -> Configuration | None:
    """The Configuration document among the manifests, if any (read before the
    scheduler is built; raises ApiError on bad input or on more than one)."""
    found = [d for d in load_documents(paths) if isinstance(d.obj, Configuration)]
    if len(found) > 1:
        extra = found[1]
        raise ApiError(
            "at most one Configuration may be given",
            source=extra.source,
            index=extra.index,
            path="kind",
        )
    return found[0].obj if found and isinstance(found[0].obj, Configuration) else None


@dataclass(slots=True)
class _FileState:
    signature: tuple[int, int] | None = None  # (mtime_ns, size)
    # Modified within the mtime granularity of the last look: an edit of the same size
    # may follow with the same mtime, so the content is hashed again (as git does).
    racy: bool = True
    digest: str | None = None
    documents: list[Decoded] = field(default_factory=list)  # from the last valid content
    error: str | None = None


@dataclass(frozen=True, slots=True)
class _Read:
    """What a poll found in one file (computed off the loop when polling)."""

    path: str
    signature: tuple[int, int] | None
    racy: bool = True
    digest: str | None = None
    documents: list[Decoded] | None = None  # None: unchanged content, or unreadable
    problem: ApiError | None = None

    @property
    def error(self) -> str | None:
        return None if self.problem is None else str(self.problem)


@dataclass(slots=True)
class _Wanted:
    """One object the manifests define, ready to apply."""

    source_key: ObjectKey  # the manifest object's identity (a Job's for a Job)
    origin: Decoded
    obj: Any  # what is applied (a Job's Workload)


class EmbeddedStore:
    def __init__(
        self,
        paths: Sequence[str],
        engine: Engine,
        *,
        poll_interval: float = 1.0,
        on_rbac_change: Callable[[list[RbacObject]], None] | None = None,
        clock: Clock | None = None,
    ) -> None:
        self.paths = list(paths)
        self.engine = engine
        self.poll_interval = poll_interval
        self.on_rbac_change = on_rbac_change
        self._first_sight = FirstSight(clock or engine.scheduler.clock)
        self._files: dict[str, _FileState] = {}
        # what was applied to the engine, by the applied object's identity
        self._applied: dict[ObjectKey, _Wanted] = {}
        # prepared objects by manifest identity: (manifest object, prepared object)
        self._prepared: dict[ObjectKey, tuple[Any, Any]] = {}
        self._rbac: dict[ObjectKey, RbacObject] = {}
        self._workload_priority_classes: dict[str, WorkloadPriorityClass] = {}
        self._priority_classes: dict[str, PriorityClass] = {}
        self._local_queues: dict[ObjectKey, LocalQueue] = {}
        self._configuration: Configuration | None = None
        self._loaded = False

    # -- reading ---------------------------------------------------------------------
    def rbac_objects(self) -> list[RbacObject]:
        """Roles, ClusterRoles and their bindings from the manifests, in key order."""
        return [self._rbac[k] for k in sorted(self._rbac)]

    def local_queues(self) -> list[tuple[str, str]]:
        """(namespace, name) of every LocalQueue the manifests define."""
        return sorted((k[1], k[2]) for k in self._local_queues)

    def priority_classes(self) -> dict[str, int]:
        """WorkloadPriorityClass name -> value."""
        return {n: c.value for n, c in sorted(self._workload_priority_classes.items())}

    def priority_class_objects(
        self,
    ) -> tuple[dict[str, WorkloadPriorityClass], dict[str, PriorityClass]]:
        """The WorkloadPriorityClasses and PriorityClasses a Job's priority resolves with."""
        return dict(self._workload_priority_classes), dict(self._priority_classes)

    def configuration(self) -> Configuration | None:
        return self._configuration

    @property
    def errors(self) -> dict[str, str]:
        """Files that currently fail to load (their previous objects stay), with why."""
        return {p: f.error for p, f in self._files.items() if f.error is not None}

    def applied_keys(self) -> list[ObjectKey]:
        return sorted(self._applied)

    # -- loading and polling ---------------------------------------------------------
    def load(self) -> None:
        """Load every file and apply the objects; raises ApiError if any is invalid."""
        for path in self._discover(initial=True):
            read = self._read(path, None)
            if read.problem is not None:
                raise read.problem
            assert read.documents is not None
            self._files[path] = _FileState(read.signature, read.racy, read.digest, read.documents)
            _warn_ignored(path, read.documents)
        for state in self._files.values():
            for d in state.documents:
                if isinstance(d.obj, Configuration) and self._configuration is None:
                    self._configuration = d.obj
        self._reconcile(strict=True)
        self._loaded = True
        self.engine.submit(MarkSynced())
        log.info("event=manifests-loaded files=%d objects=%d", len(self._files), len(self._applied))

    def check_once(self) -> bool:
        """Poll the files once, synchronously; True if any object changed."""
        return self._commit(self._scan(self._known()))

    async def check(self) -> bool:
        """Poll once, reading and parsing changed files in a worker thread (a large
        manifest would otherwise hold the loop while it parses)."""
        reads = await asyncio.to_thread(self._scan, self._known())
        return self._commit(reads)

    async def run(self) -> None:
        """Poll every `poll_interval` seconds until cancelled; never raises."""
        while True:
            await asyncio.sleep(self.poll_interval)
            try:
                await self.check()
            except Exception:
                log.exception("event=manifest-poll-failed")

    # -- files -----------------------------------------------------------------------
    def _discover(self, *, initial: bool = False) -> list[str]:
        """The manifest files, in load order: each path, a directory's YAML files
        (not recursive) by name. A missing path fails start-up, later it is empty."""
        files: list[str] = []
        for path in self.paths:
            target = Path(path)
            if target.is_dir():
                names = sorted(
                    (p for p in target.iterdir() if p.is_file() and p.suffix in YAML_SUFFIXES),
                    key=lambda p: p.name,
                )
                files.extend(str(p) for p in names)
            elif target.exists():
                files.append(str(target))
            elif initial:
                raise ApiError("no such file or directory", source=path)
        return list(dict.fromkeys(files))

    def _read(self, path: str, known: _FileState | None) -> _Read:
        """Stat, and read, hash and parse only if the file may have changed."""
        try:
            st = os.stat(path)
        except OSError as err:
            return _Read(path, None, problem=ApiError(f"cannot read: {err}", source=path))
        signature = (st.st_mtime_ns, st.st_size)
        racy = time.time_ns() - st.st_mtime_ns < _RACY_NS
        if known is not None and known.signature == signature and not known.racy:
            return _Read(path, signature, racy)
        return self._read_content(_Read(path, signature, racy), known)

    @staticmethod
    def _read_content(stat: _Read, known: _FileState | None) -> _Read:
        """Read, hash and (if the hash moved) parse a file that `stat` found changed."""
        path = stat.path
        try:
            data = Path(path).read_bytes()
        except OSError as err:
            return replace(stat, problem=ApiError(f"cannot read: {err}", source=path))
        digest = hashlib.sha256(data).hexdigest()
        if known is not None and known.digest == digest:
            return replace(stat, digest=digest)
        try:
            documents = load_yaml(data.decode("utf-8"), path)
        except UnicodeDecodeError as err:
            problem = ApiError(f"cannot read: {err}", source=path)
            return replace(stat, digest=digest, problem=problem)
        except ApiError as err:
            return replace(stat, digest=digest, problem=err)
        return replace(stat, digest=digest, documents=documents)

    def _known(self) -> dict[str, _FileState]:
        """Copies of the file states, for a scan that may run off the loop."""
        return {path: replace(state) for path, state in self._files.items()}

    def _scan(self, known: dict[str, _FileState]) -> list[_Read]:
        return [self._read(path, known.get(path)) for path in self._discover()]

    def _commit(self, reads: list[_Read]) -> bool:
        changed = False
        present = {r.path for r in reads}
        for path in [p for p in self._files if p not in present]:
            del self._files[path]
            log.info("event=manifest-removed file=%s", path)
            changed = True
        order: dict[str, _FileState] = {}
        for read in reads:
            state = self._files.get(read.path) or _FileState()
            order[read.path] = state
            if read.signature is None and read.error is not None:
                continue  # vanished between listing and stat: the next poll decides
            state.signature = read.signature
            state.racy = read.racy
            if read.digest is None or read.digest == state.digest:
                continue
            state.digest = read.digest
            if read.error is not None:
                state.error = read.error
                log.warning("event=manifest-invalid file=%s error=%r", read.path, read.error)
                continue  # keep its previous documents and their objects
            assert read.documents is not None
            state.documents = read.documents
            state.error = None
            changed = True
            _warn_ignored(read.path, read.documents)
            log.info("event=manifest-changed file=%s documents=%d", read.path, len(read.documents))
        self._files = order
        if changed:
            self._reconcile(strict=False)
        return changed

    # -- objects ---------------------------------------------------------------------
    def _reconcile(self, *, strict: bool) -> None:
        """Bring the engine to what the files say. `strict` (start-up) raises on the
        first bad object; otherwise bad objects are reported and skipped."""
        documents = [d for state in self._files.values() for d in state.documents]
        self._collect_side_kinds(documents)
        wanted = self._wanted(documents, strict=strict)
        self._apply_diff(wanted)

    def _collect_side_kinds(self, documents: list[Decoded]) -> None:
        wpcs: dict[str, WorkloadPriorityClass] = {}
        pcs: dict[str, PriorityClass] = {}
        rbac: dict[ObjectKey, RbacObject] = {}
        local_queues: dict[ObjectKey, LocalQueue] = {}
        for d in documents:
            obj = d.obj
            if isinstance(obj, WorkloadPriorityClass):
                wpcs[obj.metadata.name] = obj
            elif isinstance(obj, PriorityClass):
                pcs[obj.metadata.name] = obj
            elif isinstance(obj, RBAC_KINDS):
                rbac[object_key(obj)] = obj
            elif isinstance(obj, LocalQueue):
                local_queues[object_key(obj)] = obj
            elif (
                isinstance(obj, Configuration)
                and self._loaded
                and not _same(obj, self._configuration)
            ):
                log.warning(
                    "event=configuration-changed file=%s "
                    "msg='a Configuration change takes effect at the next start'",
                    d.source,
                )
        self._workload_priority_classes = wpcs
        self._priority_classes = pcs
        self._local_queues = local_queues
        if _dumps(rbac) != _dumps(self._rbac):
            self._rbac = rbac
            if self._loaded or self.on_rbac_change is not None:
                log.info("event=rbac-changed objects=%d", len(rbac))
            if self.on_rbac_change is not None:
                self.on_rbac_change(self.rbac_objects())

    def _wanted(self, documents: list[Decoded], *, strict: bool) -> dict[ObjectKey, _Wanted]:
        by_source: dict[ObjectKey, Decoded] = {}
        for d in documents:
            if isinstance(d.obj, SCHEDULER_KINDS):
                key = object_key(d.obj)
                if key in by_source:
                    log.warning(
                        "event=manifest-duplicate kind=%s namespace=%s name=%s first=%s "
                        "second=%s msg='the later document wins'",
                        *key,
                        by_source[key].ref,
                        d.ref,
                    )
                    del by_source[key]  # re-inserted below: the later position counts
                by_source[key] = d
        wanted: dict[ObjectKey, _Wanted] = {}
        for source_key, d in by_source.items():
            obj = self._prepared_object(source_key, d, strict=strict)
            if obj is None:
                continue
            wanted[object_key(obj)] = _Wanted(source_key, d, obj)
        for source_key in [k for k in self._prepared if k not in by_source]:
            del self._prepared[source_key]
        self._first_sight.retain(by_source.keys())
        return wanted

    def _prepared_object(self, source_key: ObjectKey, d: Decoded, *, strict: bool) -> Any:
        cached = self._prepared.get(source_key)
        if cached is not None and (cached[0] is d.obj or _same(cached[0], d.obj)):
            self._prepared[source_key] = (d.obj, cached[1])
            return cached[1]
        try:
            obj = prepare(
                d.obj,
                self._first_sight.of(source_key),
                self._workload_priority_classes,
                self._priority_classes,
                integrations=enabled_integrations(self._configuration),
            )
        except ApiError as err:
            error = err.at(d.source, d.index, d.item) if not err.source else err
            if strict:
                raise error from None
            log.warning("event=manifest-invalid file=%s error=%r", d.source, str(error))
            # Its previous version, if any, stays applied.
            return cached[1] if cached is not None else None
        if obj is not None:
            self._prepared[source_key] = (d.obj, obj)
        return obj

    def _apply_diff(self, wanted: dict[ObjectKey, _Wanted]) -> None:
        removed = [key for key in self._applied if key not in wanted]
        updated: list[_Wanted] = []
        for key, item in wanted.items():
            old = self._applied.get(key)
            if old is not None and (old.obj is item.obj or _same(old.obj, item.obj)):
                old.origin = item.origin
                continue
            if old is not None:
                errors = self._update_errors(old.obj, item.obj)
                if errors:
                    log.warning(
                        "event=manifest-update-rejected file=%s document=%s kind=%s name=%s "
                        "error=%r",
                        item.origin.source,
                        item.origin.index,
                        key[0],
                        "/".join(p for p in key[1:] if p),
                        "; ".join(errors),
                    )
                    continue
            updated.append(item)
        rank = APPLY_RANK.get
        workloads_gone = [k for k in removed if k[0] == "Workload"]
        others_gone = sorted(
            (k for k in removed if k[0] != "Workload"), key=lambda k: -(rank(k[0]) or 0)
        )
        for key in workloads_gone:
            self._delete(key)
        for item in sorted(updated, key=lambda i: rank(str(i.obj.kind)) or 0):
            self._applied[object_key(item.obj)] = item
            self.engine.submit(ApplyObject(item.obj))
        for key in others_gone:
            self._delete(key)

    def _delete(self, key: ObjectKey) -> None:
        del self._applied[key]
        kind, namespace, name = key
        self.engine.submit(DeleteObject(kind, namespace or None, name))

    def _update_errors(self, old: Any, new: Any) -> list[str]:
        """docs/scheduling.md#invalid-input: an update that breaks an immutability rule is
        refused."""
        reserved = None
        if isinstance(new, Workload):
            # The reservation lives in the core, not in the manifest.
            wl = self.engine.scheduler.workload(f"{new.metadata.namespace}/{new.metadata.name}")
            reserved = wl is not None and wl.holds_quota
        return [str(e) for e in validate_update(old, new, reserved=reserved)]


def _warn_ignored(path: str, documents: list[Decoded]) -> None:
    for d in documents:
        if isinstance(d.obj, Scenario):
            log.warning(
                "event=manifest-ignored file=%s document=%s kind=Scenario "
                "msg='scenarios are for queuescope simulate'",
                path,
                d.index,
            )


def _same(a: Any, b: Any) -> bool:
    """Equal content (source positions aside): compared by their JSON form."""
    if type(a) is not type(b):
        return False
    return bool(_dump(a) == _dump(b))


def _dump(obj: Any) -> Any:
    return obj.model_dump(mode="json", by_alias=True)


def _dumps(objects: dict[ObjectKey, RbacObject]) -> dict[ObjectKey, Any]:
    return {k: _dump(v) for k, v in objects.items()}
