"""The answers that carry addresses, rewritten to the gateway's ports (`proxy` has the story):
Metadata, DescribeCluster and FindCoordinator name the gateway instead of the brokers (and the
gateway's coordinator node for our groups); ApiVersions is capped to `ALLOWED`. Each `*_rewrite`
returns the function that rewrites one answer, as the request that asked for it reads it."""

from __future__ import annotations

from typing import Protocol

from coordinator.api import kafka_protocol as kp
from coordinator.gateway.rules import ALLOWED, COORDINATOR_NODE_ID, GROUP_KEY_TYPE, Refused, Rewrite


class Ports(Protocol):
    """What a rewrite asks of the gateway (`proxy.Gateway`): its address and ports."""

    advertised_host: str

    @property
    def coordinator_port(self) -> int: ...

    def ours(self, group: str) -> bool: ...

    async def gateway_port_of(self, node_id: int, host: str, port: int) -> int: ...


def api_versions_rewrite(header: kp.RequestHeader, error: int | None = None) -> Rewrite:
    async def rewrite(payload: bytes) -> bytes:
        version = header.api_version
        try:
            _, body = kp.decode_response(kp.API_VERSIONS, version, payload)
        except kp.KafkaProtocolError:
            version = 0  # Kafka answers a version it does not know with v0
            _, body = kp.decode_response(kp.API_VERSIONS, 0, payload)
        kept = []
        for api in body.api_keys:
            if api.api_key not in ALLOWED:
                continue
            span = ALLOWED[api.api_key]
            low, high = api.min_version, api.max_version
            if span is not None:
                low, high = max(low, span[0]), min(high, span[1])
            if low <= high:
                api.min_version, api.max_version = low, high
                kept.append(api)
        body.api_keys = kept
        if error is not None:
            body.error_code = error
        return kp.encode_response(kp.RequestHeader(kp.API_VERSIONS, version, header.correlation_id, None), body)

    return rewrite


def metadata_rewrite(gw: Ports, header: kp.RequestHeader) -> Rewrite:
    async def rewrite(payload: bytes) -> bytes:
        _, body = kp.decode_response(kp.METADATA, header.api_version, payload)
        for broker in body.brokers:
            broker.port = await gw.gateway_port_of(broker.node_id, broker.host, broker.port)
            broker.host = gw.advertised_host
        cls = kp.response_class(kp.METADATA, header.api_version)
        body.brokers = list(body.brokers) + [
            cls.MetadataResponseBroker(
                node_id=COORDINATOR_NODE_ID, host=gw.advertised_host, port=gw.coordinator_port, rack=None
            )
        ]
        return kp.encode_response(header, body)

    return rewrite


def describe_cluster_rewrite(gw: Ports, header: kp.RequestHeader) -> Rewrite:
    async def rewrite(payload: bytes) -> bytes:
        _, body = kp.decode_response(kp.DESCRIBE_CLUSTER, header.api_version, payload)
        if header.api_version >= 1 and body.endpoint_type != 1:
            raise Refused("DescribeCluster of the controllers: their addresses are not rewritten")
        for broker in body.brokers:
            broker.port = await gw.gateway_port_of(broker.broker_id, broker.host, broker.port)
            broker.host = gw.advertised_host
        return kp.encode_response(header, body)

    return rewrite


def find_coordinator_rewrite(gw: Ports, request: kp.Request) -> Rewrite:
    header, body = request.header, request.body
    version = header.api_version
    key_type = body.key_type if version >= 1 else GROUP_KEY_TYPE
    keys = list(body.coordinator_keys) if version >= 4 else [body.key]

    async def place(key: str, node_id: int, host: str, port: int, code: int) -> tuple[int, str, int, int]:
        if key_type == GROUP_KEY_TYPE and gw.ours(key):
            return COORDINATOR_NODE_ID, gw.advertised_host, gw.coordinator_port, 0
        if code == 0 and node_id >= 0:
            return node_id, gw.advertised_host, await gw.gateway_port_of(node_id, host, port), code
        return node_id, host, port, code

    async def rewrite(payload: bytes) -> bytes:
        _, answer = kp.decode_response(kp.FIND_COORDINATOR, version, payload)
        if version >= 4:
            for entry in answer.coordinators:
                node, h, p, code = await place(entry.key, entry.node_id, entry.host, entry.port, entry.error_code)
                if code != entry.error_code:
                    entry.error_message = None
                entry.node_id, entry.host, entry.port, entry.error_code = node, h, p, code
        else:
            node, h, p, code = await place(keys[0], answer.node_id, answer.host, answer.port, answer.error_code)
            if code != answer.error_code:
                answer.error_message = None
            answer.node_id, answer.host, answer.port, answer.error_code = node, h, p, code
        return kp.encode_response(header, answer)

    return rewrite
