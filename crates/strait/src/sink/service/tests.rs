//! The in-flight ledger of [`super::ProduceService`]: acks handed on as they arrive, failures, lanes.

use super::*;

/// A service with `records` in flight (sequence numbers 0..records, described by the same
/// number) whose producer never connects: reports are pushed by hand, in any order.
fn service(records: u32) -> ProduceService<u32> {
    let mut service = ProduceService::new(&unreachable(), &[]).unwrap();
    service.in_flight.extend((0..records).map(Pending::new));
    service
}

/// A target cluster no producer reaches.
fn unreachable() -> ClusterConfig {
    ClusterConfig {
        alias: "t".into(),
        bootstrap_servers: "127.0.0.1:1".into(),
        zones: Vec::new(),
        client: Default::default(),
        connections_per_broker: Default::default(),
    }
}

/// Across a long link a service sends through several producers (one connection each): each
/// partition's records always through the same one, the partitions spread over all, and the
/// acks of every one come back to the service, in its one produce order.
#[tokio::test]
async fn a_service_of_several_producers_keeps_a_partition_on_one_and_takes_every_ones_acks() {
    let producers: Vec<_> = (0..2).map(|_| ProduceService::<u32>::new_producer(&unreachable(), &[]).unwrap()).collect();
    let mut service = ProduceService::<u32>::join(&producers).unwrap();
    let spread: Vec<usize> = (0..6).map(|p| service.pick("t", Some(p))).collect();
    assert_eq!(spread, (0..6).map(|p| service.pick("t", Some(p))).collect::<Vec<_>>(), "always the same one");
    assert!(spread.contains(&0) && spread.contains(&1), "the partitions spread over both: {spread:?}");
    service.in_flight.extend((0..2).map(Pending::new));
    for (seq, j) in service.producers.iter().enumerate() {
        j.producer.context().route((j.lane << SEQ_BITS) | seq, Ok(100 + seq as i64));
    }
    let mut acked = Vec::new();
    service.take_received_acks(&mut |meta, offset| acked.push((*meta, offset))).unwrap();
    assert_eq!(acked, vec![(0, 100), (1, 101)]);
}

#[tokio::test]
async fn an_ack_reported_after_a_later_records_refusal_is_kept() {
    let mut service = service(3);
    // Record 1 is refused; the ack of record 0, sent before it, arrives after the refusal
    // (one produce response holds many partitions' outcomes, in no set order).
    let refused = KafkaError::MessageProduction(RDKafkaErrorCode::MessageSizeTooLarge);
    service.acks.received().extend([(1, Err(refused)), (0, Ok(100)), (2, Ok(200))]);
    let mut acked = Vec::new();
    let (at_fault, _) = service.take_received_acks(&mut |meta, offset| acked.push((*meta, offset))).unwrap_err();
    assert_eq!(at_fault, 1);
    assert!(acked.is_empty(), "nothing is acknowledged in order before the refusal is seen");
    let outcomes = service.settle(Duration::from_secs(5)).await;
    assert_eq!(outcomes, vec![(0, Some(100)), (1, None), (2, Some(200))]);
}

#[tokio::test]
async fn services_sharing_a_producer_get_only_their_own_acks() {
    let mut a = service(2);
    let mut b = ProduceService::<u32>::join(std::slice::from_ref(a.producer())).unwrap();
    b.in_flight.extend((0..2).map(|meta| Pending::new(10 + meta)));
    let producer = a.producer().clone();
    let context = producer.context();
    // Both lanes have records with sequence numbers 0 and 1: the lane bits tell them apart.
    let (lane_a, lane_b) = (a.producers[0].lane << SEQ_BITS, b.producers[0].lane << SEQ_BITS);
    context.route(lane_b | 1, Ok(501));
    context.route(lane_a, Ok(100));
    context.route(lane_b, Ok(500));
    let (mut got_a, mut got_b) = (Vec::new(), Vec::new());
    a.take_received_acks(&mut |m, o| got_a.push((*m, o))).unwrap();
    b.take_received_acks(&mut |m, o| got_b.push((*m, o))).unwrap();
    assert_eq!(got_a, vec![(0, 100)]);
    assert_eq!(got_b, vec![(11, 501), (10, 500)], "handed on as they arrive");
    // A closed lane's reports go nowhere, and its id is not handed out again at once.
    let closed = b.producers[0].lane;
    drop(b);
    context.route(closed << SEQ_BITS, Ok(7));
    let c = ProduceService::<u32>::join(std::slice::from_ref(a.producer())).unwrap();
    assert_ne!(c.producers[0].lane, closed);
    assert!(c.acks.received().is_empty());
}

#[tokio::test]
async fn an_ack_is_handed_on_while_a_record_sent_before_it_waits() {
    // Record 0's partition leader does not answer; record 1 (another partition) is written.
    let mut service = service(2);
    service.acks.received().push((1, Ok(700)));
    let mut acked = Vec::new();
    service.take_received_acks(&mut |meta, offset| acked.push((*meta, offset))).unwrap();
    assert_eq!(acked, vec![(1, 700)]);
    assert_eq!(service.sent() - service.first_seq, 2, "both stay in flight behind record 0");
    service.acks.received().push((0, Ok(300)));
    service.wait_acks(0, &mut |meta, offset| acked.push((*meta, offset))).await.unwrap();
    assert_eq!(acked, vec![(1, 700), (0, 300)]);
    assert!(service.in_flight.is_empty());
}

#[test]
fn sequence_numbers_wrap_within_their_bits() {
    let mut s = service(0);
    s.first_seq = SEQ_MASK;
    s.in_flight.extend((0..2).map(Pending::new));
    // The second record's sequence number wrapped to 0 in the opaque.
    assert_eq!(s.index_of(SEQ_MASK), Some(0));
    assert_eq!(s.index_of(0), Some(1));
    assert_eq!(s.index_of(1), None);
}
