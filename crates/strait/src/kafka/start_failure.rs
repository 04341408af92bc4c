//! Start-up failures of a flow, classified: permanent ones (refused credentials, a setting the
//! broker refuses) stop the flow naming the setting; the others are retried.

use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use strait_connect::ConnectError;

use crate::config::Flow;

/// Error codes that mean the cluster refuses Strait's credentials or lacks an ACL for it.
const DENIED: &[RDKafkaErrorCode] = &[
    RDKafkaErrorCode::Authentication,
    RDKafkaErrorCode::SaslAuthenticationFailed,
    RDKafkaErrorCode::UnsupportedSASLMechanism,
    RDKafkaErrorCode::IllegalSASLState,
    RDKafkaErrorCode::TopicAuthorizationFailed,
    RDKafkaErrorCode::GroupAuthorizationFailed,
    RDKafkaErrorCode::ClusterAuthorizationFailed,
    RDKafkaErrorCode::TransactionalIdAuthorizationFailed,
    RDKafkaErrorCode::DelegationTokenAuthorizationFailed,
];

/// Whether `code` means the cluster refuses Strait (credentials or a missing ACL).
pub fn is_denied(code: RDKafkaErrorCode) -> bool {
    DENIED.contains(&code)
}

/// Whether a consumer's poll error ends a read: a fatal client error, or a refusal no retry
/// fixes. Anything else (a connection to a broker refused, a leader moving) is an event the
/// client goes on retrying past, logged by [`crate::client_log`]; the read's own stall timeout
/// bounds the wait. (A bootstrap address of a broker that is down gives such an event on most
/// starts during the outage.)
pub fn ends_read(e: &KafkaError) -> bool {
    matches!(e, KafkaError::MessageConsumptionFatal(_)) || code_of(e).is_some_and(is_denied)
}

/// The broker or librdkafka error code of `e`; rdkafka gives none for admin errors, though they
/// carry one.
fn code_of(e: &KafkaError) -> Option<RDKafkaErrorCode> {
    match e {
        KafkaError::AdminOp(code) => Some(*code),
        other => other.rdkafka_error_code(),
    }
}

/// `e` as a [`ConnectError`] for `context` (what was tried, on which cluster): [`ConnectError::Denied`]
/// for authentication and authorization failures, which retrying cannot fix, else
/// [`ConnectError::Backend`], saying so when no broker answered at all.
pub fn connect_error(context: impl Into<String>, e: KafkaError) -> ConnectError {
    match code_of(&e) {
        Some(code) if is_denied(code) => {
            ConnectError::denied(format!("{} (the cluster's ACLs do not allow it)", context.into()), e)
        }
        Some(RDKafkaErrorCode::BrokerTransportFailure | RDKafkaErrorCode::AllBrokersDown) => ConnectError::backend(
            format!("{} (no broker answers: check the cluster's bootstrap_servers and that it runs)", context.into()),
            e,
        ),
        _ => ConnectError::backend(context, e),
    }
}

/// A failure to start part of a flow, classified by [`classify_start`].
#[derive(Debug)]
pub enum StartFailure {
    /// A later attempt may succeed: a cluster unreachable, a leader not available, a coordinator
    /// loading, a request timed out, anything not known to be permanent. Retried with backoff.
    Transient(ConnectError),
    /// Retrying cannot help until an operator acts: the flow stops with this error, whose context
    /// names the setting at fault where one is known.
    Permanent(ConnectError),
}

/// What to fix when the target refuses `flow`'s transaction timeout (`InvalidTransactionTimeout`),
/// as both copy kinds' transactional producers say it.
pub fn transaction_timeout_refused(flow: &Flow) -> String {
    format!(
        "flow {}: transaction_timeout_ms is above the target's transaction.max.timeout.ms (15 min by default)",
        flow.name
    )
}

/// Classifies a failure to start part of `flow` (the slot group and its coordination topic, the
/// sink and its state and offset-syncs topics, the source, checkpoints), from its kind and the
/// Kafka error code found in its causes. Permanent: a kind that says so (refused transactions,
/// [`ConnectError::Denied`], a source gap, a slot conflict, fencing, [`ConnectError::Invalid`]);
/// a client librdkafka cannot create (a file it names cannot be read or parsed); authentication
/// or authorisation refused; a replication factor, partition count, topic name, topic config,
/// policy, session timeout or transaction timeout the broker refuses. The permanent ones found
/// by code come back as [`ConnectError::Invalid`] (or [`ConnectError::Denied`]) whose context
/// names the flow's setting. Everything else is transient.
pub fn classify_start(flow: &Flow, e: ConnectError) -> StartFailure {
    if matches!(e, ConnectError::Denied { .. } | ConnectError::Invalid { .. }) {
        // Already say what to fix.
        return StartFailure::Permanent(e);
    }
    let setting = kafka_cause(&e).and_then(|k| refused_setting(flow, k));
    match (setting, &e) {
        (Some(Refused::Denied(hint)), _) => StartFailure::Permanent(ConnectError::denied(hint, e)),
        (Some(Refused::Setting(hint)), _) => StartFailure::Permanent(ConnectError::invalid(hint, e)),
        (
            None,
            ConnectError::Transaction { .. }
            | ConnectError::Denied { .. }
            | ConnectError::DataLoss { .. }
            | ConnectError::Conflict { .. }
            | ConnectError::Fenced { .. }
            | ConnectError::Invalid { .. },
        ) => StartFailure::Permanent(e),
        (None, _) => StartFailure::Transient(e),
    }
}

