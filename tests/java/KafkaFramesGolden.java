/*
 * Kafka's request and response frames as kafka-clients 4.3.1 itself writes and reads them, for
 * tests/test_kafka_protocol.py (compiled and run by tests/connect_java.py against the jars that
 * bench/vs_connect/pom.xml pins; connect-runtime 4.3.1 brings kafka-clients 4.3.1).
 *
 *   generate  prints the golden cases (tests/golden/kafka_frames.json): for each API the listener
 *             serves, at its lowest, first flexible and highest served versions, a request and a
 *             response built with kafka-clients' message classes (`*RequestData`, `*ResponseData`),
 *             framed as the network client frames them (an int32 size, the header of the version
 *             `ApiKeys.requestHeaderVersion` / `responseHeaderVersion` names, the body), as hex,
 *             with the message as its generated JSON converter writes it; and each API's version
 *             range in kafka-clients (`ApiKeys`).
 *   read      reads {"frames": [{"kind", "api_key", "version", "hex"}]} on stdin and prints, per
 *             frame, what kafka-clients reads from it (the header's correlation id and client id,
 *             the body through the JSON converter, whether bytes were left over), or the exception.
 */

import com.fasterxml.jackson.core.json.JsonWriteFeature;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.json.JsonMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.JsonNodeFactory;
import com.fasterxml.jackson.databind.node.ObjectNode;

import org.apache.kafka.common.message.ApiMessageType;
import org.apache.kafka.common.message.ApiVersionsRequestData;
import org.apache.kafka.common.message.ApiVersionsResponseData;
import org.apache.kafka.common.message.DeleteGroupsRequestData;
import org.apache.kafka.common.message.DeleteGroupsResponseData;
import org.apache.kafka.common.message.DescribeClusterRequestData;
import org.apache.kafka.common.message.DescribeClusterResponseData;
import org.apache.kafka.common.message.DescribeGroupsRequestData;
import org.apache.kafka.common.message.DescribeGroupsResponseData;
import org.apache.kafka.common.message.EnvelopeRequestData;
import org.apache.kafka.common.message.EnvelopeResponseData;
import org.apache.kafka.common.message.FindCoordinatorRequestData;
import org.apache.kafka.common.message.FindCoordinatorResponseData;
import org.apache.kafka.common.message.HeartbeatRequestData;
import org.apache.kafka.common.message.HeartbeatResponseData;
import org.apache.kafka.common.message.JoinGroupRequestData;
import org.apache.kafka.common.message.JoinGroupResponseData;
import org.apache.kafka.common.message.LeaveGroupRequestData;
import org.apache.kafka.common.message.LeaveGroupResponseData;
import org.apache.kafka.common.message.ListGroupsRequestData;
import org.apache.kafka.common.message.ListGroupsResponseData;
import org.apache.kafka.common.message.MetadataRequestData;
import org.apache.kafka.common.message.MetadataResponseData;
import org.apache.kafka.common.message.OffsetCommitRequestData;
import org.apache.kafka.common.message.OffsetCommitResponseData;
import org.apache.kafka.common.message.OffsetFetchRequestData;
import org.apache.kafka.common.message.OffsetFetchResponseData;
import org.apache.kafka.common.message.RequestHeaderData;
import org.apache.kafka.common.message.ResponseHeaderData;
import org.apache.kafka.common.message.SaslAuthenticateRequestData;
import org.apache.kafka.common.message.SaslAuthenticateResponseData;
import org.apache.kafka.common.message.SaslHandshakeRequestData;
import org.apache.kafka.common.message.SaslHandshakeResponseData;
import org.apache.kafka.common.message.SyncGroupRequestData;
import org.apache.kafka.common.message.SyncGroupResponseData;
import org.apache.kafka.common.protocol.ApiKeys;
import org.apache.kafka.common.protocol.ApiMessage;
import org.apache.kafka.common.protocol.ByteBufferAccessor;
import org.apache.kafka.common.protocol.Message;
import org.apache.kafka.common.protocol.ObjectSerializationCache;
import org.apache.kafka.common.protocol.types.RawTaggedField;
import org.apache.kafka.common.Uuid;
import org.apache.kafka.common.security.auth.KafkaPrincipal;
import org.apache.kafka.common.security.authenticator.DefaultKafkaPrincipalBuilder;

