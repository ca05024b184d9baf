//! The Merkle tree kept beside the log, on both backends: the rows every
//! append adds in its own commit agree with the tree the entries give, a
//! reopened store carries on from what it reads back, proofs check with
//! `tlog_tiles`' verifier, and a tampered or missing row is found.

use std::sync::Arc;

use stratum_domain::log::{EventMeta, Verification};
use stratum_domain::tree::{self, check_record, check_tree, Frontier, Hash, TreeRow};
use stratum_store::testing::{append_to_stream, each_backend, tamper, NewEvent};
use stratum_store::tree::{consistency, ensure, inclusion, root, root_consistent_with};
use stratum_store::{connect, verify_chain, EventStore};

fn event(n: u32) -> NewEvent {
    NewEvent {
        event_type: "MemberJoinCompleted".into(),
        schema_version: 1,
        event_id: uuid::Uuid::from_u128(0x7000_0000 + u128::from(n)),
        occurred_at: chrono::DateTime::from_timestamp(1_700_000_000 + i64::from(n), 0).unwrap(),
        meta: EventMeta {
            principal: "user/u".into(),
            request_id: None,
            causation: None,
            correlation: None,
            client_request_id: None,
        },
        payload: n.to_be_bytes().to_vec(),
    }
}

async fn append(s: &dyn EventStore, from: u32, n: u32) {
    let version = u64::from(from);
    append_to_stream(
        s,
        "member/n-1",
        version,
        (from..from + n).map(event).collect(),
    )
    .await
    .unwrap();
}

/// The tree the entries give, computed apart from the store's rows.
async fn expected(s: &dyn EventStore, size: u64) -> (Frontier, Vec<TreeRow>) {
    let mut f = Frontier::default();
    let mut rows = Vec::new();
    for e in s.entries(0, size).await.unwrap() {
        f.push(&e, &mut rows);
    }
    (f, rows)
}

