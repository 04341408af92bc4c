//! What a flow writes beside its data, MM2-compatible: heartbeats and checkpoints (with group
//! offset sync), both through the flow's one control producer handed to them by [`crate::flow`],
//! and topic config and ACL sync, through the clusters' admin API.

pub mod checkpoint;
pub mod heartbeat;
pub mod topic_acls;
pub mod topic_configs;

use crate::admin::Admin;
use crate::config::Flow;

/// Admin clients of `flow`'s source and target cluster, or `None` once it is logged that `task`
/// (`"topic config sync"`...) cannot start: the client config is invalid.
fn admins(flow: &Flow, task: &str) -> Option<(Admin, Admin)> {
    match Admin::new(&flow.source).and_then(|s| Ok((s, Admin::new(&flow.target)?))) {
        Ok(admins) => Some(admins),
        Err(e) => {
            tracing::error!(flow = %flow.name, error = %e, "{task} cannot start");
            None
        }
    }
}
