//! Kafka protocol primitives (INT16/INT32/INT64 big-endian, INT16-prefixed STRING) used by the
//! record codecs. Crate-private.

use super::error::{DecodeError, EncodeError};

/// Longest STRING the format can carry, in UTF-8 bytes (`i16::MAX`).
pub const MAX_STRING_BYTES: usize = i16::MAX as usize;

/// Appends fields to a byte buffer.
#[derive(Debug, Default)]
pub(crate) struct Writer {
    buf: Vec<u8>,
}

impl Writer {
    /// Empty writer with room for `capacity` bytes.
    pub(crate) fn with_capacity(capacity: usize) -> Self {
        Self { buf: Vec::with_capacity(capacity) }
    }

    pub(crate) fn i16(&mut self, v: i16) {
        self.buf.extend_from_slice(&v.to_be_bytes());
    }

    pub(crate) fn i32(&mut self, v: i32) {
        self.buf.extend_from_slice(&v.to_be_bytes());
    }

    pub(crate) fn i64(&mut self, v: i64) {
        self.buf.extend_from_slice(&v.to_be_bytes());
    }

    /// INT16 byte length + UTF-8 bytes. Errors when longer than [`MAX_STRING_BYTES`].
    pub(crate) fn string(&mut self, s: &str) -> Result<(), EncodeError> {
        let len = i16::try_from(s.len()).map_err(|_| EncodeError::StringTooLong { len: s.len() })?;
        self.i16(len);
        self.buf.extend_from_slice(s.as_bytes());
        Ok(())
    }

    pub(crate) fn finish(self) -> Vec<u8> {
        self.buf
    }
}

/// Bytes needed to encode `s` as a STRING.
pub(crate) fn string_size(s: &str) -> usize {
    2 + s.len()
}

/// Reads fields from the front of a byte slice.
#[derive(Debug)]
pub(crate) struct Reader<'a> {
    rest: &'a [u8],
}

impl<'a> Reader<'a> {
    pub(crate) fn new(bytes: &'a [u8]) -> Self {
        Self { rest: bytes }
    }

    fn take<const N: usize>(&mut self) -> Result<[u8; N], DecodeError> {
        let (head, tail) = self.rest.split_first_chunk::<N>().ok_or(DecodeError::Truncated)?;
        self.rest = tail;
        Ok(*head)
    }

    pub(crate) fn i16(&mut self) -> Result<i16, DecodeError> {
        self.take::<2>().map(i16::from_be_bytes)
    }

    pub(crate) fn i32(&mut self) -> Result<i32, DecodeError> {
        self.take::<4>().map(i32::from_be_bytes)
    }

    pub(crate) fn i64(&mut self) -> Result<i64, DecodeError> {
        self.take::<8>().map(i64::from_be_bytes)
    }

    pub(crate) fn string(&mut self) -> Result<String, DecodeError> {
        let len = self.i16()?;
        let len = usize::try_from(len).map_err(|_| DecodeError::NegativeLength(len))?;
        if self.rest.len() < len {
            return Err(DecodeError::Truncated);
        }
        let (bytes, tail) = self.rest.split_at(len);
        self.rest = tail;
        let s = std::str::from_utf8(bytes).map_err(|_| DecodeError::BadUtf8)?;
        Ok(s.to_owned())
    }

    /// Succeeds only if every byte was consumed.
    pub(crate) fn finish(self) -> Result<(), DecodeError> {
        if self.rest.is_empty() {
            Ok(())
        } else {
            Err(DecodeError::TrailingBytes)
        }
    }
}
