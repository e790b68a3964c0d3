/*
 * Kafka Connect's classic-protocol bytes as connect-runtime itself writes and reads them, for
 * tests/test_connect_protocol.py (compiled and run by tests/connect_java.py against the jars that
 * bench/vs_connect/pom.xml pins).
 *
 *   generate  prints the golden cases (tests/golden/connect_protocol.json): each case's input, the
 *             hex bytes ConnectProtocol / IncrementalCooperativeConnectProtocol serialized from it,
 *             and what IncrementalCooperativeConnectProtocol (the reader WorkerCoordinator and both
 *             assignors use) reads back from those bytes.
 *   read      reads {"cases": [{"name", "kind", "hex"}]} on stdin and prints, per case, what
 *             IncrementalCooperativeConnectProtocol ("read") and ConnectProtocol ("read_v0") read
 *             from the bytes, or the exception they threw.
 *   write     reads {"cases": [{"name", "kind", "protocol", "input"}]} on stdin and prints, per
 *             case, the hex bytes Connect's serializers write for the input, and the Java version
 *             (the order of a HashSet depends on it).
 *
 * The JSON shapes (also those of tests/test_connect_protocol.py):
 *   metadata    {"url", "config_offset", "allocation": null | assignment}   ("default": no allocation)
 *   assignment  {"error", "leader", "leader_url", "config_offset", "assigned", "revoked", "delay_ms"}
 *               ("default": no revoked, no delay_ms); a reading adds "version" (the header)
 *   items       {"connectors": [name...], "tasks": [[connector, task]...]}
 */

import com.fasterxml.jackson.core.json.JsonWriteFeature;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.json.JsonMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.JsonNodeFactory;
import com.fasterxml.jackson.databind.node.ObjectNode;

import org.apache.kafka.common.utils.AppInfoParser;
import org.apache.kafka.connect.runtime.distributed.ConnectProtocol;
import org.apache.kafka.connect.runtime.distributed.ExtendedAssignment;
import org.apache.kafka.connect.runtime.distributed.ExtendedWorkerState;
import org.apache.kafka.connect.runtime.distributed.IncrementalCooperativeConnectProtocol;
import org.apache.kafka.connect.util.ConnectorTaskId;

import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Collection;
import java.util.HexFormat;
import java.util.List;

public final class ConnectProtocolGolden {
    private static final ObjectMapper JSON = JsonMapper.builder()
            .enable(JsonWriteFeature.ESCAPE_NON_ASCII)
            .disable(JsonWriteFeature.ESCAPE_FORWARD_SLASHES)
            .build();
    private static final JsonNodeFactory NODES = JsonNodeFactory.instance;
    private static final HexFormat HEX = HexFormat.of();

    private static final String DEFAULT = "default";
    private static final String COMPATIBLE = "compatible";
    private static final String SESSIONED = "sessioned";

    private static final String URL_1 = "http://10.0.0.1:8083/";
    private static final String URL_2 = "http://connect-2.connect.svc.cluster.local:8083/";
    private static final String LEADER = "connect-1-7b0e0b1c-3f59-4b8e-9a3c-2d1f6b5e8a90";

    private ConnectProtocolGolden() {
    }

    public static void main(String[] args) throws Exception {
        String mode = args.length == 1 ? args[0] : "";
        ObjectNode out;
        switch (mode) {
            case "generate":
                out = generate();
                break;
            case "read":
                out = read(JSON.readTree(System.in));
                break;
            case "write":
                out = write(JSON.readTree(System.in));
                break;
            default:
                System.err.println("usage: ConnectProtocolGolden generate|read|write (read and write take JSON on stdin)");
                System.exit(2);
                return;
        }
        String text = "generate".equals(mode)
                ? JSON.writerWithDefaultPrettyPrinter().writeValueAsString(out)
                : JSON.writeValueAsString(out);
        System.out.write((text + "\n").getBytes(StandardCharsets.UTF_8));
        System.out.flush();
    }

    // --- the golden cases ------------------------------------------------------------------------

