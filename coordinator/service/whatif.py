"""The group page's "what if" view (issue 32): `/ui/groups/{group}/whatif?delay=60s[&from=T][&to=T]`
re-runs the group's history from the topic with another scheduled rebalance delay, beside the
history as recorded and its faithful re-run: `coordinator replay simulate`'s table, notes and
timelines, on a page.

The simulation runs in a child process (`coordinator.service.whatif_child`), never in the server:
a re-run of a week is seconds of pure Python, which in a thread would hold the GIL the heartbeats
need. The child is bounded: in wall time (`Bounds.timeout_s`: killed after it, and the page says
so), in memory (`Bounds.memory_mb`, its address space: a MemoryError, and the page says so) and in
number (`Bounds.concurrency` at once per server: one more is refused at once, 429, rather than
queued behind them). The memory bound is over what the child held once it had read the records:
librdkafka's threads abort under an address-space limit, so the limit starts with the simulation
proper. It runs at niceness 10, so on a busy machine the server's CPU comes first.
"""

from __future__ import annotations

import asyncio
import logging
import os
import sys
from dataclasses import dataclass
from typing import Any

import orjson
from multidict import MultiMapping

from coordinator.tools.text import escape, group_path, iso_time
from replay.commands.simulate import duration
from replay.positions import format_duration, parse_time

log = logging.getLogger(__name__)
MEMORY_EXIT = 3  # the child ran out of its memory bound (said in its answer too, when it could write one)

MAX_DELAY_MS = 2**31 - 1
MIN_MEMORY_MB = 16


@dataclass(frozen=True, slots=True)
class Bounds:
    """`serve --whatif-timeout-s --whatif-memory-mb --whatif-concurrency`."""

    timeout_s: float = 60.0
    memory_mb: int = 1024  # beyond what the child held once it had read the records
    concurrency: int = 2


class BadParameter(ValueError):
    """A parameter of the view's URL that cannot work as given: one line, said on a 400 page."""


@dataclass(frozen=True, slots=True)
class Asked:
    delay_ms: int | None  # None: only the form
    from_ms: int | None
    to_ms: int | None


def asked(query: MultiMapping[str]) -> Asked:
    """The view's parameters (`delay`: a duration as `replay simulate --scheduled-delay` takes it;
    `from`, `to`: ISO 8601 or epoch ms, as its --from and --to), or BadParameter."""
    unknown = sorted(set(query) - {"delay", "from", "to"})
    if unknown:
        raise BadParameter(f"unknown parameter {unknown[0]!r}: the view takes delay, from and to")
    values = {}
    for name in ("delay", "from", "to"):
        given = query.getall(name, [])
        if len(given) > 1:
            raise BadParameter(f"{name} is given {len(given)} times; give it once")
        values[name] = given[0].strip() if given and given[0].strip() else None
    delay = None
    if values["delay"] is not None:
        try:
            delay = duration(values["delay"])
        except Exception as e:  # argparse.ArgumentTypeError: its line is the one to say
            raise BadParameter(f"delay: {e}") from None
        if delay > MAX_DELAY_MS:
            raise BadParameter(f"delay: at most 2^31-1 ms, not {delay} ms")
    times = {}
    for name in ("from", "to"):
        try:
            times[name] = None if values[name] is None else parse_time(values[name])
        except ValueError as e:
            raise BadParameter(f"{name}: {e}") from None
    if times["from"] is not None and times["to"] is not None and times["from"] > times["to"]:
        raise BadParameter("from is after to")
    if delay is None and (times["from"] is not None or times["to"] is not None):
        raise BadParameter("from and to need a delay to re-run with")
    return Asked(delay, times["from"], times["to"])


@dataclass(frozen=True, slots=True)
class Outcome:
    """What a simulation came to: `status` for the page, and the child's answer or a line."""

    status: int
    report: bytes | None = None  # the report's HTML, as the child wrote it
    line: str = ""


