"""What a group lived through, as a script the coordinator can be driven through again (issue 32).

`extract` reads a group's events (`replay.history.History`'s) and says what happened to the group
from outside the coordinator: workers joining, leaving gracefully or for a while (static), crashing
(a departure by session timeout: the worker stopped heartbeating a session before), the
connectors changing. What the coordinator did about them (epochs, targets, revocations) is left
out: that is what a re-run computes again, with the group's own settings or others. A classic
group's history (Kafka Connect workers on the classic protocol) gives the same happenings from its
classic members' joins and departures, to be re-run on the connect protocol: the migration question.

`recorded_settings` says which settings the group had: its configuration record where it has one;
else the scheduled delay read from its deferrals (a deferred target's deadline minus the departure
that caused it), the heartbeat interval from how soon members followed a new target (on average
half an interval), and the server's defaults for the rest, each marked as read, measured or
assumed.

Both are pure functions of the events: the group page's "what if" view and the Spark tables can
feed them events of their own.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from statistics import mean

from records.connect_protocol import OFFERED, SESSIONED

from coordinator.core.assignors import ASSIGNORS
from coordinator.core.driver.scripted import Crash, Join, Leave, ScriptSettings, SetConnectors, Step
from coordinator.core.group_coordinator import CoordinatorConfig
from coordinator.core.protocol import LeaveReason
from replay import events as ev
from replay.errors import ReplayError
from replay.events import Event
from replay.positions import format_clock, format_duration

_DEFAULTS = CoordinatorConfig()


@dataclass(slots=True)
class Happening:
    """One extracted event, with what a person reads about it ("W2's crash") and the worker it
    happened to (its instance id, else its member id; None: the connectors)."""

    step: Step
    text: str
    worker: str | None = None


@dataclass(slots=True)
class Extracted:
    group_id: str
    happenings: list[Happening] = field(default_factory=list)
    start_ms: int = 0
    end_ms: int = 0
    not_reconstructed: list[str] = field(default_factory=list)  # events the script can only approximate
    server_side: bool = False
    assignor: str = "incremental_cooperative"
    replaced: set[str] = field(default_factory=set)  # classic members a join under their instance id took over
    protocol: str = "connect"  # the group's: "classic" when only classic members were in it


def extract(events: Iterable[Event], group_id: str, settings: ScriptSettings) -> Extracted:
    """The group's happenings from its events; a crash is placed a session (`settings`') before
    the removal that recorded it, or at the last record that showed the member alive if later."""
    events = list(events)
    out = Extracted(group_id, protocol=_protocol(events))
    out.replaced = {
        e.detail["took_over"] for e in events if e.kind == ev.CLASSIC_MEMBER_JOINED and e.detail.get("took_over")
    }
    away: set[str] = set()  # static members gone for a while: their removal is the coordinator's
    names: dict[str, str] = {}  # member id -> its instance id: the worker's name, across restarts
    seen: dict[str, int] = {}  # member id -> when a record last showed it alive
    held: dict[str, set] = {}  # member id -> what it holds
    first = True
    for e in events:
        if first:
            out.start_ms, first = e.at.timestamp_ms, False
        out.end_ms = e.at.timestamp_ms
        at, m, d = e.at.timestamp_ms, e.member_id, e.detail
        if m is not None and e.kind != ev.MEMBER_LEFT:
            seen[m] = at
        if m is not None and (e.gained or e.released):
            mine = held.setdefault(m, set())
            mine -= e.released
            mine |= e.gained
        if e.kind == ev.MEMBER_JOINED:
            if d.get("protocol") == "classic":
                out.not_reconstructed.append(f"{_clock(at)} {m} joined on the classic protocol (left out)")
                continue
            assignors = d["assignors"]
            out.server_side = assignors.startswith("server-side ")
            name = assignors.removeprefix("server-side ").split(" ")[0]
            if name in _ASSIGNOR_NAMES:
                out.assignor = name
            names[m] = d["instance_id"] or m
            step = Join(at, m, d["instance_id"], d.get("rebalance_timeout_ms") or 60_000)
            out.happenings.append(Happening(step, f"{names[m]}'s join", names[m]))
        elif e.kind == ev.STATIC_LEAVE:
            away.add(m)
            out.happenings.append(
                Happening(Leave(at, m, static=True), f"{names.get(m, m)}'s static leave", names.get(m, m))
            )
        elif e.kind == ev.MEMBER_LEFT:
            _left(out, e, away, settings, names.get(m, m), seen.get(m, out.start_ms), frozenset(held.get(m, ())))
        elif e.kind == ev.CONNECTORS:
            out.happenings.append(Happening(SetConnectors(at, dict(d["connectors"])), "the connectors' change"))
        elif e.kind == ev.GROUP_DELETED:
            out.not_reconstructed.append(f"{_clock(at)} the group was deleted (what follows is a new group)")
        elif out.protocol == "classic" and e.kind in (ev.CLASSIC_MEMBER_JOINED, ev.CLASSIC_MEMBER_LEFT):
            _classic(out, e, names)
        elif e.kind in (ev.CONVERTED, ev.CLASSIC_MEMBER_JOINED):
            out.not_reconstructed.append(f"{_clock(at)} {ev.text(e)} (classic members are left out)")
    if out.protocol == "classic":
        _classic_connectors(out, events)
        _join_order(out, events)
    out.happenings.sort(key=lambda h: h.step.at_ms)  # a crash moved back a session
    return out


def _join_order(out: Extracted, events: list[Event]) -> None:
    """Classic members recorded joining at one instant (a record lists them by member id, not in
    the order they joined): the connectors first, then the members by when each first led the
    group. The coordinator makes the first member to join the leader, and a leader's successor the
    first member left, so the re-run's leaders (and so Connect's leader's memory) are the recorded
    ones."""
    led: dict[str, int] = {}
    for e in events:
        if e.kind == ev.CLASSIC_GROUP and e.detail.get("leader"):
            led.setdefault(e.detail["leader"], len(led))

    def rank(h: Happening) -> int:
        step = h.step
        if isinstance(step, SetConnectors):
            return -1
        return led.get(step.member_id, len(led)) if isinstance(step, Join) else len(led)

    out.happenings.sort(key=lambda h: (h.step.at_ms, rank(h)))


def _left(
    out: Extracted, e: Event, away: set[str], settings: ScriptSettings, name: str, alive_at: int, held: frozenset
) -> None:
    at, m = e.at.timestamp_ms, e.member_id
    reason = e.detail.get("reason", LeaveReason.LEAVE)
    if m in away:  # went away for a while (-2) and did not come back: the coordinator removed it
        away.discard(m)
        return
    if reason == LeaveReason.REPLACED:
        return  # a join under its instance id took it over: the join is the happening
    if reason == LeaveReason.LEAVE:
        out.happenings.append(Happening(Leave(at, m), f"{name}'s leave", name))
        return
    # A session before its removal, but not before a record showed it alive (the session is a
    # server's default or a bound where no configuration record says it).
    crashed_at = max(alive_at, at - settings.session_timeout_ms)
    out.happenings.append(Happening(Crash(crashed_at, m, held), f"{name}'s crash", name))
    if reason != LeaveReason.SESSION_TIMEOUT:
        out.not_reconstructed.append(
            f"{_clock(at)} {m} removed ({reason}): re-run as a crash, its session timing out instead"
        )


_ASSIGNOR_NAMES = frozenset(ASSIGNORS)


# --- a classic group's history: what its workers did, to re-run on the connect protocol ------------


def _protocol(events: list[Event]) -> str:
    """ "classic" for a group whose members were all classic ones (a group that converted to the
    connect protocol is a connect group: its classic members are left out, as before)."""
    kinds = {e.kind for e in events}
    return "classic" if ev.CLASSIC_MEMBER_JOINED in kinds and ev.MEMBER_JOINED not in kinds else "connect"


def _classic(out: Extracted, e: Event, names: dict[str, str]) -> None:
    """A classic member's join or departure. A classic record does not say why a member left (a
    LeaveGroup, or its session ending): the departure is re-run as a leave at its removal, which
    removes it from the connect group when the classic coordinator removed it."""
    at, m, d = e.at.timestamp_ms, e.member_id, e.detail
    if e.kind == ev.CLASSIC_MEMBER_JOINED:
        names[m] = d.get("instance_id") or m
        step = Join(at, m, d.get("instance_id"), d.get("rebalance_timeout_ms") or 60_000)
        out.happenings.append(Happening(step, f"{names[m]}'s join", names[m]))
    elif not d.get("handover") and m not in out.replaced:
        out.happenings.append(Happening(Leave(at, m), f"{names.get(m, m)}'s leave", names.get(m, m)))
        if _LEFT_UNSAID not in out.not_reconstructed:
            out.not_reconstructed.append(_LEFT_UNSAID)


_LEFT_UNSAID = "why classic members left (a LeaveGroup or a session ending): each is re-run as a leave at its removal"


def _classic_connectors(out: Extracted, events: list[Event]) -> None:
    """The connectors over time, where no connectors record says them (real Connect workers' groups
    keep them in Connect's config topic): generation by generation, what the members ran, with
    work a departed member left waiting for the scheduled delay. An item that first shows up is
    created at the start of the rebalance that gave it out; one that nobody runs in a generation
    and the next (Connect gives a balancing revocation out again in the very next round) was
    deleted at the start of the first. Each change is a connectors step there."""
    if any(e.kind == ev.CONNECTORS for e in events):
        return
    configured = [(at, items | lost) for at, items, lost in _classic_generations(events)]
    if not configured:
        return
    previous: dict[str, int] | None = None
    steps = []
    for n, (at, items) in enumerate(configured):
        after = configured[n + 1][1] if n + 1 < len(configured) else items
        kept = items | (configured[n - 1][1] & after if n else frozenset())  # revoked, given out next round
        counts = _counts(kept)
        if counts != previous and (counts or previous):
            step = SetConnectors(out.start_ms if previous is None else at, counts)
            text = "the connectors (read from what the members ran)"
            steps.append(Happening(step, text if previous is None else "the connectors' change (read)"))
        previous = counts
    out.happenings[:0] = steps  # before the joins of their instant (the sort keeps the order)
    out.not_reconstructed.append(
        "the connectors: no connectors record; read from what the members ran, generation by generation "
        "(a change at the start of the rebalance that first showed it)"
    )


def _classic_generations(events: list[Event]) -> list[tuple[int, frozenset, frozenset]]:
    """Per completed generation: when its rebalance started, what its members ran, and what
    departed members left for nobody yet (lost work waiting for the scheduled delay)."""
    out = []
    runs: dict[str, frozenset] = {}
    lost: set = set()
    started: int | None = None
    stable = False
    for e in events:
        at = e.at.timestamp_ms
        if e.kind == ev.CLASSIC_GROUP:
            state = e.detail.get("state")
            if stable and state != "Stable":
                out.append((started, frozenset().union(*runs.values()), frozenset(lost - set().union(*runs.values()))))
            if state != "Stable" and (stable or started is None):
                started = at
            stable = state == "Stable"
        elif e.kind in (ev.CLASSIC_MEMBER, ev.CLASSIC_MEMBER_JOINED):
            runs[e.member_id] = e.detail.get("runs", frozenset())
            lost -= e.gained
        elif e.kind == ev.CLASSIC_MEMBER_LEFT:
            runs.pop(e.member_id, None)
            lost |= e.released
    if stable:
        out.append((started, frozenset().union(*runs.values()), frozenset(lost - set().union(*runs.values()))))
    return [g for g in out if g[0] is not None]


def _counts(items: Iterable) -> dict[str, int]:
    """Each connector's task count, from its items (its tasks numbered from 0)."""
    counts: dict[str, int] = {}
    for item in items:
        if isinstance(item, str):
            counts.setdefault(item, 0)
        else:
            counts[item.connector] = max(counts.get(item.connector, 0), item.task + 1)
    return dict(sorted(counts.items()))


def _clock(ms: int) -> str:
    return format_clock(ms)


# --- the settings the group had ---------------------------------------------------------------------


@dataclass(slots=True)
class Recorded:
    settings: ScriptSettings
    how: dict[str, str]  # setting -> "configured", "measured" or "server default"


def recorded_settings(events: list[Event], given: dict[str, int] | None = None) -> Recorded:
    """The group's settings, read from its configuration record, measured from its history, or the
    server's defaults (the topic does not hold a server's flags); `given` (setting -> value) says
    what the person asking knows better, such as the flags its coordinator ran with. A classic
    group's session is its workers' own (their JoinGroup's, in its records)."""
    how: dict[str, str] = {}
    configured: dict = {}
    classic = _protocol(events) == "classic"
    for e in events:
        if e.kind == ev.CONFIGURATION and e.detail:
            configured = {k: v for k, v in e.detail.items() if v is not None}
        elif classic and e.kind == ev.CLASSIC_MEMBER_JOINED and e.detail.get("session_timeout_ms"):
            configured["session_timeout_ms"] = e.detail["session_timeout_ms"]
    settings = ScriptSettings(
        session_timeout_ms=_DEFAULTS.session_timeout_ms,
        heartbeat_interval_ms=_DEFAULTS.heartbeat_interval_ms,
        scheduled_rebalance_max_delay_ms=_DEFAULTS.scheduled_rebalance_max_delay_ms,
        initial_assignment_delay_ms=_DEFAULTS.initial_assignment_delay_ms,
    )
    for name in ("session_timeout_ms", "heartbeat_interval_ms", "scheduled_rebalance_max_delay_ms"):
        how[name] = "server default"
    how["initial_assignment_delay_ms"] = "server default"
    if classic:
        # The workers' own heartbeat.interval.ms and scheduled.rebalance.max.delay.ms: no record
        # holds them; Connect's defaults (3 s, 5 min) are the server's too.
        how["heartbeat_interval_ms"] = how["scheduled_rebalance_max_delay_ms"] = "Connect's default"
        # A classic member's join is recorded when its join phase ends, after any initial delay:
        # re-run at that time, it needs none more.
        how["initial_assignment_delay_ms"] = "in the recorded joins"
        settings = replace(
            settings, protocol="classic", connect_protocol=_connect_protocol(events), initial_assignment_delay_ms=0
        )
    measured = {
        "scheduled_rebalance_max_delay_ms": _measured_delay(events),
        "heartbeat_interval_ms": _measured_interval(events),
        "initial_assignment_delay_ms": _measured_initial_delay(events),
        "session_timeout_ms": _measured_session(events, settings.session_timeout_ms),
    }
    for name, value in measured.items():
        if value is not None:
            settings, how[name] = replace(settings, **{name: value}), "measured"
    for name, value in configured.items():
        if name in how:
            settings, how[name] = replace(settings, **{name: value}), "configured"
    for name, value in (given or {}).items():
        settings, how[name] = replace(settings, **{name: value}), "given"
    return Recorded(settings, how)


def on_connect_protocol(settings: ScriptSettings) -> ScriptSettings:
    """A classic group's settings for a run on the connect protocol (the migration question): the
    coordinator's initial delay (the classic re-run's is in the recorded joins' times) and the
    same timeouts and scheduled delay, the coordinator's now."""
    if settings.protocol != "classic":
        return settings
    return replace(settings, protocol="connect", initial_assignment_delay_ms=_DEFAULTS.initial_assignment_delay_ms)


def _connect_protocol(events: list[Event]) -> str:
    """The workers' connect.protocol, as their metadata bytes offered it: the protocol the classic
    coordinator chose (the most recent one of every member's; a group that changed it midway, in
    a rolling change of connect.protocol, is re-run with the one it ended with)."""
    chosen = [e.detail["protocol"] for e in events if e.kind == ev.CLASSIC_GROUP and e.detail.get("protocol")]
    return chosen[-1] if chosen and chosen[-1] in OFFERED else SESSIONED


def _measured_delay(events: list[Event]) -> int | None:
    """A deferred target's deadline minus the latest departure before it (the assignor's rule 2b)."""
    departed_at = None
    candidates = []
    for e in events:
        if e.kind == ev.MEMBER_LEFT:
            departed_at = e.at.timestamp_ms
        elif e.kind == ev.TARGET_INSTALLED and e.detail["deferred"] and departed_at is not None:
            due = e.detail["scheduled_rebalance_at_ms"]
            if due is not None:
                candidates.append(due - departed_at)
    return max(candidates) if candidates else None


def _measured_session(events: list[Event], default: int) -> int | None:
    """At most the time from a crashed member's last record to its removal by session timeout (it
    heartbeated at least until its last record); the server's default when that says nothing."""
    last: dict[str, int] = {}
    bounds = []
    for e in events:
        if e.member_id is None:
            continue
        if e.kind == ev.MEMBER_LEFT and e.detail.get("reason") == LeaveReason.SESSION_TIMEOUT and e.member_id in last:
            bounds.append(e.at.timestamp_ms - last[e.member_id])
        last[e.member_id] = e.at.timestamp_ms
    if not bounds or min(bounds) >= default:
        return None
    return max(_DEFAULTS.min_timeout_ms, min(bounds))


def _measured_initial_delay(events: list[Event]) -> int | None:
    """The first target after the group's first members joined, minus the last of those joins:
    each join of an empty group's first members extends the wait by the delay."""
    joined = None
    for e in events:
        if e.kind == ev.MEMBER_JOINED:
            joined = e.at.timestamp_ms
        elif e.kind in (ev.TARGET_INSTALLED, ev.TARGET_FAILED) and joined is not None:
            return e.at.timestamp_ms - joined
        elif e.kind == ev.MEMBER_EPOCH and joined is None:
            return None  # the group had members before the read began
    return None


def _measured_interval(events: list[Event]) -> int | None:
    """Twice the mean time members took to move to a newly installed target's epoch: a member hears
    of it at its next heartbeat. A rough measure: while a target is computed or work waits, the
    coordinator shortens a member's interval (to a tenth, at least 100 ms), so the gaps of a group
    with a short interval say little more than that it is short."""
    gaps = follow_gaps(events)
    if len(gaps) < 3:
        return None
    return max(10, round(2 * mean(gaps)))


def follow_gaps(events: Iterable[Event]) -> list[int]:
    """How long after each target was installed each member moved to its epoch."""
    installed: dict[int, int] = {}
    gaps = []
    for e in events:
        if e.kind == ev.TARGET_INSTALLED:
            installed[e.epoch] = e.at.timestamp_ms
        elif e.kind == ev.MEMBER_EPOCH and e.previous_epoch is not None and e.epoch in installed:
            if e.epoch != e.previous_epoch:
                gaps.append(e.at.timestamp_ms - installed[e.epoch])
    return gaps


# --- the alternatives' settings ---------------------------------------------------------------------

PROTOCOLS = ("connect", "classic")


def own_runs(own: ScriptSettings) -> list[tuple[str, ScriptSettings]]:
    """The group's own re-runs: the faithful one (on its protocol), and for a classic group the
    connect protocol's too, the question asked before migrating. Checked."""
    check_settings(own)
    if own.protocol != "classic":
        return [("re-run", own)]
    return [("re-run", own), ("protocol connect", on_connect_protocol(own))]


def alternative_runs(
    own: ScriptSettings,
    *,
    assignor: Iterable[str] = (),
    scheduled_delay_ms: Iterable[int] = (),
    session_timeout_ms: Iterable[int] = (),
    initial_delay_ms: Iterable[int] = (),
    max_moves: Iterable[int] = (),
    protocol: Iterable[str] = (),
) -> list[tuple[str, ScriptSettings]]:
    """Each alternative's name and settings: the group's own (`own`) with one changed, on its own
    protocol. An assignor and a move limit are the coordinator's, so on a classic group they run on
    the connect protocol (its leader assigns by Connect's rules). A protocol is the one the group
    did not run (its own is the re-run; a classic group's connect run is always made): a connect
    group's members re-run as Kafka Connect workers with connect.protocol=sessioned. Checked."""
    classic = own.protocol == "classic"
    connect = on_connect_protocol(own)
    on_connect = " (connect protocol)" if classic else ""
    out = [(f"assignor {a}{on_connect}", replace(connect, assignor=a)) for a in assignor]
    out += [
        (f"delay {format_duration(v)}", replace(own, scheduled_rebalance_max_delay_ms=v)) for v in scheduled_delay_ms
    ]
    out += [(f"session {format_duration(v)}", replace(own, session_timeout_ms=v)) for v in session_timeout_ms]
    out += [
        (f"initial delay {format_duration(v)}", replace(own, initial_assignment_delay_ms=v)) for v in initial_delay_ms
    ]
    out += [(f"max moves {n}{on_connect}", replace(connect, max_moves=n)) for n in max_moves]
    for name in dict.fromkeys(protocol):
        if name not in PROTOCOLS:
            raise ReplayError(f"--protocol {name}: choose from {', '.join(PROTOCOLS)}", invalid_input=True)
        if name == "classic" and not classic:
            out.append(("protocol classic", replace(own, protocol="classic", connect_protocol=SESSIONED)))
        elif name == "connect" and not classic:
            out.append(("protocol connect", own))
    for _, settings in out:
        check_settings(settings)
    return out


@dataclass(frozen=True, slots=True)
class Alternatives:
    """The settings to re-run with, each value one re-run beside the recorded one (the command's
    flags; the Spark tables' `spark.whatif.simulate` takes them too). Durations in milliseconds."""

    assignor: tuple[str, ...] = ()
    scheduled_delay_ms: tuple[int, ...] = ()
    session_timeout_ms: tuple[int, ...] = ()
    initial_delay_ms: tuple[int, ...] = ()
    max_moves: tuple[int, ...] = ()
    protocol: tuple[str, ...] = ()

    def runs(self, own: ScriptSettings) -> list[tuple[str, ScriptSettings]]:
        """Each alternative's name and settings (`alternative_runs`). Checked."""
        return alternative_runs(
            own,
            assignor=self.assignor,
            scheduled_delay_ms=self.scheduled_delay_ms,
            session_timeout_ms=self.session_timeout_ms,
            initial_delay_ms=self.initial_delay_ms,
            max_moves=self.max_moves,
            protocol=self.protocol,
        )


def check_settings(settings: ScriptSettings) -> None:
    """A setting out of range is said in one line, before anything runs."""
    low = _DEFAULTS.min_timeout_ms
    for name, value, minimum in (
        ("--session-timeout", settings.session_timeout_ms, low),
        ("--scheduled-delay", settings.scheduled_rebalance_max_delay_ms, 0),
        ("--initial-delay", settings.initial_assignment_delay_ms, 0),
    ):
        if value < minimum or value > 2**31 - 1:
            raise ReplayError(f"{name} must be between {minimum} ms and 2^31-1 ms, not {value} ms", invalid_input=True)
    if settings.protocol == "classic" and settings.heartbeat_interval_ms >= settings.session_timeout_ms:
        # Kafka's consumer configuration refuses it too: every member's session would end.
        raise ReplayError(
            f"on the classic protocol the workers' heartbeat interval ({settings.heartbeat_interval_ms} ms) must be "
            f"shorter than their session ({settings.session_timeout_ms} ms): say the interval they had with "
            "--recorded-heartbeat-interval",
            invalid_input=True,
        )
    if settings.max_moves is not None and settings.max_moves < 1:
        raise ReplayError(f"--max-moves must be at least 1, not {settings.max_moves}", invalid_input=True)
    if settings.assignor not in _ASSIGNOR_NAMES:
        raise ReplayError(
            f"--assignor {settings.assignor}: not an assignor; choose from {', '.join(sorted(_ASSIGNOR_NAMES))}",
            invalid_input=True,
        )
