"""How `serve` writes its log lines: `--log-format text` or `json`.

JSON lines are one object per record with the keys `level`, `logger` and `msg`, in that
order (operators parse them; docs/operations.md lists them), plus `exc_info` (the formatted
traceback) when the record carries an exception, `stack_info` when it carries a stack, and
any `extra=` fields. A library encodes them, so quotes, backslashes, control characters
and multi-line tracebacks in a message stay inside one valid JSON object on one line.
"""

from __future__ import annotations

import logging

from pythonjsonlogger.json import JsonFormatter

from visibility_server.http.access import ACCESS_LOGGER

LOG_FORMATS = ("text", "json")  # the values of --log-format
TEXT_FORMAT = "%(levelname)s %(name)s %(message)s"

# The record attributes a JSON line starts with, and the keys operators know them by.
JSON_FIELDS = {"levelname": "level", "name": "logger", "message": "msg"}


def json_formatter() -> logging.Formatter:
    """One JSON object per record: `level`, `logger`, `msg`, then what the record adds."""
    return JsonFormatter(
        " ".join(f"{{{field}}}" for field in JSON_FIELDS),
        style="{",
        rename_fields=JSON_FIELDS,
        # ASCII only: U+2028, U+0085 and the like are escaped too, so no line splitter
        # (Python's str.splitlines included) can cut an object in two.
        json_ensure_ascii=True,
    )


def formatter(log_format: str) -> logging.Formatter:
    """The formatter for `--log-format` (`text` or `json`)."""
    if log_format == "json":
        return json_formatter()
    if log_format == "text":
        return logging.Formatter(TEXT_FORMAT)
    raise ValueError(f'unknown log format "{log_format}": must be text or json')


def configure_logging(level: str, log_format: str, *, access_log: bool = True) -> None:
    """Send records at `level` and above to standard error in `log_format`; without
    `access_log`, not the visibility server's line per request, whatever the level.

    Like `logging.basicConfig`, it leaves a root logger that already has handlers alone.
    """
    handler = logging.StreamHandler()
    handler.setFormatter(formatter(log_format))
    logging.basicConfig(level=level.upper(), handlers=[handler])
    if not access_log:
        logging.getLogger(ACCESS_LOGGER).setLevel(logging.WARNING)
