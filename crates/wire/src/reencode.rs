//! The batches that cannot be forwarded as they are, opened and written anew in the same codec
//! (issue 27, point 2): the batch a resume starts inside, whose records before the saved position
//! are already copied, and a batch the source broker stamped with its append time
//! (`LogAppendTime`), which a `CreateTime` target would give back with the producer's times, and
//! a batch the log cleaner left with gaps between its offsets (a compacted topic), which a broker
//! refuses in a produce request (`InvalidRecord`).

use bytes::{Bytes, BytesMut};
use kafka_protocol::records::{
    Compression as Codec, RecordBatchDecoder, RecordBatchEncoder, RecordEncodeOptions, TimestampType,
};

use crate::batch::Batch;
use crate::batch::{BatchError, Compression};

/// Why a batch is written anew rather than forwarded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reason {
    /// Its first records lie before the position the copy resumes from.
    StartsBeforePosition,
    /// Its timestamps are the source broker's append time.
    LogAppendTime,
    /// Compaction removed records from it: its offsets have gaps, and a broker takes a
    /// produced batch only when its record count spans its offsets.
    OffsetGaps,
}

impl Batch {
    /// Why this batch, copied from `position` on, must be written anew; none when it can be
    /// forwarded as it is.
    pub fn reencode_reason(&self, position: i64) -> Option<Reason> {
        if self.base_offset() < position {
            Some(Reason::StartsBeforePosition)
        } else if self.is_log_append_time() {
            Some(Reason::LogAppendTime)
        } else if self.record_count() != self.last_offset_delta() + 1 {
            Some(Reason::OffsetGaps)
        } else {
            None
        }
    }

    /// Its records from offset `position` on, in a new batch of the same codec: keys, values,
    /// headers and create timestamps as they were, offsets consecutive from the first record's
    /// (the gaps of a compacted batch closed: the target numbers them anew anyway, and
    /// [`Batch::last_offset`] is then no longer the source's); a `LogAppendTime` batch's records
    /// take its append time as their create time (what a consumer of the source reads). The
    /// producer fields are left unset for [`Batch::for_producer`]. None when every record lies
    /// before `position`. Errors: [`BatchError::Malformed`] when the records do not decode, or a
    /// codec this build lacks.
    pub fn records_from(&self, position: i64) -> Result<Option<Batch>, BatchError> {
        let malformed = |what: String| BatchError::Malformed { base_offset: self.base_offset(), what };
        let mut bytes = self.bytes().clone();
        let set = RecordBatchDecoder::decode(&mut bytes).map_err(|e| malformed(format!("records: {e}")))?;
        let mut records: Vec<_> = set.records.into_iter().filter(|r| r.offset >= position).collect();
        let Some(first) = records.first().map(|r| r.offset) else { return Ok(None) };
        let append_time = self.is_log_append_time().then(|| self.max_timestamp());
        for (i, r) in records.iter_mut().enumerate() {
            r.offset = first + i as i64;
            if let Some(time) = append_time {
                (r.timestamp, r.timestamp_type) = (time, TimestampType::Creation);
            }
            (r.producer_id, r.producer_epoch, r.partition_leader_epoch) = (-1, -1, -1);
            (r.transactional, r.control, r.delete_horizon) = (false, false, false);
            // kafka-protocol's encoder keeps in one batch the records whose offset follows their
            // sequence; the real sequence is set by `for_producer`.
            r.sequence = (r.offset - first) as i32;
        }
        let compression = match self.compression() {
            Some(Compression::None) | None => Codec::None,
            Some(Compression::Gzip) => Codec::Gzip,
            Some(Compression::Snappy) => Codec::Snappy,
            Some(Compression::Lz4) => Codec::Lz4,
            Some(Compression::Zstd) => Codec::Zstd,
        };
        let mut out = BytesMut::new();
        RecordBatchEncoder::encode(&mut out, &records, &RecordEncodeOptions { version: 2, compression })
            .map_err(|e| malformed(format!("written anew: {e}")))?;
        Batch::new(out.freeze()).map(Some)
    }
}

impl Batch {
    /// The timestamp (ms) a consumer reads on its last record: its create time, or the batch's
    /// append time (`LogAppendTime`). Opens (decompresses) the batch. Errors:
    /// [`BatchError::Malformed`] when the records do not decode, or a codec this build lacks.
    pub fn last_timestamp(&self) -> Result<i64, BatchError> {
        if self.is_log_append_time() {
            return Ok(self.max_timestamp());
        }
        let malformed = |what: String| BatchError::Malformed { base_offset: self.base_offset(), what };
        let mut bytes = self.bytes().clone();
        let set = RecordBatchDecoder::decode(&mut bytes).map_err(|e| malformed(format!("records: {e}")))?;
        set.records.last().map(|r| r.timestamp).ok_or_else(|| malformed("no records".into()))
    }
}

impl Batch {
    /// The value of header `key` on this batch's first record, when it has one: the batch is
    /// opened (decompressed) to read it, so call it rarely (once per producer id, say).
    /// Errors: [`BatchError::Malformed`] when the records do not decode.
    pub fn first_header(&self, key: &str) -> Result<Option<Bytes>, BatchError> {
        let malformed = |what: String| BatchError::Malformed { base_offset: self.base_offset(), what };
        let set =
            RecordBatchDecoder::decode(&mut self.bytes().clone()).map_err(|e| malformed(format!("records: {e}")))?;
        Ok(set
            .records
            .first()
            .and_then(|r| r.headers.iter().find(|(k, _)| k.as_str() == key).and_then(|(_, v)| v.clone())))
    }
}

#[cfg(test)]
mod tests {
    use kafka_protocol::indexmap::IndexMap;
    use kafka_protocol::records::Record;

