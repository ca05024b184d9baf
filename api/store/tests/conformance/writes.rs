//! Writes: the head a write locks or begins at, conflicts, and rollbacks.

use super::*;

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
