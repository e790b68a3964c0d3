"""Which assignor a group uses, whether a member may join with its assignors, and which member
computes the target (seed 000 "Assignor Selection" and "Worker Selection", DESIGN §5).

- A member names either a `ServerAssignor` or `ClientAssignors`, never both. If any member names
  a server-side assignor the coordinator computes the target itself with the one most members name
  (ties by name); a group where nobody names any assignor uses the server's default.
- Otherwise the group runs a client-side assignor: one that every member offering client-side
  assignors supports, preferred by the members' order of preference (lowest sum of positions).
- Versions: a member's [MinimumVersion, MaximumVersion] for that assignor must overlap every other
  member's, and some member's range must cover all of them: that member can read every member's
  metadata, so only such a member may compute the assignment. A member whose assignors break this
  is refused with UNSUPPORTED_ASSIGNOR and the group is left as it was.
- Worker selection prefers the member already computing, then the one that installed the current
  target (Kafka Connect's leader is sticky too), then the first by member id: the choice is a pure
  function of the group, so a coordinator that fails over tends to choose the same worker. One
  exception, made by the heartbeat: a static member that joins back while work waits for its
  instance computes the target itself, in its join response (it would otherwise wait for the
  chosen member's next heartbeat to get back what is only its own).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from records import Assignor, MemberMetadataValue

SERVER = "server"
CLIENT = "client"


@dataclass(slots=True, frozen=True)
class GroupAssignor:
    kind: str  # SERVER or CLIENT
    name: str


def group_assignor(members: Iterable[MemberMetadataValue], default_server_assignor: str) -> GroupAssignor | None:
    """The assignor the group uses; None when its members share no client-side assignor."""
    votes: Counter[str] = Counter()
    client_lists: list[tuple[Assignor, ...]] = []
    for member in members:
        if member.server_assignor is not None:
            votes[member.server_assignor] += 1
        elif member.client_assignors:
            client_lists.append(member.client_assignors)
    if votes:
        name = min(votes, key=lambda n: (-votes[n], n))
        return GroupAssignor(SERVER, name)
    if not client_lists:
        return GroupAssignor(SERVER, default_server_assignor)
    name = _common_client_assignor(client_lists)
    return None if name is None else GroupAssignor(CLIENT, name)


def _common_client_assignor(client_lists: list[tuple[Assignor, ...]]) -> str | None:
    common = set.intersection(*({a.name for a in assignors} for assignors in client_lists))
    if not common:
        return None
    rank: Counter[str] = Counter()
    for assignors in client_lists:
        for position, a in enumerate(assignors):
            if a.name in common:
                rank[a.name] += position
    return min(common, key=lambda n: (rank[n], n))


def entry(member: MemberMetadataValue, name: str) -> Assignor | None:
    """The member's entry for the client-side assignor `name`."""
    for a in member.client_assignors:
        if a.name == name:
            return a
    return None


def assignor_conflict(
    members: Mapping[str, MemberMetadataValue], member_id: str, updated: MemberMetadataValue
) -> str | None:
    """Why the group cannot take `member_id` with the metadata `updated` (UNSUPPORTED_ASSIGNOR), or None.

    The client-side members must agree among themselves even while a server-side assignor runs
    the group: when its last server-side member leaves, they are the ones who compute."""
    if updated.server_assignor is not None or not updated.client_assignors:
        return None  # server-side names were checked against the registry by the caller
    others = {
        mid: m for mid, m in members.items() if mid != member_id and m.server_assignor is None and m.client_assignors
    }
    name = _common_client_assignor([*(m.client_assignors for m in others.values()), updated.client_assignors])
    if name is None:
        offered = ", ".join(a.name for a in updated.client_assignors)
        in_use = _common_client_assignor([m.client_assignors for m in others.values()])
        group = f"the group uses {in_use!r}" if in_use is not None else "the other members share none of them"
        return f"no client-side assignor is supported by every member: this member offers {offered}; {group}"
    mine = entry(updated, name)
    assert mine is not None  # the common assignor is offered by every client-side member
    ranges = []
    for other_id, other in others.items():
        theirs = entry(other, name)
        assert theirs is not None
        if theirs.maximum_version < mine.minimum_version or mine.maximum_version < theirs.minimum_version:
            return (
                f"assignor {name!r} versions [{mine.minimum_version}, {mine.maximum_version}] do not "
                f"overlap member {other_id}'s [{theirs.minimum_version}, {theirs.maximum_version}]"
            )
        ranges.append((theirs.minimum_version, theirs.maximum_version))
    ranges.append((mine.minimum_version, mine.maximum_version))
    low = min(r[0] for r in ranges)
    high = max(r[1] for r in ranges)
    if not any(r == (low, high) for r in ranges):
        return (
            f"no member supports every version of assignor {name!r} in use ([{low}, {high}]), so none "
            f"could compute the assignment"
        )
    return None


def choose_member(
    members: Mapping[str, MemberMetadataValue], name: str, eligible: Iterable[str], prefer: Iterable[str | None]
) -> str | None:
    """The member to compute the target with client-side assignor `name` (seed "Worker Selection").

    Only members in `eligible` that offer `name` with a range covering every member's range
    qualify; the first qualifying member of `prefer` wins, else the first by member id.
    """
    ranges = [(a.minimum_version, a.maximum_version) for m in members.values() if (a := entry(m, name)) is not None]
    if not ranges:
        return None
    low = min(r[0] for r in ranges)
    high = max(r[1] for r in ranges)
    qualified = set()
    for member_id in eligible:
        a = entry(members[member_id], name)
        if a is not None and a.minimum_version <= low and a.maximum_version >= high:
            qualified.add(member_id)
    for member_id in prefer:
        if member_id in qualified:
            return member_id
    return min(qualified, default=None)
