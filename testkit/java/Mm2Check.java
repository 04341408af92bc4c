// Cross-checks Strait's MirrorMaker 2 records and topics against Apache Kafka's own MM2 classes
// (kafka-clients, connect-mirror, connect-mirror-client). Compiled and run by
// crates/testkit/src/jvm.rs; every result is one fact per line on stdout, everything else
// (logging, diagnostics) goes to stderr.
//
// Usage:
//   Mm2Check golden
//       heartbeat.key|heartbeat.value|checkpoint.key|checkpoint.value|offsetsync.key|
//       offsetsync.value <lower-case hex>, serialized by MM2 for the golden values of
//       /work/shared/mm2-formats.md.
//   Mm2Check decode <bootstrap> <topic> <offsetsync|checkpoint|heartbeat>
//       Reads every partition of <topic> from its beginning to the end offsets taken at start and
//       decodes each record with MM2's deserializeRecord:
//         ok <toString of the decoded object>
//         rejected <offset> <exception class>: <message>
//       then `missing <topic>` if the topic does not exist, and always last
//         total <n> ok <n> rejected <n>
//   Mm2Check translate <bootstrap> <source-alias> <group>
//       RemoteClusterUtils.translateOffsets(..., 30 s):
//         offset <topic> <partition> <offset>     (sorted by topic, then partition)
//         total <n>
//       If the checkpoints topic (<source-alias>.checkpoints.internal under the default policy)
//       does not exist, prints `missing <topic>` and `total 0` instead of calling MM2, which
//       would wait 60 s (default.api.timeout.ms) and throw a TimeoutException.
//   Mm2Check client <bootstrap>
//       MirrorClient: `upstream <alias>`, `heartbeats <topic>`, `checkpoints <topic>` (each sorted).
//   Mm2Check produce <bootstrap> <topic> <partition> <timestamp-ms> <value>
//       Kafka's Java producer writes one record with that CreateTime (0 included, which librdkafka
//       cannot send): `produced <offset>`.
//   Mm2Check producers <bootstrap> <topic>
//       Admin.describeProducers over every partition of <topic>: the producers with state on the
//       broker (each idempotent or transactional producer that wrote there), one line each,
//         producer <partition> <producer-id>      (sorted by partition, then id)
//       then `total <n>` (lines printed).
// Exit status 0 on success; 2 on a usage error; 1 on any other failure, with
// `error <exception class>: <message>` on stderr.

import java.io.FileDescriptor;
import java.io.FileOutputStream;
import java.io.PrintStream;
import java.lang.reflect.Method;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeSet;
import java.util.concurrent.TimeUnit;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.common.PartitionInfo;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.connect.mirror.Checkpoint;
import org.apache.kafka.connect.mirror.Heartbeat;
import org.apache.kafka.connect.mirror.MirrorClient;
import org.apache.kafka.connect.mirror.OffsetSync;
import org.apache.kafka.connect.mirror.RemoteClusterUtils;

public class Mm2Check {
    /** The real stdout; System.out is pointed at stderr so stray console logging cannot mix in. */
    private static PrintStream out;

    /** How long `decode` may take to read a topic to its end offsets. */
    private static final Duration READ_TIMEOUT = Duration.ofSeconds(60);

    private static final String USAGE = "usage: Mm2Check golden"
            + " | decode <bootstrap> <topic> <offsetsync|checkpoint|heartbeat>"
            + " | translate <bootstrap> <source-alias> <group>"
            + " | client <bootstrap>"
            + " | produce <bootstrap> <topic> <partition> <timestamp-ms> <value>"
            + " | producers <bootstrap> <topic>";

    public static void main(String[] args) {
        out = new PrintStream(new FileOutputStream(FileDescriptor.out), false, StandardCharsets.UTF_8);
        System.setOut(System.err);
        if (System.getProperty("log4j2.level") == null) {
            System.setProperty("log4j2.level", "WARN");
        }
        int status;
        try {
            status = run(args);
        } catch (Throwable e) {
            out.flush();
            System.err.println("error " + describe(e));
            status = 1;
        }
        out.flush();
        System.exit(status);
    }

    private static int run(String[] args) throws Exception {
        String cmd = args.length > 0 ? args[0] : "";
        if (cmd.equals("golden") && args.length == 1) {
            golden();
        } else if (cmd.equals("decode") && args.length == 4) {
            decode(args[1], args[2], args[3]);
        } else if (cmd.equals("translate") && args.length == 4) {
            translate(args[1], args[2], args[3]);
        } else if (cmd.equals("client") && args.length == 2) {
            client(args[1]);
        } else if (cmd.equals("producers") && args.length == 3) {
            producers(args[1], args[2]);
        } else if (cmd.equals("produce") && args.length == 6) {
            produce(args[1], args[2], Integer.parseInt(args[3]), Long.parseLong(args[4]), args[5]);
        } else {
            System.err.println(USAGE);
            return 2;
        }
        return 0;
    }