import java.lang.reflect.Method;
import java.nio.ByteBuffer;
import java.util.HexFormat;
import java.util.List;

public final class KafkaFramesGolden {
    private static final ObjectMapper JSON = JsonMapper.builder()
            .enable(JsonWriteFeature.ESCAPE_NON_ASCII)
            .disable(JsonWriteFeature.ESCAPE_FORWARD_SLASHES)
            .build();
    private static final JsonNodeFactory NODES = JsonNodeFactory.instance;
    private static final HexFormat HEX = HexFormat.of();

    private static final String GROUP = "connect-cluster";
    private static final String CLIENT = "connect-1";
    private static final String MEMBER = "connect-1-7b0e0b1c-3f59-4b8e-9a3c-2d1f6b5e8a90";
    private static final String OTHER = "connect-2-0c6b9a7e-1d2f-4e3a-8b5c-6d7e8f9a0b1c";
    private static final byte[] METADATA = {0, 2, 0, 22, 'h', 't', 't', 'p', ':', '/', '/', '1', '0', '.', '0', '.',
                                            '0', '.', '1', ':', '8', '0', '8', '3', '/', 0, 0, 0, 0, 0, 0, 0, 7, -1, -1,
                                            -1, -1};
    private static final Uuid TOPIC_ID = Uuid.fromString("b6dhT8dSTHqCNVzZ3uLgQw");
    private static final byte[] ASSIGNMENT = {0, 2, 0, 0, 0, 0, 0, 1, 'x', 0, 0, 0, 0};

    // The versions of each API a case is written at: lowest served, first flexible, highest.
    private static final Object[][] VERSIONS = {
        {ApiKeys.API_VERSIONS, new short[] {0, 3, 4}},
        {ApiKeys.FIND_COORDINATOR, new short[] {0, 3, 4, 6}},
        {ApiKeys.JOIN_GROUP, new short[] {4, 6, 9}},
        {ApiKeys.SYNC_GROUP, new short[] {0, 4, 5}},
        {ApiKeys.HEARTBEAT, new short[] {0, 4}},
        {ApiKeys.LEAVE_GROUP, new short[] {0, 3, 4, 5}},
        {ApiKeys.DESCRIBE_GROUPS, new short[] {0, 5, 6}},
        {ApiKeys.LIST_GROUPS, new short[] {0, 3, 5}},
        {ApiKeys.DELETE_GROUPS, new short[] {0, 2}},
        // Not served by the listener: the gateway rewrites their answers (the brokers' addresses).
        {ApiKeys.METADATA, new short[] {0, 9, 12, 13}},
        {ApiKeys.DESCRIBE_CLUSTER, new short[] {0, 1, 2}},
        // Served with an error only (the coordinator keeps no offsets); OffsetFetch also at v8, its first
        // batched version.
        {ApiKeys.OFFSET_COMMIT, new short[] {2, 8, 10}},
        {ApiKeys.OFFSET_FETCH, new short[] {1, 6, 8, 10}},
        // Authentication (SASL PLAIN) and a gateway's forwarding (Envelope, KIP-590).
        {ApiKeys.SASL_HANDSHAKE, new short[] {1}},
        {ApiKeys.SASL_AUTHENTICATE, new short[] {0, 1, 2}},
        {ApiKeys.ENVELOPE, new short[] {0}},
    };
    // A principal as a forwarding broker serializes it into an Envelope (DefaultKafkaPrincipalBuilder).
    private static final byte[] PRINCIPAL = new DefaultKafkaPrincipalBuilder(null, null)
            .serialize(new KafkaPrincipal(KafkaPrincipal.USER_TYPE, "alice"));

    public static void main(String[] args) throws Exception {
        String mode = args.length > 0 ? args[0] : "";
        ObjectNode out = NODES.objectNode();
        switch (mode) {
            case "generate" -> generate(out);
            case "read" -> read(JSON.readTree(System.in), out);
            default -> {
                System.err.println("usage: KafkaFramesGolden generate|read");
                System.exit(2);
            }
        }
        System.out.println(JSON.writerWithDefaultPrettyPrinter().writeValueAsString(out));
    }

