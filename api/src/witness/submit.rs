//! The log's side of C2SP tlog-witness: after each signed checkpoint, ask
//! every witness of the policy (`STRATUM_LOG_WITNESS_POLICY`) to cosign
//! it, and serve the checkpoint with the cosignatures that came back.
//!
//! Each witness has a task of its own, so a witness that is down, slow or
//! answers garbage delays no other and no commit: it submits the newest
//! checkpoint signed whenever it is free, with the consistency proof from
//! the size the witness holds (learned from a 409, the spec's answer to a
//! wrong `old`), bounded in time, and after a failure waits with backoff.
//! A cosignature is kept only if it verifies with the witness's key over
//! the checkpoint submitted. `GET /v1/log/checkpoint` serves the newest
//! checkpoint whose cosignatures reach the policy's quorum, with every
//! cosignature held for it, or, while none does, the newest signed with
//! those it has. A witness failing for [`ALARM_AFTER`] raises the
//! `log-witness-failing` alarm, which names it; the alarm is cleared once
//! every witness cosigns again.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use base64::prelude::{Engine as _, BASE64_STANDARD};
use signed_note::Note;
use stratum_store::{tree, EventStore, SignedCheckpoint};
use tokio::sync::watch;

use super::policy::{Policy, Witness};
use super::signed_by;
use crate::command::{CommandBus, CommandRequest};

/// How long one submission may take.
pub const TIMEOUT: Duration = Duration::from_secs(5);
/// How long a witness fails before the alarm names it.
pub const ALARM_AFTER: Duration = Duration::from_secs(5);
/// The longest wait between two tries at a failing witness.
const MAX_BACKOFF: Duration = Duration::from_secs(30);
/// How many checkpoints' cosignatures are kept.
const KEPT: usize = 64;
/// The largest answer read from a witness.
const MAX_ANSWER: usize = 64 * 1024;

/// The checkpoints signed lately and the cosignatures each gathered.
#[derive(Default)]
struct Gathered {
    /// By size: the checkpoint, and each witness's cosignature line.
    by_size: BTreeMap<u64, (Arc<SignedCheckpoint>, BTreeMap<String, String>)>,
    /// The witnesses failing now, and since when.
    failing: BTreeMap<String, (Instant, String)>,
    /// The witnesses asked at least once since this process started.
    tried: std::collections::BTreeSet<String>,
    /// The size served last: what is served never goes back from it.
    served: u64,
    /// Moves when the log is rebased after an acknowledged fork.
    epoch: u64,
}

/// The log's witnesses and what they cosigned.
pub struct Witnessing {
    policy: Policy,
    client: reqwest::Client,
    gathered: Mutex<Gathered>,
    /// Moves each time a cosignature is kept or a witness fails or recovers.
    changed: watch::Sender<u64>,
}

/// Why a submission did not give a cosignature.
enum Failed {
    /// The witness holds another size: submit again from it.
    Conflict(u64),
    /// Anything else, with a metric reason and a message.
    Other(&'static str, String),
}

impl Witnessing {
    pub fn new(policy: Policy) -> Self {
        let client = reqwest::Client::builder()
            .timeout(TIMEOUT)
            .connect_timeout(TIMEOUT)
            .build()
            .expect("an HTTP client");
        Self {
            policy,
            client,
            gathered: Mutex::default(),
            changed: watch::channel(0).0,
        }
    }

    fn gathered(&self) -> std::sync::MutexGuard<'_, Gathered> {
        self.gathered.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The note to serve, with every cosignature held for it: the newest
    /// checkpoint a quorum cosigned, or, while none of at least the size
    /// served before has one, the newest signed. What one process serves
    /// never gets smaller (an auditor would call that a shrink).
    pub fn served(&self, latest: &Arc<SignedCheckpoint>) -> String {
        let mut g = self.gathered();
        let from = g.served.min(latest.size);
        let with_quorum = g
            .by_size
            .range(from..=latest.size)
            .rev()
            .find(|(_, (_, lines))| lines.len() >= self.policy.quorum)
            .map(|(_, (c, _))| c.clone());
        let c = with_quorum.unwrap_or_else(|| latest.clone());
        g.served = c.size;
        let mut note = c.note.clone();
        let lines = g.by_size.get(&c.size).filter(|(k, _)| k.root == c.root);
        for line in lines.into_iter().flat_map(|(_, l)| l.values()) {
            note.push_str(line);
        }
        note
    }

