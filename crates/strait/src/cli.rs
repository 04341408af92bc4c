//! The `strait` command line's commands and arguments (clap), for `main.rs` to run.

use std::path::PathBuf;

use clap::{Parser, Subcommand};

/// Cross-cluster replication for Apache Kafka, wire-compatible with MirrorMaker 2.
#[derive(Parser)]
#[command(name = "strait", version)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
    /// Log lines on stderr as `text` (default) or `json`: one object per line with `timestamp`,
    /// `level`, `target`, `message` and tracing's fields (`flow`, `topic`...) as keys.
    #[arg(long, value_enum, default_value = "text", global = true)]
    pub log_format: LogFormat,
}

#[derive(Clone, Copy, clap::ValueEnum)]
pub enum LogFormat {
    Text,
    Json,
}

#[derive(Subcommand)]
pub enum Command {
    /// Run every flow of the config (or those named by `--flow`) until SIGINT/SIGTERM, then drain,
    /// flush and exit 0.
    ///
    /// A flow that stops on an error exits non-zero, by the error's kind: 2 the config is invalid,
    /// 3 denied (authentication failed or an ACL is missing), 4 a setting the cluster refuses or
    /// contradicts (fix it, then start again), 5 source records gone before they were copied
    /// (`on_source_gap = "fail"`), 6 another instance runs the flow, 1 anything else (a restart
    /// may help). With several failed flows, the first failure's code.
    Run {
        /// Path of the TOML config.
        #[arg(long)]
        config: PathBuf,
        /// Run only this flow of the config (`SOURCE->TARGET`, quoted in a shell); repeat it for
        /// several. Default: every flow. One config can then hold both regions' flows, each
        /// region's instance running its own (docs/disaster-recovery.md).
        #[arg(long)]
        flow: Vec<String>,
        /// Serve `/metrics`, `/health` and `/ready` on this `host:port` (overrides `[metrics] listen`).
        #[arg(long)]
        metrics_addr: Option<std::net::SocketAddr>,
    },
    /// Check the config; exit 0 if valid, else print what is wrong and exit 2.
    Validate {
        /// Path of the TOML config.
        #[arg(long)]
        config: PathBuf,
    },
    /// Print where each flow stands, from the clusters alone (with or without `strait run`): per
    /// source partition its log-start and end offsets, the saved position and the lag in records;
    /// per consumer group the newest checkpoint of each partition. A source that does not answer
    /// leaves the target's side (positions, checkpoints), a target that does not answer leaves
    /// the flow out; each is named on stderr, the other flows still print, and the exit is 1.
    Status {
        /// Path of the TOML config.
        #[arg(long)]
        config: PathBuf,
        /// `text` (aligned columns) or `json` (`{"partitions": [...], "checkpoints": [...]}`).
        #[arg(long, value_enum, default_value = "text")]
        output: Output,
    },
    /// Write a Strait config (TOML, on stdout) from a MirrorMaker 2 dedicated-mode properties
    /// file or a Strimzi `KafkaMirrorMaker2` resource (YAML, `v1beta2` or `v1`); every key it
    /// cannot carry is listed on stderr with the reason.
    ImportMm2 {
        /// Path of MM2's properties file (`connect-mirror-maker.properties`), or of the resource
        /// (`.yaml` or `.yml`).
        properties: PathBuf,
        /// Where the config expects each Secret a Strimzi resource names, mounted as a directory
        /// (`<dir>/<secret name>/<key>`).
        #[arg(long, default_value = strait::import_mm2::SECRETS_DIR)]
        secrets_dir: String,
    },
    /// Print a source consumer group's committed offsets and their translation to the target,
    /// per topic partition: the numbers its checkpoints carry (MM2 `RemoteClusterUtils.translateOffsets`).
    TranslateOffsets {
        /// Path of the TOML config.
        #[arg(long)]
        config: PathBuf,
        /// The flow, as `SOURCE->TARGET` aliases.
        #[arg(long)]
        flow: String,
        /// Consumer group on the source cluster.
        #[arg(long)]
        group: String,
        /// `text` (aligned columns) or `json` (an array of objects).
        #[arg(long, value_enum, default_value = "text")]
        output: Output,
    },
    /// Move consumer groups to a flow's target cluster: commit their translated offsets into the
    /// same groups there and print, per group/topic/partition, the source offset, the target
    /// offset and the records not replicated. Planned when the source answers (waits until the
    /// groups' topics are replicated), unplanned when it does not (the newest checkpoints and
    /// saved positions on the target; prints the recovery point). Never rewinds a group that is
    /// ahead and skips groups with active members on the target. Exit 0 when every group moved,
    /// 1 when one did not (the reason is printed), 2 for a bad config or argument.
    Failover {
        /// Path of the TOML config.
        #[arg(long)]
        config: PathBuf,
        /// The flow, as `SOURCE->TARGET` aliases: groups move from SOURCE to TARGET.
        #[arg(long)]
        flow: String,
        /// Regexes (whole group id) of the groups to move; default: the flow's `groups`.
        #[arg(long, num_args = 1..)]
        groups: Vec<String>,
        /// Planned: longest wait, in ms, for the groups' topics to be replicated.
        #[arg(long, default_value_t = 60_000)]
        wait_ms: u64,
        /// `auto`: planned when the source lists its groups within --source-timeout-ms, else
        /// unplanned; `planned`: the source must answer; `unplanned`: the source is not asked.
        #[arg(long, value_enum, default_value = "auto")]
        mode: strait::failover::Mode,
        /// How long, in ms, the source may take to answer before `auto` treats it as lost (at
        /// least 1; librdkafka gives up on its own after 15 s).
        #[arg(long, default_value_t = 10_000, value_parser = clap::value_parser!(u64).range(1..))]
        source_timeout_ms: u64,
        /// Planned: first check that the flow's source topics take no new record for this long
        /// (ms), the sign that their producers stopped; if one does, no group moves. Default:
        /// not checked.
        #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
        quiet_ms: Option<u64>,
        /// `text` (aligned columns) or `json` (the report as one object).
        #[arg(long, value_enum, default_value = "text")]
        output: Output,
    },
}

#[derive(Clone, Copy, clap::ValueEnum)]
pub enum Output {
    Text,
    Json,
}
