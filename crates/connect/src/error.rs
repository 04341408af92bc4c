//! Errors a connector or the runtime reports. Every variant carries its cause.

use std::error::Error as StdError;

/// Boxed cause of a [`ConnectError`].
pub type Cause = Box<dyn StdError + Send + Sync + 'static>;

/// What went wrong, by kind, with a human context string (what and where) and the cause.
#[derive(Debug, thiserror::Error)]
pub enum ConnectError {
    /// Reading or writing bytes failed (network, file).
    #[error("I/O error: {context}: {cause}")]
    Io { context: String, cause: Cause },
    /// A record could not be converted between representations.
    #[error("conversion error: {context}: {cause}")]
    Conversion { context: String, cause: Cause },
    /// Source positions could not be read, saved or applied.
    #[error("offset error: {context}: {cause}")]
    Offset { context: String, cause: Cause },
    /// A transaction could not begin, commit or abort.
    #[error("transaction error: {context}: {cause}")]
    Transaction { context: String, cause: Cause },
    /// The external system (e.g. a Kafka cluster) refused or failed a request, for good.
    #[error("backend error: {context}: {cause}")]
    Backend { context: String, cause: Cause },
    /// The external system refused us for good: authentication failed, or a permission (an ACL)
    /// is missing. Retrying cannot help until an operator acts; runners stop instead of retrying.
    #[error("denied: {context}: {cause}")]
    Denied { context: String, cause: Cause },
    /// Records the connector must copy are gone from the source (deleted by retention before
    /// they were copied), and it is set to stop rather than continue past the gap.
    #[error("data loss: {context}: {cause}")]
    DataLoss { context: String, cause: Cause },
    /// A transient failure (broker unreachable, leader moved, request timed out): the runtime
    /// aborts a transactional sink's batch, rewinds the source and tries again after a backoff.
    /// Kafka Connect's `RetriableException`.
    #[error("retriable error: {context}: {cause}")]
    Retriable { context: String, cause: Cause },
    /// Another instance took this work over (Kafka's transactional fencing, or the group gave it
    /// to another member): this instance must stop writing it. Kafka Connect's zombie fencing.
    #[error("fenced: {context}: {cause}")]
    Fenced { context: String, cause: Cause },
    /// The configuration contradicts what the external system already holds (say, another slot
    /// count than the one instances of the flow use); retrying cannot help until an operator acts.
    #[error("configuration conflict: {context}: {cause}")]
    Conflict { context: String, cause: Cause },
    /// A setting the external system or its client library refuses for good: a file it names
    /// cannot be read, a replication factor the cluster cannot meet, a value or policy a broker
    /// rejects. `context` names the setting; retrying cannot help until an operator changes it.
    #[error("invalid setting: {context}: {cause}")]
    Invalid { context: String, cause: Cause },
}

