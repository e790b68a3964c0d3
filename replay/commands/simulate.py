"""`coordinator replay simulate`: a group's history re-run through the coordinator, as recorded and
with other settings (issue 32), side by side.

The group's events are read as every replay command reads them (`replay.commands.reading`), the
happenings extracted (`replay.whatif`), re-run once with the group's own settings and once per
alternative (`replay.simulate`), and each history measured by the same code.
"""

from __future__ import annotations

import argparse
import html
import re
import statistics
import sys
import time
from dataclasses import dataclass, replace
from pathlib import Path

from coordinator.core.driver.scripted import ScriptSettings
from coordinator.tools.text import table
from replay.commands.reading import Read, print_json, read_summary, report_corrupt
from replay.errors import ReplayError
from replay.history import History
from replay.positions import format_clock, format_duration, format_time, parse_time
from replay.simulate import Outcome, differences, faithfulness, measure, own_settings, rerun
from replay.whatif import PROTOCOLS, Extracted, Recorded, check_settings, extract, recorded_settings

# The topic keeps every record for min.compaction.lag.ms (an hour by default); older ones may be
# compacted away, and a history read from them misses the superseded ones.
_COMPACTION_LAG_MS = 3_600_000
_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|min|h)?\s*$")
_UNITS = {"ms": 1, "s": 1_000, "min": 60_000, "h": 3_600_000, None: 1}
CLASSIC_FAITHFULNESS = (
    "not measured: the group ran the classic protocol and the re-run is on the connect protocol, "
    "so it says what migrating would have changed, not what the recorded history did"
)


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


def alternatives(
    args: argparse.Namespace, recorded: ScriptSettings, classic: bool = False
) -> list[tuple[str, ScriptSettings]]:
    out = [(f"assignor {a}", replace(recorded, assignor=a)) for a in args.assignor]
    out += [
        (f"delay {format_duration(v)}", replace(recorded, scheduled_rebalance_max_delay_ms=v))
        for v in args.scheduled_delay
    ]
    out += [(f"session {format_duration(v)}", replace(recorded, session_timeout_ms=v)) for v in args.session_timeout]
    out += [
        (f"initial delay {format_duration(v)}", replace(recorded, initial_assignment_delay_ms=v))
        for v in args.initial_delay
    ]
    out += [(f"max moves {n}", replace(recorded, max_moves=n)) for n in args.max_moves]
    for protocol in args.protocol:
        if protocol == "classic":
            raise ReplayError(
                "--protocol classic: re-running a history on the classic protocol is not implemented yet",
                invalid_input=True,
            )
        if not classic:  # a classic group's own re-run is on the connect protocol already
            out.append(("protocol connect", recorded))
    for _, settings in out:
        check_settings(settings)
    return out


@dataclass
class Simulation:
    """What `replay simulate` computed: the recorded history, its re-runs and their numbers. The CLI
    prints it; the group page's "what if" view (`coordinator.service.whatif`) draws it."""

    history: History
    read: Read
    extracted: Extracted
    recorded: Recorded
    own: ScriptSettings
    base: Outcome  # the recorded history's numbers
    outcomes: list[Outcome]  # the faithful re-run's, then each alternative's
    histories: list[tuple[str, History]]  # every history by name: recorded, re-run, alternatives
    since: int | None


def simulation(args: argparse.Namespace, read: Read | None = None) -> Simulation:
    """The command's work without its printing: read (what `read` holds if given, else what the
    arguments name), extract, re-run, measure."""
    check(args)
    history, read = _read(args, read)
    given = {
        name: value
        for name, value in (
            ("heartbeat_interval_ms", args.recorded_heartbeat_interval),
            ("session_timeout_ms", args.recorded_session_timeout),
        )
        if value is not None
    }
    recorded = recorded_settings(history.events, given)
    extracted = extract(history.events, args.group, recorded.settings)
    since = args.range_from
    if not any(since is None or h.step.at_ms >= since for h in extracted.happenings):
        raise ReplayError(f"no membership events of group {args.group}{_between(args)} in {read.description}")
    own = own_settings(extracted, recorded)
    classic = extracted.protocol == "classic"
    runs = [("protocol connect" if classic else "re-run", own), *alternatives(args, own, classic)]
    base, outcomes, histories = _run_all(history, extracted, runs, since)
    named = [("recorded", history), *zip([n for n, _ in runs], histories)]
    return Simulation(history, read, extracted, recorded, own, base, outcomes, named, since)


def run_simulate(args: argparse.Namespace) -> int:
    sim = simulation(args)
    if args.format == "json":
        _print_json(sim.extracted, sim.recorded, sim.own, sim.base, sim.outcomes)
    else:
        print(
            f"group {args.group}: {read_summary(sim.history, sim.read)}"
            + (f"; re-run from {format_time(sim.since)}" if sim.since else "")
        )
        print(settings_line(sim))
        print()
        header, rows = report_table(sim)
        print(table(rows, header))
        print()
        for line in report_notes(sim):
            print(line)
    if args.plot:
        _plot(args.plot, args.group, sim.histories)
        print(f"plot written to {args.plot}", file=sys.stderr)
    return 0


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
        raise ReplayError(f"no records of group {args.group}{_between(args)} in {read.description}")
    oldest = history.first.timestamp_ms if args.range_from is None else args.range_from
    if not args.file and oldest < time.time() * 1000 - _COMPACTION_LAG_MS:
        print(
            f"warning: {format_time(oldest)} UTC is more than min.compaction.lag.ms (1 h by default) ago: "
            "compaction may have removed records of it, so the history may miss events; the audit's tables "
            "(spark/, `coordinator audit`) keep every event",
            file=sys.stderr,
        )
    return history, read


