/*
 * A test driver for tests/test_connect_leader_assignor.py: runs Kafka Connect's own leader-side
 * assignment (WorkerCoordinator.onLeaderElected, hence EagerAssignor for `default` and
 * IncrementalCooperativeAssignor for `compatible` and `sessioned`) across several rebalance rounds,
 * with a clock the test controls, so that its answers can be compared with the Python port in
 * coordinator/core/assignors/connect_leader.py.
 *
 * It lives in Connect's package because onLeaderElected is protected there; it needs only the
 * connect-runtime jars (no Mockito, no kafka-clients test jar).
 *
 * Protocol: one JSON object per line on stdin, one JSON object per line on stdout.
 *
 *   round:   {"coordinator": "w1#1",            which worker process leads; a new name is a new
 *                                                WorkerCoordinator, hence an assignor with no memory
 *             "max_delay_ms": 300000,          scheduled.rebalance.max.delay.ms of a new coordinator
 *             "now_ms": 0, "generation": 1, "last_completed_generation": -1,
 *             "protocol": "sessioned", "leader": "member-id",
 *             "config": {"offset": 3, "connectors": {"a": 2}},
 *             "fresh_config": null | {...},     what configFreshSnapshot() returns (default: config)
 *             "members": [{"id": "...", "metadata": "<base64>"}]}   in JoinGroup response order
 *   answer:  {"assignments": {"member-id": "<base64 of the SyncGroup assignment>"}}
 *
 *   backoff: {"backoff": {"max_delay_ms": 300000, "attempts": [1, 2, 3]}}
 *   answer:  {"backoff": [40, 1600, 64000]}     the assignor's consecutive revoking rebalances backoff
 *
 *   order:   {"hash_order": ["b", "a"]}
 *   answer:  {"hash_order": ["a", "b"]}          the iteration order of a new HashMap after these puts
 *
 *   Any failure answers {"error": "..."} and the driver goes on with the next line.
 */
package org.apache.kafka.connect.runtime.distributed;

import org.apache.kafka.clients.GroupRebalanceConfig;
import org.apache.kafka.common.message.JoinGroupResponseData.JoinGroupResponseMember;
import org.apache.kafka.common.metrics.Metrics;
import org.apache.kafka.common.utils.ExponentialBackoff;
import org.apache.kafka.common.utils.LogContext;
import org.apache.kafka.common.utils.Time;
import org.apache.kafka.connect.storage.ClusterConfigState;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.io.PrintWriter;
import java.io.StringWriter;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Base64;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import java.util.TreeMap;
import java.util.function.Supplier;

public final class AssignorDriver {

    /** A clock that moves only when the test says so. */
    static final class ManualTime implements Time {
        private long nowMs;

        @Override
        public long milliseconds() {
            return nowMs;
        }

        @Override
        public long nanoseconds() {
            return nowMs * 1_000_000L;
        }

        @Override
        public void sleep(long ms) {
            nowMs += ms;
        }

        @Override
        public void waitObject(Object obj, Supplier<Boolean> condition, long deadlineMs) {
            if (!condition.get()) {
                throw new IllegalStateException("the driver's clock does not wait");
            }
        }
    }

    /**
     * A real WorkerCoordinator (so that its own choice of assignor and its own assignor instances
     * run) that is never connected: the generation, the last completed generation and the config
     * topic are what the round says.
     */
    static final class DriverCoordinator extends WorkerCoordinator {
        int generation = -1;
        int lastCompleted = -1;
        ClusterConfigState fresh;

        DriverCoordinator(Time time, int maxDelay) {
            super(new GroupRebalanceConfig(10_000, 60_000, 3_000, "connect-cluster", Optional.empty(), null, 100L, 1_000L),
                    new LogContext("[driver] "), null, new Metrics(time), "connect", time, "http://driver:8083/",
                    null, null, ConnectProtocolCompatibility.SESSIONED, maxDelay);
        }

        @Override
        public int generationId() {
            return generation;
        }

        @Override
        public int lastCompletedGenerationId() {
            return lastCompleted;
        }

        @Override
        public String memberId() {
            return "driver";
        }

        @Override
        public ClusterConfigState configFreshSnapshot() {
            return fresh;
        }

        Map<String, ByteBuffer> lead(String leaderId, String protocol, List<JoinGroupResponseMember> members) {
            return onLeaderElected(leaderId, protocol, members, false);
        }
    }

    private static final ObjectMapper JSON = new ObjectMapper();

    private AssignorDriver() {
    }

