//! The log-start and end offsets of many partitions at once: one ListOffsets request per leader
//! broker for the ends (timestamp -1, "latest") and one for the starts (-2, "earliest"), where
//! `fetch_watermarks` sends two requests per partition. librdkafka's `offsets_for_times` groups
//! the partitions by leader; ListOffsets answers -1 and -2 with the same offsets the watermark
//! query gives (the end is the last stable offset when the client reads `read_committed`).
//!
//! librdkafka looks each answered partition up in the asked list one by one, so one list costs the
//! square of its length (10 % of Strait's CPU at 5,000 partitions, all in `strcmp`). Partitions are
//! therefore asked in lists of at most `LIST_LEN` (500), each list on its own thread: the cost grows
//! with the partitions, the time stays one round trip.

use std::collections::{BTreeSet, HashMap};
use std::time::{Duration, Instant};

use rdkafka::client::{Client, ClientContext};
use rdkafka::consumer::{BaseConsumer, Consumer, ConsumerContext};
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::{Offset, TopicPartitionList};

/// (log-start offset, end offset) of partitions of a cluster: the offsets of the first record kept
/// and of the next one to be written.
#[derive(Debug, Default)]
pub struct Watermarks(HashMap<String, HashMap<i32, (i64, i64)>>);

impl Watermarks {
    /// The (log-start, end) offsets of `topic` partition `partition`. Errors:
    /// [`RDKafkaErrorCode::UnknownPartition`] (as [`KafkaError::OffsetFetch`]) for one not asked.
    pub fn get(&self, topic: &str, partition: i32) -> Result<(i64, i64), KafkaError> {
        self.0
            .get(topic)
            .and_then(|t| t.get(&partition))
            .copied()
            .ok_or(KafkaError::OffsetFetch(RDKafkaErrorCode::UnknownPartition))
    }

    /// Whether `topic` partition `partition` was answered.
    pub fn has(&self, topic: &str, partition: i32) -> bool {
        self.0.get(topic).is_some_and(|t| t.contains_key(&partition))
    }
}

/// How many times [`listed_watermarks`] lists the cluster again after an answer saying a listed
/// topic is unknown.
const RELISTS: u32 = 3;

/// [`watermarks`] of those of `partitions` the cluster still has: a deleted topic's partitions are
/// left out of the answer instead of failing it (one partition of a deleted topic in a
/// ListOffsets request fails them all). The cluster is listed first; a topic deleted between the
/// listing and the request (or still listed by a broker that has not seen its deletion) is told by
/// its unknown-topic answer, and the cluster listed again, up to 3 times. Blocking: call
/// from a blocking thread. Errors: as [`watermarks`], the last answer's when the listing never
/// settles.
pub fn listed_watermarks<C: ConsumerContext>(
    consumer: &BaseConsumer<C>,
    partitions: &[(&str, i32)],
    timeout: Duration,
) -> Result<Watermarks, KafkaError> {
    let mut relists = 0;
    loop {
        let counts: HashMap<String, usize> = topic_partition_counts(consumer.client(), timeout)?.into_iter().collect();
        let listed = |topic: &str, partition: i32| {
            counts.get(topic).is_some_and(|n| usize::try_from(partition).is_ok_and(|p| p < *n))
        };
        let asked = partitions.iter().copied().filter(|(t, p)| listed(t, *p));
        match watermarks(consumer, asked, timeout) {
            Err(e) if unknown_topic(&e) && relists < RELISTS => {
                relists += 1;
                std::thread::sleep(Duration::from_millis(200));
            }
            answered => return answered,
        }
    }
}

/// Every topic of the cluster `client` talks to with its partition count (partitions are
/// numbered from 0), waiting up to `timeout`; topics the metadata reports with an error are left
/// out. Blocking: call from a blocking thread.
pub fn topic_partition_counts<C: ClientContext>(
    client: &Client<C>,
    timeout: Duration,
) -> Result<Vec<(String, usize)>, KafkaError> {
    let md = client.fetch_metadata(None, timeout)?;
    Ok(md
        .topics()
        .iter()
        .filter(|t| t.error().is_none())
        .map(|t| (t.name().to_string(), t.partitions().len()))
        .collect())
}

/// Whether `e` says a topic or partition is unknown to the cluster (deleted).
fn unknown_topic(e: &KafkaError) -> bool {
    use RDKafkaErrorCode::{UnknownPartition, UnknownTopic, UnknownTopicOrPartition};
    e.rdkafka_error_code().is_some_and(|c| matches!(c, UnknownPartition | UnknownTopic | UnknownTopicOrPartition))
}