    /// What a witness free to submit is given: the newest checkpoint
    /// another witness cosigned and it did not (so that witnesses of
    /// different speeds meet on one size while commits go on, and a quorum
    /// forms), else the newest signed. Never one below what it holds.
    fn pick(
        &self,
        witness: &str,
        latest: &Arc<SignedCheckpoint>,
        held: u64,
    ) -> Arc<SignedCheckpoint> {
        let g = self.gathered();
        g.by_size
            .range(held..=latest.size)
            .next_back()
            .filter(|(_, (_, lines))| !lines.is_empty() && !lines.contains_key(witness))
            .map_or_else(|| latest.clone(), |(_, (c, _))| c.clone())
    }

    /// The log was rebased after an acknowledged fork: what was gathered
    /// is of the old history, and every witness is asked again.
    pub fn rebased(&self) {
        let mut g = self.gathered();
        g.by_size.clear();
        g.served = 0;
        g.epoch += 1;
        drop(g);
        self.changed.send_modify(|n| *n += 1);
    }

    /// A witness answered as it should: it is not failing, and it was
    /// asked.
    fn answered(g: &mut Gathered, witness: &str) {
        g.failing.remove(witness);
        g.tried.insert(witness.to_owned());
    }

    fn keep(&self, c: &Arc<SignedCheckpoint>, witness: &str, line: String) {
        let mut g = self.gathered();
        Self::answered(&mut g, witness);
        // A checkpoint of another root at a size held: of a history the
        // log no longer has.
        if g.by_size
            .get(&c.size)
            .is_some_and(|(k, _)| k.root != c.root)
        {
            g.by_size.clear();
        }
        let entry = g
            .by_size
            .entry(c.size)
            .or_insert_with(|| (c.clone(), BTreeMap::new()));
        entry.1.insert(witness.to_owned(), line);
        while g.by_size.len() > KEPT {
            g.by_size.pop_first();
        }
        drop(g);
        self.changed.send_modify(|n| *n += 1);
    }

    fn fail(&self, witness: &str, why: String) {
        let mut g = self.gathered();
        let now = Instant::now();
        let since = g.failing.get(witness).map_or(now, |f| f.0);
        g.failing.insert(witness.to_owned(), (since, why));
        g.tried.insert(witness.to_owned());
        drop(g);
        self.changed.send_modify(|n| *n += 1);
    }

    /// Starts a task per witness, and the keeper of this replica's alarm
    /// (`replica`: its host and address).
    pub fn spawn(
        self: &Arc<Self>,
        store: Arc<dyn EventStore>,
        bus: CommandBus,
        latest: watch::Receiver<Option<Arc<SignedCheckpoint>>>,
        replica: String,
    ) -> Vec<tokio::task::JoinHandle<()>> {
        let mut tasks: Vec<_> = self
            .policy
            .witnesses
            .iter()
            .map(|w| {
                let me = self.clone();
                let w = w.clone();
                let store = store.clone();
                let latest = latest.clone();
                tokio::spawn(async move { me.ask(w, store, latest).await })
            })
            .collect();
        let me = self.clone();
        tasks.push(tokio::spawn(
            async move { me.keep_alarm(bus, replica).await },
        ));
        tasks
    }

