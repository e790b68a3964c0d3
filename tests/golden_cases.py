"""The records behind the golden files: for every record type and value version, fixed records
whose bytes are checked into tests/golden/records.json. A new case gets its bytes from
`python tests/golden/make_golden.py`, which only ever adds; existing bytes are never rewritten,
so a change of the format fails tests/test_records_golden.py instead of passing silently.
"""

from __future__ import annotations

from records import (
    Assignor,
    ClassicGroupMember,
    ClassicGroupMetadataKey,
    ClassicGroupMetadataValue,
    ClassicMemberMetadata,
    ClassicMemberProtocol,
    ConnectGroupMetadataKey,
    ConnectGroupMetadataValue,
    ConnectorsAndTasks,
    ConnectorsTasksMetadataKey,
    ConnectorsTasksMetadataValue,
    ConnectorTaskCount,
    CurrentMemberAssignmentKey,
    CurrentMemberAssignmentValue,
    DepartedMember,
    Departure,
    FormatLevelKey,
    FormatLevelValue,
    GroupConfigurationKey,
    GroupConfigurationValue,
    MemberMetadataKey,
    MemberMetadataValue,
    Record,
    TargetAssignmentMemberKey,
    TargetAssignmentMemberValue,
    TargetAssignmentMetadataKey,
    TargetAssignmentMetadataValue,
    TaskId,
)

A0, A1, A2, B0 = TaskId("A", 0), TaskId("A", 1), TaskId("A", 2), TaskId("B", 0)
ASSIGNORS = (
    Assignor("incremental_cooperative", 0, 2, 1, 2, b"\x00\x01\xff"),
    Assignor("eager", -1, 0, 0, 0, b""),
)

