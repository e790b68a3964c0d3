"""Every state vocabulary of the coordinator, one enum each, with its transitions as data.

A state's value is its one spelling: what the records hold (type 8's `State`, type 2's `State`),
what describe, the status endpoint and the pages show. They are `StrEnum`s, so a value read from a
record compares equal to its member. Kafka's own wire spellings of group states are a mapping at
the Kafka listener's edge (`coordinator.service.kafka_edge.KAFKA_STATES`).

Transitions are tables, as Kafka's `ClassicGroupState` lists each state's valid previous states and
h11's `_state.py` its transitions: the one place that changes a state (`ClassicChange.set_state`,
`ClassicWorker._enter`) checks the table, so an illegal transition is a bug that shows at once.
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import StrEnum


class ConnectGroupState(StrEnum):
    """A connect group as describe shows it (seed 000 has no group state: these say where its epochs are)."""

    EMPTY = "EMPTY"  # no members
    ASSIGNING = "ASSIGNING"  # the target assignment is behind the group epoch
    RECONCILING = "RECONCILING"  # the target is current; some member is not at it yet
    STABLE = "STABLE"  # every member is at the target epoch, owning its target


class MemberState(StrEnum):
    """The `State` of a current member assignment (type 8), as in Kafka's consumer groups."""

    STABLE = "STABLE"  # at its target epoch, owning everything its target gives it
    UNREVOKED = "UNREVOKED"  # must give up `pending_revocation` before it moves on
    UNRELEASED = "UNRELEASED"  # at its target epoch, waiting for others to release the rest of its target


class TaskStatus(StrEnum):
    """Where a connector or task is, as far as the coordinator knows (Kafka Connect's status words
    where they fit; whether it runs or failed only the worker knows, so never RUNNING or FAILED)."""

    ASSIGNED = "ASSIGNED"  # a member owns it
    REVOKING = "REVOKING"  # its owner is revoking it, and no other member holds it yet
    UNASSIGNED = "UNASSIGNED"  # no member holds it (deferred, waiting for a target, or for its owner to release it)


class ClassicGroupState(StrEnum):
    """A classic group's state (seed 004), spelled as Kafka's `ClassicGroupState` (and type 2's
    `State`). A group that does not exist is Dead, which is no state of a group we hold."""

    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"

    @property
    def described(self) -> str:
        """As `kafka-consumer-groups --describe --state` and our describe show it: PREPARING_REBALANCE."""
        return _DESCRIBED[self]


_DESCRIBED = {
    ClassicGroupState.EMPTY: "EMPTY",
    ClassicGroupState.PREPARING_REBALANCE: "PREPARING_REBALANCE",
    ClassicGroupState.COMPLETING_REBALANCE: "COMPLETING_REBALANCE",
    ClassicGroupState.STABLE: "STABLE",
}

# Each state and the states a classic group may enter it from (Kafka's `validPreviousStates`).
CLASSIC_GROUP_PREVIOUS: Mapping[ClassicGroupState, frozenset[ClassicGroupState]] = {
    ClassicGroupState.EMPTY: frozenset({ClassicGroupState.PREPARING_REBALANCE}),
    ClassicGroupState.PREPARING_REBALANCE: frozenset(
        {ClassicGroupState.EMPTY, ClassicGroupState.STABLE, ClassicGroupState.COMPLETING_REBALANCE}
    ),
    ClassicGroupState.COMPLETING_REBALANCE: frozenset({ClassicGroupState.PREPARING_REBALANCE}),
    ClassicGroupState.STABLE: frozenset({ClassicGroupState.COMPLETING_REBALANCE}),
}


class ClassicMemberState(StrEnum):
    """Seed 000's worker states ("Migration To the New Protocol"): where a classic member is in its
    own round of JoinGroup and SyncGroup; the worker side (`ClassicWorker`) and describe of a
    classic member alike."""

    UNJOINED = "UNJOINED"
    PREPARING_REBALANCE = "PREPARING_REBALANCE"  # its JoinGroup is out
    COMPLETING_REBALANCE = "COMPLETING_REBALANCE"  # joined; its SyncGroup is due or out
    STABLE = "STABLE"


# Each worker state and the states a classic worker may enter it from. UNJOINED follows anything
# (fenced, left, an error that means join again); a join is sent from UNJOINED, or again from any
# joined state when the coordinator says to rebalance.
CLASSIC_MEMBER_PREVIOUS: Mapping[ClassicMemberState, frozenset[ClassicMemberState]] = {
    ClassicMemberState.UNJOINED: frozenset(ClassicMemberState),
    ClassicMemberState.PREPARING_REBALANCE: frozenset(ClassicMemberState),
    ClassicMemberState.COMPLETING_REBALANCE: frozenset({ClassicMemberState.PREPARING_REBALANCE}),
    ClassicMemberState.STABLE: frozenset({ClassicMemberState.COMPLETING_REBALANCE, ClassicMemberState.STABLE}),
}


class IllegalTransition(AssertionError):
    """A state change its table does not allow: a bug in the state machine, never the client's."""


def check_transition(table: Mapping[StrEnum, frozenset[StrEnum]], before: StrEnum, after: StrEnum, what: str) -> None:
    if before not in table[after]:
        raise IllegalTransition(f"{what}: {before} -> {after} is not a transition of its state machine")