    /// One witness's task.
    async fn ask(
        &self,
        w: Witness,
        store: Arc<dyn EventStore>,
        mut latest: watch::Receiver<Option<Arc<SignedCheckpoint>>>,
    ) {
        let m = crate::metrics::global();
        let size_gauge = m.witness_size.with_label_values(&[&w.name]);
        // The size the witness holds, as far as this process knows.
        let mut held: Option<u64> = None;
        let mut backoff = Duration::from_millis(250);
        // The checkpoint last settled (cosigned, or the witness holds a
        // newer one of this log), in the history of `epoch`.
        let mut settled: Option<(u64, [u8; 32])> = None;
        let mut epoch = 0;
        let mut changed = self.changed.subscribe();
        loop {
            let now = self.gathered().epoch;
            if now != epoch {
                // Rebased: what this task learned is of the old history.
                (epoch, settled, held) = (now, None, None);
            }
            let c = latest.borrow_and_update().clone();
            let c = c.map(|c| self.pick(&w.name, &c, held.unwrap_or(0)));
            let Some(c) = c.filter(|c| settled != Some((c.size, c.root))) else {
                tokio::select! {
                    r = latest.changed() => if r.is_err() { return },
                    r = changed.changed() => if r.is_err() { return },
                }
                continue;
            };
            let mut conflicts = 0;
            let result = loop {
                let began = Instant::now();
                let r = self.submit(&w, &*store, &c, held.unwrap_or(0)).await;
                m.witness_duration
                    .with_label_values(&[&w.name])
                    .observe(began.elapsed().as_secs_f64());
                if let Err(Failed::Conflict(size)) = &r {
                    size_gauge.set(i64::try_from(*size).unwrap_or(i64::MAX));
                }
                match r {
                    // The witness holds more than this checkpoint. Of this
                    // log (another replica asked it with a newer one),
                    // this task waits for its own newer checkpoint; more
                    // than this log has is another history of it (a split
                    // view, a restored backup).
                    Err(Failed::Conflict(size)) if size > c.size => {
                        held = Some(size);
                        match store.head().await {
                            Ok(head) if size <= head.position => break Ok(None),
                            Ok(head) => {
                                break Err((
                                    "ahead",
                                    format!(
                                        "it holds a checkpoint of {size} events, and this log \
                                         has {}: it cosigned another history of this log",
                                        head.position
                                    ),
                                ))
                            }
                            Err(e) => break Err(("proof", format!("the log's head: {e}"))),
                        }
                    }
                    Err(Failed::Conflict(size)) if conflicts < 3 => {
                        held = Some(size);
                        conflicts += 1;
                    }
                    Err(Failed::Conflict(size)) => {
                        break Err(("conflict", format!("it keeps answering 409 (size {size})")))
                    }
                    Err(Failed::Other(reason, why)) => break Err((reason, why)),
                    Ok(line) => break Ok(Some(line)),
                }
            };
            match result {
                Ok(Some(line)) => {
                    held = Some(c.size);
                    settled = Some((c.size, c.root));
                    size_gauge.set(i64::try_from(c.size).unwrap_or(i64::MAX));
                    backoff = Duration::from_millis(250);
                    self.keep(&c, &w.name, line);
                }
                Ok(None) => {
                    settled = Some((c.size, c.root));
                    Self::answered(&mut self.gathered(), &w.name);
                }
                Err((reason, why)) => {
                    m.witness_failures
                        .with_label_values(&[&w.name, reason])
                        .inc();
                    tracing::warn!(witness = %w.name, %why, "a witness did not cosign; trying again");
                    self.fail(&w.name, why);
                    // Its state is unknown now: learn it again.
                    held = None;
                    tokio::time::sleep(backoff).await;
                    backoff = (backoff * 2).min(MAX_BACKOFF);
                }
            }
        }
    }

