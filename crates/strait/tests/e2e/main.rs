//! Tests through real Apache Kafka brokers. `scripts/test` starts the shared clusters and sets
//! `STRAIT_TEST_BOOTSTRAP_1` and `_2`; every test uses its own aliases and topic names.

mod support;

mod acls;
mod active_active;
mod alert_rules;
mod batches;
mod batches_active_active;
mod batches_aliases;
mod batches_limits;
mod batches_ring;
mod checkpoints;
mod copy_marks;
mod crash;
mod cutover;
mod deleted_topic_lag;
mod disaster_recovery;
mod discovery;
mod exactly_once;
mod failover;
mod failover_deleted;
mod failure;
mod faults;
mod fidelity;
mod idle_lag;
mod invalid_positions;
mod metrics;
mod multi_broker;
mod offset_syncs;
mod paused;
mod recreated;
mod residency;
mod scale_out;
mod security;
mod selection;
mod sink;
mod startup_errors;
mod status_regions;
mod strimzi;
mod throttle;
/// The batches the batch path's tests make and read, shared with `strait-wire`'s own tests.
#[path = "../../../wire/tests/brokers/made.rs"]
mod wire;
