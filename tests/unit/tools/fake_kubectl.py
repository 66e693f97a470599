"""A stand-in for kubectl in tests/unit/tools/test_deploy.py, run as a subprocess.

Reads and rewrites the JSON file named by FAKE_KUBECTL_STATE: appends every call (argv and
stdin) to `calls`, fails calls whose joined argv starts with a key of `fail` (exit code
the value), answers `get apiservice NAME` from `apiservices`, any other `get WHAT ...` with
a List of `objects[WHAT]`, and `kustomize DIR` from `rendered[<DIR's name>]`, and removes
APIServices on `delete apiservice`.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import yaml


def main() -> int:
    state_file = Path(os.environ["FAKE_KUBECTL_STATE"])
    state = json.loads(state_file.read_text())
    args = sys.argv[1:]
    stdin = sys.stdin.read() if args[-2:] == ["-f", "-"] else ""
    state["calls"].append({"args": args, "stdin": stdin})
    code = next((c for p, c in state["fail"].items() if " ".join(args).startswith(p)), 0)
    if code:
        print(f"fake failure of {' '.join(args)}", file=sys.stderr)
    elif args[:2] == ["get", "apiservice"]:
        found = state["apiservices"].get(args[2])
        print(json.dumps(found) if found else "")
    elif args[0] == "get":
        items = state.get("objects", {}).get(args[1], [])
        print(json.dumps({"apiVersion": "v1", "kind": "List", "items": items}))
    elif args[:2] == ["delete", "apiservice"]:
        for name in args[2:]:
            state["apiservices"].pop(name, None)
    elif args[0] == "kustomize":
        print(yaml.safe_dump_all(state["rendered"][Path(args[1]).name]))
    state_file.write_text(json.dumps(state))
    return code


if __name__ == "__main__":
    sys.exit(main())
