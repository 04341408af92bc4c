//! Topic ACLs (KIP-140 DescribeAcls and CreateAcls, KIP-290 patterns) through librdkafka's C API:
//! rdkafka 0.39 binds no ACL call. Only TOPIC bindings are read and written (MM2's topic ACL
//! sync needs no other resource).

use std::ffi::CString;
use std::fmt;
use std::os::raw::c_char;
use std::ptr;
use std::time::Duration;

use rdkafka::admin::AdminClient;
use rdkafka::bindings as rd;
use rdkafka::error::RDKafkaErrorCode;

use super::ffi::{poll_result, string, Owned};
use crate::client_log::ClientLog;

/// An ACL operation (Kafka's `AclOperation`, less the filter-only `ANY`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum AclOperation {
    /// Every operation.
    All,
    /// Read.
    Read,
    /// Write.
    Write,
    /// Create.
    Create,
    /// Delete.
    Delete,
    /// Alter.
    Alter,
    /// Describe.
    Describe,
    /// ClusterAction.
    ClusterAction,
    /// DescribeConfigs.
    DescribeConfigs,
    /// AlterConfigs.
    AlterConfigs,
    /// IdempotentWrite.
    IdempotentWrite,
}

/// Whether a binding allows or denies (Kafka's `AclPermissionType`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum AclPermission {
    /// ALLOW.
    Allow,
    /// DENY.
    Deny,
}

/// How a binding's resource name matches topics (Kafka's `PatternType`, KIP-290).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum AclPattern {
    /// The name is one topic (or `*`, every topic).
    Literal,
    /// The name is a prefix of topic names.
    Prefixed,
}

/// One ACL binding on a TOPIC resource, as DescribeAcls returns it and CreateAcls takes it.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TopicAcl {
    /// Topic name, prefix, or `*`.
    pub topic: String,
    /// How `topic` matches.
    pub pattern: AclPattern,
    /// Who, e.g. `User:alice`.
    pub principal: String,
    /// From where, e.g. `*`.
    pub host: String,
    /// What.
    pub operation: AclOperation,
    /// Allowed or denied.
    pub permission: AclPermission,
}

/// A refused or failed ACL request: Kafka's error code and the broker's (or librdkafka's) message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AclError {
    /// The error code, e.g. `SecurityDisabled` (no authorizer) or `ClusterAuthorizationFailed`.
    pub code: RDKafkaErrorCode,
    /// The message that came with it (may be empty).
    pub message: String,
}

impl fmt::Display for AclError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.message.as_str() {
            "" => write!(f, "{}", self.code),
            message => write!(f, "{} ({message})", self.code),
        }
    }
}

impl std::error::Error for AclError {}

impl AclError {
    fn new(code: rd::rd_kafka_resp_err_t, message: String) -> Self {
        Self { code: code.into(), message }
    }

    fn invalid(message: String) -> Self {
        Self { code: RDKafkaErrorCode::InvalidArgument, message }
    }
}

const OPERATIONS: [(AclOperation, rd::rd_kafka_AclOperation_t, &str); 11] = {
    use rd::rd_kafka_AclOperation_t as Op;
    use AclOperation as O;
    [
        (O::All, Op::RD_KAFKA_ACL_OPERATION_ALL, "ALL"),
        (O::Read, Op::RD_KAFKA_ACL_OPERATION_READ, "READ"),
        (O::Write, Op::RD_KAFKA_ACL_OPERATION_WRITE, "WRITE"),
        (O::Create, Op::RD_KAFKA_ACL_OPERATION_CREATE, "CREATE"),
        (O::Delete, Op::RD_KAFKA_ACL_OPERATION_DELETE, "DELETE"),
        (O::Alter, Op::RD_KAFKA_ACL_OPERATION_ALTER, "ALTER"),
        (O::Describe, Op::RD_KAFKA_ACL_OPERATION_DESCRIBE, "DESCRIBE"),
        (O::ClusterAction, Op::RD_KAFKA_ACL_OPERATION_CLUSTER_ACTION, "CLUSTER_ACTION"),
        (O::DescribeConfigs, Op::RD_KAFKA_ACL_OPERATION_DESCRIBE_CONFIGS, "DESCRIBE_CONFIGS"),
        (O::AlterConfigs, Op::RD_KAFKA_ACL_OPERATION_ALTER_CONFIGS, "ALTER_CONFIGS"),
        (O::IdempotentWrite, Op::RD_KAFKA_ACL_OPERATION_IDEMPOTENT_WRITE, "IDEMPOTENT_WRITE"),
    ]
};