    private static ObjectNode generate() {
        List<String> five = List.of("orders-sink", "payments-source", "inventory-cdc", "audit-log", "search-index");
        List<String> twenty = new ArrayList<>();
        for (int i = 1; i <= 20; i++)
            twenty.add("connector-" + i);
        List<String> unicode = List.of("connecteur-donn\u00e9es", "\u30b3\u30cd\u30af\u30bf", "\ud83d\ude80-sink");

        ArrayNode cases = NODES.arrayNode();
        // A worker's first JoinGroup: it has had no assignment (ExtendedAssignment.empty(): a null allocation).
        cases.add(metadata("metadata/default/first-join", DEFAULT, new ConnectProtocol.WorkerState(URL_1, -1)));
        cases.add(metadata("metadata/compatible/first-join", COMPATIBLE, new ExtendedWorkerState(URL_1, -1, null)));
        cases.add(metadata("metadata/sessioned/first-join", SESSIONED, new ExtendedWorkerState(URL_1, -1, null)));
        // A worker that has read the config topic to an offset; eager metadata never carries an allocation.
        cases.add(metadata("metadata/default/config-offset", DEFAULT,
                new ConnectProtocol.WorkerState(URL_2, 1_234_567_890_123L)));
        // A rejoining worker's metadata carries its last assignment, with what it runs now.
        cases.add(metadata("metadata/compatible/allocation", COMPATIBLE, new ExtendedWorkerState(URL_2, 17,
                extended(COMPATIBLE, ConnectProtocol.Assignment.NO_ERROR, LEADER, URL_1, 17,
                        List.of("orders-sink"), tasks("orders-sink", 0, 1, 2), List.of(), List.of(), 0))));
        cases.add(metadata("metadata/sessioned/allocation", SESSIONED, new ExtendedWorkerState(URL_2, 42,
                extended(SESSIONED, ConnectProtocol.Assignment.NO_ERROR, LEADER, URL_1, 42,
                        five, concat(tasks("orders-sink", 0, 1), tasks("audit-log", 3)), List.of(), List.of(), 0))));
        cases.add(metadata("metadata/sessioned/allocation-revoked-delay", SESSIONED, new ExtendedWorkerState(URL_2, 43,
                extended(SESSIONED, ConnectProtocol.Assignment.NO_ERROR, LEADER, URL_1, 43,
                        List.of("payments-source"), tasks("payments-source", 0),
                        List.of("inventory-cdc"), tasks("inventory-cdc", 1, 0), 298_765))));
        // The eager leader's assignment: everything the worker runs; connectors in HashSet order, then
        // tasks grouped by connector in order of first appearance.
        cases.add(assignment("assignment/default/several-connectors", DEFAULT,
                new ConnectProtocol.Assignment(ConnectProtocol.Assignment.NO_ERROR, LEADER, URL_1, 42, five,
                        concat(tasks("search-index", 0), tasks("orders-sink", 1, 0), tasks("zeta-sink", 4),
                                tasks("search-index", 2)))));
        cases.add(assignment("assignment/default/config-mismatch", DEFAULT,
                new ConnectProtocol.Assignment(ConnectProtocol.Assignment.CONFIG_MISMATCH, LEADER, URL_1, 44,
                        List.of(), List.of())));
        // The incremental cooperative leader's: what to start, what to stop first, when to rejoin.
        cases.add(assignment("assignment/compatible/revocations-delay", COMPATIBLE,
                extended(COMPATIBLE, ConnectProtocol.Assignment.NO_ERROR, LEADER, URL_1, 42,
                        List.of("orders-sink"), tasks("payments-source", 2),
                        List.of("search-index", "audit-log"), concat(tasks("search-index", 0, 1), tasks("audit-log", 0)),
                        300_000)));
        cases.add(assignment("assignment/compatible/tasks-without-connector", COMPATIBLE,
                extended(COMPATIBLE, ConnectProtocol.Assignment.NO_ERROR, LEADER, URL_1, 7, List.of(),
                        concat(tasks("b-sink", 0), tasks("a-source", 1), tasks("b-sink", 1)),
                        List.of(), concat(tasks("b-sink", 2), tasks("a-source", 0), tasks("b-sink", 3)), 0)));
        cases.add(assignment("assignment/compatible/config-mismatch", COMPATIBLE,
                extended(COMPATIBLE, ConnectProtocol.Assignment.CONFIG_MISMATCH, LEADER, URL_1, 44,
                        List.of(), List.of(), List.of(), List.of(), 0)));
        cases.add(assignment("assignment/sessioned/revocations-delay", SESSIONED,
                extended(SESSIONED, ConnectProtocol.Assignment.NO_ERROR, LEADER, URL_1, 42,
                        List.of("inventory-cdc", "audit-log"), concat(tasks("inventory-cdc", 0, 1), tasks("audit-log", 0)),
                        List.of("orders-sink"), tasks("orders-sink", 2), 12_345)));
        cases.add(assignment("assignment/sessioned/nothing", SESSIONED,
                extended(SESSIONED, ConnectProtocol.Assignment.NO_ERROR, LEADER, URL_1, 42,
                        List.of(), List.of(), List.of(), List.of(), 0)));
        cases.add(assignment("assignment/sessioned/config-mismatch", SESSIONED,
                extended(SESSIONED, ConnectProtocol.Assignment.CONFIG_MISMATCH, LEADER, URL_1, 44,
                        List.of(), List.of(), List.of(), List.of(), 0)));
        // Twenty connectors: HashSet's 32 buckets put them far from insertion order.
        List<ConnectorTaskId> manyTasks = new ArrayList<>();
        for (String c : twenty)
            manyTasks.addAll(tasks(c, 0));
        cases.add(assignment("assignment/sessioned/twenty-connectors", SESSIONED,
                extended(SESSIONED, ConnectProtocol.Assignment.NO_ERROR, LEADER, URL_1, 99,
                        twenty, manyTasks, List.of(), List.of(), 0)));
        // Non-ASCII names: UTF-8 on the wire, Java's UTF-16 String.hashCode for the HashSet order.
        cases.add(assignment("assignment/sessioned/unicode", SESSIONED,
                extended(SESSIONED, ConnectProtocol.Assignment.NO_ERROR, LEADER, URL_1, 5, unicode,
                        concat(tasks(unicode.get(2), 0), tasks(unicode.get(0), 0, 1)),
                        List.of(), tasks(unicode.get(1), 0), 0)));
        cases.add(assignment("assignment/default/unicode", DEFAULT,
                new ConnectProtocol.Assignment(ConnectProtocol.Assignment.NO_ERROR, LEADER, URL_1, 5, unicode,
                        tasks(unicode.get(1), 0))));

        ObjectNode out = NODES.objectNode();
        out.put("about", "Kafka Connect's classic-protocol member metadata and assignments as connect-runtime's "
                + "own serializers write them. Generated by tests/java/ConnectProtocolGolden.java; to regenerate: "
                + ".venv/bin/python tests/connect_java.py tests/java/ConnectProtocolGolden.java generate "
                + "> tests/golden/connect_protocol.json");
        out.put("connect_runtime", AppInfoParser.getVersion());
        out.set("cases", cases);
        return out;
    }

