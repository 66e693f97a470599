"""SWF and Alea records read into trace jobs (docs/simulate.md#importing-traces)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from scheduler.traces.records import (
    GROUP_LABEL,
    JOB_LABEL,
    USER_LABEL,
    Flavor,
    PodGroup,
    Skips,
    TraceJob,
)
from scheduler.traces.swf import (
    CLUSTER_LABEL,
    SwfOptions,
    Tenant,
    header_capacity,
    machines_capacity,
    read_header,
    read_machines,
    read_swf,
)

HEADER = """\
; Version: 2.2
; Computer: Test SP2
; UnixStartTime: 843480031
; MaxNodes: 64
; MaxProcs: 128
; Note: a comment: with a colon
"""

#       job submit wait run alloc cpu mem req reqtime reqmem st user grp exe q part prec think
JOBS = """\
    1     10    5   100    4   -1   -1    4   3600     -1   1   7   3  -1 -1 -1 -1 -1
    2     20    0    50   -1   -1   -1    8     -1    512   0   8   3  -1  2 -1 -1 -1
    3     30    0    -1    1   -1   -1    1     60     -1   5   7   3  -1 -1 -1 -1 -1
    4     40    0     0    1   -1   -1    1     60     -1   1   7   3  -1 -1 -1 -1 -1
    5     50    0    10    2   -1   -1    2     60     -1   3   7   3  -1 -1 -1 -1 -1
    6     60    0    10   -1   -1   -1   -1     60     -1   1   7   3  -1 -1 -1 -1 -1
    7     70    0  20.6    3  1.5   -1    3     60     -1   1  -1  -1  -1 -1 -1 -1 -1
