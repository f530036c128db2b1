// Runs Kafka Connect's own single message transforms on records given as JSON lines.
//
// Run with Java 17's single-file source launcher, no build step:
//     java -cp <connect-api, connect-transforms, connect-json, debezium jars> SmtRunner.java
// One request per stdin line, one answer per stdout line, in order, until stdin closes:
//   request: {"config": {"transforms": "a", "transforms.a.type": "...", ...},
//             "topic": "t", "partition": 0, "offset": 0, "timestamp": 1700000000000 | null,
//             "key": {"schema": ..., "payload": ...} | null, "value": ... | null,
//             "headers": [{"key": "h", "value": {"schema": ..., "payload": ...} | null}, ...]}
//   answer:  {"topic": ..., "partition": ..., "timestamp": ..., "key": ..., "value": ...,
//             "headers": [...]}            (key/value/header values as JsonConverter writes them)
//            {"dropped": true}             (a transform returned null)
//            {"error": "<class>: <message>", "phase": "config" | "apply" | "output"}
//            ("output": the transforms ran, but JsonConverter cannot write what they made, as a
//            schemaless java.util.Date from TimestampConverter)
// Key, value and header values go through JsonConverter (schemas.enable=true,
// replace.null.with.default=false), so an answer is what Connect's converter would write.
// The chain is built as Connect's worker builds it: each transform is configured with its
// "transforms.<alias>." settings (prefix stripped), each predicate with its "predicates.<name>."
// settings, and a stage runs its transform when predicate == null || negate ^ predicate.test().

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.JsonNodeFactory;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.apache.kafka.common.record.TimestampType;
import org.apache.kafka.connect.data.SchemaAndValue;
import org.apache.kafka.connect.header.ConnectHeaders;
import org.apache.kafka.connect.header.Header;
import org.apache.kafka.connect.json.JsonConverter;
import org.apache.kafka.connect.sink.SinkRecord;
import org.apache.kafka.connect.transforms.Transformation;
import org.apache.kafka.connect.transforms.predicates.Predicate;

public class SmtRunner {
    private static final ObjectMapper MAPPER = new ObjectMapper();
    private static final JsonNodeFactory NODES = JsonNodeFactory.instance;

    /** A transform and the predicate that gates it, as Connect's TransformationStage runs them. */
    private record Stage(Transformation<SinkRecord> transform, Predicate<SinkRecord> predicate, boolean negate) {
        SinkRecord apply(SinkRecord record) {
            if (predicate == null || negate ^ predicate.test(record)) {
                return transform.apply(record);
            }
            return record;
        }

        void close() {
            transform.close();
            if (predicate != null) {
                predicate.close();
            }
        }
    }

    /** Thrown while the chain is configured, so the answer can say which phase failed. */
    private static final class ConfigPhase extends RuntimeException {
        ConfigPhase(Throwable cause) {
            super(cause);
        }
    }

    public static void main(String[] args) throws Exception {
        JsonConverter converter = new JsonConverter();
        Map<String, Object> settings = new HashMap<>();
        settings.put("schemas.enable", "true");
        settings.put("replace.null.with.default", "false");
        converter.configure(settings, false);
        PrintStream out = new PrintStream(System.out, false, StandardCharsets.UTF_8);
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        String line;
        while ((line = in.readLine()) != null) {
            if (line.isBlank()) {
                continue;
            }
            out.println(MAPPER.writeValueAsString(answer(converter, line)));
            out.flush();
        }
    }

    private static ObjectNode answer(JsonConverter converter, String line) {
        List<Stage> stages = new ArrayList<>();
        try {
            JsonNode request = MAPPER.readTree(line);
            stages = chain(stringMap(request.get("config")));
            SinkRecord record = toRecord(converter, request);
            for (Stage stage : stages) {
                record = stage.apply(record);
                if (record == null) {
                    ObjectNode dropped = NODES.objectNode();
                    dropped.put("dropped", true);
                    return dropped;
                }
            }
            try {
                return fromRecord(converter, record);
            } catch (Throwable e) {
                return error(e, "output");
            }
        } catch (ConfigPhase e) {
            return error(e.getCause(), "config");
        } catch (Throwable e) {
            return error(e, "apply");
        } finally {
            for (Stage stage : stages) {
                stage.close();
            }
        }
    }

    private static ObjectNode error(Throwable e, String phase) {
        ObjectNode node = NODES.objectNode();
        node.put("error", e.getClass().getName() + ": " + e.getMessage());
        node.put("phase", phase);
        return node;
    }

