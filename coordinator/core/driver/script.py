"""What a scripted run is made of (`scripted.run_script` on the connect protocol,
`scripted_classic` on the classic one): the steps of a group's membership script, the settings a
run may vary, and what the coordinator wrote. Plain data, shared by both drivers."""

from __future__ import annotations

from dataclasses import dataclass, field

from records import Record
from records.connect_protocol import SESSIONED


@dataclass(frozen=True, slots=True)
class Join:
    at_ms: int
    member_id: str
    instance_id: str | None = None
    rebalance_timeout_ms: int = 60_000


@dataclass(frozen=True, slots=True)
class Leave:
    """A graceful leave (-1), or with `static` a static member going away for a while (-2)."""

    at_ms: int
    member_id: str
    static: bool = False


@dataclass(frozen=True, slots=True)
class Crash:
    """The worker stops heartbeating at `at_ms`; the coordinator removes it when its session ends.
    `held`: what it ran when it was last seen alive (None: unknown). A worker that has not got
    there yet heartbeats first, with the workers the group waits for, a few rounds at most: it was
    alive to get it (its last heartbeats fell between the rounds this run steps it at)."""

    at_ms: int
    member_id: str
    held: frozenset | None = None


@dataclass(frozen=True, slots=True)
class SetConnectors:
    at_ms: int
    connectors: dict[str, int]


Step = Join | Leave | Crash | SetConnectors


@dataclass(frozen=True, slots=True)
class ScriptSettings:
    """What a run of the script may vary. `max_moves` runs the incremental cooperative assignor
    with Design III's limit, on a member (a server-side assignor is the coordinator's own); the
    assignor settings mean nothing on the classic protocol (Connect's leader assigns)."""

    assignor: str = "incremental_cooperative"
    server_side: bool = False
    session_timeout_ms: int = 10_000
    heartbeat_interval_ms: int = 3_000
    scheduled_rebalance_max_delay_ms: int = 300_000
    initial_assignment_delay_ms: int = 3_000
    max_moves: int | None = None
    # "classic": Kafka Connect workers on the classic protocol (scripted_classic.py), their leader
    # assigning by Connect's rules for `connect_protocol` (Connect's connect.protocol: default,
    # compatible or sessioned); the delay and the timeouts above are then the workers' own.
    protocol: str = "connect"
    connect_protocol: str = SESSIONED


@dataclass(slots=True)
class ScriptRun:
    """What the coordinator wrote: `log[i]` at virtual time `stamps[i]`; `heartbeats` sent in all."""

    log: list[Record] = field(default_factory=list)
    stamps: list[int] = field(default_factory=list)
    heartbeats: int = 0
    end_ms: int = 0
    given_up: dict[str, str] = field(default_factory=dict)  # workers refused for good, and why