/// The [`Watermarks`] of every one of `partitions` (duplicates asked once) through `consumer`,
/// waiting up to `timeout` in all. Blocking: call from a blocking thread. No partitions ask
/// nothing. Errors: the cluster does not answer in time; a partition's own error from its leader;
/// [`RDKafkaErrorCode::UnknownPartition`] (as [`KafkaError::OffsetFetch`]) for a partition of a
/// topic the cluster does not have.
pub fn watermarks<'a, C: ConsumerContext>(
    consumer: &BaseConsumer<C>,
    partitions: impl IntoIterator<Item = (&'a str, i32)>,
    timeout: Duration,
) -> Result<Watermarks, KafkaError> {
    watermarks_in_lists(consumer, partitions, timeout, LIST_LEN)
}

/// The most partitions [`watermarks`] puts in one `offsets_for_times` list.
const LIST_LEN: usize = 500;

/// [`watermarks`] with at most `list_len` partitions (at least 1) in each `offsets_for_times`
/// list, the lists asked at once, one thread each. Same answer and errors as [`watermarks`].
pub fn watermarks_in_lists<'a, C: ConsumerContext>(
    consumer: &BaseConsumer<C>,
    partitions: impl IntoIterator<Item = (&'a str, i32)>,
    timeout: Duration,
    list_len: usize,
) -> Result<Watermarks, KafkaError> {
    let wanted: Vec<(&str, i32)> = partitions.into_iter().collect::<BTreeSet<_>>().into_iter().collect();
    let mut marks = Watermarks::default();
    let lists: Vec<&[(&str, i32)]> = wanted.chunks(list_len.max(1)).collect();
    let answers: Vec<Result<_, KafkaError>> = match lists.as_slice() {
        [] => return Ok(marks),
        [only] => vec![starts_and_ends(consumer, only, timeout)],
        _ => std::thread::scope(|scope| {
            let asking: Vec<_> =
                lists.iter().map(|list| scope.spawn(move || starts_and_ends(consumer, list, timeout))).collect();
            asking.into_iter().map(|t| t.join().expect("a watermarks list panicked")).collect()
        }),
    };
    for answer in answers {
        for ((topic, partition), marked) in answer? {
            marks.0.entry(topic).or_default().insert(partition, marked);
        }
    }
    Ok(marks)
}

/// A partition and its (log-start, end) offsets.
type Marked = ((String, i32), (i64, i64));

/// The (log-start, end) offsets of `partitions` (no duplicates), in two lists asked in turn.
fn starts_and_ends<C: ConsumerContext>(
    consumer: &BaseConsumer<C>,
    partitions: &[(&str, i32)],
    timeout: Duration,
) -> Result<Vec<Marked>, KafkaError> {
    let deadline = Instant::now() + timeout;
    // One partition cannot be asked twice in one request: ends and starts are two requests.
    let ends = offsets(consumer, partitions, Offset::End, timeout)?;
    let starts = offsets(consumer, partitions, Offset::Beginning, deadline.saturating_duration_since(Instant::now()))?;
    Ok(ends
        .into_iter()
        .filter_map(|(key, end)| {
            let start = *starts.get(&key)?;
            Some((key, (start, end)))
        })
        .collect())
}

/// The offset ListOffsets gives for `at` (`End`: -1, `Beginning`: -2) of each of `partitions`.
fn offsets<C: ConsumerContext>(
    consumer: &BaseConsumer<C>,
    partitions: &[(&str, i32)],
    at: Offset,
    timeout: Duration,
) -> Result<HashMap<(String, i32), i64>, KafkaError> {
    let mut asked = TopicPartitionList::with_capacity(partitions.len());
    for (topic, partition) in partitions {
        asked.add_partition_offset(topic, *partition, at)?;
    }
    let answered = consumer.offsets_for_times(asked, timeout)?;
    answered
        .elements()
        .into_iter()
        .map(|e| {
            e.error()?;
            match e.offset() {
                Offset::Offset(o) => Ok(((e.topic().to_string(), e.partition()), o)),
                // Left as asked: librdkafka found no leader, the topic or partition is unknown.
                _ => Err(KafkaError::OffsetFetch(RDKafkaErrorCode::UnknownPartition)),
            }
        })
        .collect()
}
