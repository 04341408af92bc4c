//! `strait-wire` through real Apache Kafka brokers. `scripts/test` starts the shared clusters and
//! sets `STRAIT_TEST_BOOTSTRAP_1` and `_2`; every test uses its own topic names
//! (`strait_testkit::clients`). The batch producer through killed leaders of the three-broker
//! cluster is tested with Strait's own (`strait/tests/e2e/multi_broker/batches.rs`), which takes
//! turns on that cluster with the other multi-broker tests.

pub mod made;
mod offsets;
mod produce_fetch;
mod reencode;
mod security;
mod transactions;

mod support {
    pub use strait_testkit::clients::*;
}
