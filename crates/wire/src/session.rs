//! Fetch sessions (KIP-227): once a full fetch opened one with a broker, each next fetch names
//! only the partitions whose position changed, and forgets those no longer wanted; the broker
//! answers only the partitions with news (records, an error, a moved high watermark or log
//! start). An idle fetch of thousands of partitions is then a few bytes each way.

use std::collections::HashMap;

use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic, ForgottenTopic};
use kafka_protocol::messages::{FetchRequest, TopicName};
use uuid::Uuid;

use crate::fetched::FetchAt;
use crate::names::{grouped, topic_name};

/// A partition of a session: its topic's id (nil when asked by name), name and index. A topic
/// created again under its name is another partition to the broker (Fetch v13+).
type Key = (Uuid, String, i32);

/// What a session holds of a partition, as last sent: the fetch offset, the leader epoch, the last
/// fetched epoch and the byte limit.
type Sent = (i64, i32, i32, i32);

/// One broker's fetch session, as this client last left it.
#[derive(Debug, Default)]
pub(crate) struct Session {
    /// The broker's id for it; 0 while none is open, so the next fetch is full and asks for one.
    id: i32,
    /// The epoch of the next incremental fetch: 1 after the full one, then one more each answer.
    epoch: i32,
    sent: HashMap<Key, Sent>,
}

/// A fetch request made from a session, and what the session holds once it is answered.
pub(crate) struct Asked {
    pub(crate) request: FetchRequest,
    sent: HashMap<Key, Sent>,
}

impl Asked {
    /// The name of the topic asked under `id` (or by name when `id` is nil and `name` given),
    /// and the offset the session holds for its `partition` once this is answered.
    pub(crate) fn asked(&self, id: Uuid, name: &str, partition: i32) -> Option<(&str, i64)> {
        self.sent
            .iter()
            .find(|((i, n, p), _)| *p == partition && if id.is_nil() { n == name } else { *i == id })
            .map(|((_, n, _), (offset, ..))| (n.as_str(), *offset))
    }

    /// The names of the topics the session holds once this is answered.
    pub(crate) fn topics(&self) -> impl Iterator<Item = String> + '_ {
        self.sent.keys().map(|(_, name, _)| name.clone())
    }
}

impl Session {
    /// `base` (limits, isolation) with the partitions `wanted` (each with its leader epoch) from
    /// this session: all of them when none is open; else only those new or changed since the
    /// last answer, and the ones no longer wanted forgotten.
    pub(crate) fn ask(&self, base: FetchRequest, wanted: &[(&FetchAt, i32)], partition_max_bytes: i32) -> Asked {
        let key = |a: &FetchAt| (a.topic_id, a.topic.clone(), a.partition);
        let sent: HashMap<Key, Sent> = wanted
            .iter()
            .map(|(a, epoch)| (key(a), (a.offset, *epoch, a.last_fetched_epoch, partition_max_bytes)))
            .collect();
        let named = wanted.iter().filter(|(a, _)| self.id == 0 || self.sent.get(&key(a)) != sent.get(&key(a)));
        let topics = by_topic_id(named.map(|(a, epoch)| {
            let partition = FetchPartition::default()
                .with_partition(a.partition)
                .with_current_leader_epoch(*epoch)
                .with_last_fetched_epoch(a.last_fetched_epoch)
                .with_fetch_offset(a.offset)
                .with_partition_max_bytes(partition_max_bytes);
            ((a.topic_id, a.topic.as_str()), partition)
        }));
        let forgotten = match self.id {
            0 => Vec::new(),
            _ => {
                by_topic_id(self.sent.keys().filter(|k| !sent.contains_key(*k)).map(|(i, t, p)| ((*i, t.as_str()), *p)))
            }
        };
        let request = base
            .with_session_id(self.id)
            .with_session_epoch(if self.id == 0 { 0 } else { self.epoch })
            .with_topics(
                topics
                    .into_iter()
                    .map(|((id, t), ps)| FetchTopic::default().with_topic(t).with_topic_id(id).with_partitions(ps))
                    .collect(),
            )
            .with_forgotten_topics_data(
                forgotten
                    .into_iter()
                    .map(|((id, t), ps)| ForgottenTopic::default().with_topic(t).with_topic_id(id).with_partitions(ps))
                    .collect(),
            );
        Asked { request, sent }
    }

    /// The broker answered `asked` without a request error, in session `session_id` (0: it
    /// opened none, so the next fetch is full again).
    pub(crate) fn answered(&mut self, asked: Asked, session_id: i32) {
        if session_id == 0 {
            *self = Self::default();
            return;
        }
        self.epoch = if self.id == 0 { 1 } else { next_epoch(self.epoch) };
        self.id = session_id;
        self.sent = asked.sent;
    }

    /// Its id and the epoch of the next fetch, when one is open.
    pub(crate) fn open(&self) -> Option<(i32, i32)> {
        (self.id != 0).then_some((self.id, self.epoch))
    }

