"""Rules of the smaller kinds: priority classes, Jobs, Pods, Scenarios and RBAC objects."""

from __future__ import annotations

from scheduler.api.errors import FieldError
from scheduler.api.job import (
    JOB_MIN_PARALLELISM_ANNOTATION,
    PRIORITY_CLASS_LABEL,
    Job,
)
from scheduler.api.kinds import KINDS
from scheduler.api.names import dns1123_label, dns1123_subdomain
from scheduler.api.plain_pod import Pod
from scheduler.api.pod_admission import pod_errors
from scheduler.api.priority import PriorityClass
from scheduler.api.rbac import (
    RBAC_V1,
    ClusterRole,
    ClusterRoleBinding,
    PolicyRule,
    Role,
    RoleBinding,
    Subject,
)
from scheduler.api.scenario import EVENT_ACTIONS, Scenario, split_ref
from scheduler.api.validation.common import (
    at_least,
    invalid,
    name_errors,
    required,
    subdomain,
    unsupported,
)
from scheduler.api.validation.paths import child, index, key
from scheduler.api.validation.queue_labels import queued_label_errors
from scheduler.api.validation.selector import validate_label_selector
from scheduler.api.validation.workload import validate_pod_spec

# Kubernetes reserves priorities above this for system-* classes.
HIGHEST_USER_DEFINABLE_PRIORITY = 1_000_000_000
_EVENT_JSON_NAMES = EVENT_ACTIONS
_KNOWN_KINDS = sorted({kind for _, kind in KINDS})


def validate_priority_class(pc: PriorityClass) -> list[FieldError]:
    errors: list[FieldError] = []
    if pc.metadata.name.startswith("system-"):
        errors.append(
            invalid(
                "metadata.name",
                pc.metadata.name,
                "priority class names with 'system-' prefix are reserved",
            )
        )
    if pc.value > HIGHEST_USER_DEFINABLE_PRIORITY:
        errors.append(
            invalid(
                "value",
                pc.value,
                "maximum allowed value of a user defined priority is "
                f"{HIGHEST_USER_DEFINABLE_PRIORITY}",
            )
        )
    return errors


def validate_job(job: Job) -> list[FieldError]:
    spec = job.spec
    errors: list[FieldError] = []
    # The Job controller puts the name in a label of every pod, hence label length.
    if len(job.metadata.name) > 63:
        errors.append(
            invalid("metadata.name", job.metadata.name, "must be no more than 63 characters")
        )
    errors += at_least("spec.parallelism", spec.parallelism, 0)
    errors += at_least("spec.completions", spec.completions, 0)
    errors += validate_pod_spec("spec.template.spec", spec.template.spec)
    errors += queued_label_errors(job.metadata.labels)
    raw_min = job.metadata.annotations.get(JOB_MIN_PARALLELISM_ANNOTATION)
    if raw_min is not None:
        path = key("metadata.annotations", JOB_MIN_PARALLELISM_ANNOTATION)
        try:
            min_parallelism = int(raw_min)
        except ValueError:
            errors.append(invalid(path, raw_min, "must be an integer"))
        else:
            if not 1 <= min_parallelism < spec.parallelism:
                errors.append(
                    invalid(
                        path,
                        raw_min,
                        f"should be between 1 and {spec.parallelism - 1} (parallelism - 1)",
                    )
                )
    return errors


def validate_plain_pod(pod: Pod) -> list[FieldError]:
    """A Pod document (`simulate`, `serve --embedded`, the what-if dry run): its spec as
    a Job's pod template's, and Kueue's rules for a Pod it manages (a queue name that is
    a DNS subdomain, the managed label only `true`, a pod group's keys well formed)."""
    meta = pod.metadata
    errors = validate_pod_spec("spec", pod.spec)
    errors += pod_errors({"metadata": {"labels": meta.labels, "annotations": meta.annotations}})
    if meta.labels.get(PRIORITY_CLASS_LABEL):
        errors += subdomain(
            key("metadata.labels", PRIORITY_CLASS_LABEL), meta.labels[PRIORITY_CLASS_LABEL]
        )
    return errors


