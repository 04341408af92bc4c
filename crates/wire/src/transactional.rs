//! What a transactional batch producer remembers of its transactional id: the coordinator and
//! the open transaction with its partitions (the protocol itself is `crate::transaction`'s).

use std::collections::HashSet;

use kafka_protocol::messages::TransactionalId;
use kafka_protocol::protocol::StrBytes;

use crate::error::WireError;

/// A producer's transactional id and the state of its transaction.
pub(crate) struct Transactions {
    pub(crate) id: String,
    pub(crate) timeout_ms: i32,
    /// The broker id of the transaction coordinator, once found.
    pub(crate) coordinator: Option<i32>,
    /// A transaction is open (`Producer::begin`).
    pub(crate) open: bool,
    /// The partitions added to the open transaction.
    pub(crate) added: HashSet<(String, i32)>,
}

impl Transactions {
    /// The transactional id as a request names it.
    pub(crate) fn request_id(&self) -> TransactionalId {
        TransactionalId(StrBytes::from_string(self.id.clone()))
    }

    /// The error of a call out of turn (`message` says which).
    pub(crate) fn misuse(&self, message: &str) -> WireError {
        WireError::Transaction { transactional_id: self.id.clone(), message: message.to_string() }
    }
}
