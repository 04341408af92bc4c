//! Kafka's v2 record batch (magic 2, KIP-98), read and rewritten in place from its bytes: the
//! records inside, compressed or not, are never opened.
//!
//! Layout (big-endian; offsets in bytes from the batch's start):
//!
//! | offset | field | offset | field |
//! |---:|---|---:|---|
//! | 0 | base offset (i64) | 27 | base timestamp (i64, ms) |
//! | 8 | batch length (i32, bytes after this field) | 35 | max timestamp (i64, ms) |
//! | 12 | partition leader epoch (i32) | 43 | producer id (i64) |
//! | 16 | magic (i8, 2) | 51 | producer epoch (i16) |
//! | 17 | CRC32C of bytes 21.. (u32) | 53 | base sequence (i32) |
//! | 21 | attributes (i16) | 57 | record count (i32) |
//! | 23 | last offset delta (i32) | 61 | records |

use bytes::{Buf, Bytes, BytesMut};

/// Bytes before the records.
pub const HEADER_LEN: usize = 61;
/// Bytes a batch's size and magic are read from: base offset, batch length, leader epoch, magic.
const PREFIX_LEN: usize = 17;
/// Where the CRC starts covering.
const CRC_FROM: usize = 21;

const TRANSACTIONAL: i16 = 1 << 4;
const CONTROL: i16 = 1 << 5;
const DELETE_HORIZON: i16 = 1 << 6;
const LOG_APPEND_TIME: i16 = 1 << 3;

/// The codec of a batch's records (attributes bits 0–2).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Compression {
    None,
    Gzip,
    Snappy,
    Lz4,
    Zstd,
}

/// What a control batch marks (its one record's key: version i16, type i16).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Marker {
    /// The producer's transaction was aborted (type 0).
    Abort,
    /// The producer's transaction was committed (type 1).
    Commit,
}

/// Why bytes are not a v2 batch this crate can forward.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BatchError {
    /// A batch of magic 0 or 1 (Kafka before 0.11): its records have no per-batch producer
    /// fields to rewrite.
    #[error("record batch at offset {base_offset}: magic {magic}, only v2 batches (magic 2) can be forwarded")]
    OldMagic { base_offset: i64, magic: i8 },
    /// The length field or the header cannot be a batch's.
    #[error("record batch at offset {base_offset}: {what}")]
    Malformed { base_offset: i64, what: String },
}

/// One complete v2 record batch, its bytes shared with the response it came in.
#[derive(Clone, PartialEq, Eq)]
pub struct Batch {
    bytes: Bytes,
}

impl std::fmt::Debug for Batch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Batch")
            .field("base_offset", &self.base_offset())
            .field("records", &self.record_count())
            .field("bytes", &self.bytes.len())
            .field("compression", &self.compression())
            .field("producer_id", &self.producer_id())
            .field("transactional", &self.is_transactional())
            .field("control", &self.is_control())
            .finish()
    }
}

/// Splits a fetched partition's `records` into its complete batches, in log order. A batch cut
/// short at the end (the broker stops at the fetch's byte limit mid-batch) is left out; the
/// next fetch starts at it. Errors: a batch of magic 0 or 1, or a length that cannot be a
/// batch's.
pub fn split(mut records: Bytes) -> Result<Vec<Batch>, BatchError> {
    let mut batches = Vec::new();
    while records.len() >= PREFIX_LEN {
        let base_offset = (&records[0..8]).get_i64();
        let length = (&records[8..12]).get_i32();
        let magic = records[16] as i8;
        if magic != 2 {
            return Err(BatchError::OldMagic { base_offset, magic });
        }
        let total = usize::try_from(length).ok().map(|l| l + 12).filter(|t| *t >= HEADER_LEN).ok_or_else(|| {
            BatchError::Malformed { base_offset, what: format!("batch length {length} is shorter than a header") }
        })?;
        if records.len() < total {
            break;
        }
        batches.push(Batch { bytes: records.split_to(total) });
    }
    Ok(batches)
}

impl Batch {
    /// `bytes` as one batch. Errors: as [`split`], or `bytes` is not exactly one whole batch.
    pub fn new(bytes: Bytes) -> Result<Self, BatchError> {
        let len = bytes.len();
        match split(bytes)?.as_slice() {
            [one] if one.bytes.len() == len => Ok(one.clone()),
            _ => Err(BatchError::Malformed { base_offset: -1, what: format!("{len} bytes are not one whole batch") }),
        }
    }

