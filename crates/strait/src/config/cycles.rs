//! Flows on one cycle under the identity policy copy alike (issue 45). Records and batches keep
//! loops apart by different marks: a record flow by its provenance header, which a batch cannot
//! carry without being written anew; a batch flow by its producer id's registration, which a
//! record flow's producer (librdkafka, which does not give its id) never makes. So on a cycle of
//! flows (A→B→A, or a ring A→B→C→A) where one copies records and another batches, records
//! written by one kind come round through the other and are copied again.
//!
//! Also here: an exactly-once batch flow cannot pass on the batches another batch flow brought
//! from a third cluster (a chain or ring), as one transaction holds one producer's batches.

use std::collections::BTreeSet;

use super::kinds::{CopyChoice, CopyKind, CopySetting};
use super::{ConfigError, Delivery, Flow};
use crate::rules::err;

/// Which cluster aliases the flows lead from and to, through any number of flows (each alias
/// reaches itself).
struct Reach(BTreeSet<(String, String)>);

impl Reach {
    fn of(flows: &[Flow]) -> Self {
        let mut reach: BTreeSet<(String, String)> = BTreeSet::new();
        for f in flows {
            for alias in [&f.source.alias, &f.target.alias] {
                reach.insert((alias.clone(), alias.clone()));
            }
            reach.insert((f.source.alias.clone(), f.target.alias.clone()));
        }
        // Closed by adding pairs until none is new: a handful of clusters.
        loop {
            let joined: Vec<_> = (reach.iter())
                .flat_map(|(a, b)| reach.iter().filter(move |(c, _)| c == b).map(move |(_, d)| (a.clone(), d.clone())))
                .filter(|pair| !reach.contains(pair))
                .collect();
            if joined.is_empty() {
                return Self(reach);
            }
            reach.extend(joined);
        }
    }

    /// Whether `f` and `g` lie on one cycle: each one's target leads to the other's source.
    fn one_cycle(&self, f: &Flow, g: &Flow) -> bool {
        let leads = |from: &str, to: &str| self.0.contains(&(from.to_string(), to.to_string()));
        leads(&f.target.alias, &g.source.alias) && leads(&g.target.alias, &f.source.alias)
    }
}

fn identity(f: &Flow) -> bool {
    matches!(f.policy, strait_mm2::ReplicationPolicy::Identity { .. })
}

/// Whether `f` and `g` would pass each other's records round: on one cycle, either under the
/// identity policy.
fn guarded_apart(reach: &Reach, f: &Flow, g: &Flow) -> bool {
    (identity(f) || identity(g)) && reach.one_cycle(f, g)
}

/// A batch flow bringing batches into the source of `f`, an exactly-once batch flow under the
/// identity policy, from a cluster other than `f`'s target: `f` would pass them on with a
/// producer of their own (`crate::sink::lanes`), outside its transaction, and so stops at the
/// first. (Batches from `f`'s target are echoes, dropped.)
fn relayed_into<'a>(flows: &'a [Flow], f: &Flow) -> Option<&'a Flow> {
    if !identity(f) || f.copy.kind != CopyKind::Batches || !matches!(f.delivery(), Delivery::ExactlyOnce { .. }) {
        return None;
    }
    let brings = |g: &&Flow| g.copy.kind == CopyKind::Batches && g.target.alias == f.source.alias;
    flows.iter().filter(brings).find(|g| g.source.alias != f.target.alias)
}

/// `copy = "auto"` flows that took batches take records when a flow on one cycle with them
/// copies records under the identity policy ([`check_copy_kinds`]), or when they deliver
/// exactly once and another batch flow brings a third cluster's batches into their source
/// ([`relayed_into`]), until none changes (a flow switched may switch others on its cycles).
pub(super) fn settle_auto(flows: &mut [Flow]) {
    let reach = Reach::of(flows);
    loop {
        let switch = (0..flows.len()).find_map(|i| {
            let f = &flows[i];
            if (f.writing.copy, f.copy.kind) != (CopySetting::Auto, CopyKind::Batches) {
                return None;
            }
            if let Some(g) = flows.iter().find(|g| g.copy.kind == CopyKind::Records && guarded_apart(&reach, f, g)) {
                return Some((
                    i,
                    format!("flow {} copies records on a cycle with it under the identity policy", g.name),
                ));
            }
            let g = relayed_into(flows, f)?;
            Some((i, format!("exactly-once, and flow {} brings batches of a third cluster into its source", g.name)))
        });
        let Some((i, reason)) = switch else { return };
        flows[i].copy = CopyChoice::records_unless(Some(reason));
    }
}

/// Refuses an exactly-once batch flow under the identity policy that another batch flow brings
/// a third cluster's batches to ([`relayed_into`]), naming its `delivery`.
pub(super) fn check_exactly_once_relays(flows: &[Flow]) -> Result<(), ConfigError> {
    for (i, f) in flows.iter().enumerate() {
        if let Some(g) = relayed_into(flows, f) {
            return Err(err(
                format!("flows[{i}].delivery"),
                format!(
                    "flow {} copies batches exactly once under the identity policy, and flow {} brings batches of {} into its source, which it would pass on with a producer of their own, outside its transaction; set delivery = \"at_least_once\" or copy = \"records\" on it",
                    f.name, g.name, g.source.alias
                ),
            ));
        }
    }
    Ok(())
}

/// Refuses a flow copying records and one copying batches on one cycle, either under the
/// identity policy: each kind's copies would come round through the other (module doc).
pub(super) fn check_copy_kinds(flows: &[Flow]) -> Result<(), ConfigError> {
    let reach = Reach::of(flows);
    for (j, later) in flows.iter().enumerate() {
        let clash = flows[..j].iter().find(|g| g.copy.kind != later.copy.kind && guarded_apart(&reach, later, g));
        if let Some(other) = clash {
            return Err(err(
                format!("flows[{j}].copy"),
                format!(
                    "flow {} copies {} and flow {}, on a cycle with it, copies {} under the identity policy: a batch carries no provenance header and a record producer's id is not registered, so records would come round and be copied again; set copy alike on every flow of the cycle",
                    later.name,
                    later.copy.kind.name(),
                    other.name,
                    other.copy.kind.name()
                ),
            ));
        }
    }
    Ok(())
}
