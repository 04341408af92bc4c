//! Topic ACL sync (MM2 `sync.topic.acls.enabled`, `MirrorSourceConnector.syncTopicAcls`): every
//! `sync_topic_acls_interval_ms`, the first time at start, the source's TOPIC ACL bindings go
//! through MM2's rules ([`target_acl`]) and the ones the target lacks are created there with
//! CreateAcls. Nothing is ever deleted on the target: ACLs set only there, or removed on the
//! source since, stay (MM2 does the same).
//!
//! A source that cannot describe its ACLs (no authorizer: `SECURITY_DISABLED`; or Strait lacks
//! `Describe` on its cluster) and a target that refuses a binding are logged once, with a hint,
//! and tried again every interval: the flow runs on.

use std::collections::{BTreeSet, HashSet};
use std::sync::Arc;

use async_trait::async_trait;
use rdkafka::error::RDKafkaErrorCode;
use tokio_util::sync::CancellationToken;

use crate::admin::{AclError, AclOperation, AclPattern, AclPermission, Admin, TopicAcl};
use crate::config::Flow;
use crate::metrics::metrics;
use crate::schedule::{self, Every, Periodic};

/// The target binding of the source binding `acl` under MM2's rules, or `None` when it is not
/// synced:
/// - only LITERAL bindings (MM2 drops PREFIXED ones), not the `*` wildcard (it names no topic:
///   MM2 would make it a literal `<alias>.*` matching nothing, or under the identity policy a
///   grant on every target topic);
/// - only topics the flow copies to the target ([`Flow::reaches_target`], MM2's
///   `shouldReplicateTopic`);
/// - ALLOW WRITE is dropped (only the flow writes the target topic); ALLOW ALL becomes ALLOW
///   READ; DENY bindings are kept as they are (MM2's `shouldReplicateAcl`/`targetAclBinding`);
/// - the topic is renamed by the flow's replication policy; principal, host, operation (but for
///   ALL) and permission are kept.
pub fn target_acl(flow: &Flow, acl: &TopicAcl) -> Option<TopicAcl> {
    if acl.pattern != AclPattern::Literal || acl.topic == "*" || !flow.reaches_target(&acl.topic) {
        return None;
    }
    let operation = match (acl.permission, acl.operation) {
        (AclPermission::Allow, AclOperation::Write) => return None,
        (AclPermission::Allow, AclOperation::All) => AclOperation::Read,
        (_, operation) => operation,
    };
    Some(TopicAcl {
        topic: flow.policy.remote_topic(&flow.source.alias, &acl.topic),
        pattern: AclPattern::Literal,
        principal: acl.principal.clone(),
        host: acl.host.clone(),
        operation,
        permission: acl.permission,
    })
}

/// What was already logged at warn, so a refusal that lasts is logged once.
#[derive(Default)]
struct Reported {
    /// The source's last DescribeAcls refusal.
    source: Option<RDKafkaErrorCode>,
    /// The target's last DescribeAcls refusal.
    target: Option<RDKafkaErrorCode>,
    /// Why the source described no topic ACL was logged.
    none: bool,
    /// Bindings the target refused to create.
    refused: HashSet<TopicAcl>,
}

/// Syncs `flow`'s topic ACLs every interval until `cancel`. Does nothing when the flow has the
/// sync turned off.
pub async fn run_topic_acl_sync(flow: Arc<Flow>, cancel: CancellationToken) {
    let Some(interval) = flow.topic_acls.interval() else { return };
    let Some((source, target)) = super::admins(&flow, "topic ACL sync") else { return };
    let name = flow.name.clone();
    schedule::run(&name, AclSync { flow, interval, source, target, reported: Reported::default() }, cancel).await;
}

/// The topic ACL sync task's one round, every `sync_topic_acls_interval_ms`: it reports its own
/// failures, once each ([`Reported`]).
struct AclSync {
    flow: Arc<Flow>,
    interval: std::time::Duration,
    source: Admin,
    target: Admin,
    reported: Reported,
}

#[async_trait]
impl Periodic for AclSync {
    fn rounds(&self) -> Vec<Every> {
        vec![Every::now_and_every("topic ACL sync", self.interval)]
    }

    async fn round(&mut self, _: usize) -> Result<(), String> {
        sync(&self.flow, &self.source, &self.target, &mut self.reported).await;
        Ok(())
    }
}