    fn i16_at(&self, at: usize) -> i16 {
        (&self.bytes[at..at + 2]).get_i16()
    }
    fn i32_at(&self, at: usize) -> i32 {
        (&self.bytes[at..at + 4]).get_i32()
    }
    fn i64_at(&self, at: usize) -> i64 {
        (&self.bytes[at..at + 8]).get_i64()
    }

    /// The batch's bytes, as stored by the broker (or as rewritten by [`Self::for_producer`]).
    pub fn bytes(&self) -> &Bytes {
        &self.bytes
    }
    /// Offset of its first record.
    pub fn base_offset(&self) -> i64 {
        self.i64_at(0)
    }
    /// Offset of its last record: base offset + last offset delta. A compacted batch may hold
    /// fewer records than the offsets it spans.
    pub fn last_offset(&self) -> i64 {
        self.base_offset() + i64::from(self.last_offset_delta())
    }
    /// Its last record's offset less its first's: the offsets it spans, less one, which is also
    /// how far its producer's sequence advances past its first record.
    pub fn last_offset_delta(&self) -> i32 {
        self.i32_at(23)
    }
    /// Its records.
    pub fn record_count(&self) -> i32 {
        self.i32_at(57)
    }
    pub fn partition_leader_epoch(&self) -> i32 {
        self.i32_at(12)
    }
    /// The attributes field (i16): compression, timestamp type, transactional, control, delete horizon bits.
    pub fn attributes(&self) -> i16 {
        self.i16_at(21)
    }
    /// The codec its records are compressed with. `None` for codec bits Kafka does not define.
    pub fn compression(&self) -> Option<Compression> {
        Some(match self.attributes() & 0b111 {
            0 => Compression::None,
            1 => Compression::Gzip,
            2 => Compression::Snappy,
            3 => Compression::Lz4,
            4 => Compression::Zstd,
            _ => return None,
        })
    }
    /// Whether its timestamps were set by the broker at append (`LogAppendTime`) rather than by
    /// the producer (`CreateTime`).
    pub fn is_log_append_time(&self) -> bool {
        self.attributes() & LOG_APPEND_TIME != 0
    }
    pub fn is_transactional(&self) -> bool {
        self.attributes() & TRANSACTIONAL != 0
    }
    /// Whether it holds a transaction marker instead of data.
    pub fn is_control(&self) -> bool {
        self.attributes() & CONTROL != 0
    }
    /// Whether the log cleaner set a delete horizon (KIP-534), which then is the base timestamp.
    pub fn has_delete_horizon(&self) -> bool {
        self.attributes() & DELETE_HORIZON != 0
    }
    /// Base timestamp (ms): the first record's, or the delete horizon.
    pub fn base_timestamp(&self) -> i64 {
        self.i64_at(27)
    }
    /// Largest timestamp of its records (ms).
    pub fn max_timestamp(&self) -> i64 {
        self.i64_at(35)
    }
    pub fn producer_id(&self) -> i64 {
        self.i64_at(43)
    }
    pub fn producer_epoch(&self) -> i16 {
        self.i16_at(51)
    }
    /// Sequence of its first record for its producer (-1 without an idempotent producer).
    pub fn base_sequence(&self) -> i32 {
        self.i32_at(53)
    }
    /// The CRC32C stored in it.
    pub fn stored_crc(&self) -> u32 {
        (&self.bytes[17..21]).get_u32()
    }
    /// Whether the stored CRC32C is that of its bytes from the attributes on.
    pub fn crc_matches(&self) -> bool {
        self.stored_crc() == crc32c::crc32c(&self.bytes[CRC_FROM..])
    }

