//! How many connections a [`crate::Cluster`] keeps to each broker (issue 43), and which one a
//! request goes through ([`Route`]).

use std::time::Duration;

/// How many connections a [`crate::Cluster`] keeps to each broker, each partition's requests
/// always on the same one so they stay in order (issue 43). Across a long link one TCP
/// connection carries at most its window per round trip (6 MiB at 80 ms: 79 MB/s); several
/// carry that each.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Connections {
    /// [`FAR_CONNECTIONS`] when the cluster's first answers took 15 ms or more ([`is_far`])
    /// (another region), else 1.
    #[default]
    Auto,
    /// This many (1 or more).
    PerBroker(u16),
}

/// The round trip from which a cluster is far: nearby (one region) answers take a few ms at most.
const FAR_ROUND_TRIP: Duration = Duration::from_millis(15);

/// Whether a cluster whose quickest answer took `round_trip` is far (another region: 15 ms or
/// more), which [`Connections::Auto`], the wire client's tuning and `compression = "auto"` ask.
pub fn is_far(round_trip: Duration) -> bool {
    round_trip >= FAR_ROUND_TRIP
}
/// Connections per broker [`Connections::Auto`] keeps to a far cluster (MM2 users run 4 tasks
/// across a WAN for the same reason).
pub const FAR_CONNECTIONS: u16 = 4;

impl Connections {
    /// The connections per broker for a cluster whose quickest answer took `round_trip`.
    pub fn per_broker(self, round_trip: Duration) -> usize {
        match self {
            Connections::PerBroker(n) => usize::from(n.max(1)),
            Connections::Auto if is_far(round_trip) => usize::from(FAR_CONNECTIONS),
            Connections::Auto => 1,
        }
    }
}

/// Which of `per_broker` connections (0 to `per_broker - 1`) `topic`/`partition`'s requests go
/// through: each topic's partitions spread over them in turn, always the same for a partition.
/// Strait's record producers, one connection each, are picked by it too.
pub fn connection_of(topic: &str, partition: i32, per_broker: usize) -> usize {
    let offset = topic.bytes().fold(0usize, |h, b| h.wrapping_mul(31).wrapping_add(usize::from(b)));
    offset.wrapping_add(partition.unsigned_abs() as usize) % per_broker.max(1)
}

/// One of the connections to a broker ([`Connections`]): the broker's id and which of its
/// connections. A partition always goes through the same one (the [`crate::Cluster`] picks it),
/// so its requests stay in order; metadata, offsets and transactions use the first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct Route {
    pub(crate) broker: i32,
    pub(crate) index: usize,
}

impl Route {
    /// `broker`'s first connection.
    pub(crate) fn first(broker: i32) -> Self {
        Self { broker, index: 0 }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn auto_opens_several_only_to_a_far_cluster() {
        let ms = Duration::from_millis;
        assert_eq!(Connections::Auto.per_broker(ms(1)), 1, "the same region");
        assert_eq!(Connections::Auto.per_broker(ms(14)), 1);
        assert_eq!(Connections::Auto.per_broker(ms(15)), 4, "another region");
        assert_eq!(Connections::Auto.per_broker(ms(80)), 4);
        assert_eq!(Connections::PerBroker(3).per_broker(ms(80)), 3, "as set");
        assert_eq!(Connections::PerBroker(0).per_broker(ms(1)), 1, "at least one");
    }
}
