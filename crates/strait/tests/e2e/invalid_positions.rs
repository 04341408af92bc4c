//! A saved position that cannot be true (bytes that do not decode, a next offset below zero or
//! past the source's end) is never taken as "copy it all again": it is rebuilt from the
//! partition's last offset sync the target still holds, so only the records after that sync are
//! copied again; without such a sync the flow stops naming the partition and the bad record.
//! Before, each of the three copied the partition's records a second time, with one WARN.

use std::collections::BTreeMap;
use std::time::Duration;

use rdkafka::admin::AdminOptions;
use strait::config::Config;
use strait::positions::POSITIONS_TOPIC;

use crate::support::*;

const RECORDS: usize = 3_000;

/// Writes `value` under `flow`'s key of `topic`/0 in the positions topic on `target`.
async fn overwrite_position(target: &str, flow: &str, topic: &str, value: &[u8]) {
    let key = format!(r#"{{"flow":"{flow}","topic":"{topic}","partition":0}}"#);
    let record = Rec { key: Some(key.into_bytes()), value: Some(value.to_vec()), ..Rec::simple(0, "") };
    produce(target, POSITIONS_TOPIC, &[record]).await;
}

/// `strait status --output json`'s row of `topic`/0: its position and why it is invalid.
fn status_row(name: &str, config: &str, topic: &str) -> (Option<i64>, Option<String>) {
    let path = write_config(name, config);
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_strait"))
        .args(["status", "--output", "json", "--config"])
        .arg(&path)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let status: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let rows = status["partitions"].as_array().unwrap();
    let row = rows.iter().find(|r| r["topic"] == topic && r["partition"] == 0).expect("a row of the partition");
    (row["position"].as_i64(), row["invalid"].as_str().map(str::to_string))
}

/// How many records of `remote` were copied more than once.
fn duplicates(b: &str, remote: &str) -> usize {
    let mut seen: BTreeMap<Vec<u8>, usize> = BTreeMap::new();
    for (_, r) in read_all(b, remote, false).remove(&0).unwrap_or_default() {
        *seen.entry(r.value.unwrap_or_default()).or_default() += 1;
    }
    seen.values().map(|n| n - 1).sum()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_position_that_cannot_be_true_is_rebuilt_from_the_last_offset_sync() {
    let f = TopicFlow::new("badpos", 1).await;
    let config = f.config("commit_interval_ms = 300");
    let flow = Config::parse(&config).unwrap().remove(0);
    produce(&f.a, &f.topic, &(0..RECORDS).map(|i| Rec::simple(0, &format!("r{i}"))).collect::<Vec<_>>()).await;
    let strait = Strait::start(&f.p, &config);
    wait_replicated(&flow, &f.topic, 1, RECORDS, Duration::from_secs(60)).await;
    assert!(strait.stop().success());

    let cases: [(&str, &[u8]); 3] = [
        ("bytes that do not decode", b"\x00garbage\xff"),
        ("a next offset below zero", br#"{"next_offset":-5,"last_timestamp":null}"#),
        ("a next offset past the source's end", br#"{"next_offset":1000000000,"last_timestamp":null}"#),
    ];
    let mut replayed = Vec::new();
    for (i, (what, value)) in cases.into_iter().enumerate() {
        let before = duplicates(&f.b, &f.remote);
        overwrite_position(&f.b, &flow.name, &f.topic, value).await;
        let (position, invalid) = status_row(&format!("{}-status{i}", f.p), &config, &f.topic);
        assert!(invalid.is_some(), "{what}: strait status marks the position invalid (position {position:?})");
        let strait = Strait::start(&format!("{}-{i}", f.p), &config);
        let deadline = std::time::Instant::now() + Duration::from_secs(60);
        loop {
            let saved = strait::positions::load(&flow.target, &flow.name).await.unwrap_or_default();
            if saved.get(&(f.topic.clone(), 0)).is_some_and(|s| s.next_offset == RECORDS as i64) {
                break;
            }
            assert!(std::time::Instant::now() < deadline, "{what}: no true position saved again: {}", strait.logs());
            tokio::time::sleep(Duration::from_millis(300)).await;
        }
        // One more commit interval: anything copied again has landed.
        tokio::time::sleep(Duration::from_secs(1)).await;
        let logs = strait.logs();
        assert!(strait.stop().success(), "{what}: {logs}");
        let again = duplicates(&f.b, &f.remote) - before;
        eprintln!("{what}: {again} of {RECORDS} records copied again");
        assert!(
            logs.contains("a saved position cannot be true: rebuilt from the partition's last offset sync"),
            "{what}: {logs}"
        );
        replayed.push((what, again));
    }
    let offset_lag_max = flow.writing.offset_lag_max as usize;
    for (what, again) in replayed {
        assert!(
            again <= offset_lag_max,
            "{what}: {again} records copied again, more than offset_lag_max {offset_lag_max} after the last sync"
        );
    }
}

/// Without an offset sync of the partition on the target (its topic deleted here), there is
/// nothing to rebuild the position from: the flow exits 4 (an operator must fix it), naming the topic, the
/// partition and the bad record's offset in the positions topic, and copies nothing again.
#[tokio::test(flavor = "multi_thread")]
async fn a_position_that_cannot_be_true_without_evidence_stops_the_flow_naming_it() {
    let f = TopicFlow::new("badposnone", 1).await;
    let config = f.config("commit_interval_ms = 300");
    let flow = Config::parse(&config).unwrap().remove(0);
    produce(&f.a, &f.topic, &(0..200).map(|i| Rec::simple(0, &format!("r{i}"))).collect::<Vec<_>>()).await;
    let strait = Strait::start(&f.p, &config);
    wait_replicated(&flow, &f.topic, 1, 200, Duration::from_secs(60)).await;
    assert!(strait.stop().success());

    let (_, syncs) = flow.offset_syncs();
    admin(&f.b).delete_topics(&[&syncs], &AdminOptions::new()).await.unwrap();
    wait_until("offset syncs deleted", Duration::from_secs(30), || !topic_exists(&f.b, &syncs)).await;
    overwrite_position(&f.b, &flow.name, &f.topic, b"not json").await;
    let copied = count(&f.b, &f.remote);
    let mut strait = Strait::start(&format!("{}-again", f.p), &config);
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    while strait.is_running() {
        assert!(std::time::Instant::now() < deadline, "strait stops by itself: {}", strait.logs());
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    // 4: an operator must fix the state (docs/operations.md, exit codes).
    let logs = exits_with(strait, 4, Duration::from_secs(1)).await;
    let named = format!("{} partition 0: the saved position in {POSITIONS_TOPIC} (its record at offset", f.topic);
    assert!(logs.contains(&named), "the error names the partition and the record ({named}): {logs}");
    assert_eq!(count(&f.b, &f.remote), copied, "nothing copied again");
}