def _ref_errors(path: str, ref: str) -> list[FieldError]:
    namespace, name = split_ref(ref)
    if not name:
        return [required(path, 'a workload reference is "namespace/name"')]
    errors = name_errors(path, namespace, dns1123_label)
    errors += name_errors(path, name, dns1123_subdomain)
    return errors


def validate_scenario(scenario: Scenario) -> list[FieldError]:
    spec = scenario.spec
    errors: list[FieldError] = []
    if spec.cycles is not None and spec.until_idle is not None:
        errors.append(FieldError("spec", "cycles and untilIdle are mutually exclusive"))
    errors += at_least("spec.cycles", spec.cycles, 0)
    for i, event in enumerate(spec.events):
        here = index("spec.events", i)
        errors += at_least(child(here, "at"), event.at, 0)
        actions = event.actions
        if len(actions) != 1:
            listed = ", ".join(_EVENT_JSON_NAMES)
            got = ", ".join(actions) if actions else "none"
            errors.append(FieldError(here, f"exactly one of {listed} must be set (got {got})"))
        if event.failed and event.finish is None:
            errors.append(invalid(child(here, "failed"), True, "only allowed with finish"))
        for name, ref in (
            ("podsReady", event.pods_ready),
            ("finish", event.finish),
            ("deactivate", event.deactivate),
            ("activate", event.activate),
            (
                "setCheckState.workload",
                event.set_check_state.workload if event.set_check_state else None,
            ),
        ):
            if ref is not None:
                errors += _ref_errors(child(here, name), ref)
        change = event.set_check_state
        if change is not None:
            path = child(here, "setCheckState")
            if not change.check:
                errors.append(required(child(path, "check")))
            errors += at_least(child(path, "requeueAfterSeconds"), change.requeue_after_seconds, 0)
        target = event.delete
        if target is not None:
            path = child(here, "delete")
            if target.kind not in _KNOWN_KINDS:
                errors.append(unsupported(child(path, "kind"), target.kind, _KNOWN_KINDS))
            if not target.name:
                errors.append(required(child(path, "name")))
    return errors


def validate_role(role: Role | ClusterRole) -> list[FieldError]:
    errors = _rules("rules", role.rules)
    if isinstance(role, ClusterRole) and role.aggregation_rule is not None:
        for i, selector in enumerate(role.aggregation_rule.cluster_role_selectors):
            path = f"aggregationRule.clusterRoleSelectors[{i}]"
            errors += validate_label_selector(path, selector)
    return errors


def _rules(path: str, rules: list[PolicyRule]) -> list[FieldError]:
    errors: list[FieldError] = []
    for i, rule in enumerate(rules):
        here = index(path, i)
        if not rule.verbs:
            errors.append(required(child(here, "verbs"), "verbs must contain at least one value"))
        if rule.non_resource_urls and (rule.resources or rule.api_groups):
            errors.append(
                invalid(
                    child(here, "nonResourceURLs"),
                    ",".join(rule.non_resource_urls),
                    "rules cannot apply to both regular resources and non-resource URLs",
                )
            )
    return errors


def _subjects(subjects: list[Subject], *, cluster: bool) -> list[FieldError]:
    errors: list[FieldError] = []
    for i, subject in enumerate(subjects):
        here = index("subjects", i)
        if not subject.name:
            errors.append(required(child(here, "name")))
        if subject.kind == "ServiceAccount" and cluster and not subject.namespace:
            errors.append(required(child(here, "namespace")))
    return errors


def validate_binding(binding: RoleBinding | ClusterRoleBinding) -> list[FieldError]:
    cluster = isinstance(binding, ClusterRoleBinding)
    ref = binding.role_ref
    errors: list[FieldError] = []
    if ref.api_group != RBAC_V1.split("/")[0]:
        errors.append(unsupported("roleRef.apiGroup", ref.api_group, ["rbac.authorization.k8s.io"]))
    if cluster and ref.kind != "ClusterRole":
        errors.append(unsupported("roleRef.kind", ref.kind, ["ClusterRole"]))
    if not ref.name:
        errors.append(required("roleRef.name"))
    errors += _subjects(binding.subjects, cluster=cluster)
    return errors
