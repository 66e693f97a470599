"""Pod groups, as Kueue v0.19.2's `pod` integration reads them (docs/cluster.md#pod-groups).

Pods naming one group (`kueue.x-k8s.io/pod-group-name`, an annotation or a label) in
one namespace are one workload of `kueue.x-k8s.io/pod-group-total-count` pods, admitted
all or none. Pure functions on raw Pods (the JSON dicts the API server sends): the
webhook's rules, the group's composition (when its Workload can be made, and its pod
sets, one per role) and when it is finished.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from scheduler.api import raw_object as raw
from scheduler.api.errors import FieldError
from scheduler.api.job import QUEUE_NAME_LABEL
from scheduler.api.names import dns1123_subdomain
from scheduler.api.plain_pod import POD_GROUP_NAME, POD_GROUP_TOTAL_COUNT
from scheduler.api.pod_status import deleting, ended, phase, succeeded
from scheduler.api.role_hash import ROLE_HASH_ANNOTATION, role_hash
from scheduler.api.validation.common import invalid, required
from scheduler.api.validation.paths import key

FAST_ADMISSION: Final = "kueue.x-k8s.io/pod-group-fast-admission"
SERVING: Final = "kueue.x-k8s.io/pod-group-serving"
RETRIABLE_IN_GROUP: Final = "kueue.x-k8s.io/retriable-in-group"
# On a Pod whose owner made its group's Workload (a StatefulSet's Pods).
PREBUILT_WORKLOAD: Final = "kueue.x-k8s.io/prebuilt-workload-name"
# On the Workload Kueue makes of a group (and only there).
IS_GROUP_WORKLOAD: Final = "kueue.x-k8s.io/is-group-workload"

TOTAL_COUNT_PATH: Final = key("metadata.annotations", POD_GROUP_TOTAL_COUNT)
RETRIABLE_PATH: Final = key("metadata.annotations", RETRIABLE_IN_GROUP)


def group_name(pod: Mapping[str, Any]) -> str:
    """The group the Pod belongs to ("" for none): the annotation first, then the label
    (Kueue's WorkloadIdentifierAnnotations, on by default since v0.18)."""
    named = raw.annotations_of(pod).get(POD_GROUP_NAME)
    if named:
        return str(named)
    return str(raw.labels_of(pod).get(POD_GROUP_NAME) or "")


def _name_in_annotation(pod: Mapping[str, Any]) -> bool:
    return bool(raw.annotations_of(pod).get(POD_GROUP_NAME))


def group_name_path(pod: Mapping[str, Any]) -> str:
    where = "annotations" if _name_in_annotation(pod) else "labels"
    return key(f"metadata.{where}", POD_GROUP_NAME)


def prebuilt_workload(pod: Mapping[str, Any]) -> str:
    """The Workload the Pod's owner made for its group ("" for none): a group so marked
    never gets a Workload made of its Pods (docs/cluster.md#statefulsets)."""
    return str(raw.annotations_of(pod).get(PREBUILT_WORKLOAD) or "")


def _flag(pod: Mapping[str, Any], annotation: str, value: str = "true") -> bool:
    return raw.annotations_of(pod).get(annotation) == value


def is_serving(pod: Mapping[str, Any]) -> bool:
    """A serving group never finishes (its Pods are replaced as they end)."""
    return _flag(pod, SERVING)


def fast_admission(pod: Mapping[str, Any]) -> bool:
    """Made as soon as one Pod exists, for the whole count."""
    return _flag(pod, FAST_ADMISSION)


def unretriable(pod: Mapping[str, Any]) -> bool:
    """Once a Pod so marked ends and none is active, the group is finished."""
    return _flag(pod, RETRIABLE_IN_GROUP, "false")


class TotalCountError(ValueError):
    """The Pod's total count is missing or not a count; the message is Kueue's."""


def go_atoi(text: str) -> int:
    """Go's strconv.Atoi: an optional sign and decimal digits; TotalCountError in its words."""
    digits = text[1:] if text[:1] in "+-" else text
    if not digits or not digits.isascii() or not digits.isdigit():
        raise TotalCountError(f'strconv.Atoi: parsing "{text}": invalid syntax')
    return int(text)


def total_count(pod: Mapping[str, Any]) -> int:
    """The group's size the Pod declares; TotalCountError if it declares none."""
    value = raw.annotations_of(pod).get(POD_GROUP_TOTAL_COUNT)
    if value is None:
        raise TotalCountError(f"failed to extract '{POD_GROUP_TOTAL_COUNT}' annotation")
    count = go_atoi(str(value))
    if count < 1:
        raise TotalCountError(
            f"incorrect annotation value '{POD_GROUP_TOTAL_COUNT}={value}': "
            "group total count should be greater than zero"
        )
    return count


def metadata_errors(pod: Mapping[str, Any]) -> list[FieldError]:
    """Kueue's webhook rules for a Pod's group keys: the name and the total count go
    together, the name is a DNS subdomain, the count a whole number above zero."""
    name = group_name(pod)
    annotations = raw.annotations_of(pod)
    has_count = POD_GROUP_TOTAL_COUNT in annotations
    where = "annotation" if _name_in_annotation(pod) else "label"
    detail = (
        f"both the '{POD_GROUP_TOTAL_COUNT}' annotation and the '{POD_GROUP_NAME}' "
        f"{where} should be set"
    )
    if not name:
        return [required(group_name_path(pod), detail)] if has_count else []
    errors: list[FieldError] = []
    name_problems = dns1123_subdomain(name)
    if name_problems:
        # Kueue joins a name's problems into one error.
        errors.append(invalid(group_name_path(pod), name, ",".join(name_problems)))
    if not has_count:
        return [*errors, required(TOTAL_COUNT_PATH, detail)]
    try:
        total_count(pod)
    except TotalCountError as err:
        errors.append(invalid(TOTAL_COUNT_PATH, annotations[POD_GROUP_TOTAL_COUNT], str(err)))
    return errors


def update_errors(old: Mapping[str, Any], new: Mapping[str, Any]) -> list[FieldError]:
    """Kueue's rules for changing a group Pod: its group is fixed, and an unretriable
    group's Pod cannot be made retriable again."""
    errors: list[FieldError] = []
    before = group_name(old)
    if before and group_name(new) != before:
        errors.append(invalid(group_name_path(new), group_name(new), "field is immutable"))
    if group_name(new) and unretriable(old) and not unretriable(new):
        errors.append(
            FieldError(
                RETRIABLE_PATH, "Forbidden: unretriable pod group can't be converted to retriable"
            )
        )
    return errors


def pod_role(pod: Mapping[str, Any]) -> str | None:
    """The Pod's role as the webhook stored it; None when it did not (the Pod must be
    read whole to know it)."""
    stored = raw.annotations_of(pod).get(ROLE_HASH_ANNOTATION)
    return str(stored) if stored else None


def role_of_whole(pod: Mapping[str, Any]) -> str:
    """The role of a Pod read whole."""
    return pod_role(pod) or role_hash(raw.mapping(pod.get("spec")))


def runnable_or_succeeded(pod: Mapping[str, Any]) -> bool:
    """Can the Pod still run (or did it succeed)? Not when it failed, nor when it is
    being deleted before a node took it."""
    if deleting(pod) and not raw.mapping(pod.get("spec")).get("nodeName"):
        return False
    return phase(pod) != "Failed"


def compose_error(pods: Sequence[Mapping[str, Any]]) -> str | None:
    """Why no Workload can be made of the group's Pods yet (None: it can), in Kueue's
    words: fewer runnable Pods than the total count (unless fast admission), or Pods
    that disagree on their LocalQueue or their count. `pods` are the group's, the
    first one the group's voice."""
    first = pods[0]
    first_name = str(raw.metadata_of(first).get("name", ""))
    total = total_count(first)
    runnable = [p for p in pods if runnable_or_succeeded(p)]
    if not fast_admission(first) and len(runnable) < total:
        return f"'{group_name(first)}' group has fewer runnable pods than expected"
    queue = str(raw.labels_of(first).get(QUEUE_NAME_LABEL) or "")
    for pod in pods:
        if phase(pod) == "Failed":
            continue
        other = str(raw.metadata_of(pod).get("name", ""))
        other_queue = str(raw.labels_of(pod).get(QUEUE_NAME_LABEL) or "")
        if other_queue != queue:
            return (
                f"pods '{first_name}' and '{other}' has different queue names: "
                f"{queue}!={other_queue}"
            )
        other_total = total_count(pod)
        if other_total != total:
            return (
                f"pods '{first_name}' and '{other}' has different "
                f"'{POD_GROUP_TOTAL_COUNT}' values: {total}!={other_total}"
            )
    return None


@dataclass(frozen=True, slots=True)
class Role:
    """One pod set of a group's Workload: the role's hash (its name), how many Pods,
    and the name of the Pod whose spec is its template."""

    name: str
    count: int
    template_pod: str


def roles(pods: Sequence[tuple[str, str]], *, total: int, fast: bool) -> list[Role]:
    """The group's pod sets from its runnable Pods' (name, role), sorted by role as
    Kueue sorts them; with fast admission, the first Pod's role for the whole count."""
    if fast:
        name, role = pods[0]
        return [Role(role, total, name)]
    found: dict[str, Role] = {}
    for name, role in pods:
        seen = found.get(role)
        if seen is None:
            found[role] = Role(role, 1, name)
        else:
            found[role] = Role(role, seen.count + 1, seen.template_pod)
    return [found[role] for role in sorted(found)]


def finished_message(pods: Sequence[Mapping[str, Any]]) -> str | None:
    """The group's finish, in Kueue's words (None: not finished): all its Pods
    succeeded, or none is active and one said it is not to be retried. A serving group
    never finishes."""
    first = pods[0]
    if is_serving(first):
        return None
    total = total_count(first)
    done = sum(1 for p in pods if succeeded(p))
    active = any(not ended(p) for p in pods)
    if done == total or (not active and any(unretriable(p) for p in pods)):
        return f"Pods succeeded: {done}/{total}."
    return None