    use super::*;

    fn batch(codec: Codec, timestamp_type: TimestampType) -> Batch {
        let records: Vec<Record> = (0..10)
            .map(|i| Record {
                transactional: false,
                control: false,
                partition_leader_epoch: 3,
                producer_id: 42,
                producer_epoch: 1,
                timestamp_type,
                offset: 100 + i,
                sequence: i as i32,
                timestamp: 1_000 + i,
                key: Some(Bytes::from(format!("k{i}"))),
                value: Some(Bytes::from(format!("v{i}"))),
                headers: IndexMap::from([("h".to_string().into(), Some(Bytes::from_static(b"x")))]),
                delete_horizon: false,
            })
            .collect();
        let mut buf = BytesMut::new();
        RecordBatchEncoder::encode(&mut buf, &records, &RecordEncodeOptions { version: 2, compression: codec })
            .unwrap();
        if timestamp_type == TimestampType::LogAppend {
            // kafka-protocol's encoder writes CreateTime batches only: the broker's bit, set here.
            buf[22] |= 1 << 3;
            let crc = crc32c::crc32c(&buf[21..]);
            buf[17..21].copy_from_slice(&crc.to_be_bytes());
        }
        Batch::new(buf.freeze()).unwrap()
    }

    #[test]
    fn the_first_record_s_header_is_read_through_the_codec() {
        for codec in [Codec::None, Codec::Lz4, Codec::Zstd] {
            let b = batch(codec, TimestampType::Creation);
            assert_eq!(b.first_header("h").unwrap(), Some(Bytes::from_static(b"x")), "{codec:?}");
            assert_eq!(b.first_header("strait.provenance").unwrap(), None, "{codec:?}");
        }
    }

    #[test]
    fn records_before_the_position_are_left_out_and_the_rest_kept_as_they_were() {
        let b = batch(Codec::Lz4, TimestampType::Creation);
        assert!(!b.is_log_append_time());
        assert_eq!(b.reencode_reason(100), None);
        assert_eq!(b.reencode_reason(104), Some(Reason::StartsBeforePosition));
        let tail = b.records_from(104).unwrap().unwrap();
        assert_eq!((tail.base_offset(), tail.last_offset(), tail.record_count()), (104, 109, 6));
        assert_eq!(tail.compression(), Some(Compression::Lz4));
        assert!(tail.crc_matches());
        let set = RecordBatchDecoder::decode(&mut tail.bytes().clone()).unwrap();
        let kept: Vec<(i64, i64, Bytes)> =
            set.records.iter().map(|r| (r.offset, r.timestamp, r.value.clone().unwrap())).collect();
        let want: Vec<(i64, i64, Bytes)> =
            (4..10).map(|i| (100 + i, 1_000 + i, Bytes::from(format!("v{i}")))).collect();
        assert_eq!(kept, want);
        assert!(set.records.iter().all(|r| r.headers.len() == 1 && r.producer_id == -1));
        assert!(b.records_from(110).unwrap().is_none());
    }

    #[test]
    fn a_compacted_batch_is_written_anew_with_consecutive_offsets() {
        let kept = [100_i64, 101, 103, 107];
        let records: Vec<Record> = kept
            .iter()
            .map(|&o| Record {
                transactional: false,
                control: false,
                partition_leader_epoch: -1,
                producer_id: -1,
                producer_epoch: -1,
                timestamp_type: TimestampType::Creation,
                offset: o,
                sequence: (o - 100) as i32,
                timestamp: o,
                key: Some(Bytes::from(format!("k{o}"))),
                value: Some(Bytes::from(format!("v{o}"))),
                headers: IndexMap::new(),
                delete_horizon: false,
            })
            .collect();
        let mut buf = BytesMut::new();
        RecordBatchEncoder::encode(&mut buf, &records, &RecordEncodeOptions { version: 2, compression: Codec::Snappy })
            .unwrap();
        let b = Batch::new(buf.freeze()).unwrap();
        assert_eq!((b.record_count(), b.last_offset_delta()), (4, 7), "one batch with gaps");
        assert_eq!(b.reencode_reason(100), Some(Reason::OffsetGaps));
        let anew = b.records_from(100).unwrap().unwrap();
        assert_eq!((anew.base_offset(), anew.last_offset(), anew.record_count()), (100, 103, 4));
        assert_eq!(anew.reencode_reason(100), None, "forwardable as it is now");
        let set = RecordBatchDecoder::decode(&mut anew.bytes().clone()).unwrap();
        let values: Vec<Bytes> = set.records.iter().map(|r| r.value.clone().unwrap()).collect();
        assert_eq!(values, kept.iter().map(|o| Bytes::from(format!("v{o}"))).collect::<Vec<_>>());
        let tail = b.records_from(102).unwrap().unwrap();
        assert_eq!((tail.base_offset(), tail.record_count()), (103, 2), "from the first record at the position on");
    }

    #[test]
    fn a_log_append_time_batch_takes_its_append_time_as_create_time() {
        let b = batch(Codec::Zstd, TimestampType::LogAppend);
        assert!(b.is_log_append_time());
        assert_eq!(b.reencode_reason(100), Some(Reason::LogAppendTime));
        let anew = b.records_from(100).unwrap().unwrap();
        assert!(!anew.is_log_append_time());
        assert_eq!(anew.compression(), Some(Compression::Zstd));
        let set = RecordBatchDecoder::decode(&mut anew.bytes().clone()).unwrap();
        assert_eq!(set.records.len(), 10);
        assert!(set.records.iter().all(|r| r.timestamp == b.max_timestamp()), "every record at the append time");
    }
}
