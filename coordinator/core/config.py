"""The coordinator's settings, and one group's settings as its configuration record makes them."""

from __future__ import annotations

from dataclasses import dataclass, field

from records import GroupConfigurationValue, MemberMetadataValue

_CACHED_GROUPS = 10_000
# Kafka's group.min.session.timeout.ms default: the shortest classic session `serve` accepts.
KAFKA_CLASSIC_MIN_SESSION_TIMEOUT_MS = 6_000


@dataclass(slots=True, frozen=True)
class CoordinatorConfig:
    """Server defaults; a group's type 9 record overrides each (DESIGN §5: Kafka Connect's defaults)."""

    session_timeout_ms: int = 10_000
    heartbeat_interval_ms: int = 3_000
    # None: each member's own RebalanceTimeoutMs from its heartbeat (the seed's rule).
    rebalance_timeout_ms: int | None = None
    scheduled_rebalance_max_delay_ms: int = 300_000
    default_server_assignor: str = "incremental_cooperative"
    # After an assignor error the group keeps its assignment; ask again this much later.
    assignor_error_backoff_ms: int = 5_000
    # A server-side assignor runs at most once per this interval per group: the changes of a
    # burst (a rolling restart, a join storm) are assigned together. 0 computes on every change.
    server_assignment_interval_ms: int = 1_000
    # The smallest timeout a group may configure: small enough for tests and demos.
    min_timeout_ms: int = 100
    # An empty group that gets members waits this long for more before its first target, each join
    # extending the wait up to the joiner's rebalance timeout (Kafka's group.initial.rebalance.delay.ms):
    # a join storm is assigned once instead of moving work from the early joiners to the late ones.
    # 3 s, Kafka's default: longer than the gaps between joins of workers started together, and paid
    # only by a group's first assignment (docs/decisions.md, "Initial assignment delay").
    initial_assignment_delay_ms: int = 3_000
    # The classic protocol's bounds, Kafka's settings: a JoinGroup asking for a shorter session is
    # refused INVALID_SESSION_TIMEOUT, which a Java member does not survive. `serve` enforces Kafka's
    # group.min.session.timeout.ms, 6 s (KAFKA_CLASSIC_MIN_SESSION_TIMEOUT_MS); here, like
    # min_timeout_ms, it is small enough for tests and demos.
    classic_min_session_timeout_ms: int = 100
    # At most this many members in a classic group (Kafka's group.max.size): GROUP_MAX_SIZE_REACHED.
    classic_group_max_size: int = 2**31 - 1
    # A new member whose JoinGroup waits longer is removed (Kafka's new member join timeout, 5 min).
    classic_new_member_join_timeout_ms: int = 300_000
    # The settings of a group without a configuration record, and of those with one by the
    # record's identity (a replay replaces it): built once, read on every heartbeat.
    defaults: GroupSettings = field(init=False, repr=False, compare=False)
    _configured: dict[int, tuple[GroupConfigurationValue, GroupSettings]] = field(
        init=False, repr=False, compare=False, default_factory=dict
    )

    def __post_init__(self) -> None:
        object.__setattr__(
            self,
            "defaults",
            GroupSettings(
                self.session_timeout_ms,
                self.heartbeat_interval_ms,
                self.rebalance_timeout_ms,
                self.scheduled_rebalance_max_delay_ms,
                self.initial_assignment_delay_ms,
            ),
        )

    def for_group(self, configured: GroupConfigurationValue | None) -> GroupSettings:
        """The settings of a group whose type 9 record is `configured` (None: it has none)."""
        if configured is None:
            return self.defaults
        cached = self._configured.get(id(configured))
        if cached is not None and cached[0] is configured:
            return cached[1]
        if len(self._configured) >= _CACHED_GROUPS:
            self._configured.clear()
        settings = self._settings(configured)
        self._configured[id(configured)] = (configured, settings)
        return settings

    def _settings(self, configured: GroupConfigurationValue) -> GroupSettings:
        return GroupSettings(
            _either(configured.session_timeout_ms, self.session_timeout_ms),
            _either(configured.heartbeat_interval_ms, self.heartbeat_interval_ms),
            _either(configured.rebalance_timeout_ms, self.rebalance_timeout_ms),
            _either(configured.scheduled_rebalance_max_delay_ms, self.scheduled_rebalance_max_delay_ms),
            _either(configured.initial_assignment_delay_ms, self.initial_assignment_delay_ms),
        )


@dataclass(slots=True, frozen=True)
class GroupSettings:
    """One group's timeouts: what its configuration record sets, else the server's default."""

    session_timeout_ms: int
    heartbeat_interval_ms: int
    rebalance_timeout_ms: int | None  # None: each member's own
    scheduled_rebalance_max_delay_ms: int
    initial_assignment_delay_ms: int

    def member_session_timeout_ms(self, member: MemberMetadataValue | None) -> int:
        """A member's session: the group's, except for a classic member of a connect group, whose
        JoinGroup said its own (seed 000's migration; Kafka's classic members keep theirs too)."""
        if member is not None and member.classic_member_metadata is not None:
            return member.classic_member_metadata.session_timeout_ms
        return self.session_timeout_ms

    def member_rebalance_timeout_ms(self, member: MemberMetadataValue) -> int:
        """How long a member may take to revoke, or to compute an assignment: the group's setting
        when an operator set one, else what the member asked for in its heartbeat (seed 000)."""
        configured = self.rebalance_timeout_ms
        return member.rebalance_timeout_ms if configured is None else configured


def _either(configured: int | None, default: int | None) -> int | None:
    return default if configured is None else configured