    private static void generate(ObjectNode out) throws Exception {
        ObjectNode ranges = out.putObject("kafka_clients_versions");
        for (Object[] row : VERSIONS) {
            ApiKeys key = (ApiKeys) row[0];
            ranges.putArray(String.valueOf(key.id)).add(key.oldestVersion()).add(key.latestVersion());
        }
        out.put("principal_user_alice", HEX.formatHex(PRINCIPAL));
        ArrayNode cases = out.putArray("cases");
        int correlation = 1;
        for (Object[] row : VERSIONS) {
            ApiKeys key = (ApiKeys) row[0];
            for (short v : (short[]) row[1]) {
                String name = key.name().toLowerCase() + "_v" + v;
                cases.add(requestCase(name, key, v, correlation, CLIENT, request(key, v)));
                cases.add(responseCase(name, key, v, correlation, response(key, v, 0)));
                correlation += 1;
            }
        }
        // Tagged fields no schema knows (at the top and inside a protocol), which a reader must skip.
        JoinGroupRequestData tagged = (JoinGroupRequestData) request(ApiKeys.JOIN_GROUP, (short) 9);
        tagged.unknownTaggedFields().add(new RawTaggedField(77, new byte[] {1, 2, 3}));
        tagged.protocols().iterator().next().unknownTaggedFields().add(new RawTaggedField(5, new byte[] {9}));
        cases.add(requestCase("join_group_v9_unknown_tags", ApiKeys.JOIN_GROUP, (short) 9, 100, CLIENT, tagged));
        SyncGroupResponseData syncTagged = (SyncGroupResponseData) response(ApiKeys.SYNC_GROUP, (short) 5, 0);
        syncTagged.unknownTaggedFields().add(new RawTaggedField(3, new byte[] {4, 5}));
        cases.add(responseCase("sync_group_v5_unknown_tags", ApiKeys.SYNC_GROUP, (short) 5, 101, syncTagged));
        // An error code that Kafka has not defined (a reader must carry it, not refuse it).
        cases.add(responseCase("join_group_v9_unknown_error", ApiKeys.JOIN_GROUP, (short) 9, 102,
                               response(ApiKeys.JOIN_GROUP, (short) 9, 9999)));
        cases.add(responseCase("heartbeat_v4_unknown_error", ApiKeys.HEARTBEAT, (short) 4, 103,
                               response(ApiKeys.HEARTBEAT, (short) 4, 1000)));
        // A null client id (header v1 and v2 both allow it).
        cases.add(requestCase("heartbeat_v4_null_client_id", ApiKeys.HEARTBEAT, (short) 4, 104, null,
                              request(ApiKeys.HEARTBEAT, (short) 4)));
    }

    private static ObjectNode requestCase(String name, ApiKeys key, short v, int correlation, String clientId,
                                          ApiMessage body) throws Exception {
        short headerVersion = key.requestHeaderVersion(v);
        RequestHeaderData header = new RequestHeaderData().setRequestApiKey(key.id).setRequestApiVersion(v)
                .setCorrelationId(correlation).setClientId(clientId);
        ObjectNode c = describe(name, "request", key, v, headerVersion, body);
        c.put("correlation_id", correlation);
        if (clientId == null) c.putNull("client_id"); else c.put("client_id", clientId);
        c.put("hex", HEX.formatHex(frame(header, headerVersion, body, v)));
        return c;
    }

    private static ObjectNode responseCase(String name, ApiKeys key, short v, int correlation, ApiMessage body)
            throws Exception {
        short headerVersion = key.responseHeaderVersion(v);
        ResponseHeaderData header = new ResponseHeaderData().setCorrelationId(correlation);
        ObjectNode c = describe(name, "response", key, v, headerVersion, body);
        c.put("correlation_id", correlation);
        c.put("hex", HEX.formatHex(frame(header, headerVersion, body, v)));
        return c;
    }

    private static ObjectNode describe(String name, String kind, ApiKeys key, short v, short headerVersion,
                                       ApiMessage body) throws Exception {
        ObjectNode c = NODES.objectNode();
        c.put("name", name);
        c.put("kind", kind);
        c.put("api_key", key.id);
        c.put("version", v);
        c.put("header_version", headerVersion);
        c.set("body", toJson(body, v));
        return c;
    }

    private static byte[] frame(Message header, short headerVersion, Message body, short v) {
        ObjectSerializationCache cache = new ObjectSerializationCache();
        int headerSize = header.size(cache, headerVersion);
        int bodySize = body.size(cache, v);
        ByteBuffer buffer = ByteBuffer.allocate(4 + headerSize + bodySize);
        buffer.putInt(headerSize + bodySize);
        ByteBufferAccessor accessor = new ByteBufferAccessor(buffer);
        header.write(accessor, cache, headerVersion);
        body.write(accessor, cache, v);
        return buffer.array();
    }