"""


def _read(text: str, tenant: Tenant = "user") -> tuple[list[TraceJob], Skips]:
    trace = read_swf(text.splitlines(keepends=True), "t.swf", SwfOptions("t", tenant))
    return list(trace.jobs), trace.skips


def test_header_gives_origin_and_processors_as_cpu_quota() -> None:
    trace = read_swf((HEADER + JOBS).splitlines(), "t.swf", SwfOptions("t"))
    assert trace.origin == 843480031
    assert trace.capacity is not None
    assert trace.capacity.flavors == [Flavor("default", {"cpu": 128_000})]
    assert trace.capacity.source == "header MaxProcs"
    assert read_header(HEADER.splitlines())["Note"] == "a comment: with a colon"


def test_header_falls_back_to_nodes_then_to_nothing() -> None:
    assert header_capacity({"MaxNodes": "100"}) is not None
    nodes = header_capacity({"MaxProcs": "-1", "MaxNodes": "100"})
    assert nodes is not None
    assert nodes.flavors[0].quota == {"cpu": 100_000}
    assert header_capacity({"MaxProcs": "-1"}) is None
    assert read_swf(JOBS.splitlines(), "t.swf", SwfOptions("t")).origin == 0


def test_fields_map_to_the_job() -> None:
    trace = read_swf((HEADER + JOBS).splitlines(), "t.swf", SwfOptions("t"))
    first, second, third = trace.jobs
    assert first.name == "job-1"
    assert (first.submit, first.runtime, first.requested_seconds) == (10, 100, 3600)
    assert first.pods == (PodGroup(4, {"cpu": 1000}),)
    assert (first.tenant, first.queue) == ("user-7", "batch")
    assert first.labels == {JOB_LABEL: "1", USER_LABEL: "7", GROUP_LABEL: "3"}
    # requested processors win; memory is KB per processor; queue number 2
    assert second.pods == (PodGroup(8, {"cpu": 1000, "memory": 512 * 1024}),)
    assert second.requested_seconds is None
    assert second.queue == "queue-2"
    # decimals are rounded; unknown user and group leave no label
    assert third.runtime == 21
    assert third.tenant == "user-unknown"
    assert third.labels == {JOB_LABEL: "7"}


def test_jobs_that_never_ran_or_are_partial_are_counted_by_reason() -> None:
    _, skips = _read(HEADER + JOBS)
    assert skips.malformed == []
    assert dict(skips.reasons) == {
        "never ran: run time -1 or 0": 2,
        "partial execution record; its summary line is imported": 1,
        "no processor count": 1,
    }


def test_tenant_by_group_or_one_for_all() -> None:
    jobs, _ = _read(JOBS, "group")
    assert jobs[0].tenant == "group-3"
    jobs, _ = _read(JOBS, "none")
    assert {j.tenant for j in jobs} == {"t"}


def test_malformed_lines_name_file_and_line_and_are_skipped() -> None:
    text = (
        HEADER
        + "    1  10 0 100 4 -1 -1 4 3600 -1 1 7 3 -1 -1 -1 -1 -1\n"
        + "    2  10 0 100 4\n"
        + "    3  10 0 1x0 4 -1 -1 4 3600 -1 1 7 3 -1 -1 -1 -1 -1\n"
        + "    1  10 0 100 4 -1 -1 4 3600 -1 1 7 3 -1 -1 -1 -1 -1\n"
        + "    4  10 0 nan 4 -1 -1 4 3600 -1 1 7 3 -1 -1 -1 -1 -1\n"
        + "\n"
        + "    5  10 0 100 4 -1 -1 4 3600 -1 1 7 3 -1 -1 -1 -1 -1\n"
    )
    jobs, skips = _read(text)
    assert [j.name for j in jobs] == ["job-1", "job-5"]
    assert skips.malformed == [
        "t.swf:8: expected 18 fields (or Alea's 21), found 5",
        "t.swf:9: field 4 is not a number",
        "t.swf:10: job number 1 repeats",
        "t.swf:11: field 4 is not a number",
    ]
    summary = skips.summary()
    assert (
        summary[0] == "skipped malformed line t.swf:8: expected 18 fields (or Alea's 21), found 5"
    )
    assert "malformed lines skipped: 4" in summary


def test_many_malformed_lines_are_summarised() -> None:
    _, skips = _read("x\n" * 25)
    lines = skips.summary()
    assert len([m for m in lines if m.startswith("skipped malformed line")]) == 20
    assert "... and 5 more malformed lines" in lines
    assert skips.total == 25


ALEA = (
    "0 1356996147 0 56011 64 1 1024 64 86400 68719476736 1 62 1 1 -1 1 1 1 {1,1} q_1d "
    "1:ppn=64:x86_64:cl_zewura#excl\n"
    "1 1356996695 71 1164297 24 1 1024 24 1209600 1073741824 1 101 1 1 -1 1 1 1 {2,2} q_2w "
    "2:ppn=12\n"
    "2 1356996700 0 10 6 1 1024 6 600 -1 1 101 1 1 -1 1 1 1 {3} backfill "
    "2:ppn=2+1:ppn=2:^zegox12.cerit-sc.cz\n"
    "3 1356996800 0 10 6 1 1024 6 600 -1 1 101 1 1 -1 1 1 1 {3} q_2h 3\n"
    "4 1356996900 0 10 6 1 1024 6 600 -1 1 101 1 1 -1 1 1 1 {3} q_2h what:ever\n"
)
MACHINES = "0\tzewura\t20\t80\t1\t529426432\n1\tzegox\t48\t12\t1\t94035968\n"


def test_alea_lines_give_pods_per_node_queue_names_and_clusters() -> None:
    options = SwfOptions("wagap", clusters=("zewura", "zegox"))
    trace = read_swf(ALEA.splitlines(), "w.swf", options)
    by_name = {j.name: j for j in trace.jobs}
    big = by_name["job-0"]
    assert big.pods == (PodGroup(1, {"cpu": 64_000, "memory": 68719476736}),)
    assert big.queue == "q-1d"
    assert big.node_labels == {CLUSTER_LABEL: ("zewura",)}
    assert by_name["job-1"].pods == (PodGroup(2, {"cpu": 12_000, "memory": 1073741824}),)
    assert by_name["job-1"].node_labels == {}
    # two chunks of the same shape make one group; a host name names its cluster
    assert by_name["job-2"].pods == (PodGroup(3, {"cpu": 2000}),)
    assert by_name["job-2"].node_labels == {CLUSTER_LABEL: ("zegox",)}
    # nodes without ppn share the processors; an unreadable spec: one cpu per processor
    assert by_name["job-3"].pods == (PodGroup(3, {"cpu": 2000}),)
    assert by_name["job-4"].pods == (PodGroup(6, {"cpu": 1000}),)
    assert trace.skips.total == 0


def test_machines_file_gives_a_flavor_per_cluster() -> None:
    skips = Skips()
    machines = read_machines((MACHINES + "2\tbroken\n3 x y z 1 2\n").splitlines(), "m", skips)
    assert [m.name for m in machines] == ["zewura", "zegox"]
    assert skips.malformed == [
        "m:3: expected 6 fields, found 2",
        "m:4: not a number: invalid literal for int() with base 10: 'y'",
    ]
    capacity = machines_capacity(machines, "machines file m")
    assert capacity is not None
    assert capacity.flavors[1] == Flavor(
        "zegox", {"cpu": 576_000, "memory": 48 * 94035968 * 1024}, {CLUSTER_LABEL: "zegox"}
    )
    assert machines_capacity([], "none") is None


_field = st.one_of(
    st.integers(min_value=-1, max_value=10**9).map(str),
    st.sampled_from(["-1", "0", "1.5", "x", "nan", "inf", "1e3", ""]),
)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.lists(_field, min_size=0, max_size=22).map(" ".join), max_size=30))
def test_any_input_is_read_without_a_crash_and_every_line_is_accounted_for(
    lines: list[str],
) -> None:
    trace = read_swf(lines, "p.swf", SwfOptions("p"))
    records = [line for line in lines if line.strip() and not line.strip().startswith(";")]
    assert len(trace.jobs) + trace.skips.total == len(records)
    for job in trace.jobs:
        assert job.runtime > 0
        assert all(g.count > 0 for g in job.pods)
