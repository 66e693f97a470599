"""Names for objects written with `metadata.generateName` (docs/simulate.md "Generated names").

The API server appends five random characters to `generateName` (cut to 58 characters
first) when it creates such an object. `simulate` has no server and must give the same
output for the same input, so the five characters are derived from where the object
is written instead: a SHA-256 of the file (as given on the command line), the
document index, the position in a `List` and the `generateName`, spelled in the
server's alphabet of consonants and digits. The result is a name the API server could
have generated.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import Any, Final

# Kubernetes' name generator: no vowels (no accidental words) and no 0/1/3 look-alikes.
ALPHABET: Final = "bcdfghjklmnpqrstvwxz2456789"
SUFFIX_LENGTH: Final = 5
MAX_BASE_LENGTH: Final = 63 - SUFFIX_LENGTH


def generated_name(generate_name: str, source: str, index: int, item: int | None) -> str:
    base = generate_name[:MAX_BASE_LENGTH]
    seed = f"{source}\n{index}\n{'' if item is None else item}\n{generate_name}"
    number = int.from_bytes(hashlib.sha256(seed.encode("utf-8")).digest()[:8], "big")
    suffix = ""
    for _ in range(SUFFIX_LENGTH):
        number, digit = divmod(number, len(ALPHABET))
        suffix += ALPHABET[digit]
    return base + suffix


def assign_generated_name(data: Any, source: str, index: int, item: int | None) -> Any:
    """`data` with `metadata.name` set from `metadata.generateName` when only that is given."""
    if not isinstance(data, Mapping):
        return data
    metadata = data.get("metadata")
    if not isinstance(metadata, Mapping) or metadata.get("name"):
        return data
    generate_name = metadata.get("generateName")
    if not isinstance(generate_name, str) or not generate_name:
        return data
    name = generated_name(generate_name, source, index, item)
    return {**data, "metadata": {**metadata, "name": name}}