impl AclOperation {
    fn from_rd(op: rd::rd_kafka_AclOperation_t) -> Option<Self> {
        OPERATIONS.iter().find(|(_, r, _)| *r == op).map(|(o, _, _)| *o)
    }

    fn to_rd(self) -> rd::rd_kafka_AclOperation_t {
        OPERATIONS
            .iter()
            .find(|(o, _, _)| *o == self)
            .map_or(rd::rd_kafka_AclOperation_t::RD_KAFKA_ACL_OPERATION_UNKNOWN, |(_, r, _)| *r)
    }
}

impl fmt::Display for AclOperation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(OPERATIONS.iter().find(|(o, _, _)| o == self).map_or("UNKNOWN", |(_, _, name)| name))
    }
}

impl fmt::Display for TopicAcl {
    /// One line for logs, e.g. `User:alice from * ALLOW READ on LITERAL topic orders`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let permission = match self.permission {
            AclPermission::Allow => "ALLOW",
            AclPermission::Deny => "DENY",
        };
        let pattern = match self.pattern {
            AclPattern::Literal => "LITERAL",
            AclPattern::Prefixed => "PREFIXED",
        };
        write!(
            f,
            "{} from {} {permission} {} on {pattern} topic {}",
            self.principal, self.host, self.operation, self.topic
        )
    }
}

fn timeout_ms(timeout: Duration) -> i32 {
    i32::try_from(timeout.as_millis()).unwrap_or(i32::MAX)
}

/// The binding `acl` points to, or `None` when it is not a TOPIC binding this module knows
/// (another resource, an unknown operation or pattern type).
///
/// # Safety
/// `acl` is a live binding of a DescribeAcls result.
unsafe fn topic_acl(acl: *const rd::rd_kafka_AclBinding_t) -> Option<TopicAcl> {
    // SAFETY: guaranteed by the caller; the strings are copied before the result is destroyed;
    // the enum values are within their Rust enums' ranges (librdkafka maps a value it does not
    // know to UNKNOWN when it parses the response).
    unsafe {
        if rd::rd_kafka_AclBinding_restype(acl) != rd::rd_kafka_ResourceType_t::RD_KAFKA_RESOURCE_TOPIC {
            return None;
        }
        let pattern = match rd::rd_kafka_AclBinding_resource_pattern_type(acl) {
            rd::rd_kafka_ResourcePatternType_t::RD_KAFKA_RESOURCE_PATTERN_LITERAL => AclPattern::Literal,
            rd::rd_kafka_ResourcePatternType_t::RD_KAFKA_RESOURCE_PATTERN_PREFIXED => AclPattern::Prefixed,
            _ => return None,
        };
        let permission = match rd::rd_kafka_AclBinding_permission_type(acl) {
            rd::rd_kafka_AclPermissionType_t::RD_KAFKA_ACL_PERMISSION_TYPE_ALLOW => AclPermission::Allow,
            rd::rd_kafka_AclPermissionType_t::RD_KAFKA_ACL_PERMISSION_TYPE_DENY => AclPermission::Deny,
            _ => return None,
        };
        Some(TopicAcl {
            topic: string(rd::rd_kafka_AclBinding_name(acl)),
            pattern,
            principal: string(rd::rd_kafka_AclBinding_principal(acl)),
            host: string(rd::rd_kafka_AclBinding_host(acl)),
            operation: AclOperation::from_rd(rd::rd_kafka_AclBinding_operation(acl))?,
            permission,
        })
    }
}