/// The hint for a source without authorizer.
fn no_authorizer(cluster: &str) -> String {
    format!("cluster {cluster} runs no authorizer (SECURITY_DISABLED), so it has no ACLs to sync; set sync_topic_acls = false for this flow")
}

/// Why DescribeAcls failed on `cluster`, and what to do.
fn describe_hint(e: &AclError, cluster: &str) -> String {
    match e.code {
        RDKafkaErrorCode::SecurityDisabled => no_authorizer(cluster),
        RDKafkaErrorCode::ClusterAuthorizationFailed => {
            format!(
                "Strait's user needs Describe on the Cluster resource of {cluster} to list its ACLs (docs/security.md)"
            )
        }
        _ => "retrying at the next interval".into(),
    }
}

/// Why the target refused to create a binding, and what to do.
fn create_hint(e: &AclError, cluster: &str) -> String {
    match e.code {
        RDKafkaErrorCode::SecurityDisabled => format!("cluster {cluster} runs no authorizer, so it takes no ACLs"),
        RDKafkaErrorCode::ClusterAuthorizationFailed => {
            format!("Strait's user needs Alter on the Cluster resource of {cluster} to create ACLs (docs/security.md)")
        }
        _ => "retrying at the next interval".into(),
    }
}

/// Logs once why the source described no topic ACL: librdkafka passes on no error of a
/// DescribeAcls response, so a source without authorizer (`SECURITY_DISABLED`) and a missing
/// `Describe` right both look like a cluster without ACLs; the source's broker config tells the
/// first apart.
async fn explain_none(flow: &Flow, source: &Admin, reported: &mut Reported) {
    if reported.none {
        return;
    }
    let why = match source.runs_authorizer().await {
        Ok(false) => no_authorizer(&source.alias),
        Ok(true) => format!(
            "if cluster {} has topic ACLs, Strait's user lacks Describe on its Cluster resource (docs/security.md)",
            source.alias
        ),
        Err(e) => {
            return tracing::debug!(flow = %flow.name, cluster = %source.alias, error = %e, "topic ACL sync: cannot tell whether the source runs an authorizer");
        }
    };
    reported.none = true;
    tracing::warn!(flow = %flow.name, cluster = %source.alias, "topic ACL sync: the source described no topic ACL: {why}");
}

