//! Loop guard: a provenance header listing the clusters a record has been in, so that
//! active/active and multi-hop topologies (A→B→C→A) never echo a record back, whatever the
//! topic naming. MM2 cannot stop cycles under identity naming; this header can.
//!
//! The header value is the comma-separated Kafka cluster ids (not aliases, which differ between
//! deployments) of every cluster the record was read from, oldest first.

use std::borrow::Cow;

use strait_connect::Header;

/// Name of the provenance header Strait adds to every replicated record.
pub const PROVENANCE_HEADER: &str = "strait.provenance";

/// Guard for one flow, knowing the source and target cluster ids.
#[derive(Debug, Clone)]
pub struct LoopGuard {
    source_id: String,
    target_id: String,
    /// The header value of a record on its first hop (no provenance yet): the source id.
    first_hop: Vec<u8>,
}

impl LoopGuard {
    /// A guard for a flow from the cluster with id `source_id` to the one with id `target_id`.
    pub fn new(source_id: String, target_id: String) -> Self {
        Self { first_hop: source_id.clone().into_bytes(), source_id, target_id }
    }

    /// Removes the provenance header from `headers` and decides: `None` when the record has
    /// already been in the target cluster (drop it), else the header value to write with it
    /// (the old list plus the source cluster).
    pub fn pass(&self, headers: &mut Vec<Header>) -> Option<Cow<'_, [u8]>> {
        if !headers.iter().any(|h| h.key == PROVENANCE_HEADER) {
            // The common case, without allocating.
            return Some(Cow::Borrowed(&self.first_hop));
        }
        let mut visited = String::new();
        headers.retain(|h| {
            if h.key != PROVENANCE_HEADER {
                return true;
            }
            if let Some(v) = &h.value {
                visited = String::from_utf8_lossy(v).into_owned();
            }
            false
        });
        if visited.split(',').any(|id| id == self.target_id) {
            return None;
        }
        if visited.is_empty() {
            Some(Cow::Borrowed(&self.first_hop))
        } else {
            Some(Cow::Owned(format!("{visited},{}", self.source_id).into_bytes()))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn prov(v: &str) -> Header {
        Header { key: PROVENANCE_HEADER.into(), value: Some(v.as_bytes().to_vec()) }
    }

    #[test]
    fn first_hop_adds_source() {
        let mut hs = vec![Header { key: "h".into(), value: None }];
        assert_eq!(LoopGuard::new("A".into(), "B".into()).pass(&mut hs).as_deref(), Some(&b"A"[..]));
        assert_eq!(hs, vec![Header { key: "h".into(), value: None }]);
    }

    #[test]
    fn multi_hop_appends_and_cycle_is_dropped() {
        // A→B→C keeps going, C→A is an echo.
        let mut hs = vec![prov("A")];
        assert_eq!(LoopGuard::new("B".into(), "C".into()).pass(&mut hs).as_deref(), Some(&b"A,B"[..]));
        assert!(hs.is_empty());
        let mut hs = vec![prov("A,B")];
        assert_eq!(LoopGuard::new("C".into(), "A".into()).pass(&mut hs), None);
        let mut hs = vec![prov("A")];
        assert_eq!(LoopGuard::new("B".into(), "A".into()).pass(&mut hs), None, "active/active echo");
    }
}
