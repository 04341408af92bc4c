//! How many bytes a broker's log dirs hold of each partition (DescribeLogDirs): the size a topic
//! takes on disk, which a batch flow keeps equal to its source's (issue 27). rdkafka has no such
//! call.

use std::collections::BTreeMap;

use kafka_protocol::messages::DescribeLogDirsRequest;

use crate::conn::Connection;
use crate::error::WireError;

/// DescribeLogDirs v4 (Kafka 3.3 on: each log dir's total and usable bytes beside its partitions).
const DESCRIBE_LOG_DIRS_VERSION: i16 = 4;

impl Connection {
    /// The bytes this broker's log dirs hold of each partition of `topics`, summed over its log
    /// dirs (a replica being moved between dirs counted once), keyed by (topic, partition).
    /// Partitions the broker holds no replica of are left out. Errors: the request failing, or
    /// the broker's error for it.
    pub async fn partition_sizes(&self, topics: &[&str]) -> Result<BTreeMap<(String, i32), i64>, WireError> {
        let answer = self.call(&DescribeLogDirsRequest::default().with_topics(None), DESCRIBE_LOG_DIRS_VERSION).await?;
        self.check(answer.error_code, "DescribeLogDirs")?;
        let mut sizes = BTreeMap::new();
        for dir in &answer.results {
            for topic in dir.topics.iter().filter(|t| topics.contains(&t.name.0.as_str())) {
                for p in topic.partitions.iter().filter(|p| !p.is_future_key) {
                    *sizes.entry((topic.name.0.to_string(), p.partition_index)).or_insert(0) += p.partition_size;
                }
            }
        }
        Ok(sizes)
    }
}