    /// Submits `c` to `w` with the proof from `old`: the cosignature line,
    /// checked with the witness's key.
    async fn submit(
        &self,
        w: &Witness,
        store: &dyn EventStore,
        c: &SignedCheckpoint,
        old: u64,
    ) -> Result<String, Failed> {
        let url = w
            .url
            .as_ref()
            .ok_or_else(|| Failed::Other("config", "the policy gives it no URL".to_owned()))?;
        let url = format!("{}/add-checkpoint", url.as_str().trim_end_matches('/'));
        let old = if old > c.size { 0 } else { old };
        let proof = if old == 0 || old == c.size {
            Vec::new()
        } else {
            tree::consistency(store, old, c.size).await.map_err(|e| {
                Failed::Other("proof", format!("no consistency proof from {old}: {e}"))
            })?
        };
        let mut body = format!("old {old}\n");
        for h in &proof {
            body.push_str(&BASE64_STANDARD.encode(h));
            body.push('\n');
        }
        body.push('\n');
        body.push_str(&c.note);
        let mut resp = self
            .client
            .post(&url)
            .body(body)
            .send()
            .await
            .map_err(|e| {
                let reason = if e.is_timeout() {
                    "timeout"
                } else {
                    "unreachable"
                };
                Failed::Other(reason, format!("{url}: {e}"))
            })?;
        let status = resp.status();
        let mut body = Vec::new();
        while let Some(chunk) = resp
            .chunk()
            .await
            .map_err(|e| Failed::Other("unreachable", format!("{url}: reading the answer: {e}")))?
        {
            body.extend_from_slice(&chunk);
            if body.len() > MAX_ANSWER {
                return Err(Failed::Other(
                    "garbage",
                    format!("{url}: an answer of more than {MAX_ANSWER} bytes"),
                ));
            }
        }
        let text = String::from_utf8_lossy(&body).into_owned();
        match status.as_u16() {
            200 => {}
            409 => {
                return text
                    .trim_end_matches('\n')
                    .parse()
                    .map(Failed::Conflict)
                    .map_err(|_| Failed::Other("garbage", format!("{url}: a 409 without a size")))
                    .and_then(Err);
            }
            code => {
                let reason = match code {
                    403 => "forbidden",
                    404 => "unknown_log",
                    422 => "inconsistent",
                    _ => "refused",
                };
                let said: String = text.chars().take(200).filter(|c| !c.is_control()).collect();
                return Err(Failed::Other(reason, format!("{url}: {status}: {said}")));
            }
        }
        // The answer's lines, each checked with the witness's key over the
        // checkpoint submitted; the first that verifies is kept.
        let note = Note::from_bytes(c.note.as_bytes())
            .map_err(|e| Failed::Other("garbage", format!("the checkpoint itself: {e}")))?;
        let body = String::from_utf8_lossy(note.text()).into_owned();
        for line in text.lines().filter(|l| l.starts_with('—')) {
            let line = format!("{line}\n");
            let Ok(one) = Note::from_bytes(format!("{body}\n{line}").as_bytes()) else {
                continue;
            };
            if signed_by(&one, &w.verifier) == Ok(true) {
                return Ok(line);
            }
        }
        Err(Failed::Other(
            "garbage",
            format!("{url}: 200 without a cosignature that verifies with its key"),
        ))
    }

