"""`coordinator replay simulate`: a group's history re-run through the coordinator, as recorded and
with other settings (issue 32), side by side.

The group's events are read as every replay command reads them (`replay.commands.reading`), the
happenings extracted (`replay.whatif`), re-run once with the group's own settings and once per
alternative (`replay.simulate.simulate`), and each history measured by the same code. The flags,
their checks and the report (`report_text`, `report_json`, `show`) are this module's;
`coordinator audit-simulate` (`spark.cli`) takes them to say the same of the audit's records table.
"""

from __future__ import annotations

import argparse
import html
import re
import statistics
import sys
import time
from pathlib import Path

from coordinator.core.driver.scripted import ScriptSettings
from coordinator.tools.text import table
from replay.commands.reading import Read, print_json, read_summary, report_corrupt
from replay.errors import ReplayError
from replay.history import History
from replay.positions import format_clock, format_duration, format_time, parse_time
from replay.simulate import Outcome, Report, differences, faithfulness, simulate
from replay.whatif import PROTOCOLS, Alternatives

# The topic keeps every record for min.compaction.lag.ms (an hour by default); older ones may be
# compacted away, and a history read from them misses the superseded ones.
_COMPACTION_LAG_MS = 3_600_000
_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|min|h)?\s*$")
_UNITS = {"ms": 1, "s": 1_000, "min": 60_000, "h": 3_600_000, None: 1}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--group", required=True, help="the group id")
    parser.add_argument(
        "--from",
        dest="range_from",
        type=_time_arg,
        metavar="TIME",
        help="compare from this time (the group as it was then; alternatives take over then)",
    )
    parser.add_argument(
        "--to", dest="range_to", type=_time_arg, metavar="TIME", help="read and re-run to this time (as --to-time)"
    )
    what_if = parser.add_argument_group("alternatives (each value is one re-run beside the recorded one)")
    what_if.add_argument("--assignor", action="append", default=[], metavar="NAME")
    what_if.add_argument(
        "--scheduled-delay", action="append", type=duration, default=[], metavar="DURATION", help="e.g. 60s, 0"
    )
    what_if.add_argument("--session-timeout", action="append", type=duration, default=[], metavar="DURATION")
    what_if.add_argument("--initial-delay", action="append", type=duration, default=[], metavar="DURATION")
    what_if.add_argument("--max-moves", action="append", type=int, default=[], metavar="N")
    what_if.add_argument("--protocol", action="append", choices=PROTOCOLS, default=[])
    recorded = parser.add_argument_group(
        "as recorded (what the topic does not hold: the flags the group's coordinator ran with)"
    )
    recorded.add_argument("--recorded-heartbeat-interval", type=duration, metavar="DURATION")
    recorded.add_argument("--recorded-session-timeout", type=duration, metavar="DURATION")
    recorded.add_argument(
        "--recorded-scheduled-delay",
        type=duration,
        metavar="DURATION",
        help="the scheduled delay the group had (a classic group's: its workers' scheduled.rebalance.max.delay.ms, "
        "Connect's default 5min otherwise)",
    )
    parser.add_argument("--plot", metavar="FILE.html", help="draw every history's timeline, one above the other")


def duration(text: str) -> int:
    """`60s`, `1500ms`, `5min`, `1h`; a bare number is milliseconds."""
    match = _DURATION.match(text)
    if match is None:
        raise argparse.ArgumentTypeError(f"expected a duration such as 60s, 1500ms or 5min, got {text!r}")
    return round(float(match.group(1)) * _UNITS[match.group(2)])


