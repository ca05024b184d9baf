//! The store's conformance: every method of [`EventStore`] and [`WriteTx`]
//! behaves the same on SQLite and on PostgreSQL. Each test runs on a fresh
//! database of every backend that answers (`STRATUM_REQUIRE_POSTGRES=1`
//! makes a missing PostgreSQL a failure).

use std::sync::Arc;
use std::time::Duration;

use sqlx::Connection;

use stratum_domain::log::{ChainVerifier, EventMeta, Recorded, Verification};
use stratum_projections::{doc_kind, Changes, DocRow, JoinRequestRow, MemberRow, TokenRow};
use stratum_store::testing::{append_to_stream, each_backend, seal, tamper, NewEvent, TestDb};
use stratum_store::{
    connect, connect_as, export_chunk, verify_chain, Access, EventStore, Head, IdempotencyRecord,
    StoreError, StoredReadModels, SNAPSHOTS_NEWEST, SNAPSHOT_SPACING,
};

fn event(n: u8) -> NewEvent {
    NewEvent {
        event_type: "MemberJoinCompleted".into(),
        schema_version: 1,
        event_id: uuid::Uuid::from_u128(0x1000 + u128::from(n)),
        occurred_at: chrono::DateTime::from_timestamp(1_700_000_000 + i64::from(n), 0).unwrap(),
        meta: EventMeta {
            principal: format!("user/u{n}"),
            request_id: Some(format!("req-{n}")),
            causation: (n > 1).then_some(u64::from(n) - 1),
            correlation: Some("corr".into()),
            client_request_id: None,
        },
        payload: vec![n; 8],
    }
}

async fn open(db: &TestDb) -> Arc<dyn EventStore> {
    connect(&db.url).await.unwrap()
}

/// Appends `n` events to `stream` through one write, as the write path does.
async fn append(s: &dyn EventStore, stream: &str, first: u8, n: u8) -> Vec<Recorded> {
    let version = s.read_stream(stream).await.unwrap().len() as u64;
    append_to_stream(s, stream, version, (first..first + n).map(event).collect())
        .await
        .unwrap()
}