# name -> (record, value version it is written at; None for a tombstone)
CASES: dict[str, tuple[Record, int | None]] = {
    "classic_group_metadata_v0": (
        Record(
            ClassicGroupMetadataKey("connect-cluster"),
            ClassicGroupMetadataValue(
                "connect",
                41,
                "sessioned",
                "worker-1",
                1_732_000_000_000,
                (
                    ClassicGroupMember(
                        "worker-1", None, "connect-1", "/10.0.0.1", 60_000, 10_000, b"\x00\x02sub", b"asg"
                    ),
                    ClassicGroupMember("worker-2", "static-2", "connect-2", "/10.0.0.2", 60_000, 10_000, b"", b""),
                ),
            ),
        ),
        0,
    ),
    "classic_group_metadata_empty_v0": (
        Record(ClassicGroupMetadataKey("g"), ClassicGroupMetadataValue("connect", 0, None, None, -1, ())),
        0,
    ),
    "classic_group_metadata_completing_v1": (
        Record(
            ClassicGroupMetadataKey("connect-cluster"),
            ClassicGroupMetadataValue(
                "connect",
                42,
                "incremental_cooperative",
                "worker-2",
                1_732_000_000_000,
                (
                    ClassicGroupMember(
                        "worker-2", "static-2", "connect-2", "/10.0.0.2", 60_000, 10_000, b"\x00\x01m", b""
                    ),
                ),
                "CompletingRebalance",
            ),
        ),
        1,
    ),
    "connect_group_metadata_v0": (
        Record(ConnectGroupMetadataKey("connect-cluster"), ConnectGroupMetadataValue(37, "connect")),
        0,
    ),
    "connect_group_metadata_departures_v1": (
        Record(
            ConnectGroupMetadataKey("connect-cluster"),
            ConnectGroupMetadataValue(
                38, "connect", (Departure("W2", None, "session-timeout"), Departure("W5", "static-5", "replaced"))
            ),
        ),
        1,
    ),
    "connect_group_metadata_v1": (Record(ConnectGroupMetadataKey("g"), ConnectGroupMetadataValue(1, "connect")), 1),
    "connectors_tasks_metadata_v0": (
        Record(
            ConnectorsTasksMetadataKey("connect-cluster"),
            ConnectorsTasksMetadataValue(
                (ConnectorTaskCount("A", 3), ConnectorTaskCount("B", 1), ConnectorTaskCount("sink-ü", 0))
            ),
        ),
        0,
    ),
    "member_metadata_v0": (
        Record(
            MemberMetadataKey("connect-cluster", "W1"),
            MemberMetadataValue(36, None, "connect-1", "10.0.0.1", "http://w1:8083", 60_000, None, ASSIGNORS),
        ),
        0,
    ),
    "member_metadata_v1": (
        Record(
            MemberMetadataKey("connect-cluster", "W2"),
            MemberMetadataValue(
                37, "static-w2", "connect-2", "10.0.0.2", None, 45_000, None, ASSIGNORS, rack_id="eu-west-1a"
            ),
        ),
        1,
    ),
    "member_metadata_classic_v2": (
        Record(
            MemberMetadataKey("connect-cluster", "connect-1-5f1c"),
            MemberMetadataValue(
                41,
                "static-1",
                "connect-1",
                "10.0.0.1",
                "http://worker-1:8083",
                60_000,
                None,
                (),
                None,
                ClassicMemberMetadata(
                    10_000,
                    (
                        ClassicMemberProtocol("incremental_cooperative", b"\x00\x00m"),
                        ClassicMemberProtocol("eager", b"\x00\x00m"),
                    ),
                ),
            ),
        ),
        2,
    ),
    "member_metadata_connect_v2": (
        Record(
            MemberMetadataKey("g", "W4"), MemberMetadataValue(2, None, "c", "h", None, 1_000, None, ASSIGNORS, "rack-b")
        ),
        2,
    ),
    "member_metadata_server_assignor_v1": (
        Record(
            MemberMetadataKey("g", "W3"),
            MemberMetadataValue(1, None, "c", "h", "http://w3", 1, "incremental_cooperative", (), rack_id=None),
        ),
        1,
    ),
    "target_assignment_metadata_v0": (
        Record(
            TargetAssignmentMetadataKey("connect-cluster"),
            TargetAssignmentMetadataValue(
                36, 0, None, "incremental_cooperative", "W3", 1_732_000_300_000, ConnectorsAndTasks(("B",), (B0,))
            ),
        ),
        0,
    ),
    "target_assignment_metadata_error_v0": (
        Record(
            TargetAssignmentMetadataKey("g"),
            TargetAssignmentMetadataValue(
                5, -1, "assignor failed: no capacity", "eager", None, None, ConnectorsAndTasks()
            ),
        ),
        0,
    ),
    "target_assignment_metadata_departed_v1": (
        Record(
            TargetAssignmentMetadataKey("connect-cluster"),
            TargetAssignmentMetadataValue(
                36,
                0,
                None,
                "incremental_cooperative",
                "W3",
                1_732_000_300_000,
                ConnectorsAndTasks(("B",), (B0,)),
                (DepartedMember("W2", "static-w2", ConnectorsAndTasks(("B",), (B0,)), 1_732_000_000_000),),
            ),
        ),
        1,
    ),
    "target_assignment_member_v0": (
        Record(
            TargetAssignmentMemberKey("connect-cluster", "W1"),
            TargetAssignmentMemberValue(ConnectorsAndTasks(("A",), (A1, A2)), 0, 2, b"\x01\x02"),
        ),
        0,
    ),
    "current_member_assignment_v0": (
        Record(
            CurrentMemberAssignmentKey("connect-cluster", "W1"),
            CurrentMemberAssignmentValue(
                35, 34, "UNREVOKED", ConnectorsAndTasks(("A",), (A0, A1, A2)), ConnectorsAndTasks((), (A0,)), 0, 2, b"m"
            ),
        ),
        0,
    ),
    "current_member_assignment_stable_v0": (
        Record(
            CurrentMemberAssignmentKey("g", "W9"),
            CurrentMemberAssignmentValue(
                200_000, 199_999, "STABLE", ConnectorsAndTasks(), ConnectorsAndTasks(), 0, 0, b""
            ),
        ),
        0,
    ),
    "group_configuration_v0": (
        Record(GroupConfigurationKey("connect-cluster"), GroupConfigurationValue(10_000, 3_000, 60_000, 300_000)),
        0,
    ),
    "group_configuration_defaults_v0": (
        Record(GroupConfigurationKey("g"), GroupConfigurationValue(None, 100, None, 0)),
        0,
    ),
    "group_configuration_initial_delay_v1": (
        Record(GroupConfigurationKey("connect-cluster"), GroupConfigurationValue(10_000, 3_000, None, 300_000, 3_000)),
        1,
    ),
    "connect_group_metadata_times_v2": (
        Record(
            ConnectGroupMetadataKey("connect-cluster"),
            ConnectGroupMetadataValue(
                7,
                departures=(Departure("W2", None, "session-timeout"),),
                epoch_bumped_ms=1_764_000_000_123,
                rebalance_started_ms=1_764_000_000_001,
            ),
        ),
        2,
    ),
    "format_level_v0": (Record(FormatLevelKey(FormatLevelKey.PARTITION), FormatLevelValue(2)), 0),
    # Tombstones: a key and no value, for every key type.
    "classic_group_metadata_tombstone": (Record(ClassicGroupMetadataKey("connect-cluster"), None), None),
    "connect_group_metadata_tombstone": (Record(ConnectGroupMetadataKey("connect-cluster"), None), None),
    "connectors_tasks_metadata_tombstone": (Record(ConnectorsTasksMetadataKey("connect-cluster"), None), None),
    "member_metadata_tombstone": (Record(MemberMetadataKey("connect-cluster", "W2"), None), None),
    "target_assignment_metadata_tombstone": (Record(TargetAssignmentMetadataKey("connect-cluster"), None), None),
    "target_assignment_member_tombstone": (Record(TargetAssignmentMemberKey("connect-cluster", "W2"), None), None),
    "current_member_assignment_tombstone": (Record(CurrentMemberAssignmentKey("connect-cluster", "W2"), None), None),
    "group_configuration_tombstone": (Record(GroupConfigurationKey("connect-cluster"), None), None),
    "format_level_tombstone": (Record(FormatLevelKey(FormatLevelKey.PARTITION), None), None),
}