/// Every TOPIC ACL binding of the cluster (DescribeAcls with a filter matching any topic, pattern,
/// principal, host, operation and permission), blocking up to `timeout`. Needs `Describe` on the
/// cluster. Errors: the broker's refusal, e.g. `SecurityDisabled` when it runs no authorizer or
/// `ClusterAuthorizationFailed`, or a timeout.
pub fn describe_topic_acls(client: &AdminClient<ClientLog>, timeout: Duration) -> Result<Vec<TopicAcl>, AclError> {
    let timeout_ms = timeout_ms(timeout);
    let rk = client.inner().native_ptr();
    let mut errstr: [c_char; 512] = [0; 512];
    // SAFETY: every librdkafka object is owned by an `Owned` that destroys it after its last use;
    // null name, principal and host mean "any" in a filter; `errstr` outlives the call writing
    // it; the result's bindings are read before its event is destroyed; the client outlives this
    // function.
    unsafe {
        let filter = Owned(
            rd::rd_kafka_AclBindingFilter_new(
                rd::rd_kafka_ResourceType_t::RD_KAFKA_RESOURCE_TOPIC,
                ptr::null(),
                rd::rd_kafka_ResourcePatternType_t::RD_KAFKA_RESOURCE_PATTERN_ANY,
                ptr::null(),
                ptr::null(),
                rd::rd_kafka_AclOperation_t::RD_KAFKA_ACL_OPERATION_ANY,
                rd::rd_kafka_AclPermissionType_t::RD_KAFKA_ACL_PERMISSION_TYPE_ANY,
                errstr.as_mut_ptr(),
                errstr.len(),
            ),
            rd::rd_kafka_AclBinding_destroy,
        );
        if filter.0.is_null() {
            return Err(AclError::invalid(string(errstr.as_ptr())));
        }
        let queue = Owned(rd::rd_kafka_queue_new(rk), rd::rd_kafka_queue_destroy);
        let options = Owned(
            rd::rd_kafka_AdminOptions_new(rk, rd::rd_kafka_admin_op_t::RD_KAFKA_ADMIN_OP_DESCRIBEACLS),
            rd::rd_kafka_AdminOptions_destroy,
        );
        rd::rd_kafka_AdminOptions_set_request_timeout(options.0, timeout_ms, ptr::null_mut(), 0);
        rd::rd_kafka_DescribeAcls(rk, filter.0, options.0, queue.0);
        let event = poll_result(queue.0, timeout_ms).map_err(|(code, message)| AclError::new(code, message))?;
        let result = rd::rd_kafka_event_DescribeAcls_result(event.0);
        if result.is_null() {
            return Err(AclError::invalid("not a DescribeAcls result".into()));
        }
        let mut count = 0;
        let acls = rd::rd_kafka_DescribeAcls_result_acls(result, &mut count);
        Ok((0..count).filter_map(|i| topic_acl(*acls.add(i))).collect())
    }
}

/// A librdkafka binding of `acl`. Errors: a NUL byte in a name, or librdkafka refusing it.
fn binding(acl: &TopicAcl) -> Result<Owned<rd::rd_kafka_AclBinding_t>, AclError> {
    let c = |s: &str| CString::new(s).map_err(|_| AclError::invalid(format!("a NUL byte in ACL {acl}")));
    let (topic, principal, host) = (c(&acl.topic)?, c(&acl.principal)?, c(&acl.host)?);
    let pattern = match acl.pattern {
        AclPattern::Literal => rd::rd_kafka_ResourcePatternType_t::RD_KAFKA_RESOURCE_PATTERN_LITERAL,
        AclPattern::Prefixed => rd::rd_kafka_ResourcePatternType_t::RD_KAFKA_RESOURCE_PATTERN_PREFIXED,
    };
    let permission = match acl.permission {
        AclPermission::Allow => rd::rd_kafka_AclPermissionType_t::RD_KAFKA_ACL_PERMISSION_TYPE_ALLOW,
        AclPermission::Deny => rd::rd_kafka_AclPermissionType_t::RD_KAFKA_ACL_PERMISSION_TYPE_DENY,
    };
    let mut errstr: [c_char; 512] = [0; 512];
    // SAFETY: the CStrings and `errstr` outlive the call (librdkafka copies the strings); the
    // binding is owned by the returned `Owned`; `errstr` is NUL-terminated by librdkafka on error.
    unsafe {
        let new = Owned(
            rd::rd_kafka_AclBinding_new(
                rd::rd_kafka_ResourceType_t::RD_KAFKA_RESOURCE_TOPIC,
                topic.as_ptr(),
                pattern,
                principal.as_ptr(),
                host.as_ptr(),
                acl.operation.to_rd(),
                permission,
                errstr.as_mut_ptr(),
                errstr.len(),
            ),
            rd::rd_kafka_AclBinding_destroy,
        );
        if new.0.is_null() {
            return Err(AclError::invalid(format!("ACL {acl}: {}", string(errstr.as_ptr()))));
        }
        Ok(new)
    }
}