    /// What this control batch marks; `None` for a data batch, or a control record this crate
    /// does not know. Control batches are never compressed: the key is read from the one record.
    pub fn marker(&self) -> Option<Marker> {
        if !self.is_control() {
            return None;
        }
        let mut record = &self.bytes[HEADER_LEN..];
        // length (varint), attributes (i8), timestamp delta (varlong), offset delta (varint),
        // key length (varint), key: version (i16), type (i16).
        varint(&mut record)?;
        record.get(..1)?;
        record = &record[1..];
        varint(&mut record)?;
        varint(&mut record)?;
        if varint(&mut record)? < 4 {
            return None;
        }
        let kind = record.get(2..4)?;
        match i16::from_be_bytes([kind[0], kind[1]]) {
            0 => Some(Marker::Abort),
            1 => Some(Marker::Commit),
            _ => None,
        }
    }

    /// This batch as `producer_id` with `producer_epoch` would send it, its first record at
    /// `base_sequence`: base offset 0 and leader epoch -1 (the broker sets both at append), the
    /// transactional bit set or cleared, the CRC32C recomputed. The records' bytes, codec,
    /// timestamps and headers are kept as they are.
    pub fn for_producer(&self, producer_id: i64, producer_epoch: i16, base_sequence: i32, transactional: bool) -> Self {
        let mut b = BytesMut::from(&self.bytes[..]);
        b[0..8].copy_from_slice(&0i64.to_be_bytes());
        b[12..16].copy_from_slice(&(-1i32).to_be_bytes());
        let attributes =
            if transactional { self.attributes() | TRANSACTIONAL } else { self.attributes() & !TRANSACTIONAL };
        b[21..23].copy_from_slice(&attributes.to_be_bytes());
        b[43..51].copy_from_slice(&producer_id.to_be_bytes());
        b[51..53].copy_from_slice(&producer_epoch.to_be_bytes());
        b[53..57].copy_from_slice(&base_sequence.to_be_bytes());
        let crc = crc32c::crc32c(&b[CRC_FROM..]);
        b[17..21].copy_from_slice(&crc.to_be_bytes());
        Self { bytes: b.freeze() }
    }
}

