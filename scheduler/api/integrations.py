"""Which of Kueue's integrations a Configuration turns on (its
`integrations.frameworks`), among those queuescope has (docs/cluster.md#plain-pods)."""

from __future__ import annotations

from typing import Any, Final

from scheduler.api.config import ProcessSettings

JOB_FRAMEWORK: Final = "batch/job"  # always on (docs/scheduling.md#configuration)
POD_FRAMEWORK: Final = "pod"  # plain Pods, in cluster mode
INTEGRATED: Final = (JOB_FRAMEWORK, POD_FRAMEWORK)


def listed_frameworks(cfg: ProcessSettings | None) -> list[str]:
    """`integrations.frameworks` as written (Kueue's default: batch/job alone)."""
    integrations: Any = cfg.integrations if cfg is not None else None
    if not isinstance(integrations, dict):
        return [JOB_FRAMEWORK]
    return [str(f) for f in integrations.get("frameworks") or [JOB_FRAMEWORK]]


def pods_enabled(cfg: ProcessSettings | None) -> bool:
    return POD_FRAMEWORK in listed_frameworks(cfg)
