"""The HTTP API's bodies (the core's messages, `coordinator.api.wire` decoding them): both sides read
what the other writes, and a body that does not fit is one WireError naming the field (no broker)."""

from __future__ import annotations

import itertools
import re

import msgspec
import pytest

from records import Assignor, ConnectorsAndTasks, TaskId
from records.constraints import BASE64_PATTERN

from coordinator.api import wire
from coordinator.core import protocol
from coordinator.core.assignors import assignor
from coordinator.core.driver import Driver, SimWorker, converge
from coordinator.core.protocol import ErrorCode, HeartbeatRequest, PrepareAssignmentRequest


def _prepared(driver: Driver, worker: SimWorker):  # noqa: ANN202
    return driver.run(
        driver.coordinator.prepare_assignment(
            PrepareAssignmentRequest("g", worker.member_id, worker.member_epoch), driver.now
        )
    )


def test_a_prepare_answer_and_an_install_survive_the_wire() -> None:
    """The core's own messages go over the wire as they are: what the worker decodes is the GroupSpec
    the coordinator prepared, and what the coordinator decodes is the install the worker built."""
    driver = Driver()
    driver.set_connectors("g", {"A": 3, "B": 1})
    workers = [SimWorker(driver, "g", f"w{i}", instance_id=f"i{i}") for i in range(3)]
    converge(workers)
    driver.set_config("g", scheduled_rebalance_max_delay_ms=60_000)
    workers[2].leave()  # departed work: the spec carries DepartedMembers and Deferred
    workers[0].heartbeat(compute=False)
    prepared = _prepared(driver, workers[0])
    assert prepared.departed, "the scenario should leave departed work"
    spec = wire.decode(wire.encode(prepared), protocol.PrepareAssignmentResponse)
    assert spec == prepared
    result = assignor(prepared.assignor_name).assign(spec)
    install = protocol.InstallAssignmentRequest.of("g", "w0", workers[0].member_epoch, spec.group_epoch, result)
    request = wire.decode(wire.encode(install), protocol.InstallAssignmentRequest)
    assert request == install
    assert request.group_epoch == spec.group_epoch and request.deferred == result.deferred
    assert request.scheduled_rebalance_delay_ms == result.scheduled_rebalance_delay_ms
    assert {m.member_id: m.assignment for m in request.members} == result.members


def test_a_prepare_answer_is_the_whole_group_or_the_error_alone() -> None:
    """As the seed's table has it: every field on success (ScheduledRebalanceAtMs null, not absent);
    on an error ErrorCode, ErrorMessage, GroupEpoch 0 and AssignorName null, which the worker's
    client reads as no group."""
    driver = Driver()
    driver.set_connectors("g", {"A": 1})
    worker = SimWorker(driver, "g", "w0")
    converge([worker])
    fenced = driver.run(
        driver.coordinator.prepare_assignment(
            PrepareAssignmentRequest("g", worker.member_id, worker.member_epoch + 1), driver.now
        )
    )
    raw = wire.encode(fenced)
    assert msgspec.json.decode(raw) == {
        "ErrorCode": int(ErrorCode.FENCED_MEMBER_EPOCH),
        "ErrorMessage": fenced.error_message,
        "GroupEpoch": 0,
        "AssignorName": None,
    }
    with pytest.raises(wire.WireError):
        wire.decode(raw, protocol.PrepareAssignmentResponse)
    driver.set_connectors("g", {"A": 2})
    worker.heartbeat(compute=False)  # chosen to compute the new target
    answer = msgspec.json.decode(wire.encode(_prepared(driver, worker)))
    assert answer["ScheduledRebalanceAtMs"] is None and answer["ErrorCode"] == 0 and answer["ErrorMessage"] is None


def test_a_heartbeat_survives_the_wire_both_ways() -> None:
    full = HeartbeatRequest(
        "g",
        "m",
        0,
        instance_id="i",
        rack_id="r",
        rebalance_timeout_ms=5_000,
        client_assignors=(Assignor("incremental_cooperative", 0, 1, 2, 1, b"\x01\x02"),),
        owned=ConnectorsAndTasks(("A",), (TaskId("A", 0),)),
        url="http://w:8083",
    )
    partial = HeartbeatRequest("g", "m", 7)
    for request in (full, partial):
        assert wire.decode(wire.encode(request), HeartbeatRequest) == request
    assert wire.encode(partial) == b'{"GroupId":"g","MemberId":"m","MemberEpoch":7}', (
        "a steady heartbeat sends only what changed"
    )
    assert msgspec.json.decode(wire.encode(full))["ConnectorsAndTasks"] == {
        "Connectors": ["A"],
        "Tasks": [{"Connector": "A", "Task": 0}],
    }


def test_no_body_sets_what_only_the_coordinator_may() -> None:
    """A classic member's session and protocols come from its JoinGroup, translated by the coordinator
    (`ClassicJoinHeartbeat`): a heartbeat body that names them sets nothing."""
    body = b'{"GroupId": "g", "MemberId": "m", "MemberEpoch": 0, "Classic": {"SessionTimeoutMs": 1}}'
    assert wire.decode(body, HeartbeatRequest).classic is None


