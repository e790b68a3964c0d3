"""The record types of the topic and their Avro schemas (DESIGN §4).

`RECORD_TYPES` is the one table of what the topic may hold: for each record type, its name, its
key and value classes, the key schema and every value version this code can read. A value version,
once released, is never edited: a change is a new version file (`Name.vN.avsc`) and a new entry
here, and the golden tests in `tests/golden/` fail if an old version's bytes change.

The schemas live as .avsc files beside this module. Named types shared between schemas
(`worker_offsets.TaskId`, `worker_offsets.ConnectorsAndTasks`) are separate files that fastavro's
`load_schema` inlines; they are frozen for the same reason.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from importlib.resources import files
from pathlib import Path
from typing import Any

import orjson
from fastavro.repository.base import AbstractSchemaRepository
from fastavro.schema import load_schema

from records import model

SCHEMA_DIR = Path(__file__).with_name("schemas")


@dataclass(frozen=True)
class RecordType:
    type: int
    name: str
    key_class: type
    value_class: type
    key_schema: str
    value_schemas: Mapping[int, str]

    @property
    def latest_version(self) -> int:
        return max(self.value_schemas)


def _type(type_: int, name: str, key: type, value: type, key_schema: str, *versions: str) -> RecordType:
    return RecordType(type_, name, key, value, key_schema, dict(enumerate(versions)))


RECORD_TYPES: Mapping[int, RecordType] = {
    t.type: t
    for t in (
        _type(
            2,
            "ClassicGroupMetadata",
            model.ClassicGroupMetadataKey,
            model.ClassicGroupMetadataValue,
            "GroupKey",
            "ClassicGroupMetadataValue.v0",
            "ClassicGroupMetadataValue.v1",
        ),
        _type(
            3,
            "ConnectGroupMetadata",
            model.ConnectGroupMetadataKey,
            model.ConnectGroupMetadataValue,
            "GroupKey",
            "ConnectGroupMetadataValue.v0",
            "ConnectGroupMetadataValue.v1",
            "ConnectGroupMetadataValue.v2",
        ),
        _type(
            4,
            "ConnectorsTasksMetadata",
            model.ConnectorsTasksMetadataKey,
            model.ConnectorsTasksMetadataValue,
            "GroupKey",
            "ConnectorsTasksMetadataValue.v0",
        ),
        _type(
            5,
            "MemberMetadata",
            model.MemberMetadataKey,
            model.MemberMetadataValue,
            "GroupMemberKey",
            "MemberMetadataValue.v0",
            "MemberMetadataValue.v1",
            "MemberMetadataValue.v2",
        ),
        _type(
            6,
            "TargetAssignmentMetadata",
            model.TargetAssignmentMetadataKey,
            model.TargetAssignmentMetadataValue,
            "GroupKey",
            "TargetAssignmentMetadataValue.v0",
            "TargetAssignmentMetadataValue.v1",
        ),
        _type(
            7,
            "TargetAssignmentMember",
            model.TargetAssignmentMemberKey,
            model.TargetAssignmentMemberValue,
            "GroupMemberKey",
            "TargetAssignmentMemberValue.v0",
        ),
        _type(
            8,
            "CurrentMemberAssignment",
            model.CurrentMemberAssignmentKey,
            model.CurrentMemberAssignmentValue,
            "GroupMemberKey",
            "CurrentMemberAssignmentValue.v0",
        ),
        _type(
            9,
            "GroupConfiguration",
            model.GroupConfigurationKey,
            model.GroupConfigurationValue,
            "GroupKey",
            "GroupConfigurationValue.v0",
            "GroupConfigurationValue.v1",
        ),
        _type(10, "FormatLevel", model.FormatLevelKey, model.FormatLevelValue, "GroupKey", "FormatLevelValue.v0"),
    )
}

# Record format levels (Kafka's `group.version` feature, for our topic). While instances of two
# releases share the topic, the older must read whatever the newer writes, so a writer uses no value
# version above its partition's level, and the level is raised (`coordinator topic upgrade-format`,
# a type 10 record in each partition) only once every instance reads it. A release reads levels
# 1..MAX_FORMAT_LEVEL; one that finds a higher level refuses the partition instead of misreading it.
# Level -> record type -> the highest value version it allows; a type it leaves out (type 10
# itself) is written at its latest version. A released level is never edited: a new value version
# that old readers lack comes with a new level.
FORMAT_LEVELS: Mapping[int, Mapping[int, int]] = {
    # What 0.1.0 writes and reads (every type at its latest version then). Partitions without a
    # type 10 record are at this level.
    1: {2: 1, 3: 1, 4: 0, 5: 2, 6: 1, 7: 0, 8: 0, 9: 1},
    # 0.3.0: the connect group's epoch record says when it was bumped and since when the group has
    # been rebalancing (type 3 v2).
    2: {2: 1, 3: 2, 4: 0, 5: 2, 6: 1, 7: 0, 8: 0, 9: 1},
}
DEFAULT_FORMAT_LEVEL = 1
MAX_FORMAT_LEVEL = max(FORMAT_LEVELS)


def format_version(level: int, record_type: int) -> int:
    """The value version a writer at `level` uses for `record_type`."""
    return FORMAT_LEVELS[level].get(record_type, RECORD_TYPES[record_type].latest_version)


# Types 0 and 1 are the classic protocol's offset commit keys in __consumer_offsets (seed 000
# "Records"); this topic never holds them, and a reader must say so rather than guess.
RESERVED_TYPES: Mapping[int, str] = {
    0: "reserved for classic offset commits (key v0), not used in this topic",
    1: "reserved for classic offset commits (key v1), not used in this topic",
}

# Avro record names -> classes for the records nested inside keys and values.
NESTED_CLASSES: Mapping[str, type] = {
    "TaskId": model.TaskId,
    "ConnectorsAndTasks": model.ConnectorsAndTasks,
    "ConnectorTaskCount": model.ConnectorTaskCount,
    "Assignor": model.Assignor,
    "ClassicGroupMember": model.ClassicGroupMember,
    "ClassicMemberMetadata": model.ClassicMemberMetadata,
    "ClassicMemberProtocol": model.ClassicMemberProtocol,
    "DepartedMember": model.DepartedMember,
    "Departure": model.Departure,
}


class _Schemas(AbstractSchemaRepository):
    """The .avsc files as the package's resources, not by path: a Spark job ships this package to
    its executors in a zip (spark.submit.pyFiles), where `SCHEMA_DIR` is no directory."""

    def load(self, name: str) -> dict[str, Any]:
        return orjson.loads((files("records") / "schemas" / f"{name}.avsc").read_bytes())


@cache
def load(name: str) -> dict[str, Any]:
    """The parsed schema of `schemas/<name>.avsc`, shared named types inlined (cached)."""
    return load_schema(name, repo=_Schemas())
