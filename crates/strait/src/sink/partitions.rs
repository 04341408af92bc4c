//! A map keyed by source partition for the per-ack bookkeeping (offset-sync state, metric
//! handles). Acks arrive in runs of one partition, so the entry last used is checked first and
//! most lookups neither hash the topic name nor touch its reference count.

use std::collections::HashMap;
use std::sync::Arc;

/// Values per source partition (topic, partition), in first-seen order.
pub struct PartitionMap<V> {
    index: HashMap<(Arc<str>, i32), usize>,
    entries: Vec<(Arc<str>, i32, V)>,
    /// Index of the entry last looked up.
    last: usize,
}

impl<V> Default for PartitionMap<V> {
    fn default() -> Self {
        Self { index: HashMap::new(), entries: Vec::new(), last: 0 }
    }
}

impl<V> PartitionMap<V> {
    /// The entry of `topic`/`partition`, inserted from `new` if absent.
    pub fn get_or_insert_with(&mut self, topic: &Arc<str>, partition: i32, new: impl FnOnce() -> V) -> &mut V {
        let i = match self.position(topic, partition) {
            Some(i) => i,
            None => {
                self.entries.push((topic.clone(), partition, new()));
                self.index.insert((topic.clone(), partition), self.entries.len() - 1);
                self.entries.len() - 1
            }
        };
        self.last = i;
        &mut self.entries[i].2
    }

    /// The entry of `topic`/`partition`, if any.
    pub fn get(&self, topic: &Arc<str>, partition: i32) -> Option<&V> {
        self.position(topic, partition).map(|i| &self.entries[i].2)
    }

    fn position(&self, topic: &Arc<str>, partition: i32) -> Option<usize> {
        match self.entries.get(self.last) {
            Some((t, p, _)) if *p == partition && (Arc::ptr_eq(t, topic) || t == topic) => Some(self.last),
            _ => self.index.get(&(topic.clone(), partition)).copied(),
        }
    }

    /// Every entry: (topic, partition, value).
    pub fn iter(&self) -> impl Iterator<Item = (&Arc<str>, i32, &V)> {
        self.entries.iter().map(|(t, p, v)| (t, *p, v))
    }

    /// Every entry, mutably.
    pub fn iter_mut(&mut self) -> impl Iterator<Item = (&Arc<str>, i32, &mut V)> {
        self.entries.iter_mut().map(|(t, p, v)| (&*t, *p, v))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_are_found_whichever_was_last() {
        let (a, b): (Arc<str>, Arc<str>) = ("a".into(), "b".into());
        let mut m = PartitionMap::default();
        *m.get_or_insert_with(&a, 0, || 0) += 1;
        *m.get_or_insert_with(&b, 0, || 0) += 10;
        *m.get_or_insert_with(&a, 1, || 0) += 100;
        // Another Arc of the same name is the same topic.
        *m.get_or_insert_with(&"a".into(), 0, || 0) += 1;
        *m.get_or_insert_with(&b, 0, || 0) += 10;
        assert_eq!(m.get(&a, 0), Some(&2));
        assert_eq!(m.get(&b, 0), Some(&20));
        assert_eq!(m.get(&a, 1), Some(&100));
        assert_eq!(m.get(&b, 1), None);
        let all: Vec<_> = m.iter().map(|(t, p, v)| (t.to_string(), p, *v)).collect();
        assert_eq!(all, [("a".into(), 0, 2), ("b".into(), 0, 20), ("a".into(), 1, 100)]);
    }
}
