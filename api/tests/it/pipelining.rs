//! Pipelined commits: the writer decides the next batch while a commit is
//! in flight. When that commit fails, what was decided after it must be
//! decided again from the log as the database holds it: nothing is
//! answered from a state that was not stored, and the log stays gap-free
//! and chained. On SQLite and PostgreSQL, through a store that holds one
//! commit until the next batch is being decided, then fails it
//! (`testing::CountingStore` with a `CommitHook`).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use stratum_api::command::{CommandBus, CommandError, CommandRequest, IdempotencyKey, Outcome};
use stratum_api::testing::{CommitHook, CountingStore};
use stratum_domain::log::ChainVerifier;
use stratum_domain::membership::MemberCommand;
use stratum_domain::{Command, ErrorCode};
use stratum_store::{self as store, EventStore, StoreError, StoreResult, WriteTx};
use tokio::sync::Notify;

use crate::support::{admit_request as admit, each_backend};

/// How the held commit ends.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Failure {
    /// Nothing of it is stored.
    NotStored,
    /// It is stored, but its connection broke before the answer came back.
    StoredUnknown,
}

/// What the test tells the store and hears from it.
struct Plan {
    /// The next commit is held until `release`, then fails as `failure`
    /// says (`None`: it is stored and answered as any other).
    armed: AtomicBool,
    failure: Option<Failure>,
    /// A commit is being held.
    holding: Notify,
    release: Notify,
    /// A kept answer was looked up outside a transaction: the writer is
    /// deciding a batch ahead, while a commit is in flight.
    deciding_ahead: Notify,
}

#[async_trait]
impl CommitHook for Plan {
    async fn commit(&self, tx: Box<dyn WriteTx>) -> StoreResult<()> {
        if !self.armed.swap(false, Ordering::SeqCst) {
            return tx.commit().await;
        }
        self.holding.notify_one();
        self.release.notified().await;
        match self.failure {
            None => tx.commit().await,
            Some(Failure::NotStored) => {
                tx.rollback().await?;
                Err(StoreError::Unavailable(
                    "injected: the commit failed".into(),
                ))
            }
            Some(Failure::StoredUnknown) => {
                tx.commit().await?;
                Err(StoreError::OutcomeUnknown(
                    "injected: the connection broke during the commit".into(),
                ))
            }
        }
    }
}

fn plan(failure: Option<Failure>) -> Arc<Plan> {
    Arc::new(Plan {
        armed: AtomicBool::new(false),
        failure,
        holding: Notify::new(),
        release: Notify::new(),
        deciding_ahead: Notify::new(),
    })
}

/// Batch 1: `n-a` is admitted at position 1, then `n-b`, whose commit
/// `plan` holds; answers once that commit is in flight, with the task
/// that waits for `n-b`'s answer.
async fn hold_the_admission_of_n_b(
    bus: &CommandBus,
    plan: &Plan,
) -> tokio::task::JoinHandle<Result<Outcome, CommandError>> {
    let a = bus.execute(admit("n-a", "10.0.0.1")).await.unwrap();
    assert_eq!(a.committed().unwrap().position, Some(1));
    plan.armed.store(true, Ordering::SeqCst);
    let first = tokio::spawn({
        let bus = bus.clone();
        async move { bus.execute(admit("n-b", "10.0.0.2")).await }
    });
    tokio::time::timeout(Duration::from_secs(10), plan.holding.notified())
        .await
        .expect("batch 1's commit is in flight");
    first
}

/// The stored log is gap-free and chained.
fn assert_chained(log: &[stratum_domain::log::Recorded], backend: &str) {
    let mut chain = ChainVerifier::default();
    for (i, e) in log.iter().enumerate() {
        assert_eq!(e.position, i as u64 + 1, "{backend}: no gap");
        chain.check(e).expect("the chain holds");
    }
}

/// A write path started afresh on `inner` folds the members `published`
/// holds.
async fn assert_a_restart_folds_the_same_members(
    inner: &Arc<dyn EventStore>,
    published: &impl serde::Serialize,
    backend: &str,
) {
    let fresh = CommandBus::start(inner.clone()).await.unwrap();
    assert_eq!(
        serde_json::to_value(&fresh.published().state.membership.members).unwrap(),
        serde_json::to_value(published).unwrap(),
        "{backend}: a restart folds the same members"
    );
}

