//! Whether each flow runs and can write: `strait_flow_up`, `strait_flow_writable` and `/ready`.
//! A flow can run (`strait_flow_up` 1) through a target outage, retrying; it can write only
//! while its target answers too, which is what an alert on a dead mirror needs to see.

use super::{FlowLabels, Metrics};

/// What is known of one flow.
pub(super) struct FlowState {
    labels: FlowLabels,
    up: bool,
    answers: bool,
}

impl Metrics {
    /// Records whether the flow `name` (`source` → `target`) runs (`strait_flow_up`, `/ready`).
    pub fn set_flow_up(&self, name: &str, source: &str, target: &str, up: bool) {
        self.flow_up.get_or_create(&FlowLabels { source: source.into(), target: target.into() }).set(i64::from(up));
        self.update(name, source, target, |state| state.up = up);
    }

    /// Records whether the flow `source` → `target` copies batches (`copy`, resolved) or records
    /// (`strait_flow_copies_batches`).
    pub fn set_copy_batches(&self, source: &str, target: &str, batches: bool) {
        let labels = FlowLabels { source: source.into(), target: target.into() };
        self.copies_batches.get_or_create(&labels).set(i64::from(batches));
    }

    /// Records whether the target of flow `name` (`source` → `target`) answered its last probe
    /// (`strait_flow_writable`, `/ready`).
    pub fn set_target_answers(&self, name: &str, source: &str, target: &str, answers: bool) {
        self.update(name, source, target, |state| state.answers = answers);
    }

    fn update(&self, name: &str, source: &str, target: &str, change: impl FnOnce(&mut FlowState)) {
        let mut flows = self.flows.lock().unwrap_or_else(|e| e.into_inner());
        let labels = FlowLabels { source: source.into(), target: target.into() };
        let state = flows.entry(name.to_string()).or_insert(FlowState { labels, up: false, answers: true });
        change(state);
        self.writable.get_or_create(&state.labels).set(i64::from(state.up && state.answers));
    }

    /// What keeps each flow from being ready (not running, or its target not answering), for
    /// `/ready`; empty when every flow is ready.
    pub fn flows_down(&self) -> Vec<String> {
        let flows = self.flows.lock().unwrap_or_else(|e| e.into_inner());
        flows
            .iter()
            .filter_map(|(name, state)| match (state.up, state.answers) {
                (false, _) => Some(format!("{name} (not running)")),
                (true, false) => Some(format!("{name} (target not answering)")),
                (true, true) => None,
            })
            .collect()
    }
}
