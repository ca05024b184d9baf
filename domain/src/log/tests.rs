//! The hash chain and the recorded-log form, tested.

use super::line::RECORDED_V2_MAGIC;
use super::*;

fn event(position: u64, payload: &[u8]) -> Recorded {
    Recorded {
        position,
        stream_id: "member/n-1".into(),
        stream_version: position,
        event_type: "MemberJoinCompleted".into(),
        schema_version: 1,
        event_id: Uuid::from_u128(position as u128),
        occurred_at: micros_to_time(1_700_000_000_000_000),
        meta: EventMeta {
            principal: "user/admin".into(),
            ..Default::default()
        },
        payload: payload.to_vec(),
        prev_hash: [0; 32],
        hash: [0; 32],
    }
}

fn chain(n: u64) -> Vec<Recorded> {
    let mut prev = GENESIS_HASH;
    (1..=n)
        .map(|p| {
            let mut e = event(p, &[p as u8; 8]);
            e.seal(prev);
            prev = e.hash;
            e
        })
        .collect()
}

fn verify(events: &[Recorded]) -> Result<u64, ChainBreak> {
    let mut v = ChainVerifier::default();
    for e in events {
        v.check(e)?;
    }
    Ok(v.position)
}

/// The chain checked in one pass, against a recorded head.
fn verify_holding(events: &[Recorded], recorded: Option<RecordedHead>) -> Result<u64, ChainBreak> {
    let mut v = ChainVerifier::expecting(recorded);
    for e in events {
        v.check(e)?;
    }
    Ok(v.position)
}

/// The same chain checked in runs of `size` (an empty run after each),
/// joined in order.
fn verify_in_runs(
    events: &[Recorded],
    size: usize,
    recorded: Option<RecordedHead>,
) -> Result<u64, ChainBreak> {
    let mut v = ChainVerifier::expecting(recorded);
    for run in events.chunks(size) {
        v.join(ChainVerifier::check_run(
            run.iter().map(Recorded::as_ref),
            recorded,
        ))?;
        v.join(ChainVerifier::check_run([], recorded))?;
    }
    Ok(v.position)
}

#[test]
fn runs_checked_apart_and_joined_find_what_one_pass_finds() {
    type Tamper = fn(&mut Vec<Recorded>);
    let tamperings: [(&str, Tamper); 6] = [
        ("untouched", |_| {}),
        ("a changed byte", |e| e[4].payload[0] ^= 1),
        ("a removed event", |e| {
            e.remove(5);
        }),
        ("two swapped", |e| e.swap(2, 3)),
        ("a changed prev hash", |e| e[6].prev_hash[0] ^= 1),
        ("a resealed event", |e| {
            e[7].payload[0] ^= 1;
            let prev = e[7].prev_hash;
            e[7].seal(prev);
        }),
    ];
    let elsewhere: RecordedHead = format!("9:{}", hex::encode([7; 32])).parse().unwrap();
    for (what, tamper) in tamperings {
        for recorded in [None, Some(elsewhere)] {
            let mut events = chain(12);
            tamper(&mut events);
            let one_pass = verify_holding(&events, recorded);
            for size in 1..=13 {
                assert_eq!(
                    verify_in_runs(&events, size, recorded),
                    one_pass,
                    "{what}, runs of {size}, {recorded:?}"
                );
            }
        }
    }
    // Bytes are written as a sequence of bytes always was.
    let payload: Vec<u8> = (0..=255).collect();
    assert_eq!(
        postcard::to_allocvec(&Bytes(&payload)).unwrap(),
        postcard::to_allocvec(&payload.as_slice()).unwrap()
    );
    // And a borrowed event hashes as its owner does.
    let e = &chain(3)[2];
    assert_eq!(
        e.as_ref().compute_hash(&e.prev_hash, &mut vec![7; 3]),
        e.hash
    );
}

#[test]
fn an_untouched_chain_verifies() {
    assert_eq!(verify(&chain(5)), Ok(5));
}

#[test]
fn a_changed_byte_names_its_position() {
    let mut events = chain(5);
    events[2].payload[0] ^= 1;
    assert_eq!(verify(&events), Err(ChainBreak::Hash { position: 3 }));
}

