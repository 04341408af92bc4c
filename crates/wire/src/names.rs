//! How requests name topics: items grouped by topic (or any key) in the order first seen, and a
//! topic name as the protocol carries it.

use std::collections::HashMap;
use std::hash::Hash;

use kafka_protocol::messages::TopicName;
use kafka_protocol::protocol::StrBytes;

/// `items` grouped by their topic, topics in the order first seen and each topic's items in the
/// order given: the shape of every request that names topics, then their partitions.
pub fn by_topic<'a, T>(items: impl IntoIterator<Item = (&'a str, T)>) -> Vec<(TopicName, Vec<T>)> {
    grouped(items).into_iter().map(|(topic, items)| (topic_name(topic), items)).collect()
}

/// `items` grouped by their key, keys in the order first seen and each key's items in the order
/// given.
pub fn grouped<K: Eq + Hash + Copy, T>(items: impl IntoIterator<Item = (K, T)>) -> Vec<(K, Vec<T>)> {
    let mut index: HashMap<K, usize> = HashMap::new();
    let mut groups: Vec<(K, Vec<T>)> = Vec::new();
    for (key, item) in items {
        let at = *index.entry(key).or_insert_with(|| {
            groups.push((key, Vec::new()));
            groups.len() - 1
        });
        groups[at].1.push(item);
    }
    groups
}

/// `topic` as a request names it.
pub fn topic_name(topic: &str) -> TopicName {
    TopicName(StrBytes::from_string(topic.to_string()))
}
