"""A member of a connect group, sans-I/O: the worker's side of seed 000's protocol.

`GroupCoordinator` is the coordinator's side; `Member` is the worker's, in the manner of h11's
`Connection`: it never sends, sleeps or calls a listener. It says which heartbeat to send next and
when, and turns what came back (a response, a failure, the passing of time) into a list of
*actions* for its driver to carry out in order: `Revoke`, `Assign`, `Lose`, `ComputeAssignment`,
`GiveUp`. The asyncio worker of the SDK, the in-memory `SimWorker`, the test workers and the
benchmark's members all drive this one class, so the protocol's promises are kept in one place:

- **revoke before assign**: what a response takes away is revoked first, and acknowledged by a
  heartbeat sent at once (`heartbeat_due` is now); the coordinator never gives and takes in one
  response (seed 000), and if it did the revocation would still come first;
- **a full request** (every field) at epoch 0 and after any error or lost response (seed 000: "when
  it joins for the first time or when an error occurs (e.g. request timed out)"), so the lost-
  response rescue applies: the coordinator learns what this member owns;
- **fenced or unknown**: everything is lost (`Lose`), and the member rejoins at epoch 0 with the
  same member id (seed 000, seed 001's onPartitionsLost);
- **self-fencing**: a member that has had no answer for its session timeout stops its work before
  the coordinator can give it to another member (KAFKA-9184's zombie tasks), and rejoins. The
  session is the shorter of the member's own and the one the coordinator last said it holds the
  member to (`SessionTimeoutMs` in the heartbeat response, beyond the seed: the group's, which an
  operator may set shorter than the worker's configuration); measured from when the last answered
  request was *sent*, which is before the coordinator's timer restarted on receiving it;
- **leaving**: the member revokes everything before it sends the leave heartbeat (-1, or -2 for a
  static member), so no item ever runs on two workers;
- **giving up**: an error no retry can fix ends in `Lose` for everything and `GiveUp` with the
  reason, never in a silent stop with work still running.

Time is an input (milliseconds, any monotonic origin), as everywhere in the core.
"""

from __future__ import annotations

from dataclasses import dataclass

from records import Assignor, ConnectorsAndTasks

from coordinator.core.assignors import MemberAssignment
from coordinator.core.items import Item, connectors_and_tasks, items_of
from coordinator.core.protocol import (
    JOIN_GROUP_MEMBER_EPOCH,
    LEAVE_GROUP_MEMBER_EPOCH,
    LEAVE_GROUP_STATIC_MEMBER_EPOCH,
    ErrorCode,
    HeartbeatRequest,
    HeartbeatResponse,
)

# Errors that a later heartbeat may not get (the coordinator moves or loads): retried as a failure.
RETRIABLE = frozenset(
    {ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, ErrorCode.COORDINATOR_NOT_AVAILABLE}
)
# A static member's previous instance still holds its InstanceId: ask again soon, its work waits.
UNRELEASED_RETRY_MS = 200


# --- actions: what the driver does, in the order given ---------------------------------------------


@dataclass(frozen=True, slots=True)
class Revoke:
    """Stop these (the listener's on_revoked); the next heartbeat, due at once, acknowledges it."""

    items: ConnectorsAndTasks


@dataclass(frozen=True, slots=True)
class Assign:
    """Start these (on_assigned); `assignment` is the whole assignment with the assignor's
    version and metadata (seed 000: ConnectAssignor#onAssignment)."""

    items: ConnectorsAndTasks
    assignment: MemberAssignment


@dataclass(frozen=True, slots=True)
class Lose:
    """Stop these at once (on_lost): they may already run elsewhere. `reason` says why."""

    items: ConnectorsAndTasks
    reason: str


@dataclass(frozen=True, slots=True)
class ComputeAssignment:
    """COMPUTE_ASSIGNMENT: run PrepareAssignment, the assignor and InstallAssignment."""

    member_epoch: int


@dataclass(frozen=True, slots=True)
class GiveUp:
    """The coordinator refused this member for good; it owns nothing and sends nothing more."""

    reason: str


Action = Revoke | Assign | Lose | ComputeAssignment | GiveUp


# --- the member --------------------------------------------------------------------------------------


