import com.fasterxml.jackson.databind.ObjectMapper;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.ExecutionException;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.ClassicGroupDescription;
import org.apache.kafka.clients.admin.GroupListing;
import org.apache.kafka.clients.admin.MemberDescription;

/**
 * Kafka's own Admin client (kafka-clients 4.3.1) on a group, for tests/test_connect_ops.py, which
 * points it at the gateway's bootstrap port:
 *
 *   GroupsAdmin list BOOTSTRAP             Admin.listGroups(): one JSON object per group
 *   GroupsAdmin describe BOOTSTRAP GROUP   Admin.describeClassicGroups: the group as JSON
 *   GroupsAdmin delete BOOTSTRAP GROUP     Admin.deleteConsumerGroups (the DeleteGroups RPC):
 *                                          {"deleted": true} or {"error": "<exception class>", "message": ...}
 *
 * An answer Kafka's client turns into an exception is printed, not thrown, so the test sees which
 * one (GroupNotEmptyException for NON_EMPTY_GROUP, say); anything else exits non-zero.
 */
public class GroupsAdmin {
    private static final ObjectMapper JSON = new ObjectMapper();

    public static void main(String[] args) throws Exception {
        Properties props = new Properties();
        props.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, args[1]);
        props.put(AdminClientConfig.CLIENT_ID_CONFIG, "groups-admin-test");
        props.put(AdminClientConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, "30000");
        props.put(AdminClientConfig.REQUEST_TIMEOUT_MS_CONFIG, "15000");
        try (Admin admin = Admin.create(props)) {
            switch (args[0]) {
                case "list" -> {
                    for (GroupListing g : admin.listGroups().all().get()) {
                        Map<String, Object> out = new LinkedHashMap<>();
                        out.put("group", g.groupId());
                        out.put("type", g.type().map(Object::toString).orElse(null));
                        out.put("protocol", g.protocol());
                        out.put("state", g.groupState().map(Object::toString).orElse(null));
                        System.out.println(JSON.writeValueAsString(out));
                    }
                }
                case "describe" -> {
                    ClassicGroupDescription d = admin.describeClassicGroups(List.of(args[2])).all().get().get(args[2]);
                    Map<String, Object> out = new LinkedHashMap<>();
                    out.put("group", d.groupId());
                    out.put("state", d.state().toString());
                    out.put("protocol", d.protocol());
                    out.put("protocolData", d.protocolData());
                    out.put("coordinator", d.coordinator() == null ? null : d.coordinator().id());
                    List<Map<String, Object>> members = new ArrayList<>();
                    for (MemberDescription m : d.members()) {
                        Map<String, Object> member = new LinkedHashMap<>();
                        member.put("memberId", m.consumerId());
                        member.put("clientId", m.clientId());
                        member.put("host", m.host());
                        members.add(member);
                    }
                    out.put("members", members);
                    System.out.println(JSON.writeValueAsString(out));
                }
                case "delete" -> {
                    Map<String, Object> out = new LinkedHashMap<>();
                    try {
                        admin.deleteConsumerGroups(List.of(args[2])).all().get();
                        out.put("deleted", true);
                    } catch (ExecutionException e) {
                        out.put("error", e.getCause().getClass().getSimpleName());
                        out.put("message", e.getCause().getMessage());
                    }
                    System.out.println(JSON.writeValueAsString(out));
                }
                default -> throw new IllegalArgumentException("list, describe or delete: " + args[0]);
            }
        }
    }
}
