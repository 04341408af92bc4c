//! Strait: cross-cluster replication for Apache Kafka, wire-compatible with MirrorMaker 2.
//!
//! A flow reads a source cluster with [`source::KafkaSource`] and writes the target with
//! [`sink::TargetSink`] (loop guard, residency gate, renaming, offset syncs, positions, and
//! exactly-once transactions), driven by the `strait-connect` runtime, in
//! [`slots`] that instances of a flow share through a consumer group on the target; [`control`] writes MM2's
//! heartbeats and checkpoints. [`config`] is the user-facing TOML, validated once into
//! [`config::Flow`]s.
//!
//! Layers, each importing only those below it:
//! `allocator`, `rules`, `metrics`, `client_log`, `topic_id`, `retry`, `schedule` → `residency` → `config` → `kafka` → `admin`, `positions`, `record` → `mm2_offsets`, `watch`, `slots` →
//! `resume` (its `load`: the I/O before the decision) → `source`, `sink`, `control`, `status` → `flow`, `http` → the `strait` binary.

pub mod admin;
pub mod allocator;
pub mod client_log;
pub mod config;
pub mod consume;
pub mod control;
pub mod failover;
pub mod flow;
pub mod http;
pub mod import_mm2;
pub mod kafka;
pub mod metrics;
pub mod mm2_offsets;
pub mod positions;
pub mod producer;
pub mod record;
pub mod residency;
pub mod resume;
pub mod retry;
pub mod rules;
pub mod schedule;
pub mod sink;
pub mod slots;
pub mod source;
pub mod status;
pub mod topic_id;
pub mod watch;