    private static byte[] frameBytes(ApiKeys key, short v, int correlation) {
        RequestHeaderData header = new RequestHeaderData().setRequestApiKey(key.id).setRequestApiVersion(v)
                .setCorrelationId(correlation).setClientId(CLIENT);
        return frame(header, key.requestHeaderVersion(v), request(key, v), v);
    }

    private static byte[] responseFrameBytes(ApiKeys key, short v, int correlation) {
        ResponseHeaderData header = new ResponseHeaderData().setCorrelationId(correlation);
        return frame(header, key.responseHeaderVersion(v), response(key, v, 0), v);
    }

    private static JsonNode toJson(ApiMessage message, short v) throws Exception {
        Class<?> converter = Class.forName(message.getClass().getName() + "JsonConverter");
        Method write = converter.getMethod("write", message.getClass(), short.class);
        return (JsonNode) write.invoke(null, message, v);
    }

    // --- the messages -----------------------------------------------------------------------------

    private static ApiMessage request(ApiKeys key, short v) {
        return switch (key) {
            case API_VERSIONS -> v >= 3
                    ? new ApiVersionsRequestData().setClientSoftwareName("apache-kafka-java").setClientSoftwareVersion("4.3.1")
                    : new ApiVersionsRequestData();
            case FIND_COORDINATOR -> {
                FindCoordinatorRequestData d = new FindCoordinatorRequestData();
                if (v >= 4) d.setCoordinatorKeys(List.of(GROUP, "connect-other"));
                else d.setKey(GROUP);
                if (v >= 1) d.setKeyType((byte) 0);
                yield d;
            }
            case JOIN_GROUP -> {
                JoinGroupRequestData.JoinGroupRequestProtocolCollection protocols =
                        new JoinGroupRequestData.JoinGroupRequestProtocolCollection();
                protocols.add(new JoinGroupRequestData.JoinGroupRequestProtocol().setName("sessioned").setMetadata(METADATA));
                protocols.add(new JoinGroupRequestData.JoinGroupRequestProtocol().setName("compatible").setMetadata(METADATA));
                protocols.add(new JoinGroupRequestData.JoinGroupRequestProtocol().setName("default").setMetadata(METADATA));
                JoinGroupRequestData d = new JoinGroupRequestData().setGroupId(GROUP).setSessionTimeoutMs(10000)
                        .setRebalanceTimeoutMs(60000).setMemberId(MEMBER).setProtocolType("connect")
                        .setProtocols(protocols);
                if (v >= 5) d.setGroupInstanceId("worker-a");
                if (v >= 8) d.setReason("rebalance failed due to 'The group member needs to have a valid member id'");
                yield d;
            }
            case SYNC_GROUP -> {
                SyncGroupRequestData d = new SyncGroupRequestData().setGroupId(GROUP).setGenerationId(3)
                        .setMemberId(MEMBER).setAssignments(List.of(
                                new SyncGroupRequestData.SyncGroupRequestAssignment().setMemberId(MEMBER).setAssignment(ASSIGNMENT),
                                new SyncGroupRequestData.SyncGroupRequestAssignment().setMemberId(OTHER).setAssignment(new byte[0])));
                if (v >= 3) d.setGroupInstanceId("worker-a");
                if (v >= 5) d.setProtocolType("connect").setProtocolName("sessioned");
                yield d;
            }
            case HEARTBEAT -> {
                HeartbeatRequestData d = new HeartbeatRequestData().setGroupId(GROUP).setGenerationId(3).setMemberId(MEMBER);
                if (v >= 3) d.setGroupInstanceId(null);
                yield d;
            }
            case LEAVE_GROUP -> {
                LeaveGroupRequestData d = new LeaveGroupRequestData().setGroupId(GROUP);
                if (v >= 3) {
                    LeaveGroupRequestData.MemberIdentity m = new LeaveGroupRequestData.MemberIdentity().setMemberId(MEMBER);
                    if (v >= 5) m.setReason("the consumer is being closed");
                    d.setMembers(List.of(m, new LeaveGroupRequestData.MemberIdentity().setMemberId("")
                            .setGroupInstanceId("worker-b")));
                } else {
                    d.setMemberId(MEMBER);
                }
                yield d;
            }
            case DESCRIBE_GROUPS -> {
                DescribeGroupsRequestData d = new DescribeGroupsRequestData().setGroups(List.of(GROUP, "unknown"));
                if (v >= 3) d.setIncludeAuthorizedOperations(true);
                yield d;
            }
            case LIST_GROUPS -> {
                ListGroupsRequestData d = new ListGroupsRequestData();
                if (v >= 4) d.setStatesFilter(List.of("Stable", "Empty"));
                if (v >= 5) d.setTypesFilter(List.of("classic"));
                yield d;
            }
            case DELETE_GROUPS -> new DeleteGroupsRequestData().setGroupsNames(List.of(GROUP, "unknown"));
            case OFFSET_COMMIT -> {
                OffsetCommitRequestData.OffsetCommitRequestTopic t = new OffsetCommitRequestData.OffsetCommitRequestTopic()
                        .setPartitions(List.of(
                                new OffsetCommitRequestData.OffsetCommitRequestPartition().setPartitionIndex(0)
                                        .setCommittedOffset(42).setCommittedMetadata("m"),
                                new OffsetCommitRequestData.OffsetCommitRequestPartition().setPartitionIndex(3)
                                        .setCommittedOffset(7).setCommittedMetadata(null)));
                if (v >= 10) t.setTopicId(TOPIC_ID); else t.setName("connect-offsets");
                OffsetCommitRequestData d = new OffsetCommitRequestData().setGroupId(GROUP).setGenerationIdOrMemberEpoch(3)
                        .setMemberId(MEMBER).setTopics(List.of(t));
                if (v <= 4) d.setRetentionTimeMs(-1);
                if (v >= 7) d.setGroupInstanceId("worker-a");
                yield d;
            }
            case OFFSET_FETCH -> {
                OffsetFetchRequestData d = new OffsetFetchRequestData();
                if (v >= 8) {
                    OffsetFetchRequestData.OffsetFetchRequestTopics t = new OffsetFetchRequestData.OffsetFetchRequestTopics()
                            .setPartitionIndexes(List.of(0, 3));
                    if (v >= 10) t.setTopicId(TOPIC_ID); else t.setName("connect-offsets");
                    d.setGroups(List.of(
                            new OffsetFetchRequestData.OffsetFetchRequestGroup().setGroupId(GROUP).setTopics(List.of(t)),
                            new OffsetFetchRequestData.OffsetFetchRequestGroup().setGroupId("connect-other").setTopics(null)));
                } else {
                    d.setGroupId(GROUP).setTopics(List.of(new OffsetFetchRequestData.OffsetFetchRequestTopic()
                            .setName("connect-offsets").setPartitionIndexes(List.of(0, 3))));
                }
                if (v >= 7) d.setRequireStable(true);
                yield d;
            }
            case METADATA -> {
                MetadataRequestData d = new MetadataRequestData().setTopics(List.of(
                        new MetadataRequestData.MetadataRequestTopic().setName("connect-configs")));
                if (v >= 4) d.setAllowAutoTopicCreation(false);
                if (v >= 8) d.setIncludeTopicAuthorizedOperations(true);
                yield d;
            }
            case SASL_HANDSHAKE -> new SaslHandshakeRequestData().setMechanism("PLAIN");
            case SASL_AUTHENTICATE -> new SaslAuthenticateRequestData()
                    .setAuthBytes("\u0000alice\u0000alice-secret".getBytes(java.nio.charset.StandardCharsets.UTF_8));
            case ENVELOPE -> {
                // A heartbeat v4 request (header v2 and body, no frame size), forwarded for User:alice at 10.0.0.7
                byte[] framed = frameBytes(ApiKeys.HEARTBEAT, (short) 4, 42);
                yield new EnvelopeRequestData().setRequestData(ByteBuffer.wrap(framed, 4, framed.length - 4).slice())
                        .setRequestPrincipal(PRINCIPAL).setClientHostAddress(new byte[] {10, 0, 0, 7});
            }
            case DESCRIBE_CLUSTER -> {
                DescribeClusterRequestData d = new DescribeClusterRequestData().setIncludeClusterAuthorizedOperations(true);
                if (v >= 2) d.setIncludeFencedBrokers(true);
                yield d;
            }
            default -> throw new IllegalArgumentException(key.name());
        };
    }

