//! Strait: cross-cluster replication for Apache Kafka, wire-compatible with MirrorMaker 2.
//!
//! A flow reads a source cluster with [`source::KafkaSource`] and writes the target with
//! [`sink::TargetSink`] (residency gate, renaming, loop guard, offset syncs), driven by the
//! `strait-connect` runtime. [`config`] is the user-facing TOML.

pub mod admin;
pub mod checkpoint;
pub mod config;
pub mod flow;
pub mod heartbeat;
pub mod kafka;
pub mod positions;
pub mod sink;
pub mod source;
