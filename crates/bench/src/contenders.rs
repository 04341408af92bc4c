//! The replicators under test and how each is started against the benchmark's two clusters.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// One replicator configuration.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Contender {
    /// `strait run`, release build, the record path (`copy = "records"`), otherwise default
    /// settings (at-least-once).
    Strait,
    /// `strait run` with no setting but its clusters and topics: what a new user's flow does
    /// (`copy = "auto"`, which takes batches here; at-least-once; `compression = "auto"`).
    StraitDefault,
    /// `strait run` with `copy = "records"` and `delivery = "exactly_once"`, otherwise default
    /// settings.
    StraitEos,
    /// `strait run` with `copy = "records"` and `compression = "lz4"` (issue 43): the record
    /// path's batches compressed, as across a long or billed link.
    StraitLz4,
    /// `strait run` with `copy = "batches"` (issue 27): the source's record batches forwarded as
    /// they are, otherwise default settings.
    StraitBatches,
    /// `strait run` with `copy = "batches"` and `delivery = "exactly_once"`: batches, their
    /// offset syncs and positions in one transaction per commit.
    StraitBatchesEos,
    /// MirrorMaker 2 dedicated mode with defaults and `tasks.max=2`.
    Mm2Default,
    /// MirrorMaker 2 tuned as the Kafka docs and vendor guides suggest.
    Mm2Tuned,
    /// [`Contender::Mm2Tuned`] with `producer.compression.type = lz4`, as a careful MM2 user sets
    /// across a WAN.
    Mm2TunedLz4,
    /// MirrorMaker 2 dedicated mode, defaults with `tasks.max=2`, exactly-once source support
    /// (KIP-618) with the internal REST server (KIP-710) it needs.
    Mm2Eos,
    /// `raw-pipe`: consume → produce, nothing else.
    Raw,
    /// `raw-pipe --headers` with Strait's client settings ([`as_strait`]): the same pipe asking of
    /// librdkafka what Strait asks, each record's headers read and written on, and a header the
    /// size of its loop guard's added. What the client library costs.
    RawHeader,
    /// `batch-pipe`: fetched record batches produced as they are, still compressed
    /// (`strait-wire`, issue 27), nothing else: the batch path's ceiling.
    BatchPipe,
}

impl Contender {
    /// Every contender, in run order (what `--only` picks from).
    pub const ALL: [Contender; 13] = [
        Contender::Strait,
        Contender::StraitDefault,
        Contender::StraitEos,
        Contender::StraitLz4,
        Contender::StraitBatches,
        Contender::StraitBatchesEos,
        Contender::Mm2Default,
        Contender::Mm2Tuned,
        Contender::Mm2TunedLz4,
        Contender::Mm2Eos,
        Contender::Raw,
        Contender::RawHeader,
        Contender::BatchPipe,
    ];

    /// The loopback catch-ups' contenders, in run order, when `--only` names none.
    pub const LOOPBACK: [Contender; 11] = [
        Contender::Strait,
        Contender::StraitDefault,
        Contender::StraitEos,
        Contender::StraitBatches,
        Contender::StraitBatchesEos,
        Contender::Mm2Default,
        Contender::Mm2Tuned,
        Contender::Mm2Eos,
        Contender::Raw,
        Contender::RawHeader,
        Contender::BatchPipe,
    ];

    /// Short name for tables.
    pub fn name(self) -> &'static str {
        match self {
            Contender::Strait => "strait",
            Contender::StraitDefault => "strait-default",
            Contender::StraitEos => "strait-eos",
            Contender::StraitLz4 => "strait-lz4",
            Contender::StraitBatches => "strait-batches",
            Contender::StraitBatchesEos => "strait-batches-eos",
            Contender::Mm2Default => "mm2-default",
            Contender::Mm2Tuned => "mm2-tuned",
            Contender::Mm2TunedLz4 => "mm2-tuned-lz4",
            Contender::Mm2Eos => "mm2-eos",
            Contender::Raw => "raw-pipe",
            Contender::RawHeader => "raw-pipe+header",
            Contender::BatchPipe => "batch-pipe",
        }
    }

    /// Target topic name for source `topic` in run `tag` (each run writes fresh topics).
    pub fn target_topic(self, tag: &str, topic: &str) -> String {
        match self {
            Contender::Raw | Contender::RawHeader => format!("r{tag}.{topic}"),
            Contender::BatchPipe => format!("b{tag}.{topic}"),
            _ => format!("s{tag}.{topic}"),
        }
    }
}

/// Paths the contenders need.
pub struct Env {
    /// `target/release`.
    pub bin: PathBuf,
    /// Scratch folder for configs and logs.
    pub work: PathBuf,
}

/// A running contender (its output goes to `out.log` in its run folder, `mm2.log` for MirrorMaker
/// 2); stopped on drop.
pub struct Running {
    /// The replicator process (for CPU and RSS).
    pub child: Child,
}

/// How long a contender may take to stop after SIGTERM before it is killed.
const STOP_TIMEOUT: Duration = Duration::from_secs(15);

