//! Where Kafka's Java producer puts a keyed record sent without a partition (its default
//! partitioner, `BuiltInPartitioner.partitionForKey`): the positive part of the key's murmur2
//! hash, modulo the topic's partition count. Kafka Connect's offsets topic, which MM2 reads its
//! source offsets from, is written that way, so a record that must supersede one of MM2's has to
//! land in the same partition.

/// Kafka's murmur2 hash of `data` (`org.apache.kafka.common.utils.Utils.murmur2`: seed
/// `0x9747b28c`, little-endian 4-byte blocks).
pub fn murmur2(data: &[u8]) -> i32 {
    const M: u32 = 0x5bd1_e995;
    let mut h: u32 = 0x9747_b28c ^ data.len() as u32;
    let mut blocks = data.chunks_exact(4);
    for block in &mut blocks {
        let mut k = u32::from_le_bytes([block[0], block[1], block[2], block[3]]);
        k = k.wrapping_mul(M);
        k ^= k >> 24;
        k = k.wrapping_mul(M);
        h = h.wrapping_mul(M) ^ k;
    }
    let tail = blocks.remainder();
    if !tail.is_empty() {
        for (i, byte) in tail.iter().enumerate() {
            h ^= u32::from(*byte) << (8 * i);
        }
        h = h.wrapping_mul(M);
    }
    h ^= h >> 13;
    h = h.wrapping_mul(M);
    h ^= h >> 15;
    h as i32
}

/// The partition (0-based) of `partitions` that Kafka's Java producer gives a record keyed
/// `key` when none is named. `partitions` must be at least 1.
pub fn partition_for_key(key: &[u8], partitions: u32) -> i32 {
    ((murmur2(key) & 0x7fff_ffff) as u32 % partitions.max(1)) as i32
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Printed by Kafka 4.1.1's own `Utils.murmur2` and `Utils.toPositive(…) % 25`.
    const JAVA: &[(&str, i32, i32)] = &[
        ("21", -973_932_308, 15),
        ("foobar", -790_332_482, 16),
        ("a-little-bit-long-string", -985_981_536, 12),
        ("a-little-bit-longer-string", -1_486_304_829, 19),
        ("lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8", -58_897_971, 2),
        ("abc", 479_470_107, 7),
        ("", 275_646_681, 6),
        (r#"["strait-mirror-source",{"cluster":"eu-west","partition":3,"topic":"orders"}]"#, -1_235_252_765, 8),
    ];

    #[test]
    fn hashes_and_partitions_match_kafkas_java_producer() {
        for (key, hash, partition) in JAVA {
            assert_eq!(murmur2(key.as_bytes()), *hash, "{key}");
            assert_eq!(partition_for_key(key.as_bytes(), 25), *partition, "{key}");
        }
    }
}