    private static ObjectNode metadata(String name, String protocol, ConnectProtocol.WorkerState state) {
        byte[] bytes = serializeMetadata(protocol, state);
        ObjectNode c = header(name, "metadata", protocol);
        c.set("input", metadataJson(state, !DEFAULT.equals(protocol)));
        c.put("hex", HEX.formatHex(bytes));
        c.set("read", readMetadata(bytes));
        return c;
    }

    private static ObjectNode assignment(String name, String protocol, ConnectProtocol.Assignment assignment) {
        byte[] bytes = serializeAssignment(protocol, assignment);
        ObjectNode c = header(name, "assignment", protocol);
        c.set("input", assignmentJson(assignment, !DEFAULT.equals(protocol), false));
        c.put("hex", HEX.formatHex(bytes));
        c.set("read", readAssignment(bytes));
        return c;
    }

    private static ObjectNode header(String name, String kind, String protocol) {
        ObjectNode c = NODES.objectNode();
        c.put("name", name);
        c.put("kind", kind);
        c.put("protocol", protocol);
        return c;
    }

    private static ExtendedAssignment extended(String protocol, short error, String leader, String leaderUrl,
                                               long offset, Collection<String> connectors,
                                               Collection<ConnectorTaskId> tasks, Collection<String> revokedConnectors,
                                               Collection<ConnectorTaskId> revokedTasks, int delay) {
        return new ExtendedAssignment(version(protocol), error, leader, leaderUrl, offset, new ArrayList<>(connectors),
                new ArrayList<>(tasks), new ArrayList<>(revokedConnectors), new ArrayList<>(revokedTasks), delay);
    }

    private static List<ConnectorTaskId> tasks(String connector, int... numbers) {
        List<ConnectorTaskId> out = new ArrayList<>();
        for (int n : numbers)
            out.add(new ConnectorTaskId(connector, n));
        return out;
    }