def _time_arg(text: str) -> int:
    try:
        return parse_time(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def alternatives(args: argparse.Namespace) -> Alternatives:
    """The alternatives the flags ask for (checked against the group's settings once they are read)."""
    return Alternatives(
        assignor=tuple(args.assignor),
        scheduled_delay_ms=tuple(args.scheduled_delay),
        session_timeout_ms=tuple(args.session_timeout),
        initial_delay_ms=tuple(args.initial_delay),
        max_moves=tuple(args.max_moves),
        protocol=tuple(args.protocol),
    )


def given(args: argparse.Namespace) -> dict[str, int]:
    """The settings the topic does not hold, as the --recorded-* flags say them."""
    return {
        name: value
        for name, value in (
            ("heartbeat_interval_ms", args.recorded_heartbeat_interval),
            ("session_timeout_ms", args.recorded_session_timeout),
            ("scheduled_rebalance_max_delay_ms", args.recorded_scheduled_delay),
        )
        if value is not None
    }


def run_simulate(args: argparse.Namespace) -> int:
    report, read = simulation(args)
    show(report, args, read_summary(report.recorded_history, read))
    return 0


def simulation(args: argparse.Namespace, read: Read | None = None) -> tuple[Report, Read]:
    """The command's work without its printing: read (what `read` holds if given, else what the
    arguments name), then `replay.simulate.simulate`. The group page's "what if" view calls it too."""
    check(args)
    history, read = _read(args, read)
    report = simulate(
        history,
        args.group,
        since=args.range_from,
        alternatives=alternatives(args),
        given=given(args),
        where=f"{between(_since(args), args.to_time)} in {read.description}",
    )
    return report, read


def _since(args: argparse.Namespace) -> int | None:
    return args.range_from if args.range_from is not None else args.from_time


def show(report: Report, args: argparse.Namespace, summary: str) -> None:
    """The report on stdout, as text (after `summary`: what was read) or JSON lines; the plot."""
    if args.format == "json":
        for line in report_json(report):
            print_json(line)
    else:
        since = report.since
        print(f"group {report.group_id}: {summary}" + (f"; re-run from {format_time(since)}" if since else ""))
        print(report_text(report))
    if args.plot:
        _plot(args.plot, report.group_id, report.histories)
        print(f"plot written to {args.plot}", file=sys.stderr)


def check(args: argparse.Namespace) -> None:
    """What can be refused before anything is read."""
    if args.plot and Path(args.plot).suffix.lower() not in (".html", ".htm"):
        raise ReplayError(f"--plot {args.plot}: the timelines are drawn on an .html page", invalid_input=True)
    if args.range_to is not None:
        args.to_time = args.range_to
    if args.range_from is not None and args.to_time is not None and args.range_from > args.to_time:
        raise ReplayError("--from is after --to", invalid_input=True)
    for flag, value, minimum in (
        ("--recorded-heartbeat-interval", args.recorded_heartbeat_interval, 1),
        ("--recorded-session-timeout", args.recorded_session_timeout, 100),
        ("--recorded-scheduled-delay", args.recorded_scheduled_delay, 0),
    ):
        if value is not None and not minimum <= value <= 2**31 - 1:
            raise ReplayError(f"{flag} must be between {minimum} ms and 2^31-1 ms, not {value} ms", invalid_input=True)


def _read(args: argparse.Namespace, read: Read | None = None) -> tuple[History, Read]:
    """The group's history up to --to. From its start, not from --from: the re-runs start from
    what the group was at --from, which the records before it say."""
    read = read or Read(args, args.group)
    history = History(args.group, strict=args.strict)
    history.run(read)
    report_corrupt(history, args)
    if history.first is None:
        return history, read  # `simulate` says so
    oldest = history.first.timestamp_ms if args.range_from is None else args.range_from
    if not args.file and oldest < time.time() * 1000 - _COMPACTION_LAG_MS:
        print(
            f"warning: {format_time(oldest)} UTC is more than min.compaction.lag.ms (1 h by default) ago: "
            "compaction may have removed records of it, so the history may miss events; the audit's tables "
            "keep every record: `coordinator audit-simulate --warehouse DIR` (the same flags) re-runs the "
            "group from them",
            file=sys.stderr,
        )
    return history, read


def between(since: int | None, to: int | None) -> str:
    """The range asked for, as the errors say it (empty for the whole history)."""
    if since is None and to is None:
        return ""
    return (
        f" between {format_time(since) if since is not None else 'the start'} and "
        f"{format_time(to) if to is not None else 'the end'}"
    )


def _stable(o: Outcome) -> tuple[str, str]:
    known = [t for t in o.stable_after_ms if t is not None]
    if not known:
        return "-", "-"
    return format_duration(round(statistics.median(known))), format_duration(max(known))


def report_text(report: Report) -> str:
    """The report for people: the settings, the side-by-side table, faithfulness, what could not be
    reconstructed, and the happenings where each alternative differs most."""
    header, rows = report_table(report)
    return "\n".join([settings_line(report), "", table(rows, header), "", *report_notes(report)])


def settings_line(report: Report) -> str:
    """The settings the re-run took as recorded, and how each was known."""
    extracted, s, how = report.extracted, report.own, report.recorded.how
    return (
        f"{len(extracted.happenings)} happenings re-run; settings as recorded: "
        f"session {format_duration(s.session_timeout_ms)} ({how['session_timeout_ms']}), "
        f"heartbeat {format_duration(s.heartbeat_interval_ms)} ({how['heartbeat_interval_ms']}), "
        f"scheduled delay {format_duration(s.scheduled_rebalance_max_delay_ms)} "
        f"({how['scheduled_rebalance_max_delay_ms']}), initial delay "
        f"{format_duration(s.initial_assignment_delay_ms)} ({how['initial_assignment_delay_ms']}), "
        + (
            f"classic protocol, Connect's leader assigning (connect.protocol={s.connect_protocol})"
            if s.protocol == "classic"
            else f"{'server-side ' if extracted.server_side else ''}{extracted.assignor}"
        )
    )


def report_table(report: Report) -> tuple[list[str], list[list]]:
    """The side-by-side table: its header (a column per history) and its rows."""
    everything = [report.base, *report.outcomes]
    rows = [
        ["rebalances", *(o.rebalances for o in everything)],
        ["items moved", *(len(o.moves) for o in everything)],
        ["tasks moved", *(o.tasks_moved for o in everything)],
        ["unowned task-seconds", *(f"{o.unowned_task_ms / 1000:.1f}" for o in everything)],
        ["longest a task waited", *(format_duration(o.longest_wait_ms) for o in everything)],
        ["time to stable, median", *(_stable(o)[0] for o in everything)],
        ["time to stable, longest", *(_stable(o)[1] for o in everything)],
    ]
    return ["", *(o.name for o in everything)], rows


def report_notes(report: Report) -> list[str]:
    """The lines under the table: faithfulness, what was not reconstructed, workers refused, and
    the happenings where each alternative differs most from the re-run."""
    extracted, outcomes = report.extracted, report.outcomes
    out = [_faithfulness_text(faithfulness(report.base, outcomes[0]))]
    out += [f"not reconstructed: {line}" for line in extracted.not_reconstructed]
    for o in outcomes:
        for member_id, why in sorted(o.given_up.items()):
            out.append(f"{o.name}: the coordinator refused {member_id} for good ({why}); it is left out from then on")
    # The alternatives are set against the re-run (the setting's doing alone), not the record.
    for o in outcomes[1:]:
        for d in differences(extracted, outcomes[0], o, from_ms=report.since):
            out.append(f"at {format_clock(d.at_ms)} {d.what}: " + _said(d, "as recorded (re-run)", o.name))
    return out


def _faithfulness_text(f) -> str:  # noqa: ANN001
    return (
        f"faithfulness: the re-run with the group's own settings made {f.matched_moves} of the "
        f"{f.recorded_moves} recorded moves; "
        + (
            "the same items moved to the same workers, rebalance after rebalance"
            if f.same_moves
            else f"first difference: {f.first_difference}"
        )
        + f"; items moved {f.items_moved_off:.1%} off, unowned task-seconds {f.unowned_off:.1%} off "
        + ("(within 5%)" if f.within_tolerance else "(NOT within 5%)")
    )


def _said(d, base: str, name: str) -> str:  # noqa: ANN001
    def moved(n: int, last: int | None) -> str:
        if not n:
            return "nothing moved"
        return f"{n} item{'s' if n != 1 else ''} moved" + (f", the last at {format_clock(last)}" if last else "")

    return f"{base} {moved(d.base_moved, d.base_last_ms)}; with {name} {moved(d.other_moved, d.other_last_ms)}"


def report_json(report: Report) -> list[dict]:
    """The report for scripts: one object per history's outcome, then the faithfulness."""
    out: list[dict] = [
        {
            "type": "outcome",
            "name": o.name,
            "rebalances": o.rebalances,
            "items_moved": len(o.moves),
            "tasks_moved": o.tasks_moved,
            "unowned_task_ms": o.unowned_task_ms,
            "longest_wait_ms": o.longest_wait_ms,
            "stable_after_ms": o.stable_after_ms,
            "moves": [{"at_ms": m.at_ms, "item": str(m.item), "from": m.source, "to": m.target} for m in o.moves],
        }
        for o in [report.base, *report.outcomes]
    ]
    said = {
        "not_reconstructed": report.extracted.not_reconstructed,
        "settings": _settings_json(report.own),
        "settings_how": report.recorded.how,
    }
    f = faithfulness(report.base, report.outcomes[0])
    out.append(
        {
            "type": "faithfulness",
            "measured": True,
            "same_moves": f.same_moves,
            "matched_moves": f.matched_moves,
            "recorded_moves": f.recorded_moves,
            "first_difference": f.first_difference,
            "items_moved_off": f.items_moved_off,
            "unowned_off": f.unowned_off,
            "within_tolerance": f.within_tolerance,
            **said,
        }
    )
    return out


def _settings_json(s: ScriptSettings) -> dict:
    return {
        "session_timeout_ms": s.session_timeout_ms,
        "heartbeat_interval_ms": s.heartbeat_interval_ms,
        "scheduled_rebalance_max_delay_ms": s.scheduled_rebalance_max_delay_ms,
        "initial_assignment_delay_ms": s.initial_assignment_delay_ms,
        "protocol": s.protocol,
        **({"connect_protocol": s.connect_protocol} if s.protocol == "classic" else {}),
    }


def _plot(path: str, group_id: str, histories: list[tuple[str, History]]) -> None:
    from replay.plot_layout import layout
    from replay.plot_svg import svg_element

    parts = [
        f"<h2>{html.escape(name)}</h2>\n{svg_element(layout(history, group_id))}"
        for name, history in histories
        if history.first is not None
    ]
    page = (
        f"<!doctype html><meta charset='utf-8'><title>{html.escape(group_id)}: what if</title>"
        "<body style='font-family: sans-serif'>" + "\n".join(parts) + "</body>"
    )
    Path(path).write_text(page, encoding="utf-8")
