"""Hypothesis strategies for every record type, within the ranges the schemas allow."""

from __future__ import annotations

from hypothesis import strategies as st

from records import (
    RECORD_TYPES,
    Assignor,
    ClassicGroupMember,
    ClassicGroupMetadataValue,
    ClassicMemberMetadata,
    ClassicMemberProtocol,
    ConnectGroupMetadataValue,
    ConnectorsAndTasks,
    ConnectorsTasksMetadataValue,
    ConnectorTaskCount,
    CurrentMemberAssignmentValue,
    DepartedMember,
    Departure,
    FormatLevelKey,
    FormatLevelValue,
    GroupConfigurationValue,
    GroupMemberKey,
    MemberMetadataValue,
    Record,
    TargetAssignmentMemberValue,
    TargetAssignmentMetadataValue,
    TaskId,
)

int8 = st.integers(-(2**7), 2**7 - 1)
int16 = st.integers(-(2**15), 2**15 - 1)
int32 = st.integers(-(2**31), 2**31 - 1)
int64 = st.integers(-(2**63), 2**63 - 1)
text = st.text(max_size=24)
names = st.text(min_size=1, max_size=16)
blobs = st.binary(max_size=32)
small = lambda s: st.lists(s, max_size=6).map(tuple)  # noqa: E731

task_ids = st.builds(TaskId, names, int32)
connectors_and_tasks = st.builds(ConnectorsAndTasks, small(names), small(task_ids))
assignors = st.builds(Assignor, names, int16, int16, int8, int16, blobs)

VALUES = {
    2: st.builds(
        ClassicGroupMetadataValue,
        text,
        int32,
        st.none() | text,
        st.none() | text,
        int64,
        small(st.builds(ClassicGroupMember, names, st.none() | text, text, text, int32, int32, blobs, blobs)),
        st.none() | text,
    ),
    3: st.builds(ConnectGroupMetadataValue, int32, text, small(st.builds(Departure, names, st.none() | text, text))),
    4: st.builds(ConnectorsTasksMetadataValue, small(st.builds(ConnectorTaskCount, names, int32))),
    5: st.builds(
        MemberMetadataValue,
        int32,
        st.none() | text,
        text,
        text,
        st.none() | text,
        int32,
        st.none() | text,
        small(assignors),
        st.none() | text,
        st.none() | st.builds(ClassicMemberMetadata, int32, small(st.builds(ClassicMemberProtocol, names, blobs))),
    ),
    6: st.builds(
        TargetAssignmentMetadataValue,
        int32,
        int8,
        st.none() | text,
        st.none() | text,
        st.none() | text,
        st.none() | int64,
        connectors_and_tasks,
        small(st.builds(DepartedMember, text, st.none() | text, connectors_and_tasks, int64)),
    ),
    7: st.builds(TargetAssignmentMemberValue, connectors_and_tasks, int8, int16, blobs),
    8: st.builds(
        CurrentMemberAssignmentValue, int32, int32, text, connectors_and_tasks, connectors_and_tasks, int8, int16, blobs
    ),
    9: st.builds(GroupConfigurationValue, *[st.none() | int32] * 5),
    10: st.builds(FormatLevelValue, int16),
}


def keys(record_type: int) -> st.SearchStrategy:
    key_class = RECORD_TYPES[record_type].key_class
    if key_class is FormatLevelKey:
        return st.just(FormatLevelKey(FormatLevelKey.PARTITION))
    if issubclass(key_class, GroupMemberKey):
        return st.builds(key_class, text, text)
    return st.builds(key_class, text)


def records(record_type: int) -> st.SearchStrategy[Record]:
    """Records of one type: values and tombstones."""
    return st.builds(Record, keys(record_type), st.none() | VALUES[record_type])


any_record = st.sampled_from(sorted(RECORD_TYPES)).flatmap(records)