@pytest.mark.parametrize(
    ("body", "field"),
    [
        (b'{"MemberId": "m", "MemberEpoch": 0}', "GroupId"),
        (b'{"GroupId": 1, "MemberId": "m", "MemberEpoch": 0}', "$.GroupId"),
        (b'{"GroupId": "g", "MemberId": "m", "MemberEpoch": 2147483648}', "$.MemberEpoch"),
        (b'{"GroupId": "g", "MemberId": "m", "MemberEpoch": 1.5}', "$.MemberEpoch"),
        (
            (
                b'{"GroupId": "g", "MemberId": "m", "MemberEpoch": 2.0, "ConnectorsAndTasks": {"Tasks": [{"Connector": "A", '
                b'"Task": 3.5}]}}'
            ),
            "$.ConnectorsAndTasks.Tasks[0].Task",
        ),
        (b'{"GroupId": "g", "MemberId": "m", "MemberEpoch": 0, "RebalanceTimeoutMs": null}', "$.RebalanceTimeoutMs"),
        (
            b'{"GroupId": "g", "MemberId": "m", "MemberEpoch": 0, "ConnectorsAndTasks": {"Tasks": [{"Task": 0}]}}',
            "Connector",
        ),
        (
            (
                b'{"GroupId": "g", "MemberId": "m", "MemberEpoch": 0, "ClientAssignors": [{"Name": "a", "MinimumVersion": 0, '
                b'"MaximumVersion": 0, "Reason": 128}]}'
            ),
            "$.ClientAssignors[0].Reason",
        ),
        (
            (
                b'{"GroupId": "g", "MemberId": "m", "MemberEpoch": 0, "ClientAssignors": [{"Name": "a", "MinimumVersion": 0, '
                b'"MaximumVersion": 0, "Metadata": "YQ"}]}'
            ),
            "$.ClientAssignors[0].Metadata",
        ),
        (b"[1, 2]", "object"),
        (b'{"GroupId": ', "not JSON"),
    ],
)
def test_a_body_that_does_not_fit_is_one_error_naming_the_field(body: bytes, field: str) -> None:
    with pytest.raises(wire.WireError) as refused:
        wire.decode(body, HeartbeatRequest)
    assert field in str(refused.value)


def test_whole_numbers_are_integers_as_json_schema_reads_them() -> None:
    r = wire.decode(
        b'{"GroupId": "g", "MemberId": "m", "MemberEpoch": 2.0, "ConnectorsAndTasks": {"Tasks": '
        b'[{"Connector": "A", "Task": 3e0}]}}',
        HeartbeatRequest,
    )
    assert r.member_epoch == 2 and r.owned.tasks == (TaskId("A", 3),)
    assert type(r.member_epoch) is int and type(r.owned.tasks[0].task) is int


def test_unknown_properties_are_ignored() -> None:
    r = wire.decode(b'{"GroupId": "g", "MemberId": "m", "MemberEpoch": 0, "Extra": [1]}', HeartbeatRequest)
    assert r == HeartbeatRequest("g", "m", 0)


def test_the_documented_base64_pattern_is_exactly_what_the_decoder_takes() -> None:
    """Every string of up to 6 characters over a small alphabet with the edge cases (`=`, `-`, space)."""
    pattern = re.compile(BASE64_PATTERN)
    for n in range(7):
        for chars in itertools.product("A+=- ", repeat=n):
            text = "".join(chars)
            body = b'{"Name": "a", "MinimumVersion": 0, "MaximumVersion": 0, "Metadata": "%s"}' % text.encode()
            try:
                wire.decode(body, Assignor)
                taken = True
            except wire.WireError:
                taken = False
            assert taken == bool(pattern.fullmatch(text)), repr(text)


# Named cases besides the exhaustive ones: msgspec takes "YQ==", refuses "YQ" and "YQ===".
BASE64_TAKEN = [
    "",
    "YQ==",
    "YWI=",
    "YWJj",
    "YWJjZA==",
    "AAAA",
    "+/+/",
    "abcd",
    "0123",
    "z9+/",
    "AA==",
    "AAA=",
    "AAAAAA==",
]
BASE64_REFUSED = [
    "YQ",
    "YQ=",
    "YQ===",
    "Y",
    "YWI",
    "YWJjZ",
    "=",
    "==",
    "A===",
    "AA=A",
    "AAAA=",
    "AAAA==",
    "YQ==YQ==",
    "AA-_",
    "AA ==",
    " AAAA",
    "AAAA\n",
    "AA\nAA",
    "AAA\u00e9",
    "AA.A",
    "AA*=",
    "@@@@",
]


@pytest.mark.parametrize("text", BASE64_TAKEN + BASE64_REFUSED)
def test_the_base64_pattern_on_named_cases(text: str) -> None:
    body = msgspec.json.encode({"Name": "a", "MinimumVersion": 0, "MaximumVersion": 0, "Metadata": text})
    try:
        wire.decode(body, Assignor)
        taken = True
    except wire.WireError:
        taken = False
    assert taken == (text in BASE64_TAKEN) == bool(re.fullmatch(BASE64_PATTERN, text))
