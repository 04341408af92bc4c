//! Strait's data-path Kafka client for what librdkafka does not expose: record batches as the
//! broker stores them (v2, still compressed), for flows that copy batches instead of records
//! (issue 27, after Pinterest's KIP-712 proposal).
//!
//! Requests and responses are Kafka's own message schemas from the `kafka-protocol` crate
//! (0.18, generated from Apache Kafka 4.1.0's schemas: the brokers Strait is tested against are
//! 4.1.1); connections, version negotiation and the batch bytes are this crate's. Groups, admin,
//! offset syncs, positions and checkpoints stay on rdkafka.
//!
//! - [`Connection`]: one broker connection, its API versions asked once (ApiVersions), its
//!   requests pipelined; a [`Cluster`] keeps one per broker, or several across a long link
//!   ([`Connections`]), each partition's requests always on the same one.
//! - [`Cluster`]: the leaders and topic ids of the partitions asked for (Metadata) and
//!   `read_committed` fetches of raw batches from them (Fetch v13, topics named by id so a
//!   recreated topic is never read at the old one's offsets, KIP-516), each leader on its own
//!   (one that fails or is slow holds only its partitions, [`FetchRound`]), in a fetch session
//!   (KIP-227) that names only the partitions whose position moved; a moved leader found anew, a
//!   quota's throttle waited out, a diverged log named (KIP-320).
//! - [`Cluster::list_offsets`]: a partition's log start, last stable offset, or the offset of a
//!   time (ListOffsets).
//! - [`batch`]: a v2 record batch's header read from its bytes, its CRC32C checked and
//!   recomputed, and its producer fields rewritten for another producer.
//! - [`Producer`]: an idempotent producer of whole batches (InitProducerId, Produce with
//!   `acks=all`), up to [`MAX_IN_FLIGHT`] requests unanswered per leader, retries keeping their
//!   sequence, each leader's partitions sent on their own and appends handed back as they come
//!   ([`Producer::send`], [`Producer::appended`]); transactional with [`Producer::init_transactional`] (FindCoordinator,
//!   AddPartitionsToTxn, EndTxn: KIP-98, as Kafka's producer before transactions v2).
//! - [`own`]: records of this process's own (offset syncs, positions, and records a batch sink is
//!   given) written as a batch, to produce in the same transaction as the batches forwarded.
//! - [`reencode`]: the batches that cannot be forwarded as they are (one a resume starts inside,
//!   a `LogAppendTime` one) opened and written anew in the same codec.
//! - [`Fetched::committed`]: the data batches a `read_committed` consumer would read, without
//!   control batches and batches of aborted transactions.
//! - [`Connection::partition_sizes`]: the bytes a broker holds of each partition
//!   (DescribeLogDirs), to compare a target topic's size on disk with its source's.
//! - [`Security`]: TLS and SASL (PLAIN, SCRAM-SHA-256/512) from the librdkafka settings of
//!   `[clusters.client]`, refusing by key what this client cannot honour.

pub mod batch;
mod cluster;
mod conn;
mod connections;
mod error;
mod fetch;
mod fetched;
mod lanes;
mod log_dirs;
mod names;
mod oauth;
mod offsets;
mod oidc;
pub mod own;
mod produce;
pub mod reencode;
mod retry;
mod sasl;
mod security;
mod send;
mod session;
mod transaction;
mod transactional;

pub use batch::Batch;
pub use cluster::{Cluster, Leader};
pub use conn::{Answer, ClientOptions, Connection};
pub use connections::{connection_of, is_far, Connections, FAR_CONNECTIONS};
pub use error::WireError;
pub use fetch::FetchRound;
pub use fetched::{Aborted, Diverging, FetchAt, Fetched};
/// A broker's error code, as Kafka names it (a partition's fetch or offset error).
pub use kafka_protocol::ResponseError;
pub use offsets::{Listed, OffsetSpec};
pub use own::OwnRecord;
pub use produce::Producer;
pub use security::{Mechanism, Security, SettingError};
pub use send::{Appended, Outgoing, MAX_IN_FLIGHT};
/// A topic's id (KIP-516), as Metadata and Fetch v13+ carry it.
pub use uuid::Uuid;
