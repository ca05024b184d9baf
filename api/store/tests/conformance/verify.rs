//! Verification: every field the chain covers, read in chunks as one pass
//! reads it.

use super::*;

/// Verification reads the log in bulk (a chunk at a time): every field the
/// chain covers must come back exactly as the rows hold it, a NULL apart
/// from an empty text, and a range of positions exactly.
#[tokio::test]
async fn verification_reads_every_field_the_chain_covers_exactly() {
    for db in each_backend().await {
        let s = open(&db).await;
        let b = db.backend;
        let mut events: Vec<NewEvent> = (1..=5).map(event).collect();
        events[1].meta = EventMeta {
            principal: "node/n-1".into(),
            request_id: Some(String::new()),
            causation: Some(0),
            correlation: None,
            client_request_id: Some("deploy-42".into()),
        };
        events[2].meta = EventMeta {
            principal: "stratum".into(),
            ..Default::default()
        };
        events[3].payload = vec![0, 0, b' ', 0xff, b'\\'];
        events[4].event_type = "Événement ✓".into();
        let all = append_to_stream(&*s, "member/n-1", 0, events)
            .await
            .unwrap();
        let all = [all, append(&*s, "member/n-2", 6, 2).await].concat();
        let chunk = s.read_for_verify(0, 7).await.unwrap();
        assert_eq!(chunk.len(), 7, "{b}");
        for (got, want) in chunk.iter().zip(&all) {
            assert_eq!(got, want.as_ref(), "{b}");
        }
        let middle: Vec<u64> = s
            .read_for_verify(2, 5)
            .await
            .unwrap()
            .iter()
            .map(|e| e.position)
            .collect();
        assert_eq!(middle, [3, 4, 5], "{b}");
        assert!(s.read_for_verify(7, 100).await.unwrap().is_empty(), "{b}");
        assert_eq!(
            verify_chain(&*s, None).await.unwrap(),
            Verification::Intact {
                position: 7,
                hash: all[6].hash
            },
            "{b}"
        );
    }
}

/// What one pass over `read_after` finds first, as verification names it.
async fn one_pass(s: &dyn EventStore, recorded: Option<&str>) -> Verification {
    let mut v = ChainVerifier::expecting(recorded.map(|r| r.parse().unwrap()));
    loop {
        let events = s.read_after(v.position, 1000).await.unwrap();
        if events.is_empty() {
            break;
        }
        for e in &events {
            if let Err(b) = v.check(e) {
                return b.into();
            }
        }
    }
    v.verdict()
}

/// Verification reads and hashes chunks of the log apart and joins them
/// in order: across chunk edges it names the position one pass names.
#[tokio::test]
async fn verification_in_chunks_names_what_one_pass_names() {
    for db in each_backend().await {
        let s = open(&db).await;
        let b = db.backend;
        let events: Vec<NewEvent> = (0..5_000u32)
            .map(|i| NewEvent {
                event_id: uuid::Uuid::from_u128(0x10_0000 + u128::from(i)),
                ..event((i % 200) as u8 + 1)
            })
            .collect();
        let all = append_to_stream(&*s, "member/n-1", 0, events)
            .await
            .unwrap();
        let head = all.last().unwrap().hash;
        assert_eq!(
            verify_chain(&*s, None).await.unwrap(),
            Verification::Intact {
                position: 5_000,
                hash: head
            },
            "{b}"
        );
        let broken_at = |v: Verification| match v {
            Verification::Broken { position, .. } => position,
            v => panic!("{b}: {v:?}"),
        };
        // A changed byte on each side of a chunk's edge (2,048).
        for p in [2_048, 2_049] {
            tamper(
                &db,
                &format!("UPDATE events SET principal = 'user/x' WHERE position = {p}"),
            )
            .await;
            let got = verify_chain(&*s, None).await.unwrap();
            assert_eq!(got, one_pass(&*s, None).await, "{b}: {p}");
            assert_eq!(broken_at(got), p, "{b}");
            let was = &all[p as usize - 1].meta.principal;
            tamper(
                &db,
                &format!("UPDATE events SET principal = '{was}' WHERE position = {p}"),
            )
            .await;
        }
        // A head recorded beyond the first chunk, with another hash.
        let wrong = format!("4097:{}", hex::encode([7u8; 32]));
        let got = verify_chain(&*s, Some(wrong.parse().unwrap()))
            .await
            .unwrap();
        assert_eq!(got, one_pass(&*s, Some(&wrong)).await, "{b}");
        assert_eq!(broken_at(got), 4_097, "{b}");
        // The tail cut: the head names what is missing.
        tamper(&db, "DELETE FROM events WHERE position > 4500").await;
        assert_eq!(
            broken_at(verify_chain(&*s, None).await.unwrap()),
            4_501,
            "{b}"
        );
        // A whole chunk removed: the first position missing, as one pass.
        tamper(
            &db,
            "DELETE FROM events WHERE position > 2048 AND position <= 4096",
        )
        .await;
        let got = verify_chain(&*s, None).await.unwrap();
        assert_eq!(got, one_pass(&*s, None).await, "{b}");
        assert_eq!(broken_at(got), 2_049, "{b}");
    }
}
