"""The name of the Workload an integration creates for an object it manages.

Kueue's rule, so that a Workload Kueue made and the one queuescope would make for the
same object have the same name (docs/scheduling.md#workload-names): the prefix is
`<kind in lower case>-<object name>`, cut so the whole stays within 253 characters,
then `-` and the first 5 hex digits of SHA-1 over "<kind>\\n<group>\\n<name>\\n<uid>" (the
group is empty for the core group). The hash tells apart objects that reuse a name.
"""

from __future__ import annotations

import hashlib
from typing import Final

MAX_NAME: Final = 253
HASH_LENGTH: Final = 5


def workload_name(kind: str, group: str, owner_name: str, owner_uid: str) -> str:
    digest = hashlib.sha1(
        f"{kind}\n{group}\n{owner_name}\n{owner_uid}".encode(), usedforsecurity=False
    )
    prefix = f"{kind.lower()}-{owner_name}"[: MAX_NAME - HASH_LENGTH - 1]
    return f"{prefix}-{digest.hexdigest()[:HASH_LENGTH]}"
