//! Batches of records this process makes itself, to write through the batch producer alongside
//! the batches it forwards: its own state (offset syncs, positions, producer id registrations),
//! and, exactly-once, records a sink copying batches is given one by one (their producer holds
//! the transaction).

use bytes::{Bytes, BytesMut};
use kafka_protocol::indexmap::IndexMap;
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::records::{Compression as Codec, Record, RecordBatchEncoder, RecordEncodeOptions, TimestampType};

use crate::batch::{Batch, BatchError};

/// A record's key and value, either possibly null.
pub type KeyValue<'a> = (Option<&'a [u8]>, Option<&'a [u8]>);

/// A record to write in a batch of this process's making.
pub struct OwnRecord<'a> {
    /// `None` for a null key.
    pub key: Option<&'a [u8]>,
    /// `None` for a tombstone.
    pub value: Option<&'a [u8]>,
    /// Headers in order, each key once (a batch is encoded from a map of them).
    pub headers: Vec<(&'a str, Option<&'a [u8]>)>,
    /// Its CreateTime, ms since the epoch (0 is kept as 0).
    pub timestamp_ms: i64,
}

impl Batch {
    /// A new uncompressed batch of `records` (key, value), every one stamped `timestamp_ms`
    /// (CreateTime), without headers, for [`Batch::for_producer`]: how Strait's own small
    /// records (offset syncs, positions) join a transaction of forwarded batches. Errors:
    /// [`BatchError::Malformed`] when they cannot be encoded (none given).
    pub fn of_records(records: &[KeyValue], timestamp_ms: i64) -> Result<Batch, BatchError> {
        let own: Vec<OwnRecord> =
            records.iter().map(|&(key, value)| OwnRecord { key, value, headers: Vec::new(), timestamp_ms }).collect();
        Self::of_own(0, &own)
    }

    /// A new uncompressed batch of `records`, their offsets `base_offset` and on one by one, for
    /// [`Batch::for_producer`]. Errors: [`BatchError::Malformed`] when they cannot be encoded:
    /// none given, or a record naming a header key twice (Kafka allows it; this encoder keeps
    /// one value per key, and would lose the rest).
    pub fn of_own(base_offset: i64, records: &[OwnRecord]) -> Result<Batch, BatchError> {
        let malformed = |what: String| BatchError::Malformed { base_offset, what };
        if records.is_empty() {
            return Err(malformed("a batch of no records".into()));
        }
        let mut encoded = Vec::with_capacity(records.len());
        for (i, r) in records.iter().enumerate() {
            let mut headers = IndexMap::with_capacity(r.headers.len());
            for (key, value) in &r.headers {
                let before = headers.insert(StrBytes::from_string(key.to_string()), value.map(Bytes::copy_from_slice));
                if before.is_some() {
                    let offset = base_offset + i as i64;
                    return Err(malformed(format!("the record at offset {offset} has header {key} more than once")));
                }
            }
            encoded.push(Record {
                transactional: false,
                control: false,
                partition_leader_epoch: -1,
                producer_id: -1,
                producer_epoch: -1,
                timestamp_type: TimestampType::Creation,
                offset: base_offset + i as i64,
                sequence: i as i32,
                timestamp: r.timestamp_ms,
                key: r.key.map(Bytes::copy_from_slice),
                value: r.value.map(Bytes::copy_from_slice),
                headers,
                delete_horizon: false,
            });
        }
        let mut out = BytesMut::new();
        RecordBatchEncoder::encode(&mut out, &encoded, &RecordEncodeOptions { version: 2, compression: Codec::None })
            .map_err(|e| malformed(format!("written: {e}")))?;
        Batch::new(out.freeze())
    }
}

#[cfg(test)]
mod tests {
    use kafka_protocol::records::RecordBatchDecoder;

    use super::*;
    use crate::batch::Compression;

    #[test]
    fn own_records_make_one_uncompressed_batch_that_decodes_to_them() {
        let records: [KeyValue; 2] = [(Some(b"k0"), Some(b"v0")), (Some(b"k1"), None)];
        let b = Batch::of_records(&records, 1_234).unwrap();
        assert_eq!((b.record_count(), b.last_offset_delta(), b.max_timestamp()), (2, 1, 1_234));
        assert_eq!(b.compression(), Some(Compression::None));
        assert!(b.crc_matches() && !b.is_transactional());
        let mut bytes = b.for_producer(7, 1, 10, true).bytes().clone();
        let decoded = RecordBatchDecoder::decode(&mut bytes).unwrap().records;
        let got: Vec<_> = decoded.iter().map(|r| (r.key.clone(), r.value.clone(), r.timestamp, r.sequence)).collect();
        let bytes = |b: &[u8]| Some(Bytes::copy_from_slice(b));
        assert_eq!(got, vec![(bytes(b"k0"), bytes(b"v0"), 1_234, 10), (bytes(b"k1"), None, 1_234, 11)]);
        assert!(decoded.iter().all(|r| r.transactional && r.producer_id == 7));
        assert!(Batch::of_records(&[], 0).is_err());
    }

    #[test]
    fn records_keep_their_offsets_headers_and_times_and_a_repeated_header_is_refused() {
        let record = |ts, headers| OwnRecord { key: Some(b"k"), value: Some(b"v"), headers, timestamp_ms: ts };
        let b = Batch::of_own(40, &[record(0, vec![("a", Some(b"1")), ("b", None)]), record(7, vec![])]).unwrap();
        assert_eq!((b.base_offset(), b.last_offset(), b.max_timestamp()), (40, 41, 7));
        let decoded = RecordBatchDecoder::decode(&mut b.bytes().clone()).unwrap().records;
        let headers: Vec<(String, Option<Bytes>)> =
            decoded[0].headers.iter().map(|(k, v)| (k.to_string(), v.clone())).collect();
        assert_eq!(headers, vec![("a".into(), Some(Bytes::from_static(b"1"))), ("b".into(), None)]);
        assert_eq!((decoded[0].timestamp, decoded[1].timestamp, decoded[1].offset), (0, 7, 41));
        let twice = Batch::of_own(5, &[record(1, vec![("h", None), ("h", Some(b"x"))])]).unwrap_err();
        assert!(twice.to_string().contains("offset 5 has header h more than once"), "{twice}");
    }
}