def _between(args: argparse.Namespace) -> str:
    since = args.range_from if args.range_from is not None else args.from_time
    if since is None and args.to_time is None:
        return ""
    return (
        f" between {format_time(since) if since is not None else 'the start'} and "
        f"{format_time(args.to_time) if args.to_time is not None else 'the end'}"
    )


def _run_all(history: History, extracted, runs, since: int | None):  # noqa: ANN001, ANN202
    """Each run from the start; an alternative takes over at `since` (before it, the group as it was)."""
    end = history.last.timestamp_ms
    reruns = []
    own = runs[0][1]
    for n, (name, settings) in enumerate(runs):
        if since is None or n == 0:
            simulated, run = rerun(extracted, settings, end)
        else:
            simulated, run = rerun(extracted, own, end, switch=(since, settings))
        reruns.append((name, simulated, run))
    end = max([end, *(h.last.timestamp_ms for _, h, _ in reruns if h.last is not None)])
    recorded = measure("recorded", history, extracted, end, since)
    outcomes = []
    for name, simulated, run in reruns:
        outcome = measure(name, simulated, extracted, end, since)
        outcome.heartbeats, outcome.given_up = run.heartbeats, run.given_up
        outcomes.append(outcome)
    return recorded, outcomes, [h for _, h, _ in reruns]


def _stable(o: Outcome) -> tuple[str, str]:
    known = [t for t in o.stable_after_ms if t is not None]
    if not known:
        return "-", "-"
    return format_duration(round(statistics.median(known))), format_duration(max(known))


def settings_line(sim: Simulation) -> str:
    """The settings the re-run took as recorded, and how each was known."""
    s, how = sim.own, sim.recorded.how
    return (
        f"{len(sim.extracted.happenings)} happenings re-run; settings as recorded: "
        f"session {format_duration(s.session_timeout_ms)} ({how['session_timeout_ms']}), "
        f"heartbeat {format_duration(s.heartbeat_interval_ms)} ({how['heartbeat_interval_ms']}), "
        f"scheduled delay {format_duration(s.scheduled_rebalance_max_delay_ms)} "
        f"({how['scheduled_rebalance_max_delay_ms']}), initial delay "
        f"{format_duration(s.initial_assignment_delay_ms)} ({how['initial_assignment_delay_ms']}), "
        f"{'server-side ' if sim.extracted.server_side else ''}{sim.extracted.assignor}"
    )


def report_table(sim: Simulation) -> tuple[list[str], list[list]]:
    """The side-by-side table: its header (a column per history) and its rows."""
    everything = [sim.base, *sim.outcomes]
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


def report_notes(sim: Simulation) -> list[str]:
    """The lines under the table: faithfulness, what was not reconstructed, workers refused, and
    the happenings where each alternative differs most from the re-run."""
    extracted, outcomes = sim.extracted, sim.outcomes
    # The alternatives are set against the re-run (the setting's doing alone), not the record.
    base_said = "as recorded (re-run)"
    if extracted.protocol == "classic":
        base_said = "on the connect protocol"
        out = [f"faithfulness: {CLASSIC_FAITHFULNESS}"]
    else:
        out = [_faithfulness_line(faithfulness(sim.base, outcomes[0]))]
    out += [f"not reconstructed: {line}" for line in extracted.not_reconstructed]
    for o in outcomes:
        for member_id, why in sorted(o.given_up.items()):
            out.append(f"{o.name}: the coordinator refused {member_id} for good ({why}); it is left out from then on")
    for o in outcomes[1:]:
        for d in differences(extracted, outcomes[0], o, from_ms=sim.since):
            out.append(f"at {format_clock(d.at_ms)} {d.what}: " + _said(d, base_said, o.name))
    return out


def _faithfulness_line(f) -> str:  # noqa: ANN001
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


def _print_json(extracted, recorded: Recorded, own: ScriptSettings, base: Outcome, outcomes: list[Outcome]) -> None:  # noqa: ANN001
    for o in [base, *outcomes]:
        print_json(
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
        )
    said = {
        "not_reconstructed": extracted.not_reconstructed,
        "settings": _settings_json(own),
        "settings_how": recorded.how,
    }
    if extracted.protocol == "classic":
        print_json({"type": "faithfulness", "measured": False, "why": CLASSIC_FAITHFULNESS, **said})
        return
    f = faithfulness(base, outcomes[0])
    print_json(
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


def _settings_json(s: ScriptSettings) -> dict:
    return {
        "session_timeout_ms": s.session_timeout_ms,
        "heartbeat_interval_ms": s.heartbeat_interval_ms,
        "scheduled_rebalance_max_delay_ms": s.scheduled_rebalance_max_delay_ms,
        "initial_assignment_delay_ms": s.initial_assignment_delay_ms,
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