    /// Forgets the session (the broker lost it, or its answer was lost): the next fetch is full.
    pub(crate) fn reset(&mut self) {
        *self = Self::default();
    }
}

/// `items` grouped by topic id and name, as [`crate::by_topic`] groups by name: a name whose id
/// changed is forgotten under the old id and named under the new one, two topics to the broker.
fn by_topic_id<'a, T>(items: impl IntoIterator<Item = ((Uuid, &'a str), T)>) -> Vec<((Uuid, TopicName), Vec<T>)> {
    grouped(items).into_iter().map(|((id, name), items)| ((id, topic_name(name)), items)).collect()
}

/// The epoch after `epoch`, wrapping past `i32::MAX` to 1 (0 opens a session, -1 closes one).
fn next_epoch(epoch: i32) -> i32 {
    if epoch == i32::MAX {
        1
    } else {
        epoch + 1
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(partition: i32, offset: i64) -> FetchAt {
        FetchAt { topic: "t".into(), topic_id: Uuid::nil(), partition, offset, last_fetched_epoch: -1 }
    }

    fn named(asked: &Asked) -> Vec<(i32, i64)> {
        asked.request.topics.iter().flat_map(|t| &t.partitions).map(|p| (p.partition, p.fetch_offset)).collect()
    }

    #[test]
    fn a_session_names_only_what_changed_and_forgets_what_is_no_longer_wanted() {
        let mut session = Session::default();
        let (a, b, c) = (at(0, 10), at(1, 20), at(2, 30));
        let first = session.ask(FetchRequest::default(), &[(&a, 5), (&b, 5), (&c, 5)], 100);
        assert_eq!((first.request.session_id, first.request.session_epoch), (0, 0), "full, opening a session");
        assert_eq!(named(&first), [(0, 10), (1, 20), (2, 30)]);
        session.answered(first, 77);

        let b2 = at(1, 25);
        let next = session.ask(FetchRequest::default(), &[(&a, 5), (&b2, 5)], 100);
        assert_eq!((next.request.session_id, next.request.session_epoch), (77, 1));
        assert_eq!(named(&next), [(1, 25)], "only the partition that moved");
        let forgotten: Vec<i32> =
            next.request.forgotten_topics_data.iter().flat_map(|t| t.partitions.clone()).collect();
        assert_eq!(forgotten, [2]);
        session.answered(next, 77);

        let a_new_epoch = session.ask(FetchRequest::default(), &[(&a, 6), (&b2, 5)], 100);
        assert_eq!(a_new_epoch.request.session_epoch, 2);
        assert_eq!(named(&a_new_epoch), [(0, 10)], "a new leader epoch is a change");
        session.reset();
        let full = session.ask(FetchRequest::default(), &[(&a, 6), (&b2, 5)], 100);
        assert_eq!((full.request.session_id, full.request.session_epoch), (0, 0));
        assert_eq!(named(&full).len(), 2);
        session.answered(full, 0);
        assert_eq!(session.ask(FetchRequest::default(), &[(&a, 6)], 100).request.session_epoch, 0, "no session opened");
    }

    #[test]
    fn a_topic_read_under_a_new_id_is_forgotten_under_the_old_one_and_named_under_the_new() {
        let (old, new) = (Uuid::from_u128(1), Uuid::from_u128(2));
        let mut session = Session::default();
        let (p0, p1) = (FetchAt { topic_id: old, ..at(0, 10) }, FetchAt { topic_id: old, ..at(1, 10) });
        let first = session.ask(FetchRequest::default(), &[(&p0, 5), (&p1, 5)], 100);
        assert_eq!(first.request.topics.iter().map(|t| t.topic_id).collect::<Vec<_>>(), [old]);
        session.answered(first, 9);
        let p0_new = FetchAt { topic_id: new, ..at(0, 0) };
        let next = session.ask(FetchRequest::default(), &[(&p0_new, 5), (&p1, 5)], 100);
        let topics: Vec<(Uuid, Vec<i32>)> = next
            .request
            .topics
            .iter()
            .map(|t| (t.topic_id, t.partitions.iter().map(|p| p.partition).collect()))
            .collect();
        assert_eq!(topics, [(new, vec![0])]);
        let forgotten: Vec<(Uuid, Vec<i32>)> =
            next.request.forgotten_topics_data.iter().map(|t| (t.topic_id, t.partitions.clone())).collect();
        assert_eq!(forgotten, [(old, vec![0])]);
        assert_eq!(next.asked(new, "t", 0), Some(("t", 0)));
        assert_eq!(next.asked(old, "t", 1), Some(("t", 10)), "held by the session, not named again");
    }

    #[test]
    fn epochs_wrap_past_the_largest_to_one() {
        assert_eq!(next_epoch(1), 2);
        assert_eq!(next_epoch(i32::MAX), 1);
    }
}