    // ---- producers ----------------------------------------------------------------------------

    private static void producers(String bootstrap, String topic) throws Exception {
        Map<String, Object> config = new HashMap<>();
        config.put("bootstrap.servers", bootstrap);
        try (Admin admin = Admin.create(config)) {
            var description = admin.describeTopics(List.of(topic)).allTopicNames().get(30, TimeUnit.SECONDS).get(topic);
            List<TopicPartition> partitions = new ArrayList<>();
            description.partitions().forEach(p -> partitions.add(new TopicPartition(topic, p.partition())));
            var states = admin.describeProducers(partitions).all().get(30, TimeUnit.SECONDS);
            int total = 0;
            for (TopicPartition tp : partitions) {
                TreeSet<Long> ids = new TreeSet<>();
                states.get(tp).activeProducers().forEach(s -> ids.add(s.producerId()));
                for (long id : ids) {
                    out.println("producer " + tp.partition() + " " + id);
                    total++;
                }
            }
            out.println("total " + total);
        }
    }

    // ---- produce ------------------------------------------------------------------------------

    private static void produce(String bootstrap, String topic, int partition, long timestamp, String value)
            throws Exception {
        Map<String, Object> config = new HashMap<>();
        config.put(org.apache.kafka.clients.producer.ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        try (var producer = new org.apache.kafka.clients.producer.KafkaProducer<byte[], byte[]>(config,
                new org.apache.kafka.common.serialization.ByteArraySerializer(),
                new org.apache.kafka.common.serialization.ByteArraySerializer())) {
            var record = new org.apache.kafka.clients.producer.ProducerRecord<byte[], byte[]>(
                    topic, partition, timestamp, null, value.getBytes(StandardCharsets.UTF_8));
            out.println("produced " + producer.send(record).get().offset());
        }
    }

    // ---- golden -------------------------------------------------------------------------------

    private static void golden() throws Exception {
        Heartbeat hb = new Heartbeat("us-east", "eu-west", 100L);
        TopicPartition tp = new TopicPartition("orders", 7);
        Checkpoint cp = new Checkpoint("analytics", tp, 1000L, 742L, "");
        OffsetSync os = new OffsetSync(tp, 1000L, 742L);
        emit("heartbeat", hb);
        emit("checkpoint", cp);
        emit("offsetsync", os);
    }

    /** Prints `<name>.key` and `<name>.value` from MM2's package-private recordKey/recordValue. */
    private static void emit(String name, Object record) throws Exception {
        out.println(name + ".key " + hex(call(record, "recordKey")));
        out.println(name + ".value " + hex(call(record, "recordValue")));
    }

    private static byte[] call(Object target, String method) throws Exception {
        Method m = target.getClass().getDeclaredMethod(method);
        m.setAccessible(true);
        return (byte[]) m.invoke(target);
    }

    private static String hex(byte[] bytes) {
        StringBuilder sb = new StringBuilder(bytes.length * 2);
        for (byte b : bytes) {
            sb.append(Character.forDigit((b >> 4) & 0xf, 16)).append(Character.forDigit(b & 0xf, 16));
        }
        return sb.toString();
    }

    // ---- decode -------------------------------------------------------------------------------

    private static void decode(String bootstrap, String topic, String kind) {
        if (!kind.equals("offsetsync") && !kind.equals("checkpoint") && !kind.equals("heartbeat")) {
            throw new IllegalArgumentException("unknown kind '" + kind + "'; expected offsetsync, checkpoint or heartbeat");
        }
        Map<String, Object> props = new HashMap<>();
        props.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        props.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, false);
        props.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        props.put(ConsumerConfig.CLIENT_ID_CONFIG, "mm2check-decode");
        long total = 0, ok = 0, rejected = 0;
        try (KafkaConsumer<byte[], byte[]> consumer =
                new KafkaConsumer<>(props, new ByteArrayDeserializer(), new ByteArrayDeserializer())) {
            if (!consumer.listTopics(READ_TIMEOUT).containsKey(topic)) {
                out.println("missing " + topic);
                out.println("total 0 ok 0 rejected 0");
                return;
            }
            List<TopicPartition> partitions = new ArrayList<>();
            for (PartitionInfo p : consumer.partitionsFor(topic, READ_TIMEOUT)) {
                partitions.add(new TopicPartition(topic, p.partition()));
            }
            partitions.sort(Comparator.comparingInt(TopicPartition::partition));
            consumer.assign(partitions);
            consumer.seekToBeginning(partitions);
            Map<TopicPartition, Long> end = consumer.endOffsets(partitions, READ_TIMEOUT);
            long deadline = System.nanoTime() + READ_TIMEOUT.toNanos();
            while (!reachedEnd(consumer, end)) {
                if (System.nanoTime() > deadline) {
                    throw new IllegalStateException("could not read " + topic + " to its end offsets " + end
                            + " within " + READ_TIMEOUT.getSeconds() + " s");
                }
                for (ConsumerRecord<byte[], byte[]> r : consumer.poll(Duration.ofMillis(500))) {
                    Long stop = end.get(new TopicPartition(r.topic(), r.partition()));
                    if (stop == null || r.offset() >= stop) {
                        continue; // appended after we started: not part of this snapshot
                    }
                    total++;
                    try {
                        out.println("ok " + oneLine(String.valueOf(deserialize(kind, r))));
                        ok++;
                    } catch (Exception | AssertionError e) { // AssertionError: version check under -ea
                        out.println("rejected " + r.offset() + " " + describe(e));
                        rejected++;
                    }
                }
            }
        }
        out.println("total " + total + " ok " + ok + " rejected " + rejected);
    }