/// The Kafka client error underneath `e`, if any (through nested [`ConnectError`]s).
fn kafka_cause(e: &ConnectError) -> Option<&KafkaError> {
    let cause = e.cause();
    cause.downcast_ref::<KafkaError>().or_else(|| cause.downcast_ref::<ConnectError>().and_then(kafka_cause))
}

/// What a permanent Kafka error is about.
enum Refused {
    /// Credentials or ACLs.
    Denied(String),
    /// A setting of the flow or of a cluster's client table, named.
    Setting(String),
}

/// The setting a Kafka error refuses for good, or `None` when the error may pass.
fn refused_setting(flow: &Flow, e: &KafkaError) -> Option<Refused> {
    use RDKafkaErrorCode as C;
    let (name, target, rf) = (&flow.name, &flow.target.alias, flow.writing.replication_factor);
    let setting = |s: String| Some(Refused::Setting(s));
    if let KafkaError::ClientCreation(_) = e {
        // librdkafka names the property (`ssl.ca.location failed: ...`) in the error itself.
        return setting(format!(
            "flow {name}: a [clusters.client] setting of {} or {target}: librdkafka cannot create a client \
             with it (a file it names cannot be read or parsed, or a value is refused)",
            flow.source.alias
        ));
    }
    if let KafkaError::AdminOpCreation(why) = e {
        return setting(format!("flow {name}: {why}"));
    }
    match code_of(e)? {
        code if is_denied(code) => Some(Refused::Denied(format!(
            "flow {name}: the cluster refuses Strait's credentials or lacks an ACL for it (check the sasl.* and \
             ssl.* settings of its [clusters.client] table and its ACLs)"
        ))),
        C::InvalidReplicationFactor | C::InvalidReplicaAssignment => setting(format!(
            "flow {name}: replication_factor = {rf}{}: the target {target} cannot place that many replicas \
             (at most its broker count)",
            if rf == -1 { " (the broker's default.replication.factor)" } else { "" }
        )),
        C::InvalidConfig | C::PolicyViolation => setting(format!(
            "flow {name}: a topic config the target {target} refuses: replication_factor = {rf}, or a config \
             copied from the source topic (leave it out with sync_topic_configs_exclude)"
        )),
        C::InvalidPartitions => setting(format!(
            "flow {name}: a partition count the target {target} refuses ([flows.scale_out] slots = {}, or the \
             source topic's partitions)",
            flow.slots()
        )),
        C::InvalidTopic => setting(format!(
            "flow {name}: a topic name the target {target} refuses (too long or not allowed once renamed: check \
             the cluster aliases, separator and replication_policy)"
        )),
        C::InvalidSessionTimeout => setting(format!(
            "flow {name}: [flows.scale_out] session_timeout_ms = {} is outside the target's \
             group.min.session.timeout.ms and group.max.session.timeout.ms",
            flow.scale_out.session_timeout.as_millis()
        )),
        C::InvalidTransactionTimeout => setting(transaction_timeout_refused(flow)),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;
    use RDKafkaErrorCode as C;

    fn flow() -> Flow {
        let toml = "[[clusters]]\nalias = \"a\"\nbootstrap_servers = \"h:1\"\n[[clusters]]\nalias = \"b\"\n\
                    bootstrap_servers = \"h:2\"\n[[flows]]\nsource = \"a\"\ntarget = \"b\"\nreplication_factor = 3\n\
                    [flows.scale_out]\nenabled = true\nslots = 4\nsession_timeout_ms = 1000\n";
        Config::parse(toml).unwrap().remove(0)
    }

    #[test]
    fn a_read_ends_on_fatal_errors_and_refusals_only() {
        let consumption = |code| KafkaError::MessageConsumption(code);
        assert!(!ends_read(&consumption(C::BrokerTransportFailure)));
        assert!(!ends_read(&consumption(C::AllBrokersDown)));
        assert!(!ends_read(&consumption(C::NotLeaderForPartition)));
        assert!(ends_read(&KafkaError::MessageConsumptionFatal(C::BrokerTransportFailure)));
        assert!(ends_read(&consumption(C::TopicAuthorizationFailed)));
        assert!(ends_read(&consumption(C::SaslAuthenticationFailed)));
    }

    #[test]
    fn start_failures_are_permanent_only_when_retrying_cannot_help() {
        let admin = |code| ConnectError::backend("create topic t on cluster b", KafkaError::AdminOp(code));
        let metadata = |code| ConnectError::backend("list topics", KafkaError::MetadataFetch(code));
        // (failure, permanent, what the stopping error must name)
        let cases: Vec<(ConnectError, bool, &str)> = vec![
            (admin(C::InvalidReplicationFactor), true, "replication_factor = 3"),
            (admin(C::InvalidReplicaAssignment), true, "replication_factor = 3"),
            (admin(C::InvalidConfig), true, "sync_topic_configs_exclude"),
            (admin(C::PolicyViolation), true, "a topic config the target b refuses"),
            (admin(C::InvalidPartitions), true, "[flows.scale_out] slots = 4"),
            (admin(C::InvalidTopic), true, "replication_policy"),
            (admin(C::ClusterAuthorizationFailed), true, "ACL"),
            (admin(C::TopicAuthorizationFailed), true, "ACL"),
            (metadata(C::SaslAuthenticationFailed), true, "credentials"),
            (metadata(C::UnsupportedSASLMechanism), true, "sasl.*"),
            (ConnectError::backend("join", KafkaError::Global(C::GroupAuthorizationFailed)), true, "ACL"),
            (ConnectError::backend("connect", KafkaError::Global(C::Authentication)), true, "credentials"),
            (
                ConnectError::backend("join", KafkaError::Global(C::InvalidSessionTimeout)),
                true,
                "session_timeout_ms = 1000",
            ),
            (
                ConnectError::transaction("init", KafkaError::Global(C::InvalidTransactionTimeout)),
                true,
                "transaction_timeout_ms",
            ),
            (
                ConnectError::backend(
                    "producer for b",
                    KafkaError::ClientCreation("ssl.ca.location failed: no certificate or crl found".into()),
                ),
                true,
                "ssl.ca.location failed",
            ),
            (
                admin_creation("topic t: 4294967295 partitions are more than Kafka allows"),
                true,
                "more than Kafka allows",
            ),
            // Nested: the code is found under the outer error.
            (ConnectError::backend("start", admin(C::InvalidReplicationFactor)), true, "replication_factor = 3"),
            // Kinds that are permanent whatever their cause.
            (ConnectError::conflict("flow a->b: [flows.scale_out] slots", "4 vs 6"), true, "slots"),
            (ConnectError::denied("cluster b refused Strait's credentials", "login"), true, "credentials"),
            (ConnectError::data_loss("orders 0", "gap"), true, "orders 0"),
            (ConnectError::fenced("slot 0", "another instance"), true, "another instance"),
            (ConnectError::transaction("init transactions", "refused"), true, "init transactions"),
            (ConnectError::invalid("flow a->b: replication_factor", "x"), true, "replication_factor"),
            // Transient: may pass on a later attempt.
            (metadata(C::BrokerTransportFailure), false, "list topics"),
            (metadata(C::AllBrokersDown), false, "list topics"),
            (metadata(C::OperationTimedOut), false, "list topics"),
            (admin(C::LeaderNotAvailable), false, "create topic"),
            (admin(C::CoordinatorLoadInProgress), false, "create topic"),
            (admin(C::NotCoordinator), false, "create topic"),
            (admin(C::NotController), false, "create topic"),
            (admin(C::RequestTimedOut), false, "create topic"),
            (admin(C::UnknownTopicOrPartition), false, "create topic"),
            (admin(C::ThrottlingQuotaExceeded), false, "create topic"),
            (
                ConnectError::offset("read positions", KafkaError::MessageConsumption(C::OperationTimedOut)),
                false,
                "read positions",
            ),
            (ConnectError::backend("connect to cluster b", "no cluster id within 10s"), false, "no cluster id"),
            (
                ConnectError::retriable("init transactions", KafkaError::Global(C::CoordinatorNotAvailable)),
                false,
                "init",
            ),
        ];
        assert!(cases.len() >= 30);
        let flow = flow();
        for (failure, permanent, names) in cases {
            let shown = failure.to_string();
            match classify_start(&flow, failure) {
                StartFailure::Permanent(e) => {
                    assert!(permanent, "{shown}: must be retried, not stop the flow ({e})");
                    assert!(e.to_string().contains(names), "{shown}: the error must name {names:?}: {e}");
                }
                StartFailure::Transient(e) => {
                    assert!(!permanent, "{shown}: must stop the flow, not be retried");
                    assert_eq!(e.to_string(), shown, "a transient failure is retried as it is");
                }
            }
        }
    }

    fn admin_creation(why: &str) -> ConnectError {
        ConnectError::backend("create topic", KafkaError::AdminOpCreation(why.into()))
    }
}
