"""Kueue's pod group rules on raw Pods (docs/cluster.md#pod-groups): the group's name and
count, when its Workload can be made, its roles, when it is finished; and the role hash
written as Go writes JSON. Kueue's own hashes are checked end to end
(tests/e2e/test_pod_groups.py, against its GenerateRoleHash)."""

from __future__ import annotations

from typing import Any

import pytest

from scheduler.api import pod_group
from scheduler.api.go_json import go_json
from scheduler.api.role_hash import role_hash

NAME = "kueue.x-k8s.io/pod-group-name"
COUNT = "kueue.x-k8s.io/pod-group-total-count"


def pod(
    name: str = "a",
    *,
    count: str = "2",
    queue: str = "q",
    phase: str = "Pending",
    **annotations: str,
) -> dict[str, Any]:
    return {
        "metadata": {
            "name": name,
            "labels": {NAME: "g", "kueue.x-k8s.io/queue-name": queue},
            "annotations": {COUNT: count, **annotations},
        },
        "spec": {"containers": [{"name": "c"}]},
        "status": {"phase": phase},
    }


def test_the_annotation_names_the_group_before_the_label() -> None:
    obj = pod()
    assert pod_group.group_name(obj) == "g"
    obj["metadata"]["annotations"][NAME] = "h"
    assert pod_group.group_name(obj) == "h"
    assert pod_group.group_name_path(obj) == f"metadata.annotations[{NAME}]"
    assert pod_group.group_name({"metadata": {}}) == ""


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("3", None),
        ("+3", None),
        ("x", 'strconv.Atoi: parsing "x": invalid syntax'),
        ("", 'strconv.Atoi: parsing "": invalid syntax'),
        ("-1", f"incorrect annotation value '{COUNT}=-1': group total count should be greater"),
    ],
)
def test_the_total_count_is_read_as_kueue_reads_it(value: str, message: str | None) -> None:
    if message is None:
        assert pod_group.total_count(pod(count=value)) == 3
        return
    with pytest.raises(pod_group.TotalCountError, match=message.replace("+", r"\+")):
        pod_group.total_count(pod(count=value))


def test_a_workload_is_made_of_the_whole_group_only() -> None:
    assert pod_group.compose_error([pod("a")]) == (
        "'g' group has fewer runnable pods than expected"
    )
    # A failed Pod or one deleted before a node took it does not count.
    failed = pod("b", phase="Failed")
    assert pod_group.compose_error([pod("a"), failed]) is not None
    deleted = pod("b")
    deleted["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    assert pod_group.compose_error([pod("a"), deleted]) is not None
    deleted["spec"]["nodeName"] = "n"  # running somewhere: it still counts
    assert pod_group.compose_error([pod("a"), deleted]) is None
    fast = pod("a", **{"kueue.x-k8s.io/pod-group-fast-admission": "true"})
    assert pod_group.compose_error([fast]) is None


def test_pods_that_disagree_say_so_in_kueues_words() -> None:
    assert pod_group.compose_error([pod("a"), pod("b", count="3")]) == (
        f"pods 'a' and 'b' has different '{COUNT}' values: 2!=3"
    )
    assert pod_group.compose_error([pod("a"), pod("b", queue="r")]) == (
        "pods 'a' and 'b' has different queue names: q!=r"
    )


def test_roles_count_their_pods_sorted_by_hash() -> None:
    pairs = [("w1", "ffff0000"), ("l", "0000aaaa"), ("w2", "ffff0000")]
    roles = pod_group.roles(pairs, total=3, fast=False)
    assert roles == [
        pod_group.Role("0000aaaa", 1, "l"),
        pod_group.Role("ffff0000", 2, "w1"),
    ]
    # Fast admission: the first Pod's role for the whole count.
    assert pod_group.roles(pairs, total=5, fast=True) == [pod_group.Role("ffff0000", 5, "w1")]


def test_a_group_finishes_when_all_succeeded_or_an_unretriable_one_ended() -> None:
    assert pod_group.finished_message([pod("a", phase="Succeeded"), pod("b")]) is None
    both = [pod("a", phase="Succeeded"), pod("b", phase="Succeeded")]
    assert pod_group.finished_message(both) == "Pods succeeded: 2/2."
    unretriable = pod("a", phase="Failed", **{pod_group.RETRIABLE_IN_GROUP: "false"})
    assert pod_group.finished_message([unretriable, pod("b")]) is None  # b still active
    ended = [unretriable, pod("b", phase="Succeeded")]
    assert pod_group.finished_message(ended) == "Pods succeeded: 1/2."
    serving = [pod(n, phase="Succeeded", **{pod_group.SERVING: "true"}) for n in "ab"]
    assert pod_group.finished_message(serving) is None


def test_go_json_escapes_as_go_does() -> None:
    assert go_json({"a": "<&>\u2028é"}) == '{"a":"\\u003c\\u0026\\u003e\\u2028é"}'


def test_the_role_hash_reads_only_the_shape() -> None:
    base = {"containers": [{"name": "c", "image": "x", "resources": {"requests": {"cpu": "1"}}}]}
    same = {
        "containers": [{"name": "d", "image": "y", "resources": {"requests": {"cpu": "1"}}}],
        "restartPolicy": "Never",
    }
    assert role_hash(base) == role_hash(same)
    wider = {"containers": [{"name": "c", "resources": {"requests": {"cpu": "2"}}}]}
    assert role_hash(base) != role_hash(wider)
    # Go writes a map sorted: the order a selector was written in does not matter.
    one = {**base, "nodeSelector": {"a": "1", "b": "2"}}
    two = {**base, "nodeSelector": {"b": "2", "a": "1"}}
    assert role_hash(one) == role_hash(two) != role_hash(base)
    # Pod-level requests count only when the Pod sets them.
    assert role_hash({**base, "resources": {"requests": {"cpu": "1"}}}) != role_hash(base)
