//! The one write path over the event store, on SQLite and on PostgreSQL
//! alike (the store's own conformance is `api/store/tests/conformance/`).

use std::sync::Arc;

use stratum_api::command::{CommandBus, CommandRequest};
use stratum_domain::log::ChainVerifier;
use stratum_domain::membership::MemberCommand;
use stratum_domain::Command;
use stratum_store::{self as store, EventStore};

use crate::support::{admit_request, each_backend};

/// Admits `node_id`, then reports `each - 1` join steps on it, each
/// answered committed (a lost race is never answered an error).
async fn admit_then_report(bus: &CommandBus, node_id: &str, ip: String, each: usize) {
    bus.execute(admit_request(node_id, &ip))
        .await
        .unwrap()
        .committed()
        .unwrap();
    for k in 1..each {
        let step = Command::Member(MemberCommand::ReportJoinProgress {
            node_id: node_id.to_owned(),
            step: Some(format!("join/step-{k}")),
        });
        let r = bus
            .execute(CommandRequest::new(step, "user/admin"))
            .await
            .unwrap_or_else(|e| panic!("{node_id}, step {k}: {e:?}"))
            .committed()
            .unwrap();
        assert!(r.position.is_some());
    }
}

/// 64 writers × 1,000 commands (one event each) through the one write path,
/// while a reader tails the log.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_writers_make_one_gap_free_log_that_a_tailing_reader_sees_in_order() {
    const WRITERS: usize = 64;
    const EACH: usize = 1000;
    const TOTAL: u64 = (WRITERS * EACH) as u64;
    for db in each_backend().await {
        let s: Arc<dyn EventStore> = store::connect(&db.url).await.unwrap();
        let bus = CommandBus::start(s.clone()).await.unwrap();
        let reader = {
            let s = s.clone();
            tokio::spawn(async move {
                let mut last = 0u64;
                let mut seen = 0u64;
                let mut chain = ChainVerifier::default();
                while last < TOTAL {
                    let chunk = s.read_after(last, 1000).await.unwrap();
                    for e in &chunk {
                        assert_eq!(e.position, last + 1, "the reader saw a gap or a repeat");
                        chain.check(e).expect("the chain holds");
                        last = e.position;
                        seen += 1;
                    }
                    if chunk.is_empty() {
                        tokio::time::sleep(std::time::Duration::from_millis(2)).await;
                    }
                }
                seen
            })
        };
        let writers: Vec<_> = (0..WRITERS)
            .map(|w| {
                let bus = bus.clone();
                tokio::spawn(async move {
                    let ip = format!("10.{}.{}.1", w / 250, w % 250);
                    admit_then_report(&bus, &format!("n-w{w}"), ip, EACH).await;
                })
            })
            .collect();
        for w in writers {
            w.await.unwrap();
        }
        let seen = tokio::time::timeout(std::time::Duration::from_secs(120), reader)
            .await
            .expect("the reader caught up")
            .unwrap();
        assert_eq!(seen, TOTAL, "{}", db.backend);
        assert_eq!(s.head().await.unwrap().position, TOTAL, "{}", db.backend);
        // Every stream's versions are 1..=1000, each writer's events in order.
        let stream = s.read_stream("member/n-w7").await.unwrap();
        assert_eq!(stream.len(), EACH, "{}", db.backend);
        assert!(stream.windows(2).all(|w| w[0].position < w[1].position));
        assert!(stream
            .iter()
            .enumerate()
            .all(|(i, e)| e.stream_version == i as u64 + 1));
    }
}

#[tokio::test]
async fn read_models_written_inline_equal_a_replay_from_zero() {
    for db in each_backend().await {
        let app = crate::support::spawn_app(&db).await;
        crate::membership::scenario(&app).await;
        let store = &app.svc.state.store;
        let rm = stratum_api::command::load(store.clone(), None)
            .await
            .unwrap();
        let rebuilt = store::StoredReadModels::from_changes(&rm.all_rows(), rm.state.position);
        let stored = store.read_models().await.unwrap();
        assert_eq!(
            stratum_api::cli::drift(&stored, &rebuilt),
            Vec::<String>::new(),
            "{}",
            db.backend
        );
        assert_eq!(stored, rebuilt, "{}", db.backend);
        // A rebuild writes the very same rows.
        store
            .replace_read_models(&rm.all_rows(), rm.state.position)
            .await
            .unwrap();
        assert_eq!(store.read_models().await.unwrap(), stored, "{}", db.backend);
    }
}