    @SafeVarargs
    private static <T> List<T> concat(List<T>... lists) {
        List<T> out = new ArrayList<>();
        for (List<T> l : lists)
            out.addAll(l);
        return out;
    }

    // --- Connect's serializers and deserializers ---------------------------------------------------

    private static short version(String protocol) {
        switch (protocol) {
            case DEFAULT:
                return ConnectProtocol.CONNECT_PROTOCOL_V0;
            case COMPATIBLE:
                return IncrementalCooperativeConnectProtocol.CONNECT_PROTOCOL_V1;
            case SESSIONED:
                return IncrementalCooperativeConnectProtocol.CONNECT_PROTOCOL_V2;
            default:
                throw new IllegalArgumentException("not a Connect protocol: " + protocol);
        }
    }

    private static byte[] serializeMetadata(String protocol, ConnectProtocol.WorkerState state) {
        ByteBuffer buffer = DEFAULT.equals(protocol)
                ? ConnectProtocol.serializeMetadata(state)
                : IncrementalCooperativeConnectProtocol.serializeMetadata((ExtendedWorkerState) state,
                        SESSIONED.equals(protocol));
        return bytes(buffer);
    }

    private static byte[] serializeAssignment(String protocol, ConnectProtocol.Assignment assignment) {
        ByteBuffer buffer = DEFAULT.equals(protocol)
                ? ConnectProtocol.serializeAssignment(assignment)
                : IncrementalCooperativeConnectProtocol.serializeAssignment((ExtendedAssignment) assignment,
                        SESSIONED.equals(protocol));
        return bytes(buffer);
    }

    private static byte[] bytes(ByteBuffer buffer) {
        byte[] out = new byte[buffer.remaining()];
        buffer.get(out);
        return out;
    }

    /** What the runtime reads: IncrementalCooperativeConnectProtocol reads every version. */
    private static JsonNode readMetadata(byte[] bytes) {
        try {
            ExtendedWorkerState state = IncrementalCooperativeConnectProtocol.deserializeMetadata(ByteBuffer.wrap(bytes));
            ObjectNode out = metadataJson(state, false);
            // A null allocation reads as the shared ExtendedAssignment.empty().
            ExtendedAssignment allocation = state.assignment();
            out.set("allocation", allocation == ExtendedAssignment.empty() ? NODES.nullNode()
                    : assignmentJson(allocation, true, true));
            return out;
        } catch (RuntimeException e) {
            return exception(e);
        }
    }

    private static JsonNode readMetadataV0(byte[] bytes) {
        try {
            return metadataJson(ConnectProtocol.deserializeMetadata(ByteBuffer.wrap(bytes)), false);
        } catch (RuntimeException e) {
            return exception(e);
        }
    }

    private static JsonNode readAssignment(byte[] bytes) {
        try {
            ExtendedAssignment a = IncrementalCooperativeConnectProtocol.deserializeAssignment(ByteBuffer.wrap(bytes));
            return assignmentJson(a, true, true);
        } catch (RuntimeException e) {
            return exception(e);
        }
    }

    private static JsonNode readAssignmentV0(byte[] bytes) {
        try {
            return assignmentJson(ConnectProtocol.deserializeAssignment(ByteBuffer.wrap(bytes)), false, false);
        } catch (RuntimeException e) {
            return exception(e);
        }
    }

    private static ObjectNode exception(RuntimeException e) {
        ObjectNode out = NODES.objectNode();
        out.put("exception", e.getClass().getSimpleName() + ": " + e.getMessage());
        return out;
    }

    // --- JSON ------------------------------------------------------------------------------------

    private static ObjectNode metadataJson(ConnectProtocol.WorkerState state, boolean withAllocation) {
        ObjectNode out = NODES.objectNode();
        out.put("url", state.url());
        out.put("config_offset", state.offset());
        if (withAllocation) {
            ExtendedAssignment allocation = ((ExtendedWorkerState) state).assignment();
            out.set("allocation", allocation == ExtendedAssignment.empty() ? NODES.nullNode()
                    : assignmentJson(allocation, true, false));
        }
        return out;
    }