class Member:
    """One member of one connect group. See the module docstring."""

    def __init__(
        self,
        group_id: str,
        member_id: str,
        *,
        instance_id: str | None = None,
        rack_id: str | None = None,
        rebalance_timeout_ms: int = 60_000,
        url: str | None = None,
        server_assignor: str | None = None,
        client_assignors: tuple[Assignor, ...] = (),
        session_timeout_ms: int = 10_000,
        heartbeat_interval_ms: int = 1_000,
    ) -> None:
        if server_assignor is not None and client_assignors:
            raise ValueError("a member names a server-side assignor or client-side ones, not both")
        self.group_id = group_id
        self.member_id = member_id
        self.instance_id = instance_id
        self.rack_id = rack_id
        self.rebalance_timeout_ms = rebalance_timeout_ms
        self.url = url
        self.server_assignor = server_assignor
        self.client_assignors = client_assignors
        # The session timeout this member was configured with, and the one the coordinator last
        # said it holds it to (None: not said yet; kept across a rejoin, as the group's setting
        # outlives a membership). It stops its work when it has had no answer for the shorter.
        self.session_timeout_ms = session_timeout_ms
        self.group_session_timeout_ms: int | None = None
        self.heartbeat_interval_ms = heartbeat_interval_ms
        self.member_epoch = JOIN_GROUP_MEMBER_EPOCH
        self.owned: frozenset[Item] = frozenset()
        self.assignment: MemberAssignment | None = None  # the last one the coordinator gave
        self.joined = False  # answered since it last lost everything (it may still be at epoch 0)
        self.given_up: str | None = None
        self._full = True  # the next request carries every field
        self._reported: frozenset[Item] | None = None  # what the coordinator last heard we own
        self._in_flight: tuple[int, HeartbeatRequest] | None = None  # the request awaiting an answer, and when
        self._last_ok_sent_ms: int | None = None  # when the last answered request was sent
        self._due_ms = 0

    # --- what to send, and when -------------------------------------------------------------------

    @property
    def in_group(self) -> bool:
        return self.member_epoch > 0

    @property
    def acknowledgement_due(self) -> bool:
        """Whether the coordinator has yet to hear what this member owns (after a revocation)."""
        return self.joined and self._reported != self.owned

    @property
    def full_request(self) -> bool:
        """Whether the next heartbeat carries every field (a join, or the first after an error)."""
        return self._full or self.member_epoch == JOIN_GROUP_MEMBER_EPOCH

    @property
    def fence_timeout_ms(self) -> int:
        """How long without an answer before this member stops its work: the shorter of its own
        session timeout and the coordinator's for it (the coordinator's timer gives the work away
        after its own; a longer one of the member's would leave the work with two owners)."""
        told = self.group_session_timeout_ms
        return self.session_timeout_ms if told is None else min(self.session_timeout_ms, told)

    def fence_deadline(self) -> int | None:
        """When this member stops its work if no heartbeat is answered before (None: it has none)."""
        if not self.in_group or self._last_ok_sent_ms is None:
            return None
        return self._last_ok_sent_ms + self.fence_timeout_ms

    def heartbeat_due(self) -> int:
        """When the next heartbeat should go (now or earlier: at once)."""
        return self._due_ms

    def heartbeat(self, now: int) -> HeartbeatRequest:
        """The heartbeat to send now: every field at epoch 0 and after an error, else only what
        changed (seed 000). What this member owns goes whenever the coordinator has not heard it."""
        if self.given_up is not None:
            raise RuntimeError(f"member {self.member_id} gave up: {self.given_up}")
        full = self.full_request
        owned = connectors_and_tasks(self.owned) if full or self._reported != self.owned else None
        if not full:
            request = HeartbeatRequest(self.group_id, self.member_id, self.member_epoch, owned=owned)
        else:
            request = HeartbeatRequest(
                group_id=self.group_id,
                member_id=self.member_id,
                member_epoch=self.member_epoch,
                instance_id=self.instance_id,
                rack_id=self.rack_id,
                rebalance_timeout_ms=self.rebalance_timeout_ms,
                server_assignor=self.server_assignor,
                client_assignors=self.client_assignors if self.server_assignor is None else None,
                owned=owned,
                url=self.url,
            )
        self._in_flight = (now, request)
        return request

    def set_assignors(self, server_assignor: str | None, client_assignors: tuple[Assignor, ...] = ()) -> None:
        """Name other assignors, or change their Reason or metadata: the next heartbeat, due at once,
        says so (and the coordinator computes a new target)."""
        self.server_assignor, self.client_assignors = server_assignor, client_assignors
        self._full = True
        self._due_ms = 0

    def leave(self) -> tuple[list[Action], HeartbeatRequest | None]:
        """Leave the group: first revoke everything (carry out the actions), then send the request
        (None: not in the group, nothing to send). A static member leaves with -2, and its work
        waits for its InstanceId; the worker still stops it now."""
        actions: list[Action] = []
        if self.owned:
            actions.append(Revoke(connectors_and_tasks(self.owned)))
        request = None
        if self.in_group:
            epoch = LEAVE_GROUP_STATIC_MEMBER_EPOCH if self.instance_id else LEAVE_GROUP_MEMBER_EPOCH
            request = HeartbeatRequest(self.group_id, self.member_id, epoch)
        self._reset()
        return actions, request

    # --- what came back ---------------------------------------------------------------------------

    def received(self, response: HeartbeatResponse, now: int, request: HeartbeatRequest | None = None) -> list[Action]:
        """A heartbeat response (seed 000 "Response Handling") to `request` (default: the last one
        `heartbeat` built; a test that alters a request before sending it passes what it sent)."""
        sent_at, sent = self._in_flight or (now, None)
        self._in_flight = None
        request = request or sent
        code = response.error_code
        if code in (ErrorCode.NONE, ErrorCode.COMPUTE_ASSIGNMENT):
            self._last_ok_sent_ms = sent_at
            self._full = False
            self.joined = True
            if request is not None and request.owned is not None:
                self._reported = items_of(request.owned)
            self.heartbeat_interval_ms = max(1, response.heartbeat_interval_ms or self.heartbeat_interval_ms)
            if response.session_timeout_ms > 0:  # 0: a coordinator older than the field
                self.group_session_timeout_ms = response.session_timeout_ms
            self.member_epoch = response.member_epoch
            actions = self._reconcile(response.assignment)
            if code == ErrorCode.COMPUTE_ASSIGNMENT:
                actions.append(ComputeAssignment(self.member_epoch))
            # A revocation is acknowledged at once: the items' next owner waits for it.
            self._due_ms = now if self.owned != self._reported else now + self.heartbeat_interval_ms
            return actions
        if code in (ErrorCode.FENCED_MEMBER_EPOCH, ErrorCode.UNKNOWN_MEMBER_ID):
            self._last_ok_sent_ms = sent_at  # the coordinator answered: it is there
            lost = self._lose(f"{ErrorCode(code).name}: {response.error_message}")
            self._due_ms = now
            return lost
        if code == ErrorCode.UNRELEASED_INSTANCE_ID:
            self._last_ok_sent_ms = sent_at
            self._due_ms = now + min(UNRELEASED_RETRY_MS, self.heartbeat_interval_ms)
            return []
        if code in RETRIABLE:
            return self.failed(now, f"{ErrorCode(code).name}: {response.error_message}")
        return self.refused(f"heartbeat refused: {_name(code)}: {response.error_message}")

    def failed(self, now: int, reason: str) -> list[Action]:
        """The heartbeat got no answer (timed out, connection lost, coordinator moving). The next
        one is full; after a whole session timeout without an answer, the work stops."""
        self._in_flight = None
        self._full = True
        self._due_ms = now + self.heartbeat_interval_ms
        return self.poll(now, reason)

    def refused(self, reason: str) -> list[Action]:
        """An answer no retry can change (INVALID_REQUEST, authorization, an unsupported
        assignor, a body the coordinator will never take): lose everything and give up."""
        actions = self._lose(reason)
        self.given_up = reason
        actions.append(GiveUp(reason))
        return actions

    def lose(self, reason: str) -> list[Action]:
        """Lose everything at once (the process restarted, say); the next heartbeat joins again."""
        return self._lose(reason)

    def poll(self, now: int, reason: str = "no answer from the coordinator") -> list[Action]:
        """Time passed. A member in the group whose last answered heartbeat was sent a session
        timeout ago stops its work now: the coordinator's session timer, started when that request
        arrived, has not fired yet, so nobody else has been given the work."""
        deadline = self.fence_deadline()
        if deadline is not None and now >= deadline:
            return self._lose(
                f"no heartbeat answered for {now - self._last_ok_sent_ms} ms (session timeout "
                f"{self.fence_timeout_ms} ms): {reason}"
            )
        return []

    # --- inside -------------------------------------------------------------------------------------

    def _reconcile(self, assignment: MemberAssignment | None) -> list[Action]:
        if assignment is None:
            return []
        self.assignment = assignment
        given = items_of(assignment.assignment)
        revoked, added = self.owned - given, given - self.owned
        actions: list[Action] = []
        if revoked:
            self.owned -= revoked
            actions.append(Revoke(connectors_and_tasks(revoked)))
        if added:
            self.owned |= added
            actions.append(Assign(connectors_and_tasks(added), assignment))
        return actions

    def _lose(self, reason: str) -> list[Action]:
        lost = self.owned
        self._reset()
        self._full = True
        return [Lose(connectors_and_tasks(lost), reason)] if lost else []

    def _reset(self) -> None:
        self.joined = False
        self.owned = frozenset()
        self.member_epoch = JOIN_GROUP_MEMBER_EPOCH
        self.assignment = None
        self._reported = None
        self._full = True
        self._last_ok_sent_ms = None


def _name(code: int) -> str:
    try:
        return ErrorCode(code).name
    except ValueError:
        return f"error {code}"


__all__ = ["Action", "Assign", "ComputeAssignment", "GiveUp", "Lose", "Member", "Revoke"]