class WhatIf:
    """Simulations in child processes, at most `bounds.concurrency` at once."""

    def __init__(self, kafka_config: dict[str, str], topic: str, bounds: Bounds | None = None) -> None:
        # What a child can be told: the settings, not the server's logger object.
        self.kafka_config = {k: v for k, v in kafka_config.items() if isinstance(v, str | int | float | bool)}
        self.topic = topic
        self.bounds = bounds or Bounds()
        self.running = 0

    async def simulate(self, group_id: str, ask: Asked) -> Outcome:
        if self.running >= self.bounds.concurrency:
            return Outcome(
                429,
                line=f"{self.running} simulations are running, as many as this server runs at once "
                f"(--whatif-concurrency {self.bounds.concurrency}); try again when one has finished",
            )
        self.running += 1
        try:
            return await self._child(group_id, ask)
        finally:
            self.running -= 1

    async def _child(self, group_id: str, ask: Asked) -> Outcome:
        request = {
            "kafka": self.kafka_config,
            "topic": self.topic,
            "group": group_id,
            "delay_ms": ask.delay_ms,
            "from_ms": ask.from_ms,
            "to_ms": ask.to_ms,
            "memory_mb": self.bounds.memory_mb,
        }
        # A fresh interpreter, not a fork of the server (its event loop, sockets and Kafka clients).
        # One malloc arena: a second one (librdkafka's threads make it) keeps 64 MB reserved that
        # the simulation would then grow into unbounded (measured: 1 MB of bound ran a 7 MB re-run).
        env = {**os.environ, "MALLOC_ARENA_MAX": "1"}
        proc = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "coordinator.service.whatif_child",
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            env=env,
        )
        try:
            out, err = await asyncio.wait_for(proc.communicate(orjson.dumps(request)), self.bounds.timeout_s)
        except TimeoutError:
            return Outcome(
                503,
                line=f"the simulation did not finish within {self.bounds.timeout_s:g} s (--whatif-timeout-s) "
                "and was stopped; a shorter range (from, to) re-runs less",
            )
        finally:
            if proc.returncode is None:  # timed out, or the request went away: the child goes too
                proc.kill()
                await proc.wait()
        return _outcome(proc.returncode, out, err, self.bounds)


def _outcome(code: int | None, out: bytes, err: bytes, bounds: Bounds) -> Outcome:
    head, _, report_ = out.partition(b"\n")
    try:
        answer = orjson.loads(head) if head else None
    except orjson.JSONDecodeError:
        answer = None
    memory = (
        f"the simulation needed more than its {bounds.memory_mb} MB (--whatif-memory-mb); a shorter range re-runs less"
    )
    if code == MEMORY_EXIT or (answer is None and b"MemoryError" in err):
        return Outcome(503, line=memory)
    if answer is None and code is not None and code < 0:
        return Outcome(503, line=f"the simulation was killed by signal {-code}")
    if answer is None or code != 0:
        log.warning("a what-if simulation failed (exit code %s): %s", code, err.decode(errors="replace")[-4000:])
        last = err.decode(errors="replace").strip().splitlines()[-1:] or ["no message"]
        return Outcome(503, line=f"the simulation failed (exit code {code}): {last[0]}")
    if "error" in answer:
        status = {"input": 400, "nothing": 404}.get(answer["error"], 503)
        return Outcome(status, line=answer["message"])
    return Outcome(200, report=report_)


# --- the page's body -----------------------------------------------------------------------------------


def href(group_id: str, delay_ms: int | None = None) -> str:
    path = group_path(group_id) + "/whatif"
    return path + (f"?delay={delay_ms}ms" if delay_ms is not None else "")


def form(group_id: str, ask: Asked, recorded_delay_ms: int) -> str:
    """The controls: the scheduled delay, and the range (empty: the whole history the topic holds)."""
    delay = format_duration(ask.delay_ms if ask.delay_ms is not None else recorded_delay_ms)
    since = iso_time(ask.from_ms) if ask.from_ms is not None else ""
    until = iso_time(ask.to_ms) if ask.to_ms is not None else ""
    return (
        f'<form method="get" action="{escape(href(group_id))}" class="whatif">'
        f'<label>scheduled delay <input name="delay" value="{escape(delay)}" size="8"></label> '
        f'<label>from <input name="from" value="{escape(since)}" size="24" placeholder="the start"></label> '
        f'<label>to <input name="to" value="{escape(until)}" size="24" placeholder="the end"></label> '
        '<button type="submit">re-run</button></form>'
        f'<p class="note">the group runs with a scheduled delay of {escape(format_duration(recorded_delay_ms))}; '
        "durations as 60s, 1500ms, 5min; times in ISO 8601 (UTC unless they say) or epoch ms</p>"
    )


def report(result: dict[str, Any]) -> str:
    """`replay simulate`'s report: what was read, the settings, the table, the notes, the timelines."""
    header = "".join(f"<th>{escape(h)}</th>" for h in result["header"])
    rows = "".join("<tr>" + "".join(f"<td>{escape(c)}</td>" for c in row) + "</tr>" for row in result["rows"])
    out = [
        f'<p class="meta">{escape(result["summary"])}</p><p class="meta">{escape(result["settings"])}</p>'
        f'<p class="note">simulated in a child process of at most {result["peak_mb"]} MB</p>',
        f'<table class="whatif">{"<tr>" + header + "</tr>"}{rows}</table>',
        '<ul class="notes">' + "".join(f"<li>{escape(n)}</li>" for n in result["notes"]) + "</ul>",
    ]
    for name, svg in result["plots"]:
        out.append(f'<h2>{escape(name)}</h2><div class="timeline">{svg}</div>')
    return "".join(out)