/// Two processes' write paths on one database (replicas), each with
/// concurrent writers: a batch decided ahead whose head another process
/// moved first (found at its begin on SQLite, at its commit's one
/// statement on PostgreSQL) writes nothing and is decided again, so every
/// command lands once, none is answered an error, and the log is one
/// chain with every stream's versions in order.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_processes_writing_one_log_race_and_every_command_lands_once() {
    const WRITERS: usize = 16;
    const EACH: usize = 150;
    for db in each_backend().await {
        let b = db.backend;
        let mut buses = Vec::new();
        for _ in 0..2 {
            let s: Arc<dyn EventStore> = store::connect(&db.url).await.unwrap();
            buses.push(CommandBus::start(s).await.unwrap());
        }
        let writers: Vec<_> = (0..2 * WRITERS)
            .map(|w| {
                let bus = buses[w % 2].clone();
                tokio::spawn(async move {
                    let ip = format!("10.9.{w}.1");
                    admit_then_report(&bus, &format!("n-w{w}"), ip, EACH).await;
                })
            })
            .collect();
        for w in writers {
            w.await.unwrap();
        }
        let s: Arc<dyn EventStore> = store::connect(&db.url).await.unwrap();
        let total = (2 * WRITERS * EACH) as u64;
        assert_eq!(s.head().await.unwrap().position, total, "{b}");
        let mut chain = ChainVerifier::default();
        let mut last = 0;
        while last < total {
            for e in s.read_after(last, 1000).await.unwrap() {
                assert_eq!(e.position, last + 1, "{b}");
                chain.check(&e).expect("the chain holds");
                last = e.position;
            }
        }
        for w in 0..2 * WRITERS {
            let stream = s.read_stream(&format!("member/n-w{w}")).await.unwrap();
            assert_eq!(stream.len(), EACH, "{b}: n-w{w}");
            assert!(stream
                .iter()
                .enumerate()
                .all(|(i, e)| e.stream_version == i as u64 + 1));
        }
        // What both processes' read models hold is the log's: a replay
        // from zero agrees with the rows they wrote.
        let rm = stratum_api::command::load(s.clone(), None).await.unwrap();
        let rebuilt = store::StoredReadModels::from_changes(&rm.all_rows(), rm.state.position);
        assert_eq!(s.read_models().await.unwrap(), rebuilt, "{b}");
    }
}

/// Appends events to the log straight through the store until it holds
/// `n`: a member admitted every seventh event and join progress reported
/// on the others, so each member's stream version follows from the
/// position. A fold that skips a chunk misses its members.
async fn append_log(s: &Arc<dyn EventStore>, n: u64) {
    use stratum_domain::log::{EventMeta, Recorded};
    use stratum_domain::membership::Role;
    use stratum_domain::DomainEvent;
    let mut head = s.head().await.unwrap();
    while head.position < n {
        let mut batch: Vec<Recorded> = Vec::new();
        while batch.len() < 4_000 && head.position + (batch.len() as u64) < n {
            let k = head.position + batch.len() as u64;
            let member = format!("n-{}", k / 7);
            let event = if k.is_multiple_of(7) {
                stratum_domain::testing::admitted(&member, Role::Compute, 1)
            } else {
                DomainEvent::JoinProgressReported {
                    node_id: member,
                    step: format!("join/step-{k}"),
                }
            };
            let enc = stratum_domain::stored::encode(&event);
            let mut r = Recorded {
                position: k + 1,
                stream_id: stratum_domain::state::stream_of(&event),
                stream_version: k % 7 + 1,
                event_type: enc.event_type.into(),
                schema_version: enc.schema_version,
                event_id: uuid::Uuid::new_v4(),
                occurred_at: stratum_domain::log::log_precision(chrono::Utc::now()),
                meta: EventMeta {
                    principal: "user/test".into(),
                    ..Default::default()
                },
                payload: enc.payload,
                prev_hash: [0; 32],
                hash: [0; 32],
            };
            r.seal(batch.last().map_or(head.hash, |e| e.hash));
            batch.push(r);
        }
        let mut tx = s.begin_write().await.unwrap();
        tx.append(&batch).await.unwrap();
        tx.commit().await.unwrap();
        let last = batch.last().unwrap();
        head = store::Head {
            position: last.position,
            hash: last.hash,
        };
    }
}

/// Every event of the log, read row by row.
async fn every_event(s: &Arc<dyn EventStore>) -> Vec<stratum_domain::log::Recorded> {
    let head = s.head().await.unwrap().position;
    let mut all = Vec::new();
    while (all.len() as u64) < head {
        all.extend(s.read_after(all.len() as u64, 5_000).await.unwrap());
    }
    all
}

/// Asserts that `got` folded exactly `events`.
fn assert_folded(
    got: &stratum_projections::ReadModels,
    events: &[stratum_domain::log::Recorded],
    what: &str,
) {
    let want = stratum_projections::ReadModels::replay(events.iter()).unwrap();
    assert_eq!(got.state.position, events.len() as u64, "{what}");
    assert_eq!(
        got.state.membership.members.len(),
        want.state.membership.members.len(),
        "{what}"
    );
    assert!(got.all_rows() == want.all_rows(), "{what}");
}