    private static ObjectNode assignmentJson(ConnectProtocol.Assignment a, boolean extended, boolean withVersion) {
        ObjectNode out = NODES.objectNode();
        if (withVersion)
            out.put("version", ((ExtendedAssignment) a).version());
        out.put("error", a.error());
        out.put("leader", a.leader());
        out.put("leader_url", a.leaderUrl());
        out.put("config_offset", a.offset());
        out.set("assigned", itemsJson(a.connectors(), a.tasks()));
        if (extended) {
            ExtendedAssignment e = (ExtendedAssignment) a;
            out.set("revoked", itemsJson(e.revokedConnectors(), e.revokedTasks()));
            out.put("delay_ms", e.delay());
        }
        return out;
    }

    private static ObjectNode itemsJson(Collection<String> connectors, Collection<ConnectorTaskId> tasks) {
        ObjectNode out = NODES.objectNode();
        ArrayNode cs = out.putArray("connectors");
        connectors.forEach(cs::add);
        ArrayNode ts = out.putArray("tasks");
        for (ConnectorTaskId t : tasks)
            ts.addArray().add(t.connector()).add(t.task());
        return out;
    }

    private static ConnectProtocol.WorkerState metadataFrom(JsonNode m, String protocol) {
        String url = m.get("url").textValue();
        long offset = m.get("config_offset").longValue();
        if (DEFAULT.equals(protocol))
            return new ConnectProtocol.WorkerState(url, offset);
        JsonNode allocation = m.get("allocation");
        return new ExtendedWorkerState(url, offset, allocation == null || allocation.isNull() ? null
                : (ExtendedAssignment) assignmentFrom(allocation, protocol));
    }

    private static ConnectProtocol.Assignment assignmentFrom(JsonNode a, String protocol) {
        short error = (short) a.get("error").intValue();
        String leader = a.get("leader").textValue();
        String leaderUrl = a.get("leader_url").textValue();
        long offset = a.get("config_offset").longValue();
        JsonNode assigned = a.get("assigned");
        if (DEFAULT.equals(protocol))
            return new ConnectProtocol.Assignment(error, leader, leaderUrl, offset, connectorsFrom(assigned),
                    tasksFrom(assigned));
        JsonNode revoked = a.get("revoked");
        return new ExtendedAssignment(version(protocol), error, leader, leaderUrl, offset, connectorsFrom(assigned),
                tasksFrom(assigned), connectorsFrom(revoked), tasksFrom(revoked), a.get("delay_ms").intValue());
    }

    private static List<String> connectorsFrom(JsonNode items) {
        List<String> out = new ArrayList<>();
        items.get("connectors").forEach(c -> out.add(c.textValue()));
        return out;
    }

    private static List<ConnectorTaskId> tasksFrom(JsonNode items) {
        List<ConnectorTaskId> out = new ArrayList<>();
        items.get("tasks").forEach(t -> out.add(new ConnectorTaskId(t.get(0).textValue(), t.get(1).intValue())));
        return out;
    }

    // --- read and write ----------------------------------------------------------------------------

    private static ObjectNode read(JsonNode in) {
        ArrayNode cases = NODES.arrayNode();
        for (JsonNode c : in.get("cases")) {
            byte[] bytes = HEX.parseHex(c.get("hex").textValue());
            boolean isMetadata = "metadata".equals(c.get("kind").textValue());
            ObjectNode out = cases.addObject();
            out.put("name", c.get("name").textValue());
            out.set("read", isMetadata ? readMetadata(bytes) : readAssignment(bytes));
            out.set("read_v0", isMetadata ? readMetadataV0(bytes) : readAssignmentV0(bytes));
        }
        ObjectNode out = NODES.objectNode();
        out.set("cases", cases);
        return out;
    }

    private static ObjectNode write(JsonNode in) {
        ArrayNode cases = NODES.arrayNode();
        for (JsonNode c : in.get("cases")) {
            String protocol = c.get("protocol").textValue();
            JsonNode input = c.get("input");
            byte[] bytes = "metadata".equals(c.get("kind").textValue())
                    ? serializeMetadata(protocol, metadataFrom(input, protocol))
                    : serializeAssignment(protocol, assignmentFrom(input, protocol));
            ObjectNode out = cases.addObject();
            out.put("name", c.get("name").textValue());
            out.put("hex", HEX.formatHex(bytes));
        }
        ObjectNode out = NODES.objectNode();
        out.put("java", System.getProperty("java.specification.version"));  // HashSet's sizing changed in Java 19
        out.set("cases", cases);
        return out;
    }
}