#[tokio::test]
async fn the_kept_tree_is_the_entries_tree_across_commits_and_reopens() {
    for db in each_backend().await {
        let b = db.backend;
        let mut s: Arc<dyn EventStore> = connect(&db.url).await.unwrap();
        // Commits of every shape: single leaves, a tile's edge, whole
        // tiles, and past 65,536 leaves so a level-2 row is made; the
        // store is opened again midway, so the edge is read back.
        let sizes = [
            1u32, 2, 252, 1, 1, 300, 4_000, 20_000, 20_000, 21_000, 300, 3,
        ];
        let mut at = 0u32;
        let mut old_roots = Vec::new();
        for (i, n) in sizes.into_iter().enumerate() {
            append(&*s, at, n).await;
            at += n;
            old_roots.push((u64::from(at), root(&*s, u64::from(at)).await.unwrap()));
            if i == 6 {
                s = connect(&db.url).await.unwrap();
            }
        }
        let size = u64::from(at);
        let (f, rows) = expected(&*s, size).await;
        assert_eq!(root(&*s, size).await.unwrap(), f.root(), "{b}");
        assert_eq!(rows.iter().filter(|r| r.level == 2).count(), 1, "{b}");
        for level in [1u8, 2] {
            let want: Vec<[u8; 32]> = rows
                .iter()
                .filter(|r| r.level == level)
                .map(|r| r.hash)
                .collect();
            let kept = s.tree_rows(level, 0, want.len() as u64 + 1).await.unwrap();
            assert_eq!(kept, want, "{b}: level {level}");
        }
        // Every earlier root is still the root at its size, and the new
        // tree proves it extends each.
        let now = Hash(f.root());
        for (m, r) in &old_roots {
            assert_eq!(root(&*s, *m).await.unwrap(), *r, "{b}: root at {m}");
            let p = consistency(&*s, *m, size).await.unwrap();
            let p: Vec<Hash> = p.into_iter().map(Hash).collect();
            check_tree(&p, size, now, *m, Hash(*r)).unwrap_or_else(|e| panic!("{b}: {m}: {e}"));
            // What signing checks: the root of a size proven consistent
            // with a held checkpoint, bigger or smaller, and not with a
            // checkpoint of another history.
            assert_eq!(
                root_consistent_with(&*s, size, (*m, *r)).await.unwrap(),
                Some(now.0),
                "{b}: {m}"
            );
            assert_eq!(
                root_consistent_with(&*s, *m, (size, now.0)).await.unwrap(),
                Some(*r),
                "{b}: {m}"
            );
            let mut forged = *r;
            forged[0] ^= 1;
            assert_eq!(
                root_consistent_with(&*s, size, (*m, forged)).await.unwrap(),
                None,
                "{b}: {m}"
            );
        }
        let entries = s.entries(0, size).await.unwrap();
        for i in [0, 255, 256, 65_535, 65_536, size - 1] {
            let p: Vec<Hash> = inclusion(&*s, size, i)
                .await
                .unwrap()
                .into_iter()
                .map(Hash)
                .collect();
            let leaf = Hash(tree::leaf_hash(&entries[i as usize]));
            check_record(&p, size, now, i, leaf).unwrap_or_else(|e| panic!("{b}: {i}: {e}"));
        }
        assert!(matches!(
            verify_chain(&*s, None).await.unwrap(),
            Verification::Intact { .. }
        ));
        assert_eq!(ensure(&*s).await.unwrap(), None, "{b}: nothing to rebuild");

        // A row changed under the service is found by verify, naming the
        // first position it covers.
        tamper(
            &db,
            "UPDATE log_tree SET hash = (SELECT hash FROM log_tree WHERE level = 1 AND idx = 0) \
             WHERE level = 1 AND idx = 7",
        )
        .await;
        match verify_chain(&*s, None).await.unwrap() {
            Verification::Broken { position, reason } => {
                assert_eq!(position, 7 * 256 + 1, "{b}: {reason}");
                assert!(reason.contains("tile level 1, index 7"), "{b}: {reason}");
            }
            v => panic!("{b}: {v:?}"),
        }
        // A database without the tree (from before it was kept) gets it
        // built at start, and then verifies.
        tamper(&db, "DELETE FROM log_tree").await;
        let s: Arc<dyn EventStore> = connect(&db.url).await.unwrap();
        assert_eq!(ensure(&*s).await.unwrap(), Some(rows.len()), "{b}");
        assert!(matches!(
            verify_chain(&*s, None).await.unwrap(),
            Verification::Intact { .. }
        ));
        // ...and appends go on from it.
        append(&*s, at, 5).await;
        let (f, _) = expected(&*s, size + 5).await;
        assert_eq!(root(&*s, size + 5).await.unwrap(), f.root(), "{b}");
    }
}

#[tokio::test]
async fn a_write_after_another_process_replaced_the_tail_reads_the_edge_again() {
    for db in each_backend().await {
        let b = db.backend;
        let a: Arc<dyn EventStore> = connect(&db.url).await.unwrap();
        let other: Arc<dyn EventStore> = connect(&db.url).await.unwrap();
        append(&*a, 0, 250).await;
        // A failover lost positions 246..=250, and another replica wrote as
        // many other events since: the same head position, another log.
        tamper(
            &db,
            "DELETE FROM events WHERE position > 245; \
             UPDATE log_head SET position = 245, hash = (SELECT hash FROM events WHERE position = 245)",
        )
        .await;
        append_to_stream(
            &*other,
            "member/n-1",
            245,
            (900_000..900_005).map(event).collect(),
        )
        .await
        .unwrap();
        // This process's next write completes the first tile: its row must
        // be of the log as it is.
        append(&*a, 250, 10).await;
        let (f, rows) = expected(&*a, 260).await;
        assert_eq!(
            a.tree_rows(1, 0, 2).await.unwrap(),
            vec![rows[0].hash],
            "{b}"
        );
        assert_eq!(root(&*a, 260).await.unwrap(), f.root(), "{b}");
    }
}

