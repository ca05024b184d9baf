//! Opening a store: leadership and announced commits, read-only opens, a
//! newer schema, an unknown URL, and SQLite's own writer.

use super::*;

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
