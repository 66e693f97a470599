"""The Configuration `serve` runs with: `--config`'s, or the one among the embedded manifests
(docs/scheduling.md#configuration)."""

from __future__ import annotations

import logging
from collections.abc import Sequence

from scheduler.api import ApiError, Configuration
from scheduler.api.config_ignored import ignored_settings
from scheduler.runtime.embedded import find_configuration

log = logging.getLogger(__name__)


def load_configuration(
    config: str | None, manifests: Sequence[str] = (), *, cluster_mode: bool = False
) -> Configuration | None:
    """`config`'s Configuration (a file without one is bad input), else the one among
    `manifests`, if any. Raises ApiError on bad input; logs a warning for each setting
    queuescope ignores (in cluster mode, or in embedded mode)."""
    if config:
        found = find_configuration([config])
        if found is None:
            raise ApiError(
                "--config: the file holds no Configuration (config.kueue.x-k8s.io)",
                source=config,
            )
    else:
        found = find_configuration(manifests) if manifests else None
    if found is not None:
        for setting in ignored_settings(found, cluster_mode=cluster_mode):
            log.warning(
                "event=configuration-setting-ignored setting=%s why=%r", setting.path, setting.why
            )
    return found
