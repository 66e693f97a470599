"""MultiKueueCluster and MultiKueueConfig between v1beta1 and v1beta2 (docs/api-versions.md).

A v1beta1 MultiKueueCluster names its kubeconfig (and, only to survive a round trip, a
ClusterProfile) directly in `spec`; v1beta2 puts the one it uses under
`spec.clusterSource`. v1beta1 requires a kubeconfig, so a v1beta2 object without one
reads in v1beta1 with an empty `location`, which means "none" going back up, as in
Kueue. v1beta2's `spec.quotaManagement` of a MultiKueueConfig has no v1beta1 field and is
kept in the stash.
"""

from __future__ import annotations

from typing import Any

from scheduler.api.conversion.fields import keep_field, mapping, replace_key
from scheduler.api.conversion.stash import Recorder

_KUBE_CONFIG = "kubeConfig"
_PROFILE = "clusterProfileRef"
_SOURCE = "clusterSource"
# What v1beta1 reads when a v1beta2 object names no kubeconfig.
_NO_KUBE_CONFIG: dict[str, Any] = {"location": ""}


def multikueue_cluster_up(doc: dict[str, Any], rec: Recorder) -> None:
    spec = mapping(doc, "spec")
    if spec is None or (_KUBE_CONFIG not in spec and _PROFILE not in spec):
        return
    source: dict[str, Any] = {}
    kube_config = spec.get(_KUBE_CONFIG)
    if isinstance(kube_config, dict) and kube_config.get("location", "") == "":
        # No kubeconfig in v1beta2 terms; converting down gives _NO_KUBE_CONFIG back, so
        # only another value needs keeping (put back unless a kubeconfig was set since).
        if kube_config != _NO_KUBE_CONFIG:
            at = ("spec", _KUBE_CONFIG)
            rec.keep_if(at, kube_config, at, dict(_NO_KUBE_CONFIG))
    elif _KUBE_CONFIG in spec:
        source[_KUBE_CONFIG] = kube_config
    if _PROFILE in spec:
        source[_PROFILE] = spec[_PROFILE]
    first = _KUBE_CONFIG if _KUBE_CONFIG in spec else _PROFILE
    replace_key(spec, first, _SOURCE, source)
    spec.pop(_KUBE_CONFIG, None)
    spec.pop(_PROFILE, None)


def multikueue_cluster_down(doc: dict[str, Any], rec: Recorder) -> None:
    spec = mapping(doc, "spec")
    source = mapping(spec, _SOURCE)
    if spec is None or source is None:
        return
    replace_key(spec, _SOURCE, _KUBE_CONFIG, source.get(_KUBE_CONFIG, dict(_NO_KUBE_CONFIG)))
    if _PROFILE in source:
        spec[_PROFILE] = source[_PROFILE]


def multikueue_config_down(doc: dict[str, Any], rec: Recorder) -> None:
    keep_field(mapping(doc, "spec"), "quotaManagement", ("spec",), rec)