    private static ApiMessage response(ApiKeys key, short v, int error) {
        return switch (key) {
            case API_VERSIONS -> {
                ApiVersionsResponseData.ApiVersionCollection keys = new ApiVersionsResponseData.ApiVersionCollection();
                keys.add(new ApiVersionsResponseData.ApiVersion().setApiKey((short) 10).setMinVersion((short) 0).setMaxVersion((short) 6));
                keys.add(new ApiVersionsResponseData.ApiVersion().setApiKey((short) 11).setMinVersion((short) 4).setMaxVersion((short) 9));
                keys.add(new ApiVersionsResponseData.ApiVersion().setApiKey((short) 18).setMinVersion((short) 0).setMaxVersion((short) 4));
                yield new ApiVersionsResponseData().setErrorCode((short) error).setApiKeys(keys);
            }
            case SASL_HANDSHAKE -> new SaslHandshakeResponseData().setErrorCode((short) error)
                    .setMechanisms(List.of("PLAIN", "SCRAM-SHA-256"));
            case SASL_AUTHENTICATE -> new SaslAuthenticateResponseData().setErrorCode((short) error)
                    .setErrorMessage(error == 0 ? null : "Authentication failed").setAuthBytes(new byte[0])
                    .setSessionLifetimeMs(v >= 1 ? 3_600_000L : 0L);
            case ENVELOPE -> {
                byte[] framed = responseFrameBytes(ApiKeys.HEARTBEAT, (short) 4, 42);
                yield new EnvelopeResponseData().setErrorCode((short) error)
                        .setResponseData(ByteBuffer.wrap(framed, 4, framed.length - 4).slice());
            }
            case FIND_COORDINATOR -> {
                FindCoordinatorResponseData d = new FindCoordinatorResponseData();
                if (v >= 4) {
                    d.setCoordinators(List.of(
                            new FindCoordinatorResponseData.Coordinator().setKey(GROUP).setNodeId(1001)
                                    .setHost("coordinator-0.coordinator.svc").setPort(9093),
                            new FindCoordinatorResponseData.Coordinator().setKey("connect-other").setNodeId(-1)
                                    .setHost("").setPort(-1).setErrorCode((short) 15)
                                    .setErrorMessage("The coordinator is not available.")));
                } else {
                    d.setNodeId(1001).setHost("coordinator-0.coordinator.svc").setPort(9093);
                    if (v >= 1) d.setErrorMessage(null);
                }
                if (v >= 1) d.setThrottleTimeMs(0);
                yield d;
            }
            case JOIN_GROUP -> {
                JoinGroupResponseData.JoinGroupResponseMember m1 = new JoinGroupResponseData.JoinGroupResponseMember()
                        .setMemberId(MEMBER).setMetadata(METADATA);
                JoinGroupResponseData.JoinGroupResponseMember m2 = new JoinGroupResponseData.JoinGroupResponseMember()
                        .setMemberId(OTHER).setMetadata(METADATA);
                if (v >= 5) m1.setGroupInstanceId("worker-a");
                JoinGroupResponseData d = new JoinGroupResponseData().setErrorCode((short) error).setGenerationId(3)
                        .setProtocolName("sessioned").setLeader(MEMBER).setMemberId(MEMBER).setMembers(List.of(m1, m2))
                        .setThrottleTimeMs(0);
                if (v >= 7) d.setProtocolType("connect");
                yield d;
            }
            case SYNC_GROUP -> {
                SyncGroupResponseData d = new SyncGroupResponseData().setErrorCode((short) error).setAssignment(ASSIGNMENT);
                if (v >= 5) d.setProtocolType("connect").setProtocolName("sessioned");
                yield d;
            }
            case HEARTBEAT -> new HeartbeatResponseData().setErrorCode((short) error);
            case LEAVE_GROUP -> {
                LeaveGroupResponseData d = new LeaveGroupResponseData().setErrorCode((short) error);
                if (v >= 3) d.setMembers(List.of(
                        new LeaveGroupResponseData.MemberResponse().setMemberId(MEMBER).setGroupInstanceId(null),
                        new LeaveGroupResponseData.MemberResponse().setMemberId("").setGroupInstanceId("worker-b")
                                .setErrorCode((short) 25)));
                yield d;
            }
            case DESCRIBE_GROUPS -> {
                DescribeGroupsResponseData.DescribedGroupMember m = new DescribeGroupsResponseData.DescribedGroupMember()
                        .setMemberId(MEMBER).setClientId(CLIENT).setClientHost("/10.0.0.1")
                        .setMemberMetadata(METADATA).setMemberAssignment(ASSIGNMENT);
                if (v >= 4) m.setGroupInstanceId("worker-a");
                DescribeGroupsResponseData.DescribedGroup g = new DescribeGroupsResponseData.DescribedGroup()
                        .setGroupId(GROUP).setGroupState("Stable").setProtocolType("connect").setProtocolData("sessioned")
                        .setMembers(List.of(m));
                if (v >= 3) g.setAuthorizedOperations(Integer.MIN_VALUE);
                DescribeGroupsResponseData.DescribedGroup dead = new DescribeGroupsResponseData.DescribedGroup()
                        .setGroupId("unknown").setErrorCode((short) 0).setGroupState("Dead").setProtocolType("")
                        .setProtocolData("");
                yield new DescribeGroupsResponseData().setGroups(List.of(g, dead));
            }
            case LIST_GROUPS -> {
                ListGroupsResponseData.ListedGroup g = new ListGroupsResponseData.ListedGroup().setGroupId(GROUP)
                        .setProtocolType("connect");
                if (v >= 4) g.setGroupState("Stable");
                if (v >= 5) g.setGroupType("classic");
                yield new ListGroupsResponseData().setErrorCode((short) error).setGroups(List.of(g));
            }
            case DELETE_GROUPS -> {
                DeleteGroupsResponseData.DeletableGroupResultCollection results =
                        new DeleteGroupsResponseData.DeletableGroupResultCollection();
                results.add(new DeleteGroupsResponseData.DeletableGroupResult().setGroupId(GROUP).setErrorCode((short) 68));
                results.add(new DeleteGroupsResponseData.DeletableGroupResult().setGroupId("unknown").setErrorCode((short) 69));
                yield new DeleteGroupsResponseData().setResults(results);
            }
            case OFFSET_COMMIT -> {
                OffsetCommitResponseData.OffsetCommitResponseTopic t = new OffsetCommitResponseData.OffsetCommitResponseTopic()
                        .setPartitions(List.of(
                                new OffsetCommitResponseData.OffsetCommitResponsePartition().setPartitionIndex(0)
                                        .setErrorCode((short) 42),
                                new OffsetCommitResponseData.OffsetCommitResponsePartition().setPartitionIndex(3)
                                        .setErrorCode((short) 42)));
                if (v >= 10) t.setTopicId(TOPIC_ID); else t.setName("connect-offsets");
                yield new OffsetCommitResponseData().setThrottleTimeMs(0).setTopics(List.of(t));
            }
            case OFFSET_FETCH -> {
                OffsetFetchResponseData d = new OffsetFetchResponseData();
                if (v >= 3) d.setThrottleTimeMs(0);
                if (v >= 8) {
                    OffsetFetchResponseData.OffsetFetchResponseTopics t = new OffsetFetchResponseData.OffsetFetchResponseTopics()
                            .setPartitions(List.of(new OffsetFetchResponseData.OffsetFetchResponsePartitions()
                                    .setPartitionIndex(0).setCommittedOffset(-1).setCommittedLeaderEpoch(-1).setMetadata("")
                                    .setErrorCode((short) 0)));
                    if (v >= 10) t.setTopicId(TOPIC_ID); else t.setName("connect-offsets");
                    d.setGroups(List.of(
                            new OffsetFetchResponseData.OffsetFetchResponseGroup().setGroupId(GROUP).setErrorCode((short) 42),
                            new OffsetFetchResponseData.OffsetFetchResponseGroup().setGroupId("connect-other")
                                    .setTopics(List.of(t))));
                } else {
                    OffsetFetchResponseData.OffsetFetchResponsePartition p = new OffsetFetchResponseData.OffsetFetchResponsePartition()
                            .setPartitionIndex(0).setCommittedOffset(-1).setMetadata("").setErrorCode((short) 42);
                    if (v >= 5) p.setCommittedLeaderEpoch(-1);
                    d.setTopics(List.of(new OffsetFetchResponseData.OffsetFetchResponseTopic().setName("connect-offsets")
                            .setPartitions(List.of(p))));
                    if (v >= 2) d.setErrorCode((short) 42);
                }
                yield d;
            }
            case METADATA -> {
                MetadataResponseData.MetadataResponseBrokerCollection brokers =
                        new MetadataResponseData.MetadataResponseBrokerCollection();
                brokers.add(new MetadataResponseData.MetadataResponseBroker().setNodeId(1).setHost("broker-1.kafka.svc")
                        .setPort(9092).setRack("rack-a"));
                brokers.add(new MetadataResponseData.MetadataResponseBroker().setNodeId(2).setHost("broker-2.kafka.svc")
                        .setPort(9094).setRack(null));
                MetadataResponseData.MetadataResponseTopicCollection topics =
                        new MetadataResponseData.MetadataResponseTopicCollection();
                topics.add(new MetadataResponseData.MetadataResponseTopic().setName("connect-configs")
                        .setIsInternal(false).setPartitions(List.of(
                                new MetadataResponseData.MetadataResponsePartition().setPartitionIndex(0).setLeaderId(2)
                                        .setLeaderEpoch(4).setReplicaNodes(List.of(2, 1)).setIsrNodes(List.of(2, 1))
                                        .setOfflineReplicas(List.of()))));
                MetadataResponseData d = new MetadataResponseData().setThrottleTimeMs(0).setBrokers(brokers)
                        .setClusterId("5L6g3nShT-eMCtK--X86sw").setControllerId(1).setTopics(topics);
                if (v >= 13) d.setErrorCode((short) error);
                yield d;
            }
            case DESCRIBE_CLUSTER -> {
                DescribeClusterResponseData.DescribeClusterBrokerCollection brokers =
                        new DescribeClusterResponseData.DescribeClusterBrokerCollection();
                brokers.add(new DescribeClusterResponseData.DescribeClusterBroker().setBrokerId(1)
                        .setHost("broker-1.kafka.svc").setPort(9092).setRack("rack-a"));
                brokers.add(new DescribeClusterResponseData.DescribeClusterBroker().setBrokerId(2)
                        .setHost("broker-2.kafka.svc").setPort(9094).setRack(null).setIsFenced(v >= 2));
                DescribeClusterResponseData d = new DescribeClusterResponseData().setErrorCode((short) error)
                        .setClusterId("5L6g3nShT-eMCtK--X86sw").setControllerId(1).setBrokers(brokers)
                        .setClusterAuthorizedOperations(-2147483648);
                if (v >= 1) d.setEndpointType((byte) 1);
                yield d;
            }
            default -> throw new IllegalArgumentException(key.name());
        };
    }