/// A replay asks for the next chunk of the log while the one before it is
/// read, and uses it only where that one ended: across chunk boundaries,
/// up to any position, it folds every event once, in order.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replay_that_reads_ahead_folds_every_event_once_across_its_chunks() {
    use futures::FutureExt;
    let chunk = u64::from(store::READ_CHUNK);
    let n = 2 * chunk + chunk / 2;
    for db in each_backend().await {
        let b = db.backend;
        let s: Arc<dyn EventStore> = store::connect(&db.url).await.unwrap();
        append_log(&s, n).await;
        let all = every_event(&s).await;
        for until in [
            Some(chunk - 1),
            Some(chunk),
            Some(chunk + 1),
            Some(2 * chunk - 1),
            Some(2 * chunk),
            Some(2 * chunk + 1),
            Some(n - 1),
        ] {
            let got = stratum_api::command::load(s.clone(), until).await.unwrap();
            let upto = until.unwrap_or(n) as usize;
            assert_folded(&got, &all[..upto], &format!("{b}, until {until:?}"));
        }

        // The whole log, the first chunk's read held until the second has
        // been asked for: a reader that waits for one chunk before asking
        // for the next never asks, and the hold gives up after 10 s.
        let (asked, asking) = tokio::sync::watch::channel(false);
        let gave_up = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let held = gave_up.clone();
        let ends = Arc::new(std::sync::Mutex::new(Vec::new()));
        let seen = ends.clone();
        let counting = stratum_api::testing::CountingStore::new(s.clone())
            .reading_for_replay_through(move |after, done| {
                if after == chunk && !done {
                    asked.send_replace(true);
                }
                let mut asking = asking.clone();
                let held = held.clone();
                async move {
                    if after == 0 && !done {
                        let waited = tokio::time::timeout(
                            std::time::Duration::from_secs(10),
                            asking.wait_for(|a| *a),
                        )
                        .await;
                        if waited.is_err() {
                            held.store(true, std::sync::atomic::Ordering::SeqCst);
                        }
                    }
                }
                .boxed()
            });
        let got = stratum_api::command::replay(Arc::new(counting), None, move |p| {
            seen.lock().unwrap().push(p)
        })
        .await
        .unwrap();
        assert_folded(&got, &all, &format!("{b}, the whole log"));
        assert!(
            !gave_up.load(std::sync::atomic::Ordering::SeqCst),
            "{b}: the second chunk was not asked for while the first was read"
        );
        // Each chunk ended READ_CHUNK after the one before it.
        assert_eq!(*ends.lock().unwrap(), [chunk, 2 * chunk, n], "{b}");
    }
}

/// A log that grows while it is replayed: the chunk that was short when
/// read (the log's end then) is followed by a read from where it ended,
/// not by the chunk read ahead from where a whole one would have ended,
/// which would skip what was appended between the two.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replay_of_a_growing_log_reads_on_from_where_a_short_chunk_ended() {
    use futures::FutureExt;
    let chunk = u64::from(store::READ_CHUNK);
    let (first, grown) = (2 * chunk + chunk / 2, 3 * chunk + chunk / 2);
    for db in each_backend().await {
        let b = db.backend;
        let s: Arc<dyn EventStore> = store::connect(&db.url).await.unwrap();
        append_log(&s, first).await;
        // The short chunk (the third) is answered only once the log has
        // grown, and the chunk read ahead after it reads only then.
        let (short, short_read) = tokio::sync::watch::channel(false);
        let (appended, on_appended) = tokio::sync::watch::channel(false);
        let counting = stratum_api::testing::CountingStore::new(s.clone())
            .reading_for_replay_through(move |after, done| {
                if after == 2 * chunk && done {
                    short.send_replace(true);
                }
                let wait = (after == 2 * chunk && done) || (after == 3 * chunk && !done);
                let mut on_appended = on_appended.clone();
                async move {
                    if wait {
                        on_appended.wait_for(|a| *a).await.unwrap();
                    }
                }
                .boxed()
            });
        let replay = tokio::spawn(stratum_api::command::load(Arc::new(counting), None));
        let mut short_read = short_read;
        tokio::time::timeout(
            std::time::Duration::from_secs(30),
            short_read.wait_for(|r| *r),
        )
        .await
        .unwrap_or_else(|_| panic!("{b}: the third chunk was never read"))
        .unwrap();
        append_log(&s, grown).await;
        appended.send_replace(true);
        let got = replay.await.unwrap().unwrap();
        assert_folded(&got, &every_event(&s).await, &format!("{b}, grown"));
    }
}