/// Events another build appended without keeping the tree (issue 32): the
/// rows they complete are missing at the end of each level. That is no
/// break of the log: `verify_chain` says intact and `behind` names the
/// first position not covered; a proof over it is `Behind` (a 503), never
/// `Corrupt`; `catch_up` (or any write) builds them under the log's lock,
/// and appends go on. A row missing in the middle stays a break.
#[tokio::test]
async fn rows_another_build_did_not_keep_are_caught_up_not_called_tampering() {
    use stratum_store::tree::{behind, catch_up, check_rows};
    use stratum_store::StoreError;
    for db in each_backend().await {
        let b = db.backend;
        let s: Arc<dyn EventStore> = connect(&db.url).await.unwrap();
        append(&*s, 0, 700).await;
        let (f, rows) = expected(&*s, 700).await;
        let proof = consistency(&*s, 10, 700).await.unwrap();
        assert_eq!(behind(&*s, 700).await.unwrap(), None, "{b}");

        // The rows of positions 257..=700 were never kept.
        tamper(&db, "DELETE FROM log_tree WHERE level = 1 AND idx >= 1").await;
        let s: Arc<dyn EventStore> = connect(&db.url).await.unwrap();
        assert_eq!(behind(&*s, 700).await.unwrap(), Some(257), "{b}");
        assert!(
            matches!(
                verify_chain(&*s, None).await.unwrap(),
                Verification::Intact { position: 700, .. }
            ),
            "{b}: the chain is whole"
        );
        assert_eq!(check_rows(&*s, 700).await.unwrap(), Ok(()), "{b}");
        match consistency(&*s, 10, 700).await {
            Err(StoreError::Behind(why)) => assert!(why.contains("tile level 1"), "{b}: {why}"),
            other => panic!("{b}: {other:?}"),
        }

        // A catch-up whose rows do not land (here a trigger takes them
        // away) says so: the tree's keeper tries it again.
        let (keep_none, keep) = if b == "sqlite" {
            (
                "CREATE TRIGGER keep_none AFTER INSERT ON log_tree BEGIN \
                 DELETE FROM log_tree WHERE level = NEW.level AND idx = NEW.idx; END",
                "DROP TRIGGER keep_none",
            )
        } else {
            (
                "CREATE FUNCTION keep_none() RETURNS trigger LANGUAGE plpgsql AS \
                 $$ BEGIN DELETE FROM log_tree WHERE level = NEW.level AND idx = NEW.idx; \
                 RETURN NULL; END $$; CREATE TRIGGER keep_none AFTER INSERT ON log_tree \
                 FOR EACH ROW EXECUTE FUNCTION keep_none()",
                "DROP TRIGGER keep_none ON log_tree; DROP FUNCTION keep_none()",
            )
        };
        tamper(&db, keep_none).await;
        match catch_up(&*s).await {
            Err(StoreError::Behind(why)) => {
                assert!(why.contains("from position 257 of 700"), "{b}: {why}")
            }
            other => panic!("{b}: a catch-up that built nothing: {other:?}"),
        }
        tamper(&db, keep).await;
        // The store's kept edge says the rows it wrote were stored: a
        // trigger that took them is tampering, which a store opened again
        // reads past.
        let s: Arc<dyn EventStore> = connect(&db.url).await.unwrap();

        // Caught up: the same rows, the same proof, and appends go on.
        assert!(catch_up(&*s).await.unwrap(), "{b}");
        assert_eq!(behind(&*s, 700).await.unwrap(), None, "{b}");
        assert!(!catch_up(&*s).await.unwrap(), "{b}: nothing left");
        assert_eq!(consistency(&*s, 10, 700).await.unwrap(), proof, "{b}");
        assert_eq!(root(&*s, 700).await.unwrap(), f.root(), "{b}");
        assert_eq!(rows.len(), 2, "{b}: two rows at level 1");
        append(&*s, 700, 100).await;
        let (f, _) = expected(&*s, 800).await;
        assert_eq!(root(&*s, 800).await.unwrap(), f.root(), "{b}");

        // A write catches up by itself: rows missing again, then an append.
        tamper(&db, "DELETE FROM log_tree WHERE level = 1 AND idx >= 2").await;
        let s: Arc<dyn EventStore> = connect(&db.url).await.unwrap();
        append(&*s, 800, 10).await;
        assert_eq!(behind(&*s, 810).await.unwrap(), None, "{b}");
        assert_eq!(check_rows(&*s, 810).await.unwrap(), Ok(()), "{b}");

        // A row missing in the middle is not a build behind: a break.
        tamper(&db, "DELETE FROM log_tree WHERE level = 1 AND idx = 0").await;
        match verify_chain(&*s, None).await.unwrap() {
            Verification::Broken { position, .. } => assert_eq!(position, 1, "{b}"),
            v => panic!("{b}: {v:?}"),
        }
    }
}
