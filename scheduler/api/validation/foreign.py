"""Rules of the kinds queuescope stores but does not act on: Topology,
ProvisioningRequestConfig, MultiKueueConfig, MultiKueueCluster
(docs/scheduling.md#kinds-stored-but-not-acted-on).

Kueue checks these kinds only with their CRD schemas (lengths, patterns, item counts and
a few CEL rules), which queuescope's generated CRDs do not carry; these functions are
those checks, on the stored (`v1beta2`) form, worded as kube-apiserver words them.
Types, enums and required fields are the models' (pydantic).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from scheduler.api.errors import FieldError
from scheduler.api.multikueue import MultiKueueCluster, MultiKueueConfig
from scheduler.api.provisioning import (
    ProvisioningRequestConfig,
    ProvisioningRequestPodSetUpdatesNodeSelector,
)
from scheduler.api.topology import Topology
from scheduler.api.validation.common import (
    at_most,
    duplicate,
    invalid,
    item_count,
    required,
    subdomain,
)
from scheduler.api.validation.meta import validate_conditions
from scheduler.api.validation.paths import child, index, key
from scheduler.api.validation.update import IMMUTABLE
from scheduler.api.validation.v1beta2 import too_long

# A node label key as the CRDs publish it (an optional DNS-subdomain prefix and a name).
LABEL_KEY_PATTERN = (
    r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?"
    r"(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])$"
)
_LABEL_KEY = re.compile(LABEL_KEY_PATTERN, re.ASCII)
HOSTNAME_LABEL = "kubernetes.io/hostname"
HOSTNAME_LAST = "the kubernetes.io/hostname label can only be used at the lowest level of topology"
MAX_LEVELS = 16
MAX_NODE_LABEL = 316
MAX_PARAMETERS = 100
MAX_PARAMETER_VALUE = 255
MAX_MANAGED_RESOURCES = 100
MAX_NODE_SELECTORS = 8
MAX_SELECTOR_KEY = 317
MAX_CLASS_DETAIL = 32768
MAX_CLUSTERS = 20
MAX_CLUSTER_NAME = 256
MAX_LOCATION = 256
MAX_PROFILE_NAME = 256
MAX_CLUSTER_CONDITIONS = 16
EXACTLY_ONE_SOURCE = "exactly one of the fields in [kubeConfig clusterProfileRef] must be set"


def _string(path: str, value: str, limit: int) -> list[FieldError]:
    """MinLength 1 and MaxLength `limit`."""
    if not value:
        return [required(path)]
    if len(value) > limit:
        return [too_long(path, limit)]
    return []


def _label_key(path: str, value: str, limit: int) -> list[FieldError]:
    errors = _string(path, value, limit)
    if not errors and _LABEL_KEY.fullmatch(value) is None:
        errors.append(invalid(path, value, f"{path} in body should match '{LABEL_KEY_PATTERN}'"))
    return errors


def _unique(path: str, values: Sequence[str]) -> list[FieldError]:
    """A list without repeats: each repeat named by its index."""
    seen: set[str] = set()
    errors: list[FieldError] = []
    for i, value in enumerate(values):
        if value in seen:
            errors.append(duplicate(index(path, i), value))
        seen.add(value)
    return errors


def validate_topology(obj: Topology) -> list[FieldError]:
    if obj.spec is None:
        return []
    path = "spec.levels"
    levels = [level.node_label for level in obj.spec.levels]
    errors = item_count(path, levels, 1, MAX_LEVELS)
    for i, label in enumerate(levels):
        errors += _label_key(child(index(path, i), "nodeLabel"), label, MAX_NODE_LABEL)
    errors += _unique(path, levels)
    if HOSTNAME_LABEL in levels and levels[-1] != HOSTNAME_LABEL:
        errors.append(invalid(path, HOSTNAME_LABEL, HOSTNAME_LAST))
    return errors


def validate_topology_update(old: Topology, new: Topology) -> list[FieldError]:
    """Levels cannot change: ResourceFlavors and admitted Workloads refer to them."""
    old_levels = old.spec.levels if old.spec is not None else None
    new_levels = new.spec.levels if new.spec is not None else None
    if old_levels != new_levels:
        return [FieldError("spec.levels", IMMUTABLE)]
    return []


def validate_provisioning_request_config(obj: ProvisioningRequestConfig) -> list[FieldError]:
    spec = obj.spec
    if spec is None:
        return []
    errors: list[FieldError] = []
    class_path = "spec.provisioningClassName"
    if not spec.provisioning_class_name:
        errors.append(required(class_path))
    else:
        errors += subdomain(class_path, spec.provisioning_class_name)
    errors += at_most("spec.parameters", spec.parameters, MAX_PARAMETERS)
    for name, value in spec.parameters.items():
        if len(value) > MAX_PARAMETER_VALUE:
            errors.append(too_long(key("spec.parameters", name), MAX_PARAMETER_VALUE))
    resources = spec.managed_resources
    errors += at_most("spec.managedResources", resources, MAX_MANAGED_RESOURCES)
    errors += _unique("spec.managedResources", resources)
    if spec.pod_set_updates is not None:
        errors += _node_selector_updates(spec.pod_set_updates.node_selector)
    return errors


def _node_selector_updates(
    updates: Sequence[ProvisioningRequestPodSetUpdatesNodeSelector],
) -> list[FieldError]:
    path = "spec.podSetUpdates.nodeSelector"
    errors = at_most(path, updates, MAX_NODE_SELECTORS)
    keys: list[str] = []
    for i, update in enumerate(updates):
        here = index(path, i)
        errors += _label_key(child(here, "key"), update.key, MAX_SELECTOR_KEY)
        errors += _string(
            child(here, "valueFromProvisioningClassDetail"),
            update.value_from_provisioning_class_detail,
            MAX_CLASS_DETAIL,
        )
        keys.append(update.key)
    for error in _unique(path, keys):
        errors.append(FieldError(child(error.path, "key"), error.detail))
    return errors


def validate_multikueue_config(obj: MultiKueueConfig) -> list[FieldError]:
    if obj.spec is None:
        return []
    path = "spec.clusters"
    clusters = obj.spec.clusters
    errors = item_count(path, clusters, 1, MAX_CLUSTERS)
    for i, name in enumerate(clusters):
        if len(name) > MAX_CLUSTER_NAME:
            errors.append(too_long(index(path, i), MAX_CLUSTER_NAME))
    errors += _unique(path, clusters)
    return errors


def validate_multikueue_cluster(obj: MultiKueueCluster) -> list[FieldError]:
    conditions = obj.status.conditions
    errors = validate_conditions("status.conditions", conditions)
    errors += at_most("status.conditions", conditions, MAX_CLUSTER_CONDITIONS)
    if obj.spec is None:
        return errors
    path = "spec.clusterSource"
    source = obj.spec.cluster_source
    if (source.kube_config is None) == (source.cluster_profile_ref is None):
        errors.append(FieldError(path, f'Invalid value: "object": {EXACTLY_ONE_SOURCE}'))
    if source.kube_config is not None:
        errors += _string(
            child(path, "kubeConfig.location"), source.kube_config.location, MAX_LOCATION
        )
    if source.cluster_profile_ref is not None:
        errors += _string(
            child(path, "clusterProfileRef.name"), source.cluster_profile_ref.name, MAX_PROFILE_NAME
        )
    return errors
