//! Errors of the record codecs.

/// Why a key or value could not be decoded. MM2 readers log and skip such records.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DecodeError {
    /// The input ended before the last field was complete.
    #[error("record truncated: input ended inside a field")]
    Truncated,
    /// Bytes remained after the last field of the schema.
    #[error("record has trailing bytes after the last field")]
    TrailingBytes,
    /// A STRING field's bytes are not valid UTF-8.
    #[error("string field is not valid UTF-8")]
    BadUtf8,
    /// A STRING field has a negative length (`-1` would be a null string, which MM2 never writes).
    #[error("string field has negative length {0}")]
    NegativeLength(i16),
    /// The value's leading INT16 version is not 0 (checkpoints and heartbeats only).
    #[error("unsupported record value version {0} (expected 0)")]
    BadVersion(i16),
}

/// Why a record could not be encoded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EncodeError {
    /// A string field is longer than [`MAX_STRING_BYTES`](super::MAX_STRING_BYTES) (32767) bytes
    /// of UTF-8, so its length does not fit the INT16 prefix.
    #[error("string field is {len} bytes, longer than the 32767-byte limit")]
    StringTooLong {
        /// Length of the offending string, in UTF-8 bytes.
        len: usize,
    },
}
