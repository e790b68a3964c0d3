"""How the processes log: plain text on a terminal, one JSON object per line elsewhere.

An event worth finding later (a member joined, was fenced, a rebalance converged, a partition
loaded) is logged with `event(logger, name, message, **fields)`: the message is for people, the
fields (group, member, epoch, partition, reason, ...) are for machines. In JSON each line is

    {"time": "2026-11-26T01:02:03.456Z", "level": "INFO", "logger": "...", "message": "...",
     "event": "member-fenced", "group": "g", "member": "w1", "epoch": 7, ...}

so a log pipeline (Loki, Elasticsearch, `jq`) filters by group or member without parsing prose.
In text the fields follow the message as `key=value`, for the same searches with grep.
"""

from __future__ import annotations

import logging
import sys
from typing import Any, TextIO

import orjson

from coordinator.tools.text import iso_time

FORMATS = ("auto", "text", "json")
# The attribute `event` puts its fields under on a LogRecord (any name the logging module does not use).
_FIELDS = "coordinator_fields"


def event(
    logger: logging.Logger, name: str, message: str, *args: Any, level: int = logging.INFO, **fields: Any
) -> None:
    """Log `message % args` as the event `name`, with `fields` (None-valued ones are left out)."""
    if logger.isEnabledFor(level):
        kept = {"event": name, **{k: v for k, v in fields.items() if v is not None}}
        logger.log(level, message, *args, extra={_FIELDS: kept})


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, Any] = {
            "time": iso_time(int(record.created * 1000)),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        line.update(getattr(record, _FIELDS, ()))
        if record.exc_info:
            line["exception"] = self.formatException(record.exc_info)
        return orjson.dumps(line, default=str).decode()


class TextFormatter(logging.Formatter):
    def __init__(self) -> None:
        super().__init__("%(asctime)s %(levelname)s %(name)s: %(message)s")

    def formatMessage(self, record: logging.LogRecord) -> str:  # noqa: N802 - logging's name
        text = super().formatMessage(record)
        fields = getattr(record, _FIELDS, None)
        if fields:
            text += " " + " ".join(f"{k}={_text(v)}" for k, v in fields.items())
        return text


def _text(value: Any) -> str:
    if isinstance(value, list | tuple):
        value = ",".join(map(str, value))
    value = str(value)
    return orjson.dumps(value).decode() if (" " in value or not value) else value


def resolve(fmt: str, stream: TextIO) -> str:
    """`text` or `json`: `auto` is text on a terminal and JSON otherwise (a container, a file, a
    pipe): what a person reads, or what a log pipeline parses."""
    if fmt not in FORMATS:
        raise ValueError(f"log format {fmt!r}: expected one of {', '.join(FORMATS)}")
    if fmt == "auto":
        return "text" if stream.isatty() else "json"
    return fmt


def error_line(
    message: str, fmt: str, event: str, *, logger: str = "coordinator", stream: TextIO | None = None, **fields: Any
) -> str | None:
    """A command's error as its logs would carry it, for `coordinator.cli` to print: one JSON object
    line (without the newline) when `fmt` comes out as JSON on `stream` (default stderr), else None
    (the command line then writes its text line). Used before `configure` ran as well (a bad flag),
    so that under --log-format json a log pipeline never gets a line it cannot parse."""
    if fmt not in FORMATS or resolve(fmt, stream or sys.stderr) != "json":
        return None  # a bad --log-format value is itself the error being reported: in text
    record = logging.LogRecord(logger, logging.ERROR, __file__, 0, message, None, None)
    setattr(record, _FIELDS, {"event": event, **{k: v for k, v in fields.items() if v is not None}})
    return JsonFormatter().format(record)


def configure(level: str | int = "INFO", fmt: str = "auto", stream: TextIO | None = None) -> None:
    """The root logger's one handler, in `fmt` as `resolve` settles it."""
    stream = stream or sys.stderr
    fmt = resolve(fmt, stream)
    handler = logging.StreamHandler(stream)
    handler.setFormatter(JsonFormatter() if fmt == "json" else TextFormatter())
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(level)