    private static Map<String, String> stringMap(JsonNode node) {
        Map<String, String> map = new LinkedHashMap<>();
        if (node != null) {
            Iterator<Map.Entry<String, JsonNode>> fields = node.fields();
            while (fields.hasNext()) {
                Map.Entry<String, JsonNode> field = fields.next();
                map.put(field.getKey(), field.getValue().asText());
            }
        }
        return map;
    }

    /** The settings under {@code prefix}, the prefix stripped (Connect's originalsWithPrefix). */
    private static Map<String, String> withPrefix(Map<String, String> config, String prefix) {
        Map<String, String> found = new HashMap<>();
        for (Map.Entry<String, String> entry : config.entrySet()) {
            if (entry.getKey().startsWith(prefix)) {
                found.put(entry.getKey().substring(prefix.length()), entry.getValue());
            }
        }
        return found;
    }

    private static List<String> aliases(String list) {
        List<String> names = new ArrayList<>();
        if (list != null) {
            for (String name : list.split(",")) {
                if (!name.isBlank()) {
                    names.add(name.trim());
                }
            }
        }
        return names;
    }

    @SuppressWarnings("unchecked")
    private static <T> T instance(String className) throws ReflectiveOperationException {
        return (T) Class.forName(className).getDeclaredConstructor().newInstance();
    }

    private static List<Stage> chain(Map<String, String> config) {
        List<Stage> stages = new ArrayList<>();
        try {
            for (String alias : aliases(config.get("transforms"))) {
                Map<String, String> own = withPrefix(config, "transforms." + alias + ".");
                Transformation<SinkRecord> transform = instance(own.get("type"));
                transform.configure(own);
                Predicate<SinkRecord> predicate = null;
                String predicateName = own.get("predicate");
                if (predicateName != null && !predicateName.isEmpty()) {
                    Map<String, String> predicateConfig = withPrefix(config, "predicates." + predicateName + ".");
                    predicate = instance(predicateConfig.get("type"));
                    predicate.configure(predicateConfig);
                }
                stages.add(new Stage(transform, predicate, Boolean.parseBoolean(own.getOrDefault("negate", "false"))));
            }
            return stages;
        } catch (Throwable e) {
            for (Stage stage : stages) {
                stage.close();
            }
            throw new ConfigPhase(e);
        }
    }

    private static SchemaAndValue toConnect(JsonConverter converter, String topic, JsonNode envelope) throws Exception {
        if (envelope == null || envelope.isNull()) {
            return SchemaAndValue.NULL;
        }
        return converter.toConnectData(topic, MAPPER.writeValueAsBytes(envelope));
    }

    private static JsonNode fromConnect(JsonConverter converter, String topic, org.apache.kafka.connect.data.Schema schema, Object value) throws Exception {
        byte[] bytes = converter.fromConnectData(topic, schema, value);
        return bytes == null ? NODES.nullNode() : MAPPER.readTree(bytes);
    }

    private static SinkRecord toRecord(JsonConverter converter, JsonNode request) throws Exception {
        String topic = request.get("topic").asText();
        int partition = request.path("partition").asInt(0);
        long offset = request.path("offset").asLong(0);
        JsonNode ts = request.get("timestamp");
        Long timestamp = ts == null || ts.isNull() ? null : ts.asLong();
        TimestampType type = timestamp == null ? TimestampType.NO_TIMESTAMP_TYPE : TimestampType.CREATE_TIME;
        SchemaAndValue key = toConnect(converter, topic, request.get("key"));
        SchemaAndValue value = toConnect(converter, topic, request.get("value"));
        ConnectHeaders headers = new ConnectHeaders();
        for (JsonNode header : request.path("headers")) {
            SchemaAndValue h = toConnect(converter, topic, header.get("value"));
            headers.add(header.get("key").asText(), h);
        }
        return new SinkRecord(topic, partition, key.schema(), key.value(), value.schema(), value.value(),
                offset, timestamp, type, headers);
    }

    private static ObjectNode fromRecord(JsonConverter converter, SinkRecord record) throws Exception {
        ObjectNode node = NODES.objectNode();
        node.put("topic", record.topic());
        if (record.kafkaPartition() == null) {
            node.putNull("partition");
        } else {
            node.put("partition", record.kafkaPartition());
        }
        if (record.timestamp() == null) {
            node.putNull("timestamp");
        } else {
            node.put("timestamp", record.timestamp());
        }
        node.set("key", fromConnect(converter, record.topic(), record.keySchema(), record.key()));
        node.set("value", fromConnect(converter, record.topic(), record.valueSchema(), record.value()));
        ArrayNode headers = node.putArray("headers");
        for (Header header : record.headers()) {
            ObjectNode h = headers.addObject();
            h.put("key", header.key());
            h.set("value", fromConnect(converter, record.topic(), header.schema(), header.value()));
        }
        return node;
    }
}
