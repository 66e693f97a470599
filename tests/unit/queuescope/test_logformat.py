"""`--log-format json`: every record is one valid JSON object on one line, whatever the
message holds, with the keys operators already parse (`level`, `logger`, `msg`)."""

from __future__ import annotations

import io
import json
import logging
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import pytest

from queuescope.logformat import TEXT_FORMAT, formatter, json_formatter

NASTY = (
    'a "quoted" name, a back\\slash, a tab\there\nand a second line\r\n{"not": "json"}'
    " and separators\u2028\x85\x1c, é"
)


@pytest.fixture
def captured() -> Iterator[tuple[logging.Logger, io.StringIO]]:
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(json_formatter())
    logger = logging.getLogger("queuescope.test.logformat")
    logger.addHandler(handler)
    logger.setLevel(logging.DEBUG)
    logger.propagate = False
    yield logger, stream
    logger.removeHandler(handler)


def objects(stream: io.StringIO) -> list[dict[str, Any]]:
    """Each line of the stream parsed on its own; fails on a line that is not JSON."""
    lines = stream.getvalue().split("\n")
    assert lines[-1] == "", "the output ends with a newline"
    return [json.loads(line) for line in lines[:-1]]


def test_quotes_and_newlines_stay_in_one_object(
    captured: tuple[logging.Logger, io.StringIO],
) -> None:
    logger, stream = captured
    logger.warning("event=demo name=%s", NASTY)
    [obj] = objects(stream)
    assert list(obj) == ["level", "logger", "msg"]
    assert obj == {
        "level": "WARNING",
        "logger": "queuescope.test.logformat",
        "msg": f"event=demo name={NASTY}",
    }


def test_traceback_is_a_field_of_the_same_object(
    captured: tuple[logging.Logger, io.StringIO],
) -> None:
    logger, stream = captured
    try:
        raise ValueError('bad "value"\nsecond line')
    except ValueError:
        logger.exception("event=failed step=%s", "publish")
    logger.info("after")
    first, second = objects(stream)
    assert list(first)[:3] == ["level", "logger", "msg"]
    assert first["level"] == "ERROR"
    assert first["msg"] == "event=failed step=publish"
    assert first["exc_info"].startswith("Traceback (most recent call last):")
    assert first["exc_info"].endswith('ValueError: bad "value"\nsecond line')
    assert second == {"level": "INFO", "logger": "queuescope.test.logformat", "msg": "after"}


def test_extra_fields_and_stack_info_are_keys(
    captured: tuple[logging.Logger, io.StringIO],
) -> None:
    logger, stream = captured
    logger.info("with extra", extra={"audit_id": 'id "1"'}, stack_info=True)
    [obj] = objects(stream)
    assert list(obj)[:3] == ["level", "logger", "msg"]
    assert obj["audit_id"] == 'id "1"'
    assert obj["stack_info"].startswith("Stack (most recent call last):")


def test_text_format_is_unchanged() -> None:
    record = logging.LogRecord("queuescope.serve", logging.INFO, __file__, 1, "x=%s", ("y",), None)
    assert TEXT_FORMAT == "%(levelname)s %(name)s %(message)s"
    assert formatter("text").format(record) == "INFO queuescope.serve x=y"


def test_unknown_format_is_refused() -> None:
    with pytest.raises(ValueError, match='unknown log format "xml"'):
        formatter("xml")


def json_lines_of(*statements: str) -> list[dict[str, Any]]:
    """Run the statements in a fresh interpreter after `configure_logging('info', 'json')`
    (what `serve --log-format json` does); its standard error parsed line by line."""
    setup = "import logging\nfrom queuescope.logformat import configure_logging\n"
    program = setup + "\n".join(["configure_logging('info', 'json')", *statements])
    run = subprocess.run(
        [sys.executable, "-c", program], capture_output=True, text=True, check=True
    )
    assert run.stdout == ""
    return [json.loads(line) for line in run.stderr.splitlines()]


def test_configure_logging_on_a_fresh_process() -> None:
    """The root logger of a new interpreter, with a traceback among the records."""
    info, error = json_lines_of(
        "logging.getLogger('queuescope.serve').debug('hidden')",
        f"logging.getLogger('queuescope.serve').info({NASTY!r})",
        "try:\n    1 / 0\nexcept ZeroDivisionError:\n    logging.getLogger('x').exception('boom')",
    )
    assert info == {"level": "INFO", "logger": "queuescope.serve", "msg": NASTY}
    assert error["level"] == "ERROR" and error["msg"] == "boom"
    assert "ZeroDivisionError: division by zero" in error["exc_info"]


def test_uvicorn_records_go_through_the_same_json_lines() -> None:
    """The HTTPS server's own records (`uvicorn`, `uvicorn.error`) reach the root handler
    instead of a text handler of uvicorn's, so a JSON log stays JSON throughout."""
    records = json_lines_of(
        "import types",
        "from visibility_server.serving import build_server",
        "listener = types.SimpleNamespace(ssl_context_factory=lambda *a, **k: None)",
        "build_server(lambda *a: None, listener, '127.0.0.1', 0)",
        "logging.getLogger('uvicorn.error').warning('Invalid HTTP request received.')",
        "logging.getLogger('uvicorn').warning('a \"quoted\" record')",
        "logging.getLogger('uvicorn.error').info('below the server level: dropped')",
    )
    assert records == [
        {"level": "WARNING", "logger": "uvicorn.error", "msg": "Invalid HTTP request received."},
        {"level": "WARNING", "logger": "uvicorn", "msg": 'a "quoted" record'},
    ]


def test_the_access_log_is_a_json_line_with_its_fields_and_can_be_turned_off() -> None:
    """docs/operations.md#the-access-log: at INFO, one JSON object per request whose
    fields are kube-apiserver's names; `--no-access-log` drops it alone."""
    program = [
        "import types",
        "from visibility_server.http.access import log_request",
        "info = types.SimpleNamespace(raw_path='/apis', query_string=b'', method='GET',",
        "    client='10.0.0.7:5',",
        "    header_values=lambda name: ['id-1'] if name == 'audit-id' else [])",
        "log_request(info, None, 401, 0.0012)",
        "logging.getLogger('queuescope.serve').info('kept')",
    ]
    [line, kept] = json_lines_of(*program)
    assert line == {
        "level": "INFO",
        "logger": "visibility_server.access",
        "msg": 'HTTP verb="GET" URI="/apis" latency="1.200ms" user="" userAgent="" '
        'audit-ID="id-1" srcIP="10.0.0.7:5" resp=401',
        "verb": "GET",
        "URI": "/apis",
        "latency": "1.200ms",
        "user": "",
        "userAgent": "",
        "audit-ID": "id-1",
        "srcIP": "10.0.0.7:5",
        "resp": 401,
    }
    assert kept["msg"] == "kept"
    setup = "import logging\nfrom queuescope.logformat import configure_logging\n"
    off = setup + "\n".join(["configure_logging('info', 'json', access_log=False)", *program])
    run = subprocess.run([sys.executable, "-c", off], capture_output=True, text=True, check=True)
    assert [json.loads(line)["msg"] for line in run.stderr.splitlines()] == ["kept"]