impl Drop for Running {
    /// SIGTERM, then SIGKILL after [`STOP_TIMEOUT`]: a contender killed with a transaction open
    /// on the target (Strait's positions, MM2's offsets) holds the next one's `read_committed`
    /// start-up reads back until that transaction times out (a 60 s start seen).
    fn drop(&mut self) {
        if let Ok(pid) = i32::try_from(self.child.id()) {
            // SAFETY: a signal to our own child process, which `wait` below reaps.
            unsafe { libc::kill(pid, libc::SIGTERM) };
        }
        let deadline = Instant::now() + STOP_TIMEOUT;
        while Instant::now() < deadline && matches!(self.child.try_wait(), Ok(None)) {
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn log_file(dir: &Path) -> (Stdio, Stdio) {
    let f = fs::File::create(dir.join("out.log")).expect("log file");
    (Stdio::from(f.try_clone().expect("log file")), Stdio::from(f))
}

/// `strait run` of the flow `s<tag>->t<tag>` (source and target bootstrap servers) over `topics`, its config (with `flow_extra` TOML
/// lines in the flow) written to `dir`, logging at `log`.
fn strait_command(
    env: &Env,
    dir: &Path,
    tag: &str,
    (source, target): (&str, &str),
    topics: &[String],
    flow_extra: &str,
    log: &str,
) -> Command {
    let list: Vec<String> = topics.iter().map(|t| format!("\"{t}\"")).collect();
    let config = format!(
        "[[clusters]]\nalias = \"s{tag}\"\nbootstrap_servers = \"{source}\"\n\n[[clusters]]\nalias = \"t{tag}\"\nbootstrap_servers = \"{target}\"\n\n[[flows]]\nsource = \"s{tag}\"\ntarget = \"t{tag}\"\ntopics = [{}]\n{flow_extra}",
        list.join(", ")
    );
    fs::write(dir.join("strait.toml"), config).expect("config");
    let mut command = Command::new(env.bin.join("strait"));
    // `STRAIT_BENCH_LOG` overrides the log filter, to see where a run spends its time.
    let log = std::env::var("STRAIT_BENCH_LOG").unwrap_or_else(|_| log.to_string());
    command.args(["run", "--config"]).arg(dir.join("strait.toml")).env("RUST_LOG", log);
    command
}

/// Instance `instance` of Strait copying records with `[flows.scale_out]` on (`slots` slots) and `flow_extra`
/// (say, a delivery mode), run `tag`; its log (with the slot group's info lines) is `out.log` in
/// its run folder, returned with it.
#[allow(clippy::too_many_arguments)]
pub fn launch_scaled_strait(
    env: &Env,
    tag: &str,
    instance: usize,
    slots: u32,
    source: &str,
    target: &str,
    topics: &[String],
    flow_extra: &str,
) -> (Running, PathBuf) {
    let dir = env.work.join(format!("strait-scale-{tag}-{instance}"));
    let _ = fs::remove_dir_all(&dir);
    fs::create_dir_all(&dir).expect("run dir");
    let (out, err) = log_file(&dir);
    // The record path, as the single flow it is weighed against ([`Contender::Strait`]).
    let extra = format!("copy = \"records\"\n{flow_extra}[flows.scale_out]\nenabled = true\nslots = {slots}\n");
    let child = strait_command(env, &dir, tag, (source, target), topics, &extra, "warn,strait::flow=info")
        .stdout(out)
        .stderr(err)
        .spawn()
        .expect("start strait");
    (Running { child }, dir.join("out.log"))
}

/// `strait run` (the record path, at-least-once) of `topics` from `source` to `target`, run `tag`,
/// with `extra` TOML lines after its flow (other tables, such as `[metrics]`, may follow there).
pub fn launch_strait(env: &Env, tag: &str, (source, target): (&str, &str), topics: &[String], extra: &str) -> Running {
    let dir = env.work.join(format!("strait-{tag}"));
    let _ = fs::remove_dir_all(&dir);
    fs::create_dir_all(&dir).expect("run dir");
    let (out, err) = log_file(&dir);
    // Kept to the record path, so its figures compare with earlier builds'.
    let extra = format!("copy = \"records\"\n{extra}");
    let child = strait_command(env, &dir, tag, (source, target), topics, &extra, "warn")
        .stdout(out)
        .stderr(err)
        .spawn()
        .expect("start strait");
    Running { child }
}

/// Starts `contender` replicating `topics` from `source` to `target`, run `tag`.
pub fn launch(contender: Contender, env: &Env, tag: &str, source: &str, target: &str, topics: &[String]) -> Running {
    let dir = env.work.join(format!("{}-{tag}", contender.name()));
    let _ = fs::remove_dir_all(&dir);
    fs::create_dir_all(&dir).expect("run dir");
    let (out, err) = log_file(&dir);
    let child = match contender {
        Contender::Strait
        | Contender::StraitDefault
        | Contender::StraitEos
        | Contender::StraitLz4
        | Contender::StraitBatches
        | Contender::StraitBatchesEos => {
            let extra = match contender {
                Contender::StraitDefault => "",
                Contender::StraitEos => "copy = \"records\"\ndelivery = \"exactly_once\"\n",
                Contender::StraitLz4 => "copy = \"records\"\ncompression = \"lz4\"\n",
                Contender::StraitBatches => "copy = \"batches\"\n",
                Contender::StraitBatchesEos => "copy = \"batches\"\ndelivery = \"exactly_once\"\n",
                _ => "copy = \"records\"\ndelivery = \"at_least_once\"\n",
            };
            strait_command(env, &dir, tag, (source, target), topics, extra, "warn")
                .stdout(out)
                .stderr(err)
                .spawn()
                .expect("start strait")
        }
        Contender::Mm2Default | Contender::Mm2Tuned | Contender::Mm2TunedLz4 | Contender::Mm2Eos => {
            let mut props = format!(
                "clusters = s{tag}, t{tag}\n\
                 s{tag}.bootstrap.servers = {source}\n\
                 t{tag}.bootstrap.servers = {target}\n\
                 s{tag}->t{tag}.enabled = true\n\
                 t{tag}->s{tag}.enabled = false\n\
                 s{tag}->t{tag}.topics = {}\n\
                 groups.exclude = .*\n\
                 replication.factor = 1\n\
                 checkpoints.topic.replication.factor = 1\n\
                 heartbeats.topic.replication.factor = 1\n\
                 offset-syncs.topic.replication.factor = 1\n\
                 offset.storage.replication.factor = 1\n\
                 status.storage.replication.factor = 1\n\
                 config.storage.replication.factor = 1\n\
                 sync.topic.acls.enabled = false\n",
                topics.join("|")
            );
            if contender == Contender::Mm2Default {
                props.push_str("tasks.max = 2\n");
            } else if contender == Contender::Mm2Eos {
                props.push_str(&format!(
                    "tasks.max = 2\n\
                     t{tag}.exactly.once.source.support = enabled\n\
                     dedicated.mode.enable.internal.rest = true\n\
                     listeners = http://127.0.0.1:0\n"
                ));
            } else {
                // Kafka docs / vendor tuning guides: more tasks, larger batches, linger, bigger fetches.
                props.push_str(&format!(
                    "tasks.max = 4\n\
                     t{tag}.producer.batch.size = 524288\n\
                     t{tag}.producer.linger.ms = 20\n\
                     t{tag}.producer.buffer.memory = 134217728\n\
                     t{tag}.producer.max.request.size = 2097152\n\
                     s{tag}.consumer.fetch.max.bytes = 52428800\n\
                     s{tag}.consumer.max.partition.fetch.bytes = 10485760\n\
                     s{tag}.consumer.fetch.min.bytes = 65536\n\
                     s{tag}.consumer.max.poll.records = 2000\n"
                ));
                if contender == Contender::Mm2TunedLz4 {
                    props.push_str(&format!("t{tag}.producer.compression.type = lz4\n"));
                }
            }
            strait_testkit::start_mirror_maker(&dir, &props).expect("start MirrorMaker 2")
        }
        Contender::Raw | Contender::RawHeader => Command::new(env.bin.join("raw-pipe"))
            .args(if contender == Contender::RawHeader { as_strait() } else { Vec::new() })
            .env("MALLOC_CONF", malloc_conf())
            .args([source, target, &format!("r{tag}.")])
            .args(topics)
            .stdout(out)
            .stderr(err)
            .spawn()
            .expect("start raw-pipe"),
        Contender::BatchPipe => Command::new(env.bin.join("batch-pipe"))
            .args([source, target, &format!("b{tag}.")])
            .args(topics)
            .stdout(out)
            .stderr(err)
            .spawn()
            .expect("start batch-pipe"),
    };
    Running { child }
}

/// `raw-pipe`'s arguments that make it ask of librdkafka what a flow with one slot asks, by
/// value (the pipe imports nothing of Strait): `--headers`, then Strait's consumer settings
/// (`-c`) and its at-least-once record producer's (`-p`), the whole producer queue included.
fn as_strait() -> Vec<String> {
    let queue_kbytes = strait::sink::PRODUCER_QUEUE_KBYTES.to_string();
    let queue = [("queue.buffering.max.kbytes", queue_kbytes.as_str())];
    let consumer = strait::source::CONSUMER_SETTINGS.iter().map(|kv| ("-c", kv));
    let producer = [strait::sink::PRODUCER_SETTINGS, strait::sink::AT_LEAST_ONCE_SETTINGS, &queue[..]];
    let producer = producer.into_iter().flatten().map(|kv| ("-p", kv));
    let mut args = vec!["--headers".to_string()];
    for (flag, (k, v)) in consumer.chain(producer) {
        args.extend([flag.to_string(), format!("{k}={v}")]);
    }
    args
}

/// Strait's jemalloc options as `MALLOC_CONF`, so the pipe runs on the allocator setup Strait does.
fn malloc_conf() -> String {
    String::from_utf8_lossy(strait::allocator::MALLOC_CONF).trim_end_matches('\0').to_string()
}
