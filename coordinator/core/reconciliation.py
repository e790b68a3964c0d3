"""Member epochs: how one member moves from its current assignment to its target (seed 000
"Member Epoch - Reconciliation of the group"; Kafka's `CurrentAssignmentBuilder`).

The state of a member is its current assignment (type 8): a member epoch, what it owns, what it
still has to revoke, and one of three states:

    state       member epoch        meaning
    ---------   -----------------   ---------------------------------------------------------
    STABLE      = its target epoch  owns exactly its target
    UNREVOKED   < its target epoch  owns `assignment`, must give up `pending_revocation` first
    UNRELEASED  = its target epoch  owns part of its target; the rest is still held by others

and the transitions, one per heartbeat:

    from any state, once nothing is left to revoke:
        target ∖ owned ∋ items that others still hold  ->  UNRELEASED at the target epoch
        otherwise                                      ->  STABLE at the target epoch
    owned ∖ target ≠ ∅                                 ->  UNREVOKED, member epoch unchanged,
                                                           told to keep owned ∩ target
    UNREVOKED, the heartbeat shows the revoked items gone -> computed again from what it kept

Three rules keep "no item is ever owned by two members" true:

1. revoke first: a member that must give items up is told only what it keeps (current ∩ target)
   and stays at its epoch until it acknowledges, so it is never revoked from and given new items
   in the same response;
2. an item is handed to a member only when no other member holds it (owned or pending revocation);
3. moving to the target epoch is written (type 8) before the response that announces it is sent.
"""

from __future__ import annotations

from collections.abc import Callable

from records import CurrentMemberAssignmentValue, TargetAssignmentMemberValue

from coordinator.core.items import EMPTY, Item, connectors_and_tasks, items_of
from coordinator.core.states import MemberState


def next_current(
    current: CurrentMemberAssignmentValue,
    target_epoch: int,
    target: TargetAssignmentMemberValue | None,
    held_by_other: Callable[[Item], bool],
    reported: frozenset[Item] | None,
) -> CurrentMemberAssignmentValue:
    """The member's next current assignment; `current` itself when nothing changes.

    `reported` is what the member says it owns (None when its heartbeat did not say): it tells an
    acknowledged revocation apart from one still in progress.
    """
    if current.state == MemberState.UNREVOKED:
        pending = items_of(current.pending_revocation)
        if reported is None or not reported.isdisjoint(pending):
            return current  # still revoking; the rebalance timeout bounds how long
    elif current.state == MemberState.STABLE and current.member_epoch == target_epoch:
        return current

    owned = items_of(current.assignment)
    wanted = items_of(target.assignment) if target is not None else frozenset()
    kept = owned & wanted
    revoked = owned - kept
    if revoked and (reported is None or not reported.isdisjoint(revoked)):
        return CurrentMemberAssignmentValue(
            member_epoch=current.member_epoch,
            previous_member_epoch=current.previous_member_epoch,
            state=MemberState.UNREVOKED,
            assignment=connectors_and_tasks(kept),
            pending_revocation=connectors_and_tasks(revoked),
            error=current.error,
            version=current.version,
            metadata=current.metadata,
        )

    missing = wanted - kept
    free = [item for item in missing if not held_by_other(item)]
    state = MemberState.UNRELEASED if len(free) < len(missing) else MemberState.STABLE
    assignment = current.assignment if not free and not revoked else connectors_and_tasks(kept.union(free))
    previous = current.previous_member_epoch if current.member_epoch == target_epoch else current.member_epoch
    error, version, metadata = (target.error, target.version, target.metadata) if target is not None else (0, 0, b"")
    updated = CurrentMemberAssignmentValue(
        member_epoch=target_epoch,
        previous_member_epoch=previous,
        state=state,
        assignment=assignment,
        pending_revocation=EMPTY,
        error=error,
        version=version,
        metadata=metadata,
    )
    return current if updated == current else updated