    // --- read -------------------------------------------------------------------------------------

    private static void read(JsonNode in, ObjectNode out) {
        ArrayNode results = out.putArray("frames");
        for (JsonNode f : in.get("frames")) {
            ObjectNode r = results.addObject();
            try {
                ApiKeys key = ApiKeys.forId(f.get("api_key").asInt());
                short v = (short) f.get("version").asInt();
                ByteBuffer buffer = ByteBuffer.wrap(HEX.parseHex(f.get("hex").asText()));
                int size = buffer.getInt();
                if (size != buffer.remaining()) throw new IllegalStateException("frame size " + size + " but "
                        + buffer.remaining() + " bytes follow");
                ByteBufferAccessor accessor = new ByteBufferAccessor(buffer);
                ApiMessage body;
                if (f.get("kind").asText().equals("request")) {
                    RequestHeaderData header = new RequestHeaderData(accessor, key.requestHeaderVersion(v));
                    r.put("correlation_id", header.correlationId());
                    if (header.clientId() == null) r.putNull("client_id"); else r.put("client_id", header.clientId());
                    body = ApiMessageType.fromApiKey(key.id).newRequest();
                } else {
                    ResponseHeaderData header = new ResponseHeaderData(accessor, key.responseHeaderVersion(v));
                    r.put("correlation_id", header.correlationId());
                    body = ApiMessageType.fromApiKey(key.id).newResponse();
                }
                body.read(accessor, v);
                r.set("body", toJson(body, v));
                r.put("left_over", buffer.remaining());
            } catch (Exception e) {
                r.put("error", e.getClass().getSimpleName() + ": " + e.getMessage());
            }
        }
    }

}
