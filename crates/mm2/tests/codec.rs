//! Golden vectors from the JVM classes (docs: /work/shared/mm2-formats.md) and decode rejections.

use strait_mm2::{Checkpoint, DecodeError, DownstreamOffset, EncodeError, Heartbeat, OffsetSync, UpstreamOffset};

fn hex(s: &str) -> Vec<u8> {
    let digits = s.as_bytes().chunks_exact(2);
    assert!(digits.remainder().is_empty(), "odd hex");
    digits.map(|pair| u8::from_str_radix(std::str::from_utf8(pair).expect("ascii"), 16).expect("hex")).collect()
}

const HB_KEY: &str = "000775732d65617374000765752d77657374";
const HB_VALUE: &str = "00000000000000000064";
const CP_KEY: &str = "0009616e616c797469637300066f726465727300000007";
const CP_VALUE: &str = "000000000000000003e800000000000002e60000";
const OS_KEY: &str = "00066f726465727300000007";
const OS_VALUE: &str = "00000000000003e800000000000002e6";

fn golden_heartbeat() -> Heartbeat {
    Heartbeat { source_alias: "us-east".into(), target_alias: "eu-west".into(), timestamp_ms: 100 }
}

fn golden_checkpoint() -> Checkpoint {
    Checkpoint {
        group: "analytics".into(),
        topic: "orders".into(),
        partition: 7,
        upstream: UpstreamOffset(1000),
        downstream: DownstreamOffset(742),
        metadata: String::new(),
    }
}

fn golden_offset_sync() -> OffsetSync {
    OffsetSync {
        topic: "orders".into(),
        partition: 7,
        upstream: UpstreamOffset(1000),
        downstream: DownstreamOffset(742),
    }
}

#[test]
fn golden_encode() {
    let cases: Vec<(&str, Vec<u8>, &str)> = vec![
        ("heartbeat key", golden_heartbeat().encode_key(), HB_KEY),
        ("heartbeat value", golden_heartbeat().encode_value(), HB_VALUE),
        ("checkpoint key", golden_checkpoint().encode_key(), CP_KEY),
        ("checkpoint value", golden_checkpoint().encode_value(), CP_VALUE),
        ("offset sync key", golden_offset_sync().encode_key(), OS_KEY),
        ("offset sync value", golden_offset_sync().encode_value(), OS_VALUE),
    ];
    for (case, got, want) in cases {
        assert_eq!(got, hex(want), "{case}");
    }
}

#[test]
fn golden_decode() {
    assert_eq!(Heartbeat::decode(&hex(HB_KEY), &hex(HB_VALUE)), Ok(golden_heartbeat()));
    assert_eq!(Checkpoint::decode(&hex(CP_KEY), &hex(CP_VALUE)), Ok(golden_checkpoint()));
    assert_eq!(OffsetSync::decode(&hex(OS_KEY), &hex(OS_VALUE)), Ok(golden_offset_sync()));
}

#[test]
fn try_encode_matches_encode() {
    let cp = golden_checkpoint();
    assert_eq!(cp.try_encode_key(), Ok(cp.encode_key()));
    assert_eq!(cp.try_encode_value(), Ok(cp.encode_value()));
    let hb = golden_heartbeat();
    assert_eq!(hb.try_encode_key(), Ok(hb.encode_key()));
    let os = golden_offset_sync();
    assert_eq!(os.try_encode_key(), Ok(os.encode_key()));
}

/// Every strict prefix of a golden key or value is rejected as truncated.
#[test]
fn truncated_inputs_rejected() {
    type Decoder = fn(&[u8], &[u8]) -> Option<DecodeError>;
    let cases: [(&str, &str, &str, Decoder); 3] = [
        ("heartbeat", HB_KEY, HB_VALUE, |k, v| Heartbeat::decode(k, v).err()),
        ("checkpoint", CP_KEY, CP_VALUE, |k, v| Checkpoint::decode(k, v).err()),
        ("offset sync", OS_KEY, OS_VALUE, |k, v| OffsetSync::decode(k, v).err()),
    ];
    for (name, key, value, decode) in cases {
        let (key, value) = (hex(key), hex(value));
        for n in 0..key.len() {
            assert_eq!(decode(&key[..n], &value), Some(DecodeError::Truncated), "{name} key[..{n}]");
        }
        for n in 0..value.len() {
            assert_eq!(decode(&key, &value[..n]), Some(DecodeError::Truncated), "{name} value[..{n}]");
        }
    }
}

#[test]
fn trailing_bytes_rejected() {
    let extra = |s: &str| {
        let mut v = hex(s);
        v.push(0);
        v
    };
    let cases: Vec<(&str, Option<DecodeError>)> = vec![
        ("hb key", Heartbeat::decode(&extra(HB_KEY), &hex(HB_VALUE)).err()),
        ("hb value", Heartbeat::decode(&hex(HB_KEY), &extra(HB_VALUE)).err()),
        ("cp key", Checkpoint::decode(&extra(CP_KEY), &hex(CP_VALUE)).err()),
        ("cp value", Checkpoint::decode(&hex(CP_KEY), &extra(CP_VALUE)).err()),
        ("os key", OffsetSync::decode(&extra(OS_KEY), &hex(OS_VALUE)).err()),
        ("os value", OffsetSync::decode(&hex(OS_KEY), &extra(OS_VALUE)).err()),
    ];
    for (case, got) in cases {
        assert_eq!(got, Some(DecodeError::TrailingBytes), "{case}");
    }
}