fn member(node: &str, version: u64) -> MemberRow {
    MemberRow {
        node_id: node.into(),
        state: "active",
        role: "compute",
        rack: Some("r1".into()),
        ordinal: 1,
        version,
        doc: format!(r#"{{"nodeId":"{node}","version":{version}}}"#),
    }
}

fn rows(version: u64, generation: Option<u64>) -> Changes {
    Changes {
        members: vec![member("n-1", version), member("n-2", version)],
        join_requests: vec![JoinRequestRow {
            request_id: "jr-1".into(),
            status: "pending",
            version,
            doc: format!(r#"{{"id":"jr-1","v":{version}}}"#),
        }],
        tokens: vec![TokenRow {
            token_id: "tok-1".into(),
            secret_sha256: Some([7; 32]),
            secret_argon2id: None,
            principal: "user/ops".into(),
            policies: r#"["admin"]"#.into(),
            expires_at: None,
            revoked_at: None,
            doc: format!(r#"{{"id":"tok-1","v":{version}}}"#),
        }],
        docs: vec![DocRow {
            kind: doc_kind::UPGRADE,
            id: "up-1".into(),
            sort_key: 1,
            doc: format!(r#"{{"id":"up-1","v":{version}}}"#),
        }],
        generation,
        removed: vec![],
    }
}

/// The first event and [`rows`] at version 1, in one write.
async fn write_first(s: &dyn EventStore) {
    let mut tx = s.begin_write().await.unwrap();
    let recs = seal(tx.head(), "member/n-1", 0, vec![event(1)]);
    tx.append(&recs).await.unwrap();
    tx.write_changes(&rows(1, Some(1)), 1).await.unwrap();
    tx.commit().await.unwrap();
}

fn idem(principal: &str, key: &str, position: u64) -> IdempotencyRecord {
    IdempotencyRecord {
        principal: principal.into(),
        key: key.into(),
        request_hash: vec![1, 2, 3],
        status: 201,
        body: r#"{"ok":true}"#.into(),
        etag: Some(position),
        position,
    }
}

#[tokio::test]
async fn an_empty_log_has_head_zero_and_nothing_to_read() {
    for db in each_backend().await {
        let s = open(&db).await;
        let b = db.backend;
        assert_eq!(
            s.head().await.unwrap(),
            Head {
                position: 0,
                hash: [0; 32]
            },
            "{b}"
        );
        assert!(s.read_after(0, 10).await.unwrap().is_empty(), "{b}");
        assert!(s.read_for_replay(0, 10).await.unwrap().is_empty(), "{b}");
        assert!(s.read_stream("member/n-1").await.unwrap().is_empty(), "{b}");
        assert_eq!(s.cluster_row().await.unwrap(), (0, 0), "{b}");
        assert_eq!(
            s.read_models().await.unwrap(),
            StoredReadModels::default(),
            "{b}"
        );
        assert_eq!(export_chunk(&*s, 0, 0).await.unwrap(), None, "{b}");
        assert_eq!(
            verify_chain(&*s, None).await.unwrap(),
            Verification::Intact {
                position: 0,
                hash: [0; 32]
            },
            "{b}"
        );
        s.ping().await.unwrap();
        let (open, idle) = s.pool_stats().expect("both backends pool their reads");
        assert!(idle <= open, "{b}");
    }
}

#[tokio::test]
async fn appended_events_read_back_whole_in_position_and_stream_order() {
    for db in each_backend().await {
        let s = open(&db).await;
        let b = db.backend;
        let a1 = append(&*s, "member/n-1", 1, 3).await;
        let b1 = append(&*s, "member/n-2", 4, 2).await;
        let a2 = append(&*s, "member/n-1", 6, 2).await;
        let all: Vec<Recorded> = [a1, b1, a2].concat();
        let last = all.last().unwrap();
        assert_eq!(
            s.head().await.unwrap(),
            Head {
                position: 7,
                hash: last.hash
            },
            "{b}"
        );
        // The log, whole and in chunks.
        assert_eq!(s.read_after(0, 100).await.unwrap(), all, "{b}");
        assert_eq!(s.read_after(2, 3).await.unwrap(), all[2..5], "{b}");
        assert!(s.read_after(7, 100).await.unwrap().is_empty(), "{b}");
        // What a fold reads is the same event.
        let replay = s.read_for_replay(1, 100).await.unwrap();
        assert_eq!(replay.len(), 6, "{b}");
        for (r, e) in replay.iter().zip(&all[1..]) {
            assert_eq!(
                (
                    r.position,
                    r.stream_id,
                    r.stream_version,
                    r.event_type,
                    r.schema_version,
                    r.occurred_at,
                    r.principal,
                    r.payload
                ),
                (
                    e.position,
                    e.stream_id.as_str(),
                    e.stream_version,
                    e.event_type.as_str(),
                    e.schema_version,
                    e.occurred_at,
                    e.meta.principal.as_str(),
                    &e.payload[..]
                ),
                "{b}"
            );
        }
        assert_eq!(s.read_for_replay(0, 2).await.unwrap().len(), 2, "{b}");
        // A stream, whole and by pages of its versions.
        let n1 = s.read_stream("member/n-1").await.unwrap();
        assert_eq!(
            n1.iter().map(|e| e.stream_version).collect::<Vec<_>>(),
            [1, 2, 3, 4, 5],
            "{b}"
        );
        assert_eq!(
            n1.iter().map(|e| e.position).collect::<Vec<_>>(),
            [1, 2, 3, 6, 7],
            "{b}"
        );
        assert_eq!(
            s.read_stream_page("member/n-1", 2, 2).await.unwrap(),
            n1[2..4],
            "{b}"
        );
        assert!(s
            .read_stream_page("member/n-1", 5, 10)
            .await
            .unwrap()
            .is_empty());
        assert!(s.read_stream("member/none").await.unwrap().is_empty());
        // Exports and verification read the same log.
        let (lines, at) = export_chunk(&*s, 0, 5).await.unwrap().unwrap();
        assert_eq!(at, 5, "{b}");
        assert_eq!(lines.iter().filter(|&&c| c == b'\n').count(), 5, "{b}");
        assert_eq!(export_chunk(&*s, 5, 5).await.unwrap(), None, "{b}");
        assert_eq!(
            verify_chain(&*s, None).await.unwrap(),
            Verification::Intact {
                position: 7,
                hash: last.hash
            },
            "{b}"
        );
    }
}

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

#[tokio::test]
async fn a_write_appends_only_what_follows_the_head_it_locked() {
    for db in each_backend().await {
        let s = open(&db).await;
        let b = db.backend;
        append(&*s, "member/n-1", 1, 2).await;
        let head = s.head().await.unwrap();

        let mut tx = s.begin_write().await.unwrap();
        assert_eq!(tx.head(), head, "{b}");
        assert_eq!(tx.stream_version("member/n-1").await.unwrap(), 2, "{b}");
        assert_eq!(tx.stream_version("member/n-9").await.unwrap(), 0, "{b}");
        // A gap, and a broken chain, are refused before anything is written.
        let gap = seal(
            Head {
                position: head.position + 1,
                hash: head.hash,
            },
            "member/n-9",
            0,
            vec![event(9)],
        );
        assert!(
            matches!(tx.append(&gap).await, Err(StoreError::Conflict(_))),
            "{b}"
        );
        let unchained = seal(
            Head {
                position: head.position,
                hash: [9; 32],
            },
            "member/n-9",
            0,
            vec![event(9)],
        );
        assert!(
            matches!(tx.append(&unchained).await, Err(StoreError::Conflict(_))),
            "{b}"
        );
        // What follows is appended, and moves the transaction's head.
        let good = seal(head, "member/n-9", 0, vec![event(9), event(10)]);
        tx.append(&good).await.unwrap();
        assert_eq!(tx.head().position, head.position + 2, "{b}");
        assert_eq!(tx.stream_version("member/n-9").await.unwrap(), 2, "{b}");
        // Readers outside see nothing before the commit.
        tx.commit().await.unwrap();
        assert_eq!(s.head().await.unwrap().hash, good[1].hash, "{b}");
    }
}

/// A write begun at the head its writer last left (the write path's batch
/// decided ahead) writes everything it holds while the head is still there,
/// and nothing once another writer moved it: its begin, a read in it, or
/// its commit says `Conflict`. (PostgreSQL checks at the commit, in the
/// statement that writes; SQLite under the lock at the begin.)
#[tokio::test]
async fn a_write_begun_at_a_head_writes_only_while_the_head_is_still_there() {
    for db in each_backend().await {
        let s = open(&db).await;
        let other = open(&db).await;
        let b = db.backend;
        write_first(&*s).await;
        let watch = other.subscribe().await.unwrap();

        // The head is where `s` left it: everything is written, at once.
        let at = s.head().await.unwrap();
        let mut tx = s.begin_write_at(at).await.unwrap();
        assert_eq!(tx.head(), at, "{b}");
        let recs = seal(at, "member/n-2", 0, vec![event(2), event(3)]);
        tx.append(&recs).await.unwrap();
        tx.write_changes(&rows(2, Some(2)), 3).await.unwrap();
        tx.put_idempotency(&[idem("user/a", "k", 3)]).await.unwrap();
        tx.commit().await.unwrap();
        assert_eq!(s.head().await.unwrap(), tx_head(&recs), "{b}");
        assert_eq!(
            s.read_models().await.unwrap(),
            StoredReadModels::from_changes(&rows(2, Some(2)), 3),
            "{b}"
        );
        assert_eq!(s.cluster_row().await.unwrap(), (2, 3), "{b}");
        assert!(s.idempotency("user/a", "k").await.unwrap().is_some(), "{b}");
        assert_eq!(s.read_stream("member/n-2").await.unwrap().len(), 2, "{b}");
        if let Some(mut rx) = watch {
            let got = tokio::time::timeout(Duration::from_secs(10), rx.recv())
                .await
                .expect("the commit is announced")
                .unwrap();
            assert_eq!(got, 3, "{b}");
        }
        // The chain and the tree's rows written with it hold.
        assert!(
            matches!(
                verify_chain(&*s, None).await.unwrap(),
                Verification::Intact { position: 3, .. }
            ),
            "{b}"
        );

        // Another writer moves the head: a write that expected the old one,
        // whether it reads first or only writes, writes nothing.
        for (i, reads_first) in [false, true].into_iter().enumerate() {
            // `s` wrote last: the tree's edge it keeps is the head's.
            append(&*s, "member/n-5", 10 + i as u8, 1).await;
            let stale = s.head().await.unwrap();
            let moved = append(&*other, "member/n-7", 20 + i as u8, 1).await;
            let before = s.read_models().await.unwrap();
            let tried = async {
                let mut tx = s.begin_write_at(stale).await?;
                if reads_first {
                    tx.idempotency("user/a", "k2").await?;
                }
                tx.append(&seal(stale, "member/n-3", 0, vec![event(4)]))
                    .await?;
                tx.write_changes(&rows(9, Some(9)), 9).await?;
                tx.put_idempotency(&[idem("user/a", "k2", 9)]).await?;
                tx.commit().await
            }
            .await;
            assert!(
                matches!(tried, Err(StoreError::Conflict(_))),
                "{b}, reads first {reads_first}: {tried:?}"
            );
            assert_eq!(s.head().await.unwrap(), tx_head(&moved), "{b}");
            assert!(s.read_stream("member/n-3").await.unwrap().is_empty(), "{b}");
            assert_eq!(s.read_models().await.unwrap(), before, "{b}");
            assert_eq!(s.idempotency("user/a", "k2").await.unwrap(), None, "{b}");
        }
        // The writer is free again, and its next write follows the head.
        append(&*s, "member/n-3", 8, 1).await;
        assert_eq!(s.head().await.unwrap().position, 8, "{b}");

        // A write with no new generation keeps the stored one.
        let at = s.head().await.unwrap();
        let mut tx = s.begin_write_at(at).await.unwrap();
        let recs = seal(at, "member/n-4", 0, vec![event(30)]);
        tx.append(&recs).await.unwrap();
        tx.write_changes(&rows(3, None), 9).await.unwrap();
        tx.commit().await.unwrap();
        assert_eq!(s.cluster_row().await.unwrap(), (2, 9), "{b}");

        if b == "postgres" {
            // PostgreSQL defers the lock to the commit: a write begun at
            // the head does not wait for another that holds the lock, and
            // its commit waits for that one to end. When it committed a
            // new head, nothing is written; when it rolled back, all is.
            for other_commits in [true, false] {
                // `s` wrote last: the tree's edge it keeps is the head's.
                let n = 40 + u8::from(other_commits) * 3;
                append(&*s, "member/n-9", n + 2, 1).await;
                let at = s.head().await.unwrap();
                let mut holder = other.begin_write().await.unwrap();
                let mut tx = tokio::time::timeout(Duration::from_secs(2), s.begin_write_at(at))
                    .await
                    .expect("a write begun at the head takes no lock")
                    .unwrap();
                let mine = seal(at, "member/n-6", 0, vec![event(n)]);
                tx.append(&mine).await.unwrap();
                tx.write_changes(&rows(4, Some(4)), 10).await.unwrap();
                let commit = tokio::spawn(async move { tx.commit().await });
                tokio::time::sleep(Duration::from_millis(300)).await;
                assert!(!commit.is_finished(), "the commit waits for the lock");
                if other_commits {
                    let theirs = seal(at, "member/n-8", 0, vec![event(n + 1)]);
                    holder.append(&theirs).await.unwrap();
                    holder.commit().await.unwrap();
                    let r = commit.await.unwrap();
                    assert!(matches!(r, Err(StoreError::Conflict(_))), "{r:?}");
                    assert_eq!(s.head().await.unwrap(), tx_head(&theirs));
                    assert!(s.read_stream("member/n-6").await.unwrap().is_empty());
                } else {
                    holder.rollback().await.unwrap();
                    commit.await.unwrap().unwrap();
                    assert_eq!(s.head().await.unwrap(), tx_head(&mine));
                    assert_eq!(s.read_stream("member/n-6").await.unwrap().len(), 1);
                }
            }
            assert_eq!(s.head().await.unwrap().position, 13);
        }
        let head = s.head().await.unwrap();
        assert_eq!(
            verify_chain(&*s, None).await.unwrap(),
            Verification::Intact {
                position: head.position,
                hash: head.hash
            },
            "{b}"
        );
    }
}

fn tx_head(recs: &[Recorded]) -> Head {
    let last = recs.last().expect("events");
    Head {
        position: last.position,
        hash: last.hash,
    }
}

#[tokio::test]
async fn two_appends_with_the_same_expected_version_one_wins() {
    for db in each_backend().await {
        let s = open(&db).await;
        let b = db.backend;
        append_to_stream(&*s, "member/n-1", 0, vec![event(1)])
            .await
            .unwrap();
        for round in 0..10u8 {
            let version = s.read_stream("member/n-1").await.unwrap().len() as u64;
            let (x, y) = tokio::join!(
                append_to_stream(&*s, "member/n-1", version, vec![event(2 + 2 * round)]),
                append_to_stream(&*s, "member/n-1", version, vec![event(3 + 2 * round)]),
            );
            let wins = [&x, &y].iter().filter(|r| r.is_ok()).count();
            assert_eq!(wins, 1, "{b}: {x:?} {y:?}");
            let lost = if x.is_err() { x } else { y };
            assert!(matches!(lost, Err(StoreError::Conflict(_))), "{b}");
        }
        let stream = s.read_stream("member/n-1").await.unwrap();
        assert_eq!(stream.len(), 11, "{b}");
        assert!(stream
            .iter()
            .enumerate()
            .all(|(i, e)| e.stream_version == i as u64 + 1));
    }
}

#[tokio::test]
async fn a_write_sees_what_others_committed_and_a_rollback_leaves_nothing() {
    for db in each_backend().await {
        let s = open(&db).await;
        let b = db.backend;
        append(&*s, "member/n-1", 1, 1).await;
        // Another writer commits after this one last read.
        append(&*s, "member/n-2", 2, 2).await;
        let mut tx = s.begin_write().await.unwrap();
        let after = tx.events_after(1).await.unwrap();
        assert_eq!(
            after.iter().map(|e| e.position).collect::<Vec<_>>(),
            [2, 3],
            "{b}"
        );
        let head = tx.head();
        tx.append(&seal(head, "member/n-3", 0, vec![event(4)]))
            .await
            .unwrap();
        tx.write_changes(&rows(1, Some(4)), 4).await.unwrap();
        tx.put_idempotency(&[idem("user/a", "k", 4)]).await.unwrap();
        assert!(tx.idempotency("user/a", "k").await.unwrap().is_some());
        tx.rollback().await.unwrap();
        assert_eq!(s.head().await.unwrap(), head, "{b}");
        assert!(s.read_stream("member/n-3").await.unwrap().is_empty(), "{b}");
        assert_eq!(
            s.read_models().await.unwrap(),
            StoredReadModels::default(),
            "{b}"
        );
        assert_eq!(s.idempotency("user/a", "k").await.unwrap(), None, "{b}");
        // The writer is free again.
        append(&*s, "member/n-3", 5, 1).await;
        assert_eq!(s.head().await.unwrap().position, 4, "{b}");
    }
}

#[tokio::test]
async fn read_models_are_written_with_the_events_upserted_cleared_and_replaced() {
    for db in each_backend().await {
        let s = open(&db).await;
        let b = db.backend;
        write_first(&*s).await;
        assert_eq!(
            s.read_models().await.unwrap(),
            StoredReadModels::from_changes(&rows(1, Some(1)), 1),
            "{b}"
        );
        assert_eq!(s.cluster_row().await.unwrap(), (1, 1), "{b}");
        assert_eq!(
            s.token_docs().await.unwrap(),
            [("tok-1".to_owned(), rows(1, None).tokens[0].doc.clone())],
            "{b}"
        );

        // A later write upserts its rows; no generation keeps the old one.
        let mut tx = s.begin_write().await.unwrap();
        tx.write_changes(&rows(2, None), 2).await.unwrap();
        tx.commit().await.unwrap();
        let mut expected = StoredReadModels::from_changes(&rows(2, None), 2);
        expected.generation = 1;
        assert_eq!(s.read_models().await.unwrap(), expected, "{b}");

        // A rebuild replaces every row, under the write lock.
        let fewer = Changes {
            members: vec![member("n-3", 7)],
            generation: Some(7),
            ..Default::default()
        };
        s.replace_read_models(&fewer, 9).await.unwrap();
        assert_eq!(
            s.read_models().await.unwrap(),
            StoredReadModels::from_changes(&fewer, 9),
            "{b}"
        );
        // Clearing inside a write that rolls back clears nothing.
        let mut tx = s.begin_write().await.unwrap();
        tx.clear_read_models().await.unwrap();
        tx.rollback().await.unwrap();
        assert_eq!(s.read_models().await.unwrap().members.len(), 1, "{b}");
    }
}

#[tokio::test]
async fn idempotency_records_are_kept_by_principal_and_key_once() {
    for db in each_backend().await {
        let s = open(&db).await;
        let b = db.backend;
        let mut tx = s.begin_write().await.unwrap();
        tx.put_idempotency(&[
            idem("user/a", "POST /v1/x k1", 1),
            idem("user/b", "POST /v1/x k1", 1),
        ])
        .await
        .unwrap();
        assert_eq!(
            tx.idempotency("user/a", "POST /v1/x k1").await.unwrap(),
            Some(idem("user/a", "POST /v1/x k1", 1)),
            "{b}: a write sees its own records"
        );
        tx.commit().await.unwrap();
        assert_eq!(
            s.idempotency("user/a", "POST /v1/x k1").await.unwrap(),
            Some(idem("user/a", "POST /v1/x k1", 1)),
            "{b}"
        );
        assert_eq!(
            s.idempotency("user/c", "POST /v1/x k1").await.unwrap(),
            None,
            "{b}: another principal's key is not this one's"
        );
        assert_eq!(s.idempotency("user/a", "k2").await.unwrap(), None, "{b}");
        // A key is kept once: a second record for it is a conflict, when
        // it is put or at the latest when the write commits (SQLite's
        // writer runs a write's statements in its commit), and nothing of
        // that write is stored.
        let mut tx = s.begin_write().await.unwrap();
        let head = tx.head();
        tx.append(&seal(head, "member/n-7", 0, vec![event(7)]))
            .await
            .unwrap();
        let again = match tx
            .put_idempotency(&[idem("user/a", "POST /v1/x k1", 2)])
            .await
        {
            Ok(()) => tx.commit().await,
            Err(e) => {
                tx.rollback().await.unwrap();
                Err(e)
            }
        };
        assert!(
            matches!(again, Err(StoreError::Conflict(_))),
            "{b}: {again:?}"
        );
        assert_eq!(s.head().await.unwrap(), head, "{b}");
        assert!(s.read_stream("member/n-7").await.unwrap().is_empty(), "{b}");
        assert_eq!(
            s.idempotency("user/a", "POST /v1/x k1")
                .await
                .unwrap()
                .unwrap()
                .position,
            1,
            "{b}"
        );
    }
}

#[tokio::test]
async fn the_newest_snapshot_at_or_before_a_position_is_found() {
    for db in each_backend().await {
        let s = open(&db).await;
        let b = db.backend;
        assert_eq!(s.snapshot_at_or_before(100).await.unwrap(), None, "{b}");
        s.put_snapshot(10, b"ten").await.unwrap();
        s.put_snapshot(20, b"twenty").await.unwrap();
        assert_eq!(s.snapshot_at_or_before(5).await.unwrap(), None, "{b}");
        assert_eq!(
            s.snapshot_at_or_before(15).await.unwrap(),
            Some((10, b"ten".to_vec())),
            "{b}"
        );
        assert_eq!(
            s.snapshot_at_or_before(20).await.unwrap(),
            Some((20, b"twenty".to_vec())),
            "{b}"
        );
        // A snapshot is a cache: writing one again replaces it.
        s.put_snapshot(20, b"again").await.unwrap();
        assert_eq!(
            s.snapshot_at_or_before(u64::MAX >> 1).await.unwrap(),
            Some((20, b"again".to_vec())),
            "{b}"
        );
    }
}

/// What the writer keeps over a long log: a snapshot every 10,000 events or
/// a little more (a batch can carry it past the mark), with time-travel reads
/// adding snapshots of old positions between them.
#[tokio::test]
async fn snapshots_are_pruned_to_a_bounded_set_that_still_serves_time_travel() {
    const EVERY: u64 = 10_000;
    let writer: Vec<u64> = (1..=105u64).map(|i| i * EVERY + (i * 37) % 200).collect();
    let head = *writer.last().unwrap();
    for db in each_backend().await {
        let s = open(&db).await;
        let b = db.backend;
        for &p in &writer {
            s.put_snapshot(p, format!("at {p}").as_bytes())
                .await
                .unwrap();
        }
        // Time travel keeps a snapshot of where it arrived: inside a spacing
        // that already has one it goes at once; the first of a spacing stays.
        s.put_snapshot(450_000, b"travel").await.unwrap();
        assert_eq!(
            s.snapshot_at_or_before(450_000).await.unwrap().unwrap().0,
            400_000 + (40 * 37) % 200,
            "{b}: a snapshot neither newest nor first of its spacing is pruned"
        );
        s.put_snapshot(300_005, b"travel").await.unwrap();
        assert_eq!(
            s.snapshot_at_or_before(350_000).await.unwrap(),
            Some((300_005, b"travel".to_vec())),
            "{b}: the first at or after a multiple is kept"
        );

        let mut kept = Vec::new();
        let mut p = head;
        while let Some((at, _)) = s.snapshot_at_or_before(p).await.unwrap() {
            kept.push(at);
            if at == 0 {
                break;
            }
            p = at - 1;
        }
        // Bounded: one per spacing, and the newest two.
        assert!(
            kept.len() as u64 <= head / SNAPSHOT_SPACING + 1 + SNAPSHOTS_NEWEST,
            "{b}: {} snapshots kept of {}: {kept:?}",
            kept.len(),
            writer.len() + 2
        );
        // The newest ones, which start-up folds from, are there.
        for &p in writer.iter().rev().take(SNAPSHOTS_NEWEST as usize) {
            assert!(
                kept.contains(&p),
                "{b}: the newest {p} was pruned: {kept:?}"
            );
        }
        // From any position, time travel finds a snapshot at most a spacing
        // and a writer's distance before it.
        let first = writer[0];
        for p in (first..=head + 1_000)
            .step_by(997)
            .chain(writer.iter().copied())
        {
            let (at, _) = s.snapshot_at_or_before(p).await.unwrap().unwrap();
            assert!(
                p - at <= SNAPSHOT_SPACING + EVERY,
                "{b}: asOf={p} would replay {} events from {at}: {kept:?}",
                p - at
            );
        }
    }
}

#[tokio::test]
async fn one_process_leads_and_commits_are_announced_where_the_backend_can() {
    for db in each_backend().await {
        let s = open(&db).await;
        let other = open(&db).await;
        let b = db.backend;
        let lead = s.try_lead(42).await.unwrap().expect("the first one leads");
        assert!(lead.still_held().await, "{b}");
        match db.backend {
            "postgres" => {
                // Among replicas of one database, one holds the role.
                assert!(other.try_lead(42).await.unwrap().is_none(), "{b}");
                assert!(other.try_lead(43).await.unwrap().is_some(), "{b}");
                drop(lead);
                let mut next = None;
                for _ in 0..50 {
                    next = other.try_lead(42).await.unwrap();
                    if next.is_some() {
                        break;
                    }
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
                assert!(next.is_some(), "{b}: a dropped role is free again");
                // Commits are announced to every replica.
                let mut rx = other.subscribe().await.unwrap().expect("LISTEN");
                append(&*s, "member/n-1", 1, 3).await;
                let got = tokio::time::timeout(Duration::from_secs(10), rx.recv())
                    .await
                    .expect("a commit is announced")
                    .unwrap();
                assert_eq!(got, 3, "{b}");
            }
            _ => {
                // The embedded store has one process: it always leads, and
                // watchers poll.
                assert!(other.try_lead(42).await.unwrap().is_some(), "{b}");
                assert!(s.subscribe().await.unwrap().is_none(), "{b}");
            }
        }
    }
}

#[tokio::test]
async fn a_read_only_open_reads_and_never_writes_or_migrates() {
    for db in each_backend().await {
        let b = db.backend;
        // Nothing there yet: a read-only open neither creates nor migrates.
        let refused = connect_as(&db.url, Access::ReadOnly).await;
        assert!(
            matches!(
                refused,
                Err(StoreError::Schema(_) | StoreError::Unavailable(_))
            ),
            "{b}: {:?}",
            refused.err()
        );
        let s = open(&db).await;
        append(&*s, "member/n-1", 1, 2).await;
        let ro = connect_as(&db.url, Access::ReadOnly).await.unwrap();
        assert_eq!(ro.head().await.unwrap(), s.head().await.unwrap(), "{b}");
        assert_eq!(ro.read_after(0, 10).await.unwrap().len(), 2, "{b}");
        let version = ro.read_stream("member/n-1").await.unwrap().len() as u64;
        let write = append_to_stream(&*ro, "member/n-1", version, vec![event(3)]).await;
        assert!(write.is_err(), "{b}: a read-only store wrote");
        assert_eq!(s.head().await.unwrap().position, 2, "{b}");
    }
}

#[tokio::test]
async fn a_schema_newer_than_this_build_is_refused_not_migrated_down() {
    for db in each_backend().await {
        let b = db.backend;
        drop(open(&db).await);
        let future = "INSERT INTO _sqlx_migrations (version, description, success, checksum, execution_time) \
                      VALUES (99999, 'from the future', TRUE, $1, 0)";
        if b == "postgres" {
            let mut c = sqlx::PgConnection::connect(&db.url).await.unwrap();
            sqlx::query(future)
                .bind(vec![0u8])
                .execute(&mut c)
                .await
                .unwrap();
        } else {
            let mut c = sqlx::SqliteConnection::connect(&db.url).await.unwrap();
            sqlx::query(future)
                .bind(vec![0u8])
                .execute(&mut c)
                .await
                .unwrap();
        }
        for access in [Access::ReadWrite, Access::ReadOnly] {
            let got = connect_as(&db.url, access).await;
            assert!(
                matches!(&got, Err(StoreError::Schema(m)) if m.contains("99999")),
                "{b} {access:?}: {:?}",
                got.err()
            );
        }
    }
}

#[tokio::test]
async fn an_unknown_url_scheme_is_refused_without_its_password() {
    let got = connect("mysql://app:s3cret@db/stratum").await;
    let msg = got.err().expect("refused").to_string();
    assert!(msg.contains("unsupported"), "{msg}");
    assert!(!msg.contains("s3cret"), "{msg}");
}

/// SQLite's writer has a connection of its own: a database in memory is
/// the one sqlx's readers see, and a write dropped before its end (a
/// cancelled task) stores nothing and lets the write lock go, also for
/// another process's connection.
#[tokio::test]
async fn sqlite_writes_in_memory_and_a_dropped_write_lets_the_lock_go() {
    {
        let url = "sqlite::memory:";
        let s = connect(url).await.unwrap();
        let written = append(&*s, "member/n-1", 1, 3).await;
        assert_eq!(s.head().await.unwrap().position, 3, "{url}");
        assert_eq!(s.read_after(0, 10).await.unwrap(), written, "{url}");
        assert!(
            matches!(
                verify_chain(&*s, None).await.unwrap(),
                Verification::Intact { position: 3, .. }
            ),
            "{url}"
        );
    }
    for db in each_backend().await {
        if db.backend != "sqlite" {
            continue;
        }
        let s = open(&db).await;
        let other = open(&db).await;
        append(&*s, "member/n-1", 1, 1).await;
        let head = s.head().await.unwrap();
        let mut tx = s.begin_write().await.unwrap();
        tx.append(&seal(head, "member/n-2", 0, vec![event(2)]))
            .await
            .unwrap();
        tx.put_idempotency(&[idem("user/a", "k", 2)]).await.unwrap();
        assert!(tx.idempotency("user/a", "k").await.unwrap().is_some());
        drop(tx);
        // Another connection takes the lock at once (not after the busy
        // timeout) and finds nothing of the dropped write.
        let took = tokio::time::timeout(Duration::from_secs(2), other.begin_write())
            .await
            .expect("the dropped write let the lock go")
            .unwrap();
        assert_eq!(took.head(), head);
        took.rollback().await.unwrap();
        assert!(s.read_stream("member/n-2").await.unwrap().is_empty());
        assert_eq!(s.idempotency("user/a", "k").await.unwrap(), None);
        append(&*s, "member/n-2", 2, 1).await;
        assert_eq!(s.head().await.unwrap().position, 2);
    }
}

/// Runs `sql` on the test database, as another build would.
async fn raw(db: &TestDb, sql: &str) {
    if db.backend == "postgres" {
        let mut c = sqlx::PgConnection::connect(&db.url).await.unwrap();
        sqlx::query(sql).execute(&mut c).await.unwrap();
    } else {
        let mut c = sqlx::SqliteConnection::connect(&db.url).await.unwrap();
        sqlx::query(sql).execute(&mut c).await.unwrap();
    }
}

#[tokio::test]
async fn rows_name_their_projection_version_and_rows_of_another_are_found_and_rewritten() {
    for db in each_backend().await {
        let s = open(&db).await;
        let b = db.backend;
        write_first(&*s).await;
        // Written by this build: every row of its versions.
        assert_eq!(s.other_version_rows(10).await.unwrap(), vec![], "{b}");
        assert_eq!(s.read_models().await.unwrap().other_versions, vec![], "{b}");

        // Another build (a fold of another version) wrote two rows.
        raw(
            &db,
            "UPDATE rm_members SET projection_version = 7 WHERE node_id = 'n-2'",
        )
        .await;
        raw(
            &db,
            "UPDATE rm_docs SET projection_version = 7 WHERE id = 'up-1'",
        )
        .await;
        let mut found = s.other_version_rows(10).await.unwrap();
        found.sort();
        assert_eq!(
            found,
            vec![
                ("member".to_owned(), "n-2".to_owned()),
                ("upgrade".to_owned(), "up-1".to_owned())
            ],
            "{b}"
        );
        assert_eq!(s.other_version_rows(1).await.unwrap().len(), 1, "{b}");
        let mut others = s.read_models().await.unwrap().other_versions;
        others.sort();
        assert_eq!(
            others,
            vec![
                ("member".to_owned(), "n-2".to_owned(), 7),
                ("upgrade".to_owned(), "up-1".to_owned(), 7)
            ],
            "{b}"
        );

        // This build writes one again and deletes the other.
        let mut tx = s.begin_write().await.unwrap();
        let again = Changes {
            members: vec![member("n-2", 1)],
            removed: vec![("upgrade".to_owned(), "up-1".to_owned())],
            ..Changes::default()
        };
        tx.write_changes(&again, 1).await.unwrap();
        tx.commit().await.unwrap();
        assert_eq!(s.other_version_rows(10).await.unwrap(), vec![], "{b}");
        let stored = s.read_models().await.unwrap();
        assert_eq!(stored.other_versions, vec![], "{b}");
        assert!(stored.docs.is_empty(), "{b}: {:?}", stored.docs);
        assert_eq!(stored.members.len(), 2, "{b}");
    }
}
