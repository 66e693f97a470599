"""Scenario fixtures for `queuescope simulate`, checked against the specification.

Every folder `tests/conformance/<NNN-name>/` holds an `input.yaml` (the simulator's
input) and an `expected.yaml` stating the rule under test and the expected result.
The expectations were derived from the specification, not from the program's output.

`expected.yaml` keys:

* `rule` (required): the spec rule the fixture checks, with its section.
* `args`: extra command-line arguments (default: none, i.e. run until idle).
* `exit`: expected exit status (default 0).
* `stderr_contains`: substrings that must occur in standard error.
* `xfail`: reason; the fixture is a known disagreement with the spec. It runs with
  strict xfail semantics: once it passes, the test fails so the marker gets removed.
* `expect`: a subset of the JSON output, keyed as follows.

  - `workloads: {"<ns>/<name>": {...}}`; the key `"<ns>/<Kind>:<name>"` finds the
    Workload owned by that object (a Job's Workload name carries a hash). A `null`
    value means the Workload must not exist. Per workload:
    `admitted` (true: QuotaReserved=True and Admitted=True; false: neither is True and
    there is no `status.admission`), `clusterQueue`, `admission: null` (no admission),
    `podSets: {<name>: {count, flavors, resourceUsage}}` (flavors and resourceUsage
    compared exactly), `conditions: {<type>: {status, reason, message, ...} | null}`,
    `resourceRequests: {<podSet>: {<resource>: <quantity>}}` (exact per pod set),
    `spec` and `metadata` (generic subsets of the object).
  - `clusterQueues: {<name>: {...}}`: `pendingWorkloads`, `reservingWorkloads`,
    `admittedWorkloads`, `conditions`, `flavorsUsage` / `flavorsReservation` as
    `{<flavor>: {<resource>: {total, borrowed}}}`.
  - `localQueues: {"<ns>/<name>": {...}}`: the counts, `conditions`, `flavorUsage` /
    `flavorsReservation` as `{<flavor>: {<resource>: <total>}}`.
  - `cohorts: {<name>: {conditions: ...} | null}`.
  - `pending: {<cq>: [<workload key>, ...]}`: the PendingWorkloadsSummary, exact order.
  - `positions: {<cq>: {<workload key>: [positionInClusterQueue, positionInLocalQueue]}}`.

In generic subsets, an expected `null` means "absent (or null)"; lists must have the
same length and match element by element.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml

HERE = Path(__file__).resolve().parent

Json = dict[str, Any]

TOP_LEVEL_KEYS = frozenset({"rule", "args", "exit", "stderr_contains", "xfail", "expect"})
EXPECT_KEYS = frozenset(
    {"workloads", "clusterQueues", "localQueues", "cohorts", "pending", "positions"}
)
WORKLOAD_KEYS = frozenset(
    {
        "admitted",
        "clusterQueue",
        "admission",
        "podSets",
        "conditions",
        "resourceRequests",
        "requeueState",
        "spec",
        "metadata",
    }
)
QUEUE_COUNT_KEYS = ("pendingWorkloads", "reservingWorkloads", "admittedWorkloads")
CQ_KEYS = frozenset(
    {
        *QUEUE_COUNT_KEYS,
        "conditions",
        "flavorsUsage",
        "flavorsReservation",
        "fairSharing",
        "pendingWorkloadsStatus",
    }
)
LQ_KEYS = frozenset(
    {*QUEUE_COUNT_KEYS, "conditions", "flavorUsage", "flavorsReservation", "pendingWorkloadsStatus"}
)
COHORT_KEYS = frozenset({"conditions", "fairSharing"})
MISSING: Any = object()


# --------------------------------------------------------------------------- loading


def _fixture_dirs() -> list[Path]:
    return sorted(p for p in HERE.iterdir() if p.is_dir() and (p / "input.yaml").is_file())


def _load_expected(directory: Path) -> Json:
    path = directory / "expected.yaml"
    with path.open(encoding="utf-8") as fh:
        data = yaml.safe_load(fh)
    if not isinstance(data, dict):
        raise ValueError(f"{path}: expected a mapping at the top level")
    unknown = set(data) - TOP_LEVEL_KEYS
    if unknown:
        raise ValueError(f"{path}: unknown top-level keys {sorted(unknown)}")
    if not isinstance(data.get("rule"), str) or not data["rule"]:
        raise ValueError(f"{path}: `rule` (a non-empty string) is required")
    return data


def _params() -> Iterator[Any]:
    for directory in _fixture_dirs():
        marks: list[pytest.MarkDecorator] = []
        try:
            expected = _load_expected(directory)
        except (OSError, ValueError, yaml.YAMLError):
            expected = {}  # the test itself reports the broken file
        reason = expected.get("xfail")
        if reason:
            marks.append(pytest.mark.xfail(reason=str(reason), strict=True))
        yield pytest.param(directory, id=directory.name, marks=marks)


# --------------------------------------------------------------------------- running


@dataclass(frozen=True)
class Run:
    code: int
    stdout: str
    stderr: str


def _run(capsys: pytest.CaptureFixture[str], directory: Path, args: list[str]) -> Run:
    from queuescope.cli import main  # noqa: PLC0415  (import errors fail per fixture)

    capsys.readouterr()
    argv = ["simulate", str(directory / "input.yaml"), "-o", "json", *args]
    try:
        code = main(argv)
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 1
    out, err = capsys.readouterr()
    return Run(code=code, stdout=out, stderr=err)


# --------------------------------------------------------------------------- output index


@dataclass
class Output:
    workloads: dict[str, Json] = field(default_factory=dict)
    owned: dict[str, Json] = field(default_factory=dict)
    cluster_queues: dict[str, Json] = field(default_factory=dict)
    local_queues: dict[str, Json] = field(default_factory=dict)
    cohorts: dict[str, Json] = field(default_factory=dict)
    pending: dict[str, Json] = field(default_factory=dict)

    def workload(self, key: str) -> Json | None:
        """A Workload by `ns/name`, or by `ns/Kind:name` of its owner."""
        namespace, _, rest = key.partition("/")
        if ":" in rest:
            return self.owned.get(key)
        return self.workloads.get(f"{namespace}/{rest}")

    def resolve(self, key: str) -> str:
        """The `ns/name` a workload key stands for (owner keys resolved)."""
        item = self.workload(key)
        if item is None:
            return key
        meta = item.get("metadata", {})
        return f"{meta.get('namespace')}/{meta.get('name')}"


def _index(doc: Any) -> Output:
    if not isinstance(doc, dict):
        raise AssertionError(f"output is not a JSON object: {type(doc).__name__}")
    if doc.get("apiVersion") != "v1" or doc.get("kind") != "List":
        raise AssertionError(
            f"output is not a v1 List: apiVersion={doc.get('apiVersion')!r} "
            f"kind={doc.get('kind')!r}"
        )
    items = doc.get("items")
    if not isinstance(items, list):
        raise AssertionError("output List has no `items` array")
    out = Output()
    for n, item in enumerate(items):
        if not isinstance(item, dict):
            raise AssertionError(f"items[{n}] is not an object")
        kind = item.get("kind")
        meta = item.get("metadata") or {}
        name = str(meta.get("name"))
        namespace = meta.get("namespace")
        if kind == "Workload":
            out.workloads[f"{namespace}/{name}"] = item
            for owner in meta.get("ownerReferences") or []:
                out.owned[f"{namespace}/{owner.get('kind')}:{owner.get('name')}"] = item
        elif kind == "ClusterQueue":
            out.cluster_queues[name] = item
        elif kind == "LocalQueue":
            out.local_queues[f"{namespace}/{name}"] = item
        elif kind == "Cohort":
            out.cohorts[name] = item
        elif kind == "PendingWorkloadsSummary":
            out.pending[name] = item
        else:
            raise AssertionError(f"items[{n}] has an unexpected kind {kind!r}")
    return out


# --------------------------------------------------------------------------- comparison


@dataclass
class Checker:
    fixture: str
    failures: list[str] = field(default_factory=list)

    def fail(self, path: str, message: str) -> None:
        self.failures.append(f"{path}: {message}")

    def equal(self, path: str, expected: Any, actual: Any) -> None:
        if actual is MISSING:
            self.fail(path, f"expected {expected!r}, but the key is missing")
        elif expected != actual:
            self.fail(path, f"expected {expected!r}, got {actual!r}")

    def subset(self, path: str, expected: Any, actual: Any) -> None:
        if expected is None:
            if actual is not MISSING and actual is not None:
                self.fail(path, f"expected absent, got {actual!r}")
            return
        if actual is MISSING or actual is None:
            self.fail(path, f"expected {expected!r}, but it is missing")
            return
        if isinstance(expected, dict):
            if not isinstance(actual, dict):
                self.fail(path, f"expected an object, got {actual!r}")
                return
            for key, value in expected.items():
                self.subset(f"{path}.{key}", value, actual.get(key, MISSING))
        elif isinstance(expected, list):
            if not isinstance(actual, list) or len(actual) != len(expected):
                self.fail(path, f"expected {expected!r}, got {actual!r}")
                return
            for n, (exp, act) in enumerate(zip(expected, actual, strict=True)):
                self.subset(f"{path}[{n}]", exp, act)
        else:
            self.equal(path, expected, actual)

    def unknown_keys(self, path: str, expected: Json, allowed: frozenset[str]) -> bool:
        unknown = set(expected) - allowed
        if unknown:
            self.fail(path, f"malformed expected.yaml: unknown keys {sorted(unknown)}")
        return not unknown

    def report(self) -> None:
        if self.failures:
            lines = "\n  ".join(self.failures)
            pytest.fail(
                f"{self.fixture}: {len(self.failures)} mismatch(es)\n  {lines}", pytrace=False
            )


def _get(obj: Any, *keys: str) -> Any:
    for key in keys:
        if not isinstance(obj, dict) or key not in obj:
            return MISSING
        obj = obj[key]
    return obj


def _quantities(value: Any) -> Any:
    """Expected quantity maps: YAML may hold ints (`cpu: 3`); outputs hold strings."""
    if isinstance(value, dict):
        return {str(k): _quantities(v) for k, v in value.items()}
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, int | float):
        return str(value)
    return value


def _conditions(check: Checker, path: str, expected: Any, obj: Json) -> None:
    if not isinstance(expected, dict):
        check.fail(path, "malformed expected.yaml: `conditions` must be a mapping")
        return
    raw = _get(obj, "status", "conditions")
    actual: dict[str, Json] = {}
    if isinstance(raw, list):
        for cond in raw:
            if isinstance(cond, dict) and "type" in cond:
                actual[str(cond["type"])] = cond
    for ctype, exp in expected.items():
        check.subset(f"{path}.{ctype}", exp, actual.get(ctype, MISSING))


def _named(raw: Any) -> dict[str, Json]:
    """`[{name: x, ...}]` as `{x: {...}}`."""
    out: dict[str, Json] = {}
    if isinstance(raw, list):
        for entry in raw:
            if isinstance(entry, dict) and "name" in entry:
                out[str(entry["name"])] = entry
    return out


def _is_true(obj: Json, ctype: str) -> bool:
    conditions = _get(obj, "status", "conditions")
    if not isinstance(conditions, list):
        return False
    for cond in conditions:
        if isinstance(cond, dict) and cond.get("type") == ctype:
            return bool(cond.get("status") == "True")
    return False


def _check_workload(check: Checker, key: str, exp: Any, out: Output) -> None:
    path = f"workloads[{key}]"
    obj = out.workload(key)
    if exp is None:
        if obj is not None:
            check.fail(path, "expected no such Workload, but it is in the output")
        return
    if obj is None:
        known = sorted(out.workloads)
        check.fail(path, f"no such Workload in the output (have: {known})")
        return
    if not isinstance(exp, dict) or not check.unknown_keys(path, exp, WORKLOAD_KEYS):
        return
    admission = _get(obj, "status", "admission")
    if "admitted" in exp:
        reserved = _is_true(obj, "QuotaReserved")
        admitted = _is_true(obj, "Admitted")
        if exp["admitted"]:
            if not (reserved and admitted):
                check.fail(
                    f"{path}.admitted",
                    f"expected admitted, got QuotaReserved={reserved} Admitted={admitted} "
                    f"conditions={_get(obj, 'status', 'conditions')!r}",
                )
        elif reserved or admitted or admission not in (MISSING, None):
            check.fail(
                f"{path}.admitted",
                f"expected not admitted, got QuotaReserved={reserved} Admitted={admitted} "
                f"admission={admission!r}",
            )
    if "admission" in exp:
        check.subset(f"{path}.status.admission", exp["admission"], admission)
    if "clusterQueue" in exp:
        check.equal(
            f"{path}.status.admission.clusterQueue",
            exp["clusterQueue"],
            _get(admission, "clusterQueue") if admission is not MISSING else MISSING,
        )
    if "podSets" in exp:
        assignments = _named(_get(admission, "podSetAssignments"))
        for ps_name, ps_exp in exp["podSets"].items():
            ps_path = f"{path}.status.admission.podSetAssignments[{ps_name}]"
            ps = assignments.get(ps_name)
            if ps is None:
                check.fail(ps_path, f"no such pod set assignment (have: {sorted(assignments)})")
                continue
            for field_name, value in ps_exp.items():
                if field_name in ("flavors", "resourceUsage"):
                    check.equal(
                        f"{ps_path}.{field_name}", _quantities(value), ps.get(field_name, MISSING)
                    )
                elif field_name == "count":
                    check.equal(f"{ps_path}.count", value, ps.get("count", MISSING))
                else:
                    check.fail(f"{ps_path}.{field_name}", "malformed expected.yaml: unknown key")
    if "conditions" in exp:
        _conditions(check, f"{path}.status.conditions", exp["conditions"], obj)
    if "requeueState" in exp:
        # Exact match; `requeueState: null` means the field is absent.
        actual = (obj.get("status") or {}).get("requeueState", MISSING)
        if exp["requeueState"] is None:
            if actual is not MISSING:
                check.fail(f"{path}.status.requeueState", f"expected absent, got {actual!r}")
        else:
            check.equal(f"{path}.status.requeueState", exp["requeueState"], actual)
    if "resourceRequests" in exp:
        requests = _named(_get(obj, "status", "resourceRequests"))
        for ps_name, res_exp in exp["resourceRequests"].items():
            rr_path = f"{path}.status.resourceRequests[{ps_name}].resources"
            entry = requests.get(ps_name)
            if entry is None:
                check.fail(rr_path, f"no such pod set (have: {sorted(requests)})")
                continue
            check.equal(rr_path, _quantities(res_exp), entry.get("resources", MISSING))
    for section in ("spec", "metadata"):
        if section in exp:
            check.subset(f"{path}.{section}", exp[section], obj.get(section, MISSING))


def _check_flavor_usage(
    check: Checker, path: str, expected: Any, raw: Any, *, with_borrowed: bool
) -> None:
    if raw is MISSING:
        check.fail(path, "missing in the output")
        return
    flavors = _named(raw)
    if not isinstance(expected, dict):
        check.fail(path, "malformed expected.yaml: must be a mapping of flavors")
        return
    for flavor, res_exp in expected.items():
        f_path = f"{path}[{flavor}]"
        entry = flavors.get(flavor)
        if entry is None:
            check.fail(f_path, f"no such flavor (have: {sorted(flavors)})")
            continue
        resources = _named(entry.get("resources"))
        for res, value in res_exp.items():
            r_path = f"{f_path}.resources[{res}]"
            got = resources.get(res)
            if got is None:
                check.fail(r_path, f"no such resource (have: {sorted(resources)})")
                continue
            want = value if isinstance(value, dict) else {"total": value}
            for qty_field, qty in want.items():
                if qty_field == "borrowed" and not with_borrowed:
                    check.fail(r_path, "malformed expected.yaml: LocalQueues have no `borrowed`")
                    continue
                check.equal(f"{r_path}.{qty_field}", _quantities(qty), got.get(qty_field, MISSING))


def _check_queue(
    check: Checker,
    path: str,
    exp: Any,
    obj: Json | None,
    allowed: frozenset[str],
    usage_fields: tuple[str, ...],
    *,
    with_borrowed: bool,
) -> None:
    if obj is None:
        check.fail(path, "no such object in the output")
        return
    if not isinstance(exp, dict) or not check.unknown_keys(path, exp, allowed):
        return
    status = obj.get("status") or {}
    for count_field in QUEUE_COUNT_KEYS:
        if count_field in exp:
            check.equal(
                f"{path}.status.{count_field}", exp[count_field], status.get(count_field, MISSING)
            )
    if "conditions" in exp:
        _conditions(check, f"{path}.status.conditions", exp["conditions"], obj)
    _check_fair_sharing(check, path, exp, obj)
    if "pendingWorkloadsStatus" in exp:
        # Exact match; null means absent (queue visibility not configured).
        actual = (obj.get("status") or {}).get("pendingWorkloadsStatus", MISSING)
        if exp["pendingWorkloadsStatus"] is None:
            if actual is not MISSING:
                check.fail(
                    f"{path}.status.pendingWorkloadsStatus", f"expected absent, got {actual!r}"
                )
        else:
            check.equal(
                f"{path}.status.pendingWorkloadsStatus", exp["pendingWorkloadsStatus"], actual
            )
    for usage in usage_fields:
        if usage in exp:
            _check_flavor_usage(
                check,
                f"{path}.status.{usage}",
                exp[usage],
                status.get(usage, MISSING),
                with_borrowed=with_borrowed,
            )


def _check_fair_sharing(check: Checker, path: str, exp: Json, obj: Json) -> None:
    """`fairSharing: {weightedShare: N}` must match exactly; `fairSharing: null` means the
    field is absent (fair sharing disabled)."""
    if "fairSharing" not in exp:
        return
    actual = (obj.get("status") or {}).get("fairSharing", MISSING)
    if exp["fairSharing"] is None:
        if actual is not MISSING:
            check.fail(f"{path}.status.fairSharing", f"expected absent, got {actual!r}")
    else:
        check.equal(f"{path}.status.fairSharing", exp["fairSharing"], actual)


def _pending_keys(summary: Json) -> list[str]:
    keys = []
    for entry in summary.get("items") or []:
        meta = entry.get("metadata") or {}
        keys.append(f"{meta.get('namespace')}/{meta.get('name')}")
    return keys


def _check_expectations(check: Checker, expect: Json, out: Output) -> None:
    if not check.unknown_keys("expect", expect, EXPECT_KEYS):
        return
    for key, exp in (expect.get("workloads") or {}).items():
        _check_workload(check, key, exp, out)
    for name, exp in (expect.get("clusterQueues") or {}).items():
        _check_queue(
            check,
            f"clusterQueues[{name}]",
            exp,
            out.cluster_queues.get(name),
            CQ_KEYS,
            ("flavorsUsage", "flavorsReservation"),
            with_borrowed=True,
        )
    for key, exp in (expect.get("localQueues") or {}).items():
        _check_queue(
            check,
            f"localQueues[{key}]",
            exp,
            out.local_queues.get(key),
            LQ_KEYS,
            ("flavorUsage", "flavorsReservation"),
            with_borrowed=False,
        )
    for name, exp in (expect.get("cohorts") or {}).items():
        path = f"cohorts[{name}]"
        cohort = out.cohorts.get(name)
        if exp is None:
            if cohort is not None:
                check.fail(path, "expected no such Cohort in the output")
            continue
        if cohort is None:
            check.fail(path, f"no such Cohort in the output (have: {sorted(out.cohorts)})")
            continue
        if not check.unknown_keys(path, exp, COHORT_KEYS):
            continue
        if "conditions" in exp:
            _conditions(check, f"{path}.status.conditions", exp["conditions"], cohort)
        _check_fair_sharing(check, path, exp, cohort)
    for cq, exp_list in (expect.get("pending") or {}).items():
        path = f"pending[{cq}]"
        summary = out.pending.get(cq)
        if summary is None:
            check.fail(path, f"no PendingWorkloadsSummary (have: {sorted(out.pending)})")
            continue
        check.equal(path, [out.resolve(k) for k in exp_list], _pending_keys(summary))
    for cq, exp_positions in (expect.get("positions") or {}).items():
        path = f"positions[{cq}]"
        summary = out.pending.get(cq)
        if summary is None:
            check.fail(path, f"no PendingWorkloadsSummary (have: {sorted(out.pending)})")
            continue
        by_key = {
            k: entry
            for k, entry in zip(_pending_keys(summary), summary.get("items") or [], strict=True)
        }
        for key, (pos_cq, pos_lq) in exp_positions.items():
            entry = by_key.get(out.resolve(key))
            if entry is None:
                check.fail(f"{path}[{key}]", f"not listed (have: {sorted(by_key)})")
                continue
            got = [
                entry.get("positionInClusterQueue", MISSING),
                entry.get("positionInLocalQueue", MISSING),
            ]
            check.equal(f"{path}[{key}]", [pos_cq, pos_lq], got)


# --------------------------------------------------------------------------- the test


def _clip(text: str, limit: int = 4000) -> str:
    return text if len(text) <= limit else text[:limit] + f"... ({len(text) - limit} more)"


def _assert_exit(name: str, run: Run, expected_code: int) -> None:
    assert run.code == expected_code, (
        f"{name}: exit status {run.code}, expected {expected_code}\n"
        f"stderr: {_clip(run.stderr)}\nstdout: {_clip(run.stdout, 1000)}"
    )


@pytest.mark.parametrize("directory", list(_params()))
def test_fixture(directory: Path, capsys: pytest.CaptureFixture[str]) -> None:
    name = directory.name
    expected = _load_expected(directory)
    args = [str(a) for a in expected.get("args") or []]
    expected_code = int(expected.get("exit", 0))

    first = _run(capsys, directory, args)
    _assert_exit(name, first, expected_code)
    for fragment in expected.get("stderr_contains") or []:
        assert str(fragment) in first.stderr, (
            f"{name}: stderr lacks {fragment!r}\nstderr: {_clip(first.stderr)}"
        )
    if expected_code != 0:
        assert first.stdout == "", (
            f"{name}: exit {expected_code} must print nothing on stdout, got "
            f"{_clip(first.stdout, 1000)}"
        )
    else:
        try:
            doc = json.loads(first.stdout)
        except json.JSONDecodeError as err:
            pytest.fail(f"{name}: stdout is not JSON ({err}): {_clip(first.stdout, 1000)}")
        check = Checker(name)
        expect = expected.get("expect") or {}
        if isinstance(expect, dict):
            _check_expectations(check, expect, _index(doc))
        else:
            check.fail("expect", "malformed expected.yaml: must be a mapping")
        check.report()

    # Determinism: the same input prints byte-identical output.
    second = _run(capsys, directory, args)
    assert second.code == first.code, f"{name}: second run exited {second.code}, first {first.code}"
    assert second.stdout == first.stdout, f"{name}: two runs printed different output"


def test_fixtures_present() -> None:
    dirs = _fixture_dirs()
    assert len(dirs) >= 45, f"only {len(dirs)} conformance fixtures"
    for directory in dirs:
        assert (directory / "expected.yaml").is_file(), f"{directory.name}: no expected.yaml"