#[test]
fn bad_version_rejected() {
    // Version 1 and -1 (0xffff), with otherwise valid (or even shorter) bodies.
    let cases: Vec<(&str, Option<DecodeError>, i16)> = vec![
        ("cp v1", Checkpoint::decode(&hex(CP_KEY), &hex("000100000000000003e800000000000002e60000")).err(), 1),
        ("cp v-1", Checkpoint::decode(&hex(CP_KEY), &hex("ffff")).err(), -1),
        ("hb v1", Heartbeat::decode(&hex(HB_KEY), &hex("00010000000000000064")).err(), 1),
        ("hb v2 short", Heartbeat::decode(&hex(HB_KEY), &hex("0002")).err(), 2),
    ];
    for (case, got, version) in cases {
        assert_eq!(got, Some(DecodeError::BadVersion(version)), "{case}");
    }
}

#[test]
fn bad_strings_rejected() {
    let cases: Vec<(&str, Option<DecodeError>, DecodeError)> = vec![
        // topic "or\xffers": invalid UTF-8
        ("utf8", OffsetSync::decode(&hex("00066f72ff65727300000007"), &hex(OS_VALUE)).err(), DecodeError::BadUtf8),
        // null string (length -1)
        ("null", OffsetSync::decode(&hex("ffff00000007"), &hex(OS_VALUE)).err(), DecodeError::NegativeLength(-1)),
        // length longer than the input
        ("overlong", Heartbeat::decode(&hex("0009757300"), &hex(HB_VALUE)).err(), DecodeError::Truncated),
        // invalid UTF-8 in checkpoint metadata
        (
            "metadata",
            Checkpoint::decode(&hex(CP_KEY), &hex("000000000000000003e800000000000002e60001c3")).err(),
            DecodeError::BadUtf8,
        ),
    ];
    for (case, got, want) in cases {
        assert_eq!(got, Some(want), "{case}");
    }
}

#[test]
fn string_length_limit() {
    let ok = "x".repeat(32767);
    let too_long = "x".repeat(32768);
    let mut cp = golden_checkpoint();
    cp.metadata = ok.clone();
    let value = cp.try_encode_value().expect("32767 bytes fits");
    assert_eq!(&value[18..20], &[0x7f, 0xff]);
    assert_eq!(Checkpoint::decode(&cp.encode_key(), &value), Ok(cp.clone()));
    cp.metadata = too_long;
    assert_eq!(cp.try_encode_value(), Err(EncodeError::StringTooLong { len: 32768 }));
    let os = OffsetSync { topic: "é".repeat(16384), ..golden_offset_sync() };
    assert_eq!(os.try_encode_key(), Err(EncodeError::StringTooLong { len: 32768 }));
}

#[test]
#[should_panic(expected = "longer than 32767")]
fn encode_panics_on_overlong_string() {
    let hb = Heartbeat { source_alias: "a".repeat(40000), ..golden_heartbeat() };
    let _ = hb.encode_key();
}

/// Deterministic pseudo-random round trips (xorshift64), covering extreme numbers and
/// multi-byte UTF-8.
#[test]
fn round_trips() {
    let mut seed: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut next = move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    let alphabet = ["a", "Z", "9", ".", "-", "_", "é", "日", "🦀", ""];
    let text = |next: &mut dyn FnMut() -> u64| -> String {
        let n = (next() % 12) as usize;
        (0..n).map(|_| alphabet[(next() % alphabet.len() as u64) as usize]).collect()
    };
    let specials = [0i64, 1, -1, i64::MIN, i64::MAX];
    for i in 0..500 {
        let num = |next: &mut dyn FnMut() -> u64| {
            if i % 5 == 0 {
                specials[(next() % 5) as usize]
            } else {
                next() as i64
            }
        };
        let os = OffsetSync {
            topic: text(&mut next),
            partition: next() as i32,
            upstream: UpstreamOffset(num(&mut next)),
            downstream: DownstreamOffset(num(&mut next)),
        };
        assert_eq!(OffsetSync::decode(&os.encode_key(), &os.encode_value()), Ok(os));
        let cp = Checkpoint {
            group: text(&mut next),
            topic: text(&mut next),
            partition: next() as i32,
            upstream: UpstreamOffset(num(&mut next)),
            downstream: DownstreamOffset(num(&mut next)),
            metadata: text(&mut next),
        };
        assert_eq!(Checkpoint::decode(&cp.encode_key(), &cp.encode_value()), Ok(cp));
        let hb =
            Heartbeat { source_alias: text(&mut next), target_alias: text(&mut next), timestamp_ms: num(&mut next) };
        assert_eq!(Heartbeat::decode(&hb.encode_key(), &hb.encode_value()), Ok(hb));
    }
}