impl ConnectError {
    /// An [`ConnectError::Io`] with `context` and `cause`.
    pub fn io(context: impl Into<String>, cause: impl Into<Cause>) -> Self {
        Self::Io { context: context.into(), cause: cause.into() }
    }
    /// A [`ConnectError::Conversion`] with `context` and `cause`.
    pub fn conversion(context: impl Into<String>, cause: impl Into<Cause>) -> Self {
        Self::Conversion { context: context.into(), cause: cause.into() }
    }
    /// An [`ConnectError::Offset`] with `context` and `cause`.
    pub fn offset(context: impl Into<String>, cause: impl Into<Cause>) -> Self {
        Self::Offset { context: context.into(), cause: cause.into() }
    }
    /// A [`ConnectError::Transaction`] with `context` and `cause`.
    pub fn transaction(context: impl Into<String>, cause: impl Into<Cause>) -> Self {
        Self::Transaction { context: context.into(), cause: cause.into() }
    }
    /// A [`ConnectError::Backend`] with `context` and `cause`.
    pub fn backend(context: impl Into<String>, cause: impl Into<Cause>) -> Self {
        Self::Backend { context: context.into(), cause: cause.into() }
    }
    /// A [`ConnectError::Denied`] with `context` and `cause`.
    pub fn denied(context: impl Into<String>, cause: impl Into<Cause>) -> Self {
        Self::Denied { context: context.into(), cause: cause.into() }
    }
    /// A [`ConnectError::DataLoss`] with `context` and `cause`.
    pub fn data_loss(context: impl Into<String>, cause: impl Into<Cause>) -> Self {
        Self::DataLoss { context: context.into(), cause: cause.into() }
    }
    /// A [`ConnectError::Retriable`] with `context` and `cause`.
    pub fn retriable(context: impl Into<String>, cause: impl Into<Cause>) -> Self {
        Self::Retriable { context: context.into(), cause: cause.into() }
    }
    /// A [`ConnectError::Fenced`] with `context` and `cause`.
    pub fn fenced(context: impl Into<String>, cause: impl Into<Cause>) -> Self {
        Self::Fenced { context: context.into(), cause: cause.into() }
    }
    /// A [`ConnectError::Conflict`] with `context` and `cause`.
    pub fn conflict(context: impl Into<String>, cause: impl Into<Cause>) -> Self {
        Self::Conflict { context: context.into(), cause: cause.into() }
    }
    /// An [`ConnectError::Invalid`] with `context` (naming the setting) and `cause`.
    pub fn invalid(context: impl Into<String>, cause: impl Into<Cause>) -> Self {
        Self::Invalid { context: context.into(), cause: cause.into() }
    }
    /// What went wrong underneath, whatever the kind (to look for a client library's error code
    /// in it, say).
    pub fn cause(&self) -> &(dyn StdError + Send + Sync + 'static) {
        match self {
            Self::Io { cause, .. }
            | Self::Conversion { cause, .. }
            | Self::Offset { cause, .. }
            | Self::Transaction { cause, .. }
            | Self::Backend { cause, .. }
            | Self::Denied { cause, .. }
            | Self::DataLoss { cause, .. }
            | Self::Retriable { cause, .. }
            | Self::Fenced { cause, .. }
            | Self::Conflict { cause, .. }
            | Self::Invalid { cause, .. } => cause.as_ref(),
        }
    }
    /// Which kind of error this is, without its context and cause: what decides a runner's
    /// reaction (retry, stop) and a process's exit code.
    pub fn kind(&self) -> ErrorKind {
        match self {
            Self::Io { .. } => ErrorKind::Io,
            Self::Conversion { .. } => ErrorKind::Conversion,
            Self::Offset { .. } => ErrorKind::Offset,
            Self::Transaction { .. } => ErrorKind::Transaction,
            Self::Backend { .. } => ErrorKind::Backend,
            Self::Denied { .. } => ErrorKind::Denied,
            Self::DataLoss { .. } => ErrorKind::DataLoss,
            Self::Retriable { .. } => ErrorKind::Retriable,
            Self::Fenced { .. } => ErrorKind::Fenced,
            Self::Conflict { .. } => ErrorKind::Conflict,
            Self::Invalid { .. } => ErrorKind::Invalid,
        }
    }
    /// A new error of `kind` with `context` and `cause`.
    pub fn of_kind(kind: ErrorKind, context: impl Into<String>, cause: impl Into<Cause>) -> Self {
        let (context, cause) = (context.into(), cause.into());
        match kind {
            ErrorKind::Io => Self::Io { context, cause },
            ErrorKind::Conversion => Self::Conversion { context, cause },
            ErrorKind::Offset => Self::Offset { context, cause },
            ErrorKind::Transaction => Self::Transaction { context, cause },
            ErrorKind::Backend => Self::Backend { context, cause },
            ErrorKind::Denied => Self::Denied { context, cause },
            ErrorKind::DataLoss => Self::DataLoss { context, cause },
            ErrorKind::Retriable => Self::Retriable { context, cause },
            ErrorKind::Fenced => Self::Fenced { context, cause },
            ErrorKind::Conflict => Self::Conflict { context, cause },
            ErrorKind::Invalid => Self::Invalid { context, cause },
        }
    }
    /// The same error (kind and cause) with `outer` put before its context: `"<outer>: <context>"`.
    pub fn within(self, outer: impl std::fmt::Display) -> Self {
        let kind = self.kind();
        let (context, cause) = match self {
            Self::Io { context, cause }
            | Self::Conversion { context, cause }
            | Self::Offset { context, cause }
            | Self::Transaction { context, cause }
            | Self::Backend { context, cause }
            | Self::Denied { context, cause }
            | Self::DataLoss { context, cause }
            | Self::Retriable { context, cause }
            | Self::Fenced { context, cause }
            | Self::Conflict { context, cause }
            | Self::Invalid { context, cause } => (context, cause),
        };
        Self::of_kind(kind, format!("{outer}: {context}"), cause)
    }
    /// Whether trying the batch again may succeed ([`ConnectError::Retriable`]).
    pub fn is_retriable(&self) -> bool {
        matches!(self, Self::Retriable { .. })
    }
}

/// The kinds of [`ConnectError`], one per variant.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ErrorKind {
    /// [`ConnectError::Io`].
    Io,
    /// [`ConnectError::Conversion`].
    Conversion,
    /// [`ConnectError::Offset`].
    Offset,
    /// [`ConnectError::Transaction`].
    Transaction,
    /// [`ConnectError::Backend`].
    Backend,
    /// [`ConnectError::Denied`].
    Denied,
    /// [`ConnectError::DataLoss`].
    DataLoss,
    /// [`ConnectError::Retriable`].
    Retriable,
    /// [`ConnectError::Fenced`].
    Fenced,
    /// [`ConnectError::Conflict`].
    Conflict,
    /// [`ConnectError::Invalid`].
    Invalid,
}

/// Result alias for connector calls.
pub type ConnectResult<T> = Result<T, ConnectError>;

#[cfg(test)]
mod tests {
    use super::*;

    /// Wrapping an error in an outer context keeps its kind and cause: a runner deciding to stop
    /// or retry, and an exit code, see the kind the failure had where it happened.
    #[test]
    fn within_keeps_the_kind_and_the_cause() {
        let errors = [
            ConnectError::denied("topic t", "TOPIC_AUTHORIZATION_FAILED"),
            ConnectError::data_loss("topic t partition 0", "120 records deleted"),
            ConnectError::conflict("[flows.scale_out] slots", "the topic has 4 partitions"),
            ConnectError::fenced("slot 3", "another instance owns it"),
            ConnectError::invalid("replication_factor = 3", "1 broker"),
            ConnectError::retriable("produce", "timed out"),
        ];
        for e in errors {
            let (kind, shown) = (e.kind(), e.to_string());
            let wrapped = e.within("flow a->b slot 0");
            assert_eq!(wrapped.kind(), kind);
            let (label, rest) = shown.split_once(": ").unwrap();
            assert_eq!(wrapped.to_string(), format!("{label}: flow a->b slot 0: {rest}"));
            assert_eq!(ConnectError::of_kind(kind, "c", "x").kind(), kind);
        }
    }
}
