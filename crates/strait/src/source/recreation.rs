//! Source topics deleted and created again under the same name while the flow runs (a new topic
//! id, KIP-516). Resuming the new topic at the old topic's offsets would skip its first records,
//! so its partitions are taken off the consumer at once, and only once every record of the old
//! topic already read is committed (its positions saved with the old id) does the new id come
//! into force and the new topic start at its log start. Pure bookkeeping; the source does the I/O.

use std::collections::{HashMap, HashSet};

use crate::topic_id::TopicId;

/// The topics recreated during this run, and those still waiting for their old records' commit.
#[derive(Default)]
pub struct Recreations {
    /// Recreated in this run: saved positions (of an earlier topic of the name) never apply.
    recreated: HashSet<String>,
    /// Recreated, old records still uncommitted: topic → its new id and, per partition, the next
    /// offset after the last record read from the old topic.
    draining: HashMap<String, (TopicId, HashMap<i32, i64>)>,
    /// Assigned topics missing from the source's last listing (deleted, perhaps about to be
    /// created again): their partitions are paused until the topic is listed again.
    vanished: HashSet<String>,
}

impl Recreations {
    /// The topics recreated in this run, whose saved positions never apply.
    pub fn recreated(&self) -> &HashSet<String> {
        &self.recreated
    }

    /// Whether `topic` waits for its old records' commit before its partitions are assigned again.
    pub fn is_draining(&self, topic: &str) -> bool {
        self.draining.contains_key(topic)
    }

    /// Whether any topic waits.
    pub fn any_draining(&self) -> bool {
        !self.draining.is_empty()
    }

    /// `topic` is missing from the source's listing: whether it was not already.
    pub fn vanished(&mut self, topic: &str) -> bool {
        self.vanished.insert(topic.to_string())
    }

    /// `topic` is listed again: whether it had vanished.
    pub fn listed_again(&mut self, topic: &str) -> bool {
        self.vanished.remove(topic)
    }

    /// `topic` now has `new_id`; `read` holds, per partition, the next offset after the last
    /// record read from the old topic and not yet committed (partitions with nothing uncommitted
    /// are left out).
    pub fn begin(&mut self, topic: &str, new_id: TopicId, read: HashMap<i32, i64>) {
        self.vanished.remove(topic);
        self.recreated.insert(topic.to_string());
        self.draining.insert(topic.to_string(), (new_id, read));
    }

    /// Records of `topic`/`partition` before `next` are committed.
    pub fn committed(&mut self, topic: &str, partition: i32, next: i64) {
        if let Some((_, read)) = self.draining.get_mut(topic) {
            if read.get(&partition).is_some_and(|r| next >= *r) {
                read.remove(&partition);
            }
        }
    }

    /// Every record read since the last commit was dropped (an aborted transaction): none of the
    /// old topics' records is waiting any more.
    pub fn rewound(&mut self) {
        for (_, read) in self.draining.values_mut() {
            read.clear();
        }
    }

    /// The topics whose old records are all committed, each with its new id, now in force.
    pub fn take_drained(&mut self) -> Vec<(String, TopicId)> {
        let done: Vec<String> =
            self.draining.iter().filter(|(_, (_, r))| r.is_empty()).map(|(t, _)| t.clone()).collect();
        done.into_iter().filter_map(|t| self.draining.remove(&t).map(|(id, _)| (t, id))).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(s: &str) -> TopicId {
        TopicId(s.into())
    }

    #[test]
    fn a_recreated_topic_waits_until_every_old_record_read_is_committed() {
        let mut r = Recreations::default();
        r.begin("orders", id("new"), HashMap::from([(0, 100), (2, 7)]));
        assert!(r.recreated().contains("orders") && r.is_draining("orders") && !r.recreated().contains("other"));
        assert!(r.take_drained().is_empty());
        r.committed("orders", 0, 99);
        r.committed("orders", 2, 7);
        r.committed("other", 0, 1_000);
        assert!(r.take_drained().is_empty(), "partition 0 still has offset 99 uncommitted");
        r.committed("orders", 0, 100);
        assert_eq!(r.take_drained(), [("orders".to_string(), id("new"))]);
        assert!(!r.is_draining("orders") && !r.any_draining());
        assert!(r.recreated().contains("orders"), "saved positions of the old topic never apply again");
    }

    #[test]
    fn a_vanished_topic_is_paused_once_and_a_recreation_ends_it() {
        let mut r = Recreations::default();
        assert!(r.vanished("a") && !r.vanished("a"), "paused once");
        assert!(r.listed_again("a") && !r.listed_again("a"));
        r.vanished("b");
        r.begin("b", id("b2"), HashMap::new());
        assert!(!r.listed_again("b"), "the recreation took its partitions off");
    }

    #[test]
    fn nothing_uncommitted_or_an_abort_ends_the_wait() {
        let mut r = Recreations::default();
        r.begin("a", id("a2"), HashMap::new());
        r.begin("b", id("b2"), HashMap::from([(1, 5)]));
        assert_eq!(r.take_drained(), [("a".to_string(), id("a2"))]);
        r.rewound();
        assert_eq!(r.take_drained(), [("b".to_string(), id("b2"))]);
    }
}