    /// Keeps this replica's alarm: raised naming the witnesses that failed
    /// for [`ALARM_AFTER`] (raised again when they change), cleared once
    /// none does and every witness was asked since this start (an alarm
    /// from before a restart stands until then). Why each fails is in the
    /// metric and the log, not the alarm, so a changing error text is not
    /// an event each time.
    async fn keep_alarm(&self, bus: CommandBus, replica: String) {
        let mut changed = self.changed.subscribe();
        let mut said: Option<Vec<String>> = None;
        let key = stratum_domain::upgrade::alarm_key(
            stratum_domain::upgrade::LOG_WITNESS_FAILING_ALARM,
            None,
            Some(&replica),
        );
        loop {
            let (failing, all_tried) = {
                let g = self.gathered();
                let failing: Vec<String> = g
                    .failing
                    .iter()
                    .filter(|(_, (since, _))| since.elapsed() >= ALARM_AFTER)
                    .map(|(w, _)| w.clone())
                    .collect();
                (failing, g.tried.len() == self.policy.witnesses.len())
            };
            let raised = bus
                .published()
                .state
                .upgrades
                .alarms
                .get(&key)
                .is_some_and(|a| a.cleared_at.is_none());
            let wanted = !failing.is_empty();
            let raise = wanted && (!raised || said.as_ref() != Some(&failing));
            let clear = !wanted && raised && all_tried;
            if raise || clear {
                let req = CommandRequest::new(
                    stratum_domain::Command::Upgrade(
                        stratum_domain::upgrade::UpgradeCommand::KeepWitnessAlarm {
                            replica: replica.clone(),
                            failing: failing.clone(),
                        },
                    ),
                    stratum_domain::iam::SERVICE_PRINCIPAL,
                );
                match bus.execute(req).await {
                    Ok(_) => said = Some(failing),
                    Err(e) => {
                        tracing::warn!(error = %e, "the log-witness-failing alarm was not kept; trying again")
                    }
                }
            }
            tokio::select! {
                r = changed.changed() => if r.is_err() { return },
                () = tokio::time::sleep(Duration::from_secs(1)) => {}
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::witness::Cosigner;

    fn checkpoint(size: u64, root: u8) -> Arc<SignedCheckpoint> {
        Arc::new(SignedCheckpoint {
            size,
            root: [root; 32],
            note: format!("log\n{size}\nroot-{root}\n\n— log sig\n"),
        })
    }

    fn witnessing() -> Witnessing {
        let keys: Vec<String> = ["a.test/w", "b.test/w"]
            .iter()
            .map(|n| Cosigner::generate(n).unwrap().1)
            .collect();
        let policy = Policy::parse(&format!(
            "witness a {} http://127.0.0.1:1\nwitness b {} http://127.0.0.1:2\nquorum 2\n",
            keys[0], keys[1]
        ))
        .unwrap();
        Witnessing::new(policy)
    }

    fn size_of(note: &str) -> u64 {
        note.lines().nth(1).unwrap().parse().unwrap()
    }

    #[test]
    fn what_is_served_is_the_newest_with_a_quorum_and_never_goes_back() {
        let w = witnessing();
        // Nothing cosigned: the newest signed, with what it has.
        let c11 = checkpoint(11, 1);
        w.keep(&c11, "a", "— a.test/w x11\n".into());
        let note = w.served(&c11);
        assert_eq!(size_of(&note), 11);
        assert!(note.ends_with("— a.test/w x11\n"), "{note}");
        // A quorum forms at 10, below what was served: not served.
        let c10 = checkpoint(10, 1);
        w.keep(&c10, "a", "— a.test/w x10\n".into());
        w.keep(&c10, "b", "— b.test/w x10\n".into());
        assert_eq!(size_of(&w.served(&c11)), 11);
        // A quorum at 12: served, with both cosignatures, and kept served
        // while 13 has none.
        let c12 = checkpoint(12, 1);
        w.keep(&c12, "b", "— b.test/w x12\n".into());
        w.keep(&c12, "a", "— a.test/w x12\n".into());
        let note = w.served(&c12);
        assert_eq!(size_of(&note), 12);
        assert!(note.contains("— a.test/w x12\n") && note.contains("— b.test/w x12\n"));
        assert_eq!(size_of(&w.served(&checkpoint(13, 1))), 12);
        // Rebased after an acknowledged fork: the old history's
        // cosignatures are gone, and the new log is served from its size.
        w.rebased();
        let new = checkpoint(5, 2);
        let note = w.served(&new);
        assert_eq!(size_of(&note), 5);
        assert!(!note.contains("x1"), "{note}");
        // A cosignature of another root at a size held drops the old ones.
        w.keep(&checkpoint(12, 2), "a", "— a.test/w y12\n".into());
        assert_eq!(size_of(&w.served(&checkpoint(12, 2))), 12);
        assert!(!w.served(&checkpoint(12, 2)).contains("x12"));
    }

    #[test]
    fn a_free_witness_joins_the_newest_checkpoint_another_cosigned() {
        let w = witnessing();
        let c10 = checkpoint(10, 1);
        let c12 = checkpoint(12, 1);
        w.keep(&c10, "a", "— a.test/w x10\n".into());
        // b joins a at 10; a itself goes on to the newest.
        assert_eq!(w.pick("b", &c12, 0).size, 10);
        assert_eq!(w.pick("a", &c12, 10).size, 12);
        // Not below what b holds.
        assert_eq!(w.pick("b", &c12, 11).size, 12);
        // Once both cosigned 10, the newest again.
        w.keep(&c10, "b", "— b.test/w x10\n".into());
        assert_eq!(w.pick("b", &c12, 10).size, 12);
    }

    #[test]
    fn a_witness_counts_as_tried_once_it_answered_or_failed() {
        let w = witnessing();
        w.fail("a", "down".into());
        assert_eq!(w.gathered().failing["a"].1, "down");
        assert_eq!(w.gathered().tried.len(), 1);
        w.keep(&checkpoint(3, 1), "a", "— a.test/w z\n".into());
        assert!(w.gathered().failing.is_empty());
    }
}