    private static Object deserialize(String kind, ConsumerRecord<byte[], byte[]> r) {
        switch (kind) {
            case "offsetsync": return OffsetSync.deserializeRecord(r);
            case "checkpoint": return Checkpoint.deserializeRecord(r);
            default: return Heartbeat.deserializeRecord(r);
        }
    }

    private static boolean reachedEnd(KafkaConsumer<byte[], byte[]> consumer, Map<TopicPartition, Long> end) {
        for (Map.Entry<TopicPartition, Long> e : end.entrySet()) {
            if (consumer.position(e.getKey(), READ_TIMEOUT) < e.getValue()) {
                return false;
            }
        }
        return true;
    }

    // ---- translate ----------------------------------------------------------------------------

    private static void translate(String bootstrap, String sourceAlias, String group) throws Exception {
        Map<String, Object> props = new HashMap<>();
        props.put("bootstrap.servers", bootstrap);
        // Without this check MM2's consumer waits for the missing topic until
        // default.api.timeout.ms (60 s, not the 30 s given) and throws a TimeoutException.
        String checkpoints;
        Set<String> topics;
        try (MirrorClient client = new MirrorClient(props)) {
            checkpoints = client.replicationPolicy().checkpointsTopic(sourceAlias);
        }
        try (Admin admin = Admin.create(props)) {
            topics = admin.listTopics().names().get(60, TimeUnit.SECONDS);
        }
        if (!topics.contains(checkpoints)) {
            out.println("missing " + checkpoints);
            out.println("total 0");
            return;
        }
        Map<TopicPartition, OffsetAndMetadata> offsets =
                RemoteClusterUtils.translateOffsets(props, sourceAlias, group, Duration.ofSeconds(30));
        List<Map.Entry<TopicPartition, OffsetAndMetadata>> entries = new ArrayList<>(offsets.entrySet());
        entries.sort(Comparator.comparing((Map.Entry<TopicPartition, OffsetAndMetadata> e) -> e.getKey().topic())
                .thenComparingInt(e -> e.getKey().partition()));
        for (Map.Entry<TopicPartition, OffsetAndMetadata> e : entries) {
            out.println("offset " + e.getKey().topic() + " " + e.getKey().partition() + " " + e.getValue().offset());
        }
        out.println("total " + entries.size());
    }

    // ---- client -------------------------------------------------------------------------------

    private static void client(String bootstrap) throws Exception {
        Map<String, Object> props = new HashMap<>();
        props.put("bootstrap.servers", bootstrap);
        try (MirrorClient client = new MirrorClient(props)) {
            for (String alias : new TreeSet<>(client.upstreamClusters())) {
                out.println("upstream " + alias);
            }
            for (String topic : new TreeSet<>(client.heartbeatTopics())) {
                out.println("heartbeats " + topic);
            }
            for (String topic : new TreeSet<>(client.checkpointTopics())) {
                out.println("checkpoints " + topic);
            }
        }
    }

    // ---- helpers ------------------------------------------------------------------------------

    private static String describe(Throwable e) {
        Throwable t = e;
        if (t instanceof java.lang.reflect.InvocationTargetException && t.getCause() != null) {
            t = t.getCause();
        }
        return oneLine(t.getClass().getName() + ": " + t.getMessage());
    }

    private static String oneLine(String s) {
        return s.replace('\r', ' ').replace('\n', ' ');
    }
}