/// Reads one zig-zag varint (at most 5 bytes), advancing `buf`; `None` when cut short.
fn varint(buf: &mut &[u8]) -> Option<i32> {
    let mut raw: u32 = 0;
    for i in 0..5 {
        let (&byte, rest) = buf.split_first()?;
        *buf = rest;
        raw |= u32::from(byte & 0x7f) << (7 * i);
        if byte & 0x80 == 0 {
            return Some(((raw >> 1) as i32) ^ -((raw & 1) as i32));
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use kafka_protocol::indexmap::IndexMap;
    use kafka_protocol::records::{
        Compression as Codec, Record, RecordBatchDecoder, RecordBatchEncoder, RecordEncodeOptions, TimestampType,
    };

    fn record(offset: i64, value: &str, timestamp: i64) -> Record {
        let mut headers = IndexMap::new();
        headers.insert("h".to_string().into(), Some(Bytes::from_static(b"x")));
        Record {
            transactional: false,
            control: false,
            partition_leader_epoch: 7,
            producer_id: 1000,
            producer_epoch: 2,
            timestamp_type: TimestampType::Creation,
            offset,
            sequence: 30 + offset as i32,
            timestamp,
            key: Some(Bytes::from(format!("k{offset}"))),
            value: Some(Bytes::from(value.to_string())),
            headers,
            delete_horizon: false,
        }
    }

    /// Three records from offset 100, one with timestamp 0, encoded by kafka-protocol's encoder.
    fn encoded(codec: Codec) -> Bytes {
        let records = [record(100, "a", 1_700_000_000_000), record(101, "b", 0), record(102, "c", 1_700_000_000_005)];
        let mut buf = BytesMut::new();
        RecordBatchEncoder::encode(&mut buf, &records, &RecordEncodeOptions { version: 2, compression: codec })
            .expect("encode");
        buf.freeze()
    }

    #[test]
    fn the_header_reads_as_the_encoder_wrote_it() {
        let bytes = encoded(Codec::Lz4);
        let batch = Batch::new(bytes).unwrap();
        assert_eq!((batch.base_offset(), batch.last_offset(), batch.record_count()), (100, 102, 3));
        assert_eq!(batch.compression(), Some(Compression::Lz4));
        assert_eq!((batch.producer_id(), batch.producer_epoch(), batch.base_sequence()), (1000, 2, 130));
        // kafka-protocol's encoder takes the smallest timestamp as the base (record b's 0).
        assert_eq!((batch.base_timestamp(), batch.max_timestamp()), (0, 1_700_000_000_005));
        assert_eq!(batch.partition_leader_epoch(), 7);
        assert!(!batch.is_transactional() && !batch.is_control() && !batch.is_log_append_time());
        assert!(batch.crc_matches());
        assert_eq!(batch.marker(), None);
    }

    #[test]
    fn a_rewritten_batch_keeps_its_records_and_decodes_with_the_new_producer() {
        for codec in [Codec::None, Codec::Lz4] {
            let original = Batch::new(encoded(codec)).unwrap();
            let rewritten = original.for_producer(55, 9, 4_000, true);
            assert!(rewritten.crc_matches(), "{codec:?}: CRC recomputed");
            assert_eq!(&rewritten.bytes()[HEADER_LEN..], &original.bytes()[HEADER_LEN..], "records untouched");
            assert_eq!(rewritten.attributes(), original.attributes() | TRANSACTIONAL);
            assert_eq!((rewritten.base_offset(), rewritten.partition_leader_epoch()), (0, -1));
            let mut bytes = rewritten.bytes().clone();
            let decoded = RecordBatchDecoder::decode(&mut bytes).expect("decodes, CRC checked");
            let values: Vec<_> = decoded.records.iter().map(|r| r.value.clone().unwrap()).collect();
            assert_eq!(values, [&b"a"[..], b"b", b"c"]);
            assert_eq!(decoded.records[1].timestamp, 0, "timestamp 0 kept");
            assert!(decoded.records.iter().all(|r| r.producer_id == 55 && r.producer_epoch == 9 && r.transactional));
            assert_eq!(decoded.records.iter().map(|r| r.sequence).collect::<Vec<_>>(), [4_000, 4_001, 4_002]);
            let (key, value) = decoded.records[2].headers.get_index(0).expect("a header");
            assert_eq!((key.as_str(), value.as_deref()), ("h", Some(&b"x"[..])));
            let cleared = rewritten.for_producer(55, 9, 4_000, false);
            assert_eq!(cleared.attributes(), original.attributes() & !TRANSACTIONAL);
        }
    }

    #[test]
    fn a_changed_byte_fails_the_crc() {
        let mut bytes = BytesMut::from(&encoded(Codec::None)[..]);
        let last = bytes.len() - 1;
        bytes[last] ^= 1;
        assert!(!Batch::new(bytes.freeze()).unwrap().crc_matches());
    }

    #[test]
    fn split_keeps_whole_batches_and_leaves_a_cut_one_out() {
        let (one, two) = (encoded(Codec::None), encoded(Codec::Lz4));
        let mut joined = BytesMut::new();
        joined.extend_from_slice(&one);
        joined.extend_from_slice(&two);
        joined.extend_from_slice(&one[..one.len() - 3]);
        let batches = split(joined.freeze()).unwrap();
        assert_eq!(batches.len(), 2);
        assert_eq!((batches[0].bytes(), batches[1].bytes()), (&one, &two));
        assert_eq!(split(one.slice(..10)).unwrap(), Vec::<Batch>::new(), "shorter than a prefix");
        assert!(Batch::new(one.slice(..one.len() - 1)).is_err());
    }

    #[test]
    fn old_magic_and_short_lengths_are_refused() {
        let mut bytes = BytesMut::from(&encoded(Codec::None)[..]);
        bytes[16] = 1;
        assert_eq!(split(bytes.clone().freeze()), Err(BatchError::OldMagic { base_offset: 100, magic: 1 }));
        bytes[16] = 2;
        bytes[8..12].copy_from_slice(&10i32.to_be_bytes());
        assert!(matches!(split(bytes.freeze()), Err(BatchError::Malformed { base_offset: 100, .. })));
    }

    #[test]
    fn varints_read_as_kafka_writes_them() {
        for (bytes, value) in
            [(&[0x00][..], 0), (&[0x01], -1), (&[0x02], 1), (&[0xac, 0x02], 150), (&[0x81, 0x01], -65)]
        {
            let mut buf = bytes;
            assert_eq!(varint(&mut buf), Some(value), "{bytes:?}");
            assert!(buf.is_empty());
        }
        assert_eq!(varint(&mut &[0x80][..]), None);
    }
}