fn progress(node: &str, step: &str) -> CommandRequest {
    CommandRequest::new(
        Command::Member(MemberCommand::ReportJoinProgress {
            node_id: node.into(),
            step: Some(step.into()),
        }),
        "user/admin",
    )
}

/// Progress on `node` with an Idempotency-Key, as the HTTP API sends it:
/// deciding it ahead looks the key up outside the transaction, which the
/// store reports.
fn keyed_progress(node: &str, step: &str) -> CommandRequest {
    let mut req = progress(node, step);
    req.idempotency = Some(IdempotencyKey::new(
        format!("key-{node}"),
        "POST",
        &format!("/v1/admin/cluster/members/{node}/join-progress"),
        format!("{{\"step\":\"{step}\"}}").as_bytes(),
    ));
    req
}

/// Batch 1 admits `n-b`; its commit is held. Batch 2 reports progress on
/// `n-b` (which exists only if batch 1 is stored) and on `n-a`, and is
/// decided while batch 1's commit is in flight. Then batch 1's commit
/// fails.
async fn commit_fails_while_the_next_batch_is_decided(failure: Failure) {
    for db in each_backend().await {
        let inner = store::connect(&db.url).await.unwrap();
        let plan = plan(Some(failure));
        // A kept answer looked up outside a transaction: the writer is
        // deciding a batch ahead, while a commit is in flight.
        let faulty: Arc<dyn EventStore> = Arc::new(
            CountingStore::new(inner.clone())
                .observed({
                    let plan = plan.clone();
                    move |method| {
                        if method == "idempotency" {
                            plan.deciding_ahead.notify_one();
                        }
                    }
                })
                .committing_through(plan.clone()),
        );
        let bus = CommandBus::start(faulty.clone()).await.unwrap();
        let first = hold_the_admission_of_n_b(&bus, &plan).await;
        // Batch 2, with Idempotency-Keys, so deciding it ahead looks a key
        // up outside the transaction, which the store reports. Whichever
        // command reaches the writer first is decided ahead; the other may
        // join it or follow.
        let on_b = keyed_progress("n-b", "join/after-b");
        let on_a = keyed_progress("n-a", "join/after-a");
        let second: Vec<_> = [on_b, on_a]
            .into_iter()
            .map(|req| {
                let bus = bus.clone();
                tokio::spawn(async move { bus.execute(req).await })
            })
            .collect();
        tokio::time::timeout(Duration::from_secs(10), plan.deciding_ahead.notified())
            .await
            .unwrap_or_else(|_| {
                panic!(
                    "{}: batch 2 is decided while batch 1's commit is in flight",
                    db.backend
                )
            });
        // Let the other command of batch 2 reach the writer too.
        tokio::time::sleep(Duration::from_millis(100)).await;
        // Readers see neither batch while batch 1's commit is in flight.
        let seen = bus.published();
        assert_eq!(seen.state.position, 1, "{}", db.backend);
        assert!(!seen.state.membership.members.contains_key("n-b"));
        plan.release.notify_one();

        let first = first.await.unwrap();
        let mut second_answers = Vec::new();
        for t in second {
            second_answers.push(t.await.unwrap());
        }
        let backend = db.backend;
        match failure {
            Failure::NotStored => {
                assert!(
                    matches!(first, Err(CommandError::Store(StoreError::Unavailable(_)))),
                    "{backend}: batch 1 is answered its failure: {first:?}"
                );
                // n-b was never stored: progress on it is refused, never
                // answered from the state batch 1 would have left.
                match &second_answers[0] {
                    Ok(Outcome::Refused(r)) => assert_eq!(r.code, ErrorCode::NotFound, "{backend}"),
                    other => panic!("{backend}: progress on n-b must be refused: {other:?}"),
                }
                // Progress on n-a is decided again and takes the position
                // after the stored head: 2, not 3.
                let on_a = second_answers[1].clone().unwrap().committed().unwrap();
                assert_eq!(on_a.position, Some(2), "{backend}: {}", on_a.body);
                assert_eq!(on_a.etag, Some(2), "{backend}: {}", on_a.body);
                assert_eq!(on_a.json()["joinStep"], "join/after-a", "{backend}");
            }
            Failure::StoredUnknown => {
                assert!(
                    matches!(
                        first,
                        Err(CommandError::Store(StoreError::OutcomeUnknown(_)))
                    ),
                    "{backend}: batch 1 is answered that its outcome is unknown: {first:?}"
                );
                // Batch 1 was stored after all: batch 2 is decided again
                // on the log that holds it.
                let mut positions = Vec::new();
                for (answer, node) in second_answers.iter().zip(["n-b", "n-a"]) {
                    let c = answer.clone().unwrap().committed().unwrap();
                    assert_eq!(c.json()["nodeId"], node, "{backend}: {}", c.body);
                    assert_eq!(c.etag, Some(2), "{backend}: {}", c.body);
                    positions.push(c.position.unwrap());
                }
                positions.sort();
                assert_eq!(positions, vec![3, 4], "{backend}");
            }
        }

        // What is stored: a gap-free chained log holding exactly what was
        // answered, and read models equal to a fold of it from zero.
        let log = inner.read_after(0, 100).await.unwrap();
        assert_chained(&log, backend);
        let streams: Vec<&str> = log.iter().map(|e| e.stream_id.as_str()).collect();
        let expected: &[&str] = match failure {
            Failure::NotStored => &["member/n-a", "member/n-a"],
            Failure::StoredUnknown => &["member/n-a", "member/n-b", "member/n-b", "member/n-a"],
        };
        let mut got = streams.clone();
        let mut want = expected.to_vec();
        got.sort();
        want.sort();
        assert_eq!(got, want, "{backend}: the log holds what was answered");
        // The kept answers are those of the commands that were carried out.
        let kept = |node: &str| {
            let key = format!("POST /v1/admin/cluster/members/{node}/join-progress key-{node}");
            let inner = inner.clone();
            async move { inner.idempotency("user/admin", &key).await.unwrap() }
        };
        let on_a_kept = kept("n-a").await.expect("n-a's answer is kept");
        let on_b_kept = kept("n-b").await;
        match failure {
            Failure::NotStored => {
                assert_eq!(on_a_kept.position, 2, "{backend}");
                assert!(on_b_kept.is_none(), "{backend}: a refusal is not kept");
            }
            Failure::StoredUnknown => {
                assert!(on_a_kept.position >= 3, "{backend}");
                assert!(on_b_kept.expect("n-b's answer is kept").position >= 3);
            }
        }
        let published = bus.published();
        assert_eq!(published.state.position, log.len() as u64, "{backend}");
        assert_eq!(
            published.state.membership.members.contains_key("n-b"),
            failure == Failure::StoredUnknown,
            "{backend}: the published read models are the stored log's"
        );
        assert_a_restart_folds_the_same_members(
            &inner,
            &published.state.membership.members,
            backend,
        )
        .await;
        // The write path goes on, gap-free.
        let next = bus.execute(progress("n-a", "join/next")).await.unwrap();
        assert_eq!(
            next.committed().unwrap().position,
            Some(log.len() as u64 + 1),
            "{backend}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_commit_undoes_the_batch_decided_after_it() {
    commit_fails_while_the_next_batch_is_decided(Failure::NotStored).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_commit_of_unknown_outcome_has_the_next_batch_decided_on_the_stored_log() {
    commit_fails_while_the_next_batch_is_decided(Failure::StoredUnknown).await;
}

/// Batch 1 (admit `n-b`) commits while batch 2 (progress on `n-a` and on
/// `n-b`) is decided ahead of it. As batch 2's write begins, another
/// process's write path admits `n-x`. Batch 2 began at the head batch 1
/// left, which is no longer the log's: on SQLite its write finds that as
/// it begins, on PostgreSQL its commit's one statement writes nothing.
/// Either way it is decided again under the lock, on the log holding
/// `n-x`, and both its commands are answered once, committed after it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_whose_head_another_process_moved_is_decided_again_and_answered_once() {
    for db in each_backend().await {
        let backend = db.backend;
        let inner = store::connect(&db.url).await.unwrap();
        let other = CommandBus::start(store::connect(&db.url).await.unwrap())
            .await
            .unwrap();
        let plan = plan(None);
        let race = Arc::new(AtomicBool::new(false));
        let store: Arc<dyn EventStore> = Arc::new(
            CountingStore::new(inner.clone())
                .observed({
                    let (race, plan, other) = (race.clone(), plan.clone(), other.clone());
                    move |method| {
                        if method == "idempotency" {
                            plan.deciding_ahead.notify_one();
                        }
                        // The other process commits just before batch 2's
                        // write begins (this runs on the writer's task).
                        if method == "begin_write_at" && race.swap(false, Ordering::SeqCst) {
                            let other = other.clone();
                            tokio::task::block_in_place(|| {
                                tokio::runtime::Handle::current().block_on(async move {
                                    let r = other.execute(admit("n-x", "10.0.0.9")).await;
                                    assert_eq!(r.unwrap().committed().unwrap().position, Some(3));
                                })
                            });
                        }
                    }
                })
                .committing_through(plan.clone()),
        );
        let bus = CommandBus::start(store.clone()).await.unwrap();
        let first = hold_the_admission_of_n_b(&bus, &plan).await;
        let second: Vec<_> = ["n-a", "n-b"]
            .into_iter()
            .map(|node| {
                let bus = bus.clone();
                let req = keyed_progress(node, "join/raced");
                tokio::spawn(async move { bus.execute(req).await })
            })
            .collect();
        tokio::time::timeout(Duration::from_secs(10), plan.deciding_ahead.notified())
            .await
            .unwrap_or_else(|_| panic!("{backend}: batch 2 is decided ahead"));
        tokio::time::sleep(Duration::from_millis(100)).await;
        race.store(true, Ordering::SeqCst);
        plan.release.notify_one();

        let first = first.await.unwrap().unwrap().committed().unwrap();
        assert_eq!(first.position, Some(2), "{backend}");
        let mut positions = Vec::new();
        for (t, node) in second.into_iter().zip(["n-a", "n-b"]) {
            let c = t
                .await
                .unwrap()
                .unwrap_or_else(|e| panic!("{backend}: {node} is not refused a lost race: {e:?}"))
                .committed()
                .unwrap_or_else(|r| panic!("{backend}: {node}: {r:?}"));
            assert_eq!(c.json()["joinStep"], "join/raced", "{backend}: {}", c.body);
            positions.push(c.position.unwrap());
        }
        assert!(!race.load(Ordering::SeqCst), "{backend}: the race was run");
        positions.sort();
        // After the other process's event, never at or before it.
        assert!(positions.iter().all(|p| *p > 3), "{backend}: {positions:?}");

        // The log holds each command once, gap-free and chained.
        let log = inner.read_after(0, 100).await.unwrap();
        assert_chained(&log, backend);
        let mut streams: Vec<&str> = log.iter().map(|e| e.stream_id.as_str()).collect();
        streams.sort();
        assert_eq!(
            streams,
            [
                "member/n-a",
                "member/n-a",
                "member/n-b",
                "member/n-b",
                "member/n-x"
            ],
            "{backend}"
        );
        let published = bus.published();
        assert_eq!(published.state.position, 5, "{backend}");
        assert!(published.state.membership.members.contains_key("n-x"));
        assert_a_restart_folds_the_same_members(
            &inner,
            &published.state.membership.members,
            backend,
        )
        .await;
    }
}

/// Holds the commits it is armed for, one at a time, and records in one
/// sequence each commit as it begins and each answer as the test hears
/// it.
#[derive(Default)]
struct Sequenced {
    armed: AtomicBool,
    holding: Notify,
    release: Notify,
    heard: std::sync::Mutex<Vec<&'static str>>,
}

impl Sequenced {
    fn hear(&self, what: &'static str) {
        self.heard.lock().unwrap().push(what);
    }
}

#[async_trait]
impl CommitHook for Sequenced {
    async fn commit(&self, tx: Box<dyn WriteTx>) -> StoreResult<()> {
        self.hear("commit");
        if self.armed.swap(false, Ordering::SeqCst) {
            self.holding.notify_one();
            self.release.notified().await;
        }
        tx.commit().await
    }
}

/// A commit of 20 commands (batch C) lands while batch D is decided ahead
/// of it. On PostgreSQL, where D's write is its commit's one statement, D
/// goes out before C's 20 answers do (`ANSWERS_AFTER_NEXT`); on SQLite
/// C's answers go first. Either way every command is answered once, as
/// committed, C's before D's in the log, and the log is chained.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_commit_with_many_answers_lets_the_next_one_go_out_first_on_postgresql() {
    for db in each_backend().await {
        let backend = db.backend;
        let inner = store::connect(&db.url).await.unwrap();
        let seq = Arc::new(Sequenced::default());
        let store: Arc<dyn EventStore> =
            Arc::new(CountingStore::new(inner.clone()).committing_through(seq.clone()));
        let bus = CommandBus::start(store).await.unwrap();
        let nodes: Vec<String> = (0..21).map(|i| format!("n-{i}")).collect();
        for (i, node) in nodes.iter().enumerate() {
            let ip = format!("10.0.1.{}", i + 1);
            bus.execute(admit(node, &ip))
                .await
                .unwrap()
                .committed()
                .unwrap();
        }
        let send = |req: CommandRequest, heard: Option<&'static str>| {
            let (bus, seq) = (bus.clone(), seq.clone());
            tokio::spawn(async move {
                let r = bus.execute(req).await;
                if let Some(what) = heard {
                    seq.hear(what);
                }
                r.unwrap().committed().unwrap()
            })
        };
        let settle = || tokio::time::sleep(Duration::from_millis(300));
        let held = |what: &'static str| {
            let seq = seq.clone();
            async move {
                tokio::time::timeout(Duration::from_secs(10), seq.holding.notified())
                    .await
                    .unwrap_or_else(|_| panic!("{backend}: {what}'s commit is held"));
            }
        };
        // Batch A (one admission) is held; batch B (one command) is
        // decided ahead of it, and C's 20 commands queue behind.
        seq.armed.store(true, Ordering::SeqCst);
        let a = send(admit("n-x", "10.0.2.1"), None);
        held("batch A").await;
        let b = send(progress(&nodes[0], "join/b"), None);
        settle().await;
        let c: Vec<_> = nodes[1..]
            .iter()
            .map(|n| send(progress(n, "join/c"), Some("answer C")))
            .collect();
        settle().await;
        // A lands; B commits, held, while C is decided ahead of it.
        seq.armed.store(true, Ordering::SeqCst);
        seq.release.notify_one();
        held("batch B").await;
        settle().await;
        // B lands; C commits, held, while D is decided ahead of it.
        seq.armed.store(true, Ordering::SeqCst);
        seq.release.notify_one();
        held("batch C").await;
        let d = send(progress(&nodes[0], "join/d"), None);
        settle().await;
        seq.heard.lock().unwrap().clear();
        seq.release.notify_one();

        let a = a.await.unwrap();
        let b = b.await.unwrap();
        let mut c_at = Vec::new();
        for t in c {
            c_at.push(t.await.unwrap().position.unwrap());
        }
        let d = d.await.unwrap();
        c_at.sort_unstable();
        let (first_c, last_c) = (c_at[0], c_at[c_at.len() - 1]);
        assert_eq!(a.position, Some(22), "{backend}");
        assert_eq!(b.position, Some(23), "{backend}: {}", b.body);
        assert_eq!(
            c_at,
            (24..44).collect::<Vec<_>>(),
            "{backend}: C's 20 commands commit together, once each"
        );
        assert_eq!(d.position, Some(last_c + 1), "{backend}: {}", d.body);
        assert!(first_c > 23);
        let heard = seq.heard.lock().unwrap().clone();
        let d_began = heard.iter().position(|h| *h == "commit");
        let first_answer = heard.iter().position(|h| *h == "answer C");
        assert!(
            d_began.is_some() && first_answer.is_some(),
            "{backend}: {heard:?}"
        );
        if backend == "postgres" {
            assert!(
                d_began < first_answer,
                "{backend}: D's commit began before C's answers went out: {heard:?}"
            );
        }
        let log = inner.read_after(0, 100).await.unwrap();
        assert_eq!(log.len(), 44, "{backend}");
        assert_chained(&log, backend);
    }
}
