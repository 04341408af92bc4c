//! The batch path's client (`strait-wire`) over a SASL_SSL listener, secured from the same
//! librdkafka settings a `[clusters.client]` table holds: SCRAM-SHA-512, SCRAM-SHA-256 and PLAIN
//! over TLS, a wrong password and an untrusted certificate refused with their reason.

use std::collections::BTreeMap;
use std::time::Duration;

use strait_testkit::secure::start_secure_cluster;
use strait_wire::{ClientOptions, Cluster, Outgoing, Producer, Security, WireError};

use crate::made::fetch_all;
use crate::support::*;

const PASSWORD: &str = "wire-pw-71fa";

#[tokio::test(flavor = "multi_thread")]
async fn batches_are_fetched_and_produced_over_sasl_ssl_by_scram_and_plain_and_bad_credentials_are_named() {
    let dir = std::env::temp_dir().join(format!("strait-tests-{}", std::process::id())).join(unique("wiresec"));
    // Started from this thread: a broker dies with the thread that started it.
    let secure = start_secure_cluster(&dir, &[("strait", PASSWORD)], false).expect("secure cluster");
    let (internal, bootstrap) = (secure.cluster.internal.clone(), secure.cluster.bootstrap.clone());
    let (source, target) = (unique("wiresecs"), unique("wiresect"));
    create_topic(&internal, &source, 2, &[]).await;
    create_topic(&internal, &target, 2, &[]).await;
    produce_with(
        &internal,
        &source,
        &(0..300).map(|i| Rec::simple(i % 2, &format!("s{i}"))).collect::<Vec<_>>(),
        &[("compression.type", "zstd")],
    )
    .await;
    let settings = |mechanism: &str, password: &str| -> BTreeMap<String, String> {
        let mut s: BTreeMap<String, String> = secure.client_settings("strait", password).into_iter().collect();
        s.insert("sasl.mechanisms".into(), mechanism.into());
        s
    };
    let options = |settings: &BTreeMap<String, String>| ClientOptions {
        client_id: "wire-security-test".into(),
        timeout: Duration::from_secs(10),
        security: Security::from_client_settings(settings).expect("settings the client honours"),
        connections: Default::default(),
    };

    for mechanism in ["SCRAM-SHA-512", "SCRAM-SHA-256", "PLAIN"] {
        let mut cluster = Cluster::connect(&bootstrap, options(&settings(mechanism, PASSWORD))).await.expect(mechanism);
        cluster.refresh(&[&source]).await.expect("metadata over SASL_SSL");
        let fetched = fetch_all(&mut cluster, &source, 2, 1 << 20).await;
        let records: i32 = fetched.values().flatten().flat_map(|f| f.committed()).map(|b| b.record_count()).sum();
        assert_eq!(records, 300, "{mechanism}: every record fetched over SASL_SSL");
        if mechanism == "SCRAM-SHA-256" {
            // Produced back over the same listener: the target topic holds the source's records.
            let mut producer = Producer::init(cluster, Duration::from_secs(30)).await.expect("producer over SASL_SSL");
            let batches: Vec<Outgoing> = fetched
                .iter()
                .flat_map(|(p, fs)| fs.iter().flat_map(|f| f.committed()).map(move |b| (*p, b)))
                .map(|(partition, batch)| Outgoing { topic: target.clone(), partition, batch: batch.clone() })
                .collect();
            producer.produce(&batches).await.expect("produced over SASL_SSL");
            let values = |topic: &str| -> Vec<Vec<u8>> {
                let mut v: Vec<Vec<u8>> =
                    read_all(&internal, topic, true).into_values().flatten().filter_map(|(_, r)| r.value).collect();
                v.sort();
                v
            };
            let read = values(&target);
            assert_eq!(read.len(), 300, "every record produced over SASL_SSL");
            assert_eq!(read, values(&source), "the target holds the source's records");
        }
    }

    // A wrong password: refused by the broker, named, and not retried.
    let refused = Cluster::connect(&bootstrap, options(&settings("SCRAM-SHA-512", "not-the-password"))).await;
    match refused {
        Err(e @ WireError::Authentication { .. }) => {
            assert!(!e.is_retriable(), "{e}");
            assert!(e.to_string().contains("SCRAM-SHA-512"), "{e}");
        }
        other => panic!("a wrong password must fail authentication: {:?}", other.err()),
    }
    // The test CA not trusted (the system's CAs instead): the handshake fails, saying why.
    let mut untrusted = settings("PLAIN", PASSWORD);
    untrusted.remove("ssl.ca.location");
    match Cluster::connect(&bootstrap, options(&untrusted)).await {
        Err(e @ WireError::Tls { .. }) => {
            assert!(!e.is_retriable(), "{e}");
            assert!(e.to_string().contains("certificate"), "{e}");
        }
        other => panic!("an untrusted certificate must fail the handshake: {:?}", other.err()),
    }
}