/// Creates `acls` in one CreateAcls request, blocking up to `timeout`; creating a binding that
/// exists is success (Kafka's rule). Needs `Alter` on the cluster. Returns each binding's
/// outcome, in order: say `SecurityDisabled` (no authorizer) or `ClusterAuthorizationFailed`.
/// Errors: the request as a whole failed (a timeout).
pub fn create_topic_acls(
    client: &AdminClient<ClientLog>,
    acls: &[TopicAcl],
    timeout: Duration,
) -> Result<Vec<Result<(), AclError>>, AclError> {
    let mut outcomes: Vec<Result<(), AclError>> = vec![Ok(()); acls.len()];
    let mut sent = Vec::new();
    for (i, acl) in acls.iter().enumerate() {
        match binding(acl) {
            Ok(b) => sent.push((i, b)),
            Err(e) => outcomes[i] = Err(e),
        }
    }
    if sent.is_empty() {
        return Ok(outcomes);
    }
    let timeout_ms = timeout_ms(timeout);
    let rk = client.inner().native_ptr();
    // SAFETY: the bindings, queue and options are owned by `Owned`s that outlive the request
    // (librdkafka copies the bindings); the result's entries are read before its event is
    // destroyed, and their errors belong to the result (not freed here); the client outlives
    // this function.
    unsafe {
        let queue = Owned(rd::rd_kafka_queue_new(rk), rd::rd_kafka_queue_destroy);
        let options = Owned(
            rd::rd_kafka_AdminOptions_new(rk, rd::rd_kafka_admin_op_t::RD_KAFKA_ADMIN_OP_CREATEACLS),
            rd::rd_kafka_AdminOptions_destroy,
        );
        rd::rd_kafka_AdminOptions_set_request_timeout(options.0, timeout_ms, ptr::null_mut(), 0);
        let mut bindings: Vec<*mut rd::rd_kafka_AclBinding_t> = sent.iter().map(|(_, b)| b.0).collect();
        rd::rd_kafka_CreateAcls(rk, bindings.as_mut_ptr(), bindings.len(), options.0, queue.0);
        let event = poll_result(queue.0, timeout_ms).map_err(|(code, message)| AclError::new(code, message))?;
        let result = rd::rd_kafka_event_CreateAcls_result(event.0);
        if result.is_null() {
            return Err(AclError::invalid("not a CreateAcls result".into()));
        }
        let mut count = 0;
        let results = rd::rd_kafka_CreateAcls_result_acls(result, &mut count);
        for (n, (i, _)) in sent.iter().enumerate() {
            outcomes[*i] = if n >= count {
                Err(AclError::invalid("no result for this binding".into()))
            } else {
                let error = rd::rd_kafka_acl_result_error(*results.add(n));
                if error.is_null()
                    || rd::rd_kafka_error_code(error) == rd::rd_kafka_resp_err_t::RD_KAFKA_RESP_ERR_NO_ERROR
                {
                    Ok(())
                } else {
                    Err(AclError::new(rd::rd_kafka_error_code(error), string(rd::rd_kafka_error_string(error))))
                }
            };
        }
        Ok(outcomes)
    }
}