#[test]
fn a_removed_event_names_the_missing_position() {
    let mut events = chain(5);
    events.remove(1);
    assert_eq!(verify(&events).unwrap_err().position(), 2);
}

fn verify_against(events: &[Recorded], recorded: &str) -> Result<u64, ChainBreak> {
    let mut v = ChainVerifier::expecting(Some(recorded.parse().unwrap()));
    for e in events {
        v.check(e)?;
    }
    v.finish()?;
    Ok(v.position)
}

#[test]
fn a_recorded_head_catches_a_cut_tail_and_a_rewritten_log() {
    let events = chain(5);
    let at3 = format!("3:{}", hex::encode(events[2].hash));
    // The log went on after the head was written down: still intact.
    assert_eq!(verify_against(&events, &at3), Ok(5));
    // Cut back to 2 events, the chain alone still verifies...
    assert_eq!(verify(&events[..2]), Ok(2));
    // ...but not against the head recorded at 3.
    let cut = verify_against(&events[..2], &at3).unwrap_err();
    assert_eq!(
        cut,
        ChainBreak::Truncated {
            ends: 2,
            recorded: 3
        }
    );
    assert_eq!(cut.position(), 3);
    // A log rebuilt from 1 with other bytes verifies on its own, but
    // its event 3 is not the one recorded.
    let mut rewritten = chain(5);
    let mut prev = GENESIS_HASH;
    for e in rewritten.iter_mut() {
        e.payload[0] ^= 0x80;
        e.seal(prev);
        prev = e.hash;
    }
    assert_eq!(verify(&rewritten), Ok(5));
    assert_eq!(
        verify_against(&rewritten, &at3),
        Err(ChainBreak::NotRecordedHead { position: 3 })
    );
}

#[test]
fn a_recorded_head_is_position_colon_hex() {
    let hash = "ab".repeat(32);
    let r: RecordedHead = format!("7:{hash}").parse().unwrap();
    assert_eq!((r.position, r.hash), (7, [0xab; 32]));
    for bad in [
        "7".to_owned(),
        format!("0:{hash}"),
        format!("x:{hash}"),
        "7:abc".to_owned(),
        format!("7:{}zz", &hash[2..]),
    ] {
        assert!(bad.parse::<RecordedHead>().is_err(), "{bad}");
    }
}

#[test]
fn the_first_prev_hash_is_zero() {
    assert_eq!(chain(1)[0].prev_hash, [0u8; 32]);
}

#[test]
fn a_callers_request_id_is_chained_and_kept_by_both_log_forms() {
    let mut plain = event(1, b"x");
    plain.seal([0; 32]);
    let mut with_id = event(1, b"x");
    with_id.meta.client_request_id = Some("deploy-42".into());
    with_id.seal([0; 32]);
    // Without one, the bytes (and so every old hash) are as before;
    // with one, it is covered.
    assert_ne!(plain.hash, with_id.hash);
    assert!(with_id
        .canonical_bytes()
        .starts_with(&plain.canonical_bytes()));
    let mut forged = with_id.clone();
    forged.meta.client_request_id = Some("deploy-43".into());
    assert_ne!(forged.compute_hash(&[0; 32]), with_id.hash);
    // A recorded log keeps it; one without keeps its version 1 bytes.
    let v1 = encode_log(std::slice::from_ref(&plain));
    assert!(!v1.starts_with(RECORDED_V2_MAGIC));
    assert_eq!(decode_log(&v1).unwrap(), vec![plain.clone()]);
    let v2 = encode_log(&[plain.clone(), with_id.clone()]);
    assert_eq!(decode_log(&v2).unwrap(), vec![plain, with_id.clone()]);
    // And so does an export line.
    let line = LogLine::new(&with_id, serde_json::json!({}));
    let text = serde_json::to_string(&line).unwrap();
    assert!(text.contains("\"clientRequestId\":\"deploy-42\""), "{text}");
    let back: LogLine = serde_json::from_str(&text).unwrap();
    assert_eq!(back.to_recorded().unwrap(), with_id);
}