/// One round: describes the source's and the target's topic ACLs and creates the target
/// bindings missing. A target that cannot describe its ACLs gets every binding (creating an
/// existing one changes nothing).
async fn sync(flow: &Flow, source: &Admin, target: &Admin, reported: &mut Reported) {
    let on_source = match source.topic_acls().await {
        Ok(acls) => acls,
        Err(e) => {
            if reported.source.replace(e.code) != Some(e.code) {
                let hint = describe_hint(&e, &source.alias);
                tracing::warn!(flow = %flow.name, cluster = %source.alias, error = %e, "topic ACL sync cannot describe the source's ACLs: {hint}");
            } else {
                tracing::debug!(flow = %flow.name, cluster = %source.alias, error = %e, "topic ACL sync: the source still cannot describe its ACLs");
            }
            return;
        }
    };
    if reported.source.take().is_some() {
        tracing::info!(flow = %flow.name, cluster = %source.alias, "topic ACL sync describes the source's ACLs again");
    }
    if on_source.is_empty() {
        return explain_none(flow, source, reported).await;
    }
    reported.none = false;
    let wanted: BTreeSet<TopicAcl> = on_source.iter().filter_map(|acl| target_acl(flow, acl)).collect();
    if wanted.is_empty() {
        return;
    }
    let existing: BTreeSet<TopicAcl> = match target.topic_acls().await {
        Ok(acls) => {
            reported.target = None;
            acls.into_iter().collect()
        }
        Err(e) => {
            if reported.target.replace(e.code) != Some(e.code) {
                let hint = describe_hint(&e, &target.alias);
                tracing::warn!(flow = %flow.name, cluster = %target.alias, error = %e, "topic ACL sync cannot describe the target's ACLs, so it creates every synced one each interval: {hint}");
            }
            BTreeSet::new()
        }
    };
    let missing: Vec<TopicAcl> = wanted.difference(&existing).cloned().collect();
    if missing.is_empty() {
        return;
    }
    let outcomes = match target.create_topic_acls(missing.clone()).await {
        Ok(outcomes) => outcomes,
        Err(e) => {
            return tracing::warn!(flow = %flow.name, cluster = %target.alias, error = %e, "topic ACL sync could not create ACLs; retrying at the next interval")
        }
    };
    let synced = metrics().acls_synced(&flow.source.alias, &flow.target.alias);
    for (acl, outcome) in missing.into_iter().zip(outcomes) {
        match outcome {
            Ok(()) => {
                synced.inc();
                tracing::info!(flow = %flow.name, cluster = %target.alias, acl = %acl, "synced topic ACL");
                reported.refused.remove(&acl);
            }
            Err(e) => {
                let hint = create_hint(&e, &target.alias);
                if reported.refused.insert(acl.clone()) {
                    tracing::warn!(flow = %flow.name, cluster = %target.alias, acl = %acl, error = %e, "the target refused topic ACL {acl}: {hint}");
                } else {
                    tracing::debug!(flow = %flow.name, cluster = %target.alias, acl = %acl, error = %e, "the target still refuses topic ACL {acl}");
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;

    const TWO_CLUSTERS: &str = "[[clusters]]\nalias = \"a\"\nbootstrap_servers = \"a:9092\"\n[[clusters]]\n\
         alias = \"b\"\nbootstrap_servers = \"b:9092\"\n[[flows]]\nsource = \"a\"\ntarget = \"b\"\n";

    fn flow(policy: &str) -> Flow {
        let toml = format!(
            "{TWO_CLUSTERS}topics = [\".*orders\"]\nreplication_policy = \"{policy}\"\nsync_topic_acls = true\n"
        );
        Config::parse(&toml).expect("config").remove(0)
    }

    #[test]
    fn acl_sync_is_off_by_default_and_its_interval_bounded() {
        let flow = Config::parse(TWO_CLUSTERS).expect("config").remove(0);
        assert_eq!(flow.topic_acls.interval(), None);
        let on = Config::parse(&format!("{TWO_CLUSTERS}sync_topic_acls = true\n")).expect("config").remove(0);
        assert_eq!(on.topic_acls.interval(), Some(std::time::Duration::from_secs(600)));
        let e = Config::parse(&format!("{TWO_CLUSTERS}sync_topic_acls_interval_ms = 0\n")).unwrap_err();
        assert_eq!(e.field, "flows[0].sync_topic_acls_interval_ms", "{e}");
    }

    fn acl(topic: &str, pattern: AclPattern, operation: AclOperation, permission: AclPermission) -> TopicAcl {
        TopicAcl {
            topic: topic.into(),
            pattern,
            principal: "User:alice".into(),
            host: "10.0.0.1".into(),
            operation,
            permission,
        }
    }

    #[test]
    fn target_acls_follow_mm2_rules() {
        use AclOperation::*;
        use AclPattern::*;
        use AclPermission::*;
        let flow = flow("default");
        let kept = |op, perm| target_acl(&flow, &acl("orders", Literal, op, perm));
        assert_eq!(kept(Read, Allow), Some(acl("a.orders", Literal, Read, Allow)), "renamed, principal and host kept");
        assert_eq!(kept(Describe, Allow), Some(acl("a.orders", Literal, Describe, Allow)));
        assert_eq!(kept(Write, Allow), None, "ALLOW WRITE dropped");
        assert_eq!(kept(All, Allow), Some(acl("a.orders", Literal, Read, Allow)), "ALLOW ALL made READ");
        assert_eq!(kept(Write, Deny), Some(acl("a.orders", Literal, Write, Deny)), "DENY kept as is");
        assert_eq!(kept(All, Deny), Some(acl("a.orders", Literal, All, Deny)), "DENY ALL kept as is");
        assert_eq!(target_acl(&flow, &acl("orders", Prefixed, Read, Allow)), None, "PREFIXED dropped");
        assert_eq!(target_acl(&flow, &acl("*", Literal, Read, Allow)), None, "the wildcard dropped");
        assert_eq!(target_acl(&flow, &acl("payments", Literal, Read, Allow)), None, "a topic not replicated");
        assert_eq!(target_acl(&flow, &acl("b.orders", Literal, Read, Allow)), None, "a topic from the target (cycle)");
        let identity = self::flow("identity");
        assert_eq!(
            target_acl(&identity, &acl("orders", Literal, All, Allow)),
            Some(acl("orders", Literal, Read, Allow)),
            "identity keeps the name"
        );
    }
}
