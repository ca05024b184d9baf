//! The rows a write changes beside the events: read models, idempotency
//! records, snapshots, and the projection version each row names.

use super::*;

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