    public static void main(String[] args) throws Exception {
        PrintStream out = new PrintStream(System.out, true, StandardCharsets.UTF_8);
        System.setOut(System.err);  // nothing but answers on stdout
        ManualTime time = new ManualTime();
        Map<String, DriverCoordinator> coordinators = new HashMap<>();
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        String line;
        while ((line = in.readLine()) != null) {
            if (line.isBlank()) {
                continue;
            }
            ObjectNode answer = JSON.createObjectNode();
            try {
                JsonNode request = JSON.readTree(line);
                if (request.has("backoff")) {
                    answer.set("backoff", backoff(request.get("backoff")));
                } else if (request.has("hash_order")) {
                    answer.set("hash_order", hashOrder(request.get("hash_order")));
                } else {
                    answer.set("assignments", round(request, time, coordinators));
                }
            } catch (Exception | AssertionError e) {
                StringWriter trace = new StringWriter();
                e.printStackTrace(new PrintWriter(trace));
                answer.put("error", trace.toString());
            }
            out.println(JSON.writeValueAsString(answer));
        }
    }

    private static ObjectNode round(JsonNode request, ManualTime time, Map<String, DriverCoordinator> coordinators) {
        time.nowMs = request.get("now_ms").asLong();
        int maxDelay = request.get("max_delay_ms").asInt();
        DriverCoordinator coordinator = coordinators.computeIfAbsent(
                request.get("coordinator").asText(), name -> new DriverCoordinator(time, maxDelay));
        coordinator.generation = request.get("generation").asInt();
        coordinator.lastCompleted = request.get("last_completed_generation").asInt();
        // WorkerCoordinator.metadata() takes the snapshot when the worker joins; the assignors read
        // configFreshSnapshot() only when that one is behind a member.
        ClusterConfigState snapshot = configState(request.get("config"));
        coordinator.configSnapshot(snapshot);
        JsonNode fresh = request.get("fresh_config");
        coordinator.fresh = fresh == null || fresh.isNull() ? snapshot : configState(fresh);

        List<JoinGroupResponseMember> members = new ArrayList<>();
        for (JsonNode member : request.get("members")) {
            members.add(new JoinGroupResponseMember()
                    .setMemberId(member.get("id").asText())
                    .setMetadata(Base64.getDecoder().decode(member.get("metadata").asText())));
        }
        Map<String, ByteBuffer> assignments =
                coordinator.lead(request.get("leader").asText(), request.get("protocol").asText(), members);

        ObjectNode result = JSON.createObjectNode();
        for (Map.Entry<String, ByteBuffer> entry : new TreeMap<>(assignments).entrySet()) {
            ByteBuffer buffer = entry.getValue().duplicate();
            byte[] bytes = new byte[buffer.remaining()];
            buffer.get(bytes);
            result.put(entry.getKey(), Base64.getEncoder().encodeToString(bytes));
        }
        return result;
    }

    /** A config topic snapshot: its offset, and each connector with its task count. */
    private static ClusterConfigState configState(JsonNode config) {
        Map<String, Integer> taskCounts = new HashMap<>();
        Map<String, Map<String, String>> connectorConfigs = new HashMap<>();
        for (Map.Entry<String, JsonNode> connector : config.get("connectors").properties()) {
            taskCounts.put(connector.getKey(), connector.getValue().asInt());
            connectorConfigs.put(connector.getKey(), Map.of());
        }
        return new ClusterConfigState(
                config.get("offset").asLong(), null, taskCounts, connectorConfigs, Map.of(), Map.of(), Map.of(),
                Map.of(), Map.of(), Set.of(), Set.of());
    }

    /** How IncrementalCooperativeAssignor visits members: the keys of a HashMap filled by put. */
    private static ArrayNode hashOrder(JsonNode keys) {
        Map<String, Boolean> map = new HashMap<>();
        for (JsonNode key : keys) {
            map.put(key.asText(), true);
        }
        ArrayNode result = JSON.createArrayNode();
        map.keySet().forEach(result::add);
        return result;
    }

    /** The backoff IncrementalCooperativeAssignor's constructor builds for successive revoking rebalances. */
    private static ArrayNode backoff(JsonNode request) {
        int maxDelay = request.get("max_delay_ms").asInt();
        ExponentialBackoff backoff = new ExponentialBackoff(maxDelay == 0 ? 0 : 1, 40, maxDelay, 0);
        ArrayNode result = JSON.createArrayNode();
        for (JsonNode attempts : request.get("attempts")) {
            result.add((int) backoff.backoff(attempts.asLong()));
        }
        return result;
    }
}
