//! What `strait failover` commits for one group partition: pure decisions, unit-tested.

use serde::Serialize;

use crate::positions::Saved;

/// What happens to one target group partition.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Action {
    /// The translated offset is committed into the target group.
    Commit,
    /// The target group is already at or past the translated offset: never rewound.
    KeepAhead,
    /// No offset sync covers the group's offset (nothing of the partition replicated yet below
    /// it): nothing is committed; the group starts there by its own `auto.offset.reset`.
    NoTranslation,
    /// The group is not moved at all (active on a cluster, a commit refused, records left to
    /// copy): the report's problems say why.
    Skipped,
}

impl Action {
    /// The name JSON reports give it (`commit`, `keep_ahead`, `no_translation`, `skipped`).
    pub fn name(self) -> &'static str {
        match self {
            Action::Commit => "commit",
            Action::KeepAhead => "keep_ahead",
            Action::NoTranslation => "no_translation",
            Action::Skipped => "skipped",
        }
    }
}

/// The action for a partition translated to `downstream` whose target group offset is `current`
/// (`None`: no commit, or a negative one): a group is only moved forward, as MM2's group offset
/// sync does.
pub fn decide(downstream: Option<i64>, current: Option<i64>) -> Action {
    match (downstream, current) {
        (None, _) => Action::NoTranslation,
        (Some(down), Some(now)) if now >= down => Action::KeepAhead,
        (Some(_), _) => Action::Commit,
    }
}

/// The target offset for a group at `upstream`, from the offset syncs' translation `translated`
/// and the flow's saved position of the partition. A group that consumed everything Strait
/// copied (`upstream` at or past the saved next offset: past it lie only transaction markers once
/// a planned failover caught up, or records not copied yet, which reach the group when they are)
/// resumes right after the last record written to the target, exactly; offset syncs alone may
/// place it up to `offset_lag_max` records earlier (MM2's translation). Never below `translated`.
pub fn translate_at_head(upstream: i64, translated: Option<i64>, saved: Option<&Saved>) -> Option<i64> {
    let head = saved.filter(|s| upstream >= s.next_offset).and_then(|s| s.last_downstream).map(|d| d + 1);
    match (translated, head) {
        (Some(t), Some(h)) => Some(t.max(h)),
        (t, h) => t.or(h),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn saved(next_offset: i64, last_downstream: Option<i64>) -> Saved {
        Saved { next_offset, last_timestamp: None, last_downstream, topic_id: None }
    }

    #[test]
    fn text_names_are_the_json_names() {
        for action in [Action::Commit, Action::KeepAhead, Action::NoTranslation, Action::Skipped] {
            assert_eq!(serde_json::to_value(action).unwrap(), action.name());
        }
    }

    #[test]
    fn a_group_is_only_moved_forward() {
        assert_eq!(decide(Some(10), None), Action::Commit);
        assert_eq!(decide(Some(10), Some(9)), Action::Commit);
        assert_eq!(decide(Some(10), Some(10)), Action::KeepAhead);
        assert_eq!(decide(Some(10), Some(11)), Action::KeepAhead);
        assert_eq!(decide(None, Some(3)), Action::NoTranslation);
        assert_eq!(decide(None, None), Action::NoTranslation);
    }

    #[test]
    fn a_group_at_the_head_resumes_after_the_last_copied_record() {
        // The newest sync is 15 records behind: syncs alone would re-read 15 records.
        assert_eq!(translate_at_head(100, Some(85), Some(&saved(100, Some(99)))), Some(100));
        // Identity policy over a target with records of its own: downstream offsets differ.
        assert_eq!(translate_at_head(100, Some(130), Some(&saved(100, Some(149)))), Some(150));
        // Past the head: only markers there, or records not copied yet.
        assert_eq!(translate_at_head(102, Some(85), Some(&saved(100, Some(99)))), Some(100));
        // Behind the head, the syncs decide.
        assert_eq!(translate_at_head(90, Some(85), Some(&saved(100, Some(99)))), Some(85));
        // Never below the syncs' answer, with or without a position.
        assert_eq!(translate_at_head(100, Some(120), Some(&saved(100, Some(99)))), Some(120));
        assert_eq!(translate_at_head(100, Some(85), None), Some(85));
        assert_eq!(translate_at_head(100, None, Some(&saved(100, None))), None);
        assert_eq!(translate_at_head(100, None, Some(&saved(100, Some(7)))), Some(8));
    }
}
