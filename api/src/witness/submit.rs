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
/// The name of the alarm raised while witnesses fail.
pub const WITNESS_ALARM: &str = stratum_domain::upgrade::LOG_WITNESS_FAILING_ALARM;

/// The checkpoints signed lately and the cosignatures each gathered.
#[derive(Default)]
struct Gathered {
    /// By size: the checkpoint, and each witness's cosignature line.
    by_size: BTreeMap<u64, (Arc<SignedCheckpoint>, BTreeMap<String, String>)>,
    /// The witnesses failing now, and since when.
    failing: BTreeMap<String, (Instant, String)>,
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

    pub fn policy(&self) -> &Policy {
        &self.policy
    }

    fn gathered(&self) -> std::sync::MutexGuard<'_, Gathered> {
        self.gathered.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The note to serve: the newest checkpoint with a quorum of
    /// cosignatures, else `latest`, each with every cosignature held.
    pub fn served(&self, latest: &Arc<SignedCheckpoint>) -> String {
        let g = self.gathered();
        let with_quorum = g
            .by_size
            .range(..=latest.size)
            .rev()
            .find(|(_, (_, lines))| lines.len() >= self.policy.quorum)
            .map(|(_, x)| x);
        let (c, lines) = match with_quorum {
            Some((c, lines)) => (c.clone(), Some(lines)),
            None => (latest.clone(), g.by_size.get(&latest.size).map(|x| &x.1)),
        };
        let mut note = c.note.clone();
        for line in lines.into_iter().flat_map(|l| l.values()) {
            note.push_str(line);
        }
        note
    }

    /// The witnesses failing now, with why, for the alarm and `/metrics`.
    pub fn failing(&self) -> Vec<(String, String)> {
        self.gathered()
            .failing
            .iter()
            .map(|(w, (_, why))| (w.clone(), why.clone()))
            .collect()
    }

    fn keep(&self, c: &Arc<SignedCheckpoint>, witness: &str, line: String) {
        let mut g = self.gathered();
        g.failing.remove(witness);
        // A checkpoint of another root at a size held: the log was rebased
        // after an acknowledged fork, and what was gathered is of the old.
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
        drop(g);
        self.changed.send_modify(|n| *n += 1);
    }

    /// Starts a task per witness, and the alarm's keeper.
    pub fn spawn(
        self: &Arc<Self>,
        store: Arc<dyn EventStore>,
        bus: CommandBus,
        latest: watch::Receiver<Option<Arc<SignedCheckpoint>>>,
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
        tasks.push(tokio::spawn(async move { me.keep_alarm(bus).await }));
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
        let mut cosigned_at: Option<u64> = None;
        loop {
            let c = latest.borrow_and_update().clone();
            let Some(c) = c.filter(|c| cosigned_at != Some(c.size)) else {
                if latest.changed().await.is_err() {
                    return;
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
                match r {
                    // The witness holds more than this checkpoint: another
                    // replica asked it with a newer one; this one waits
                    // for its own newer checkpoint.
                    Err(Failed::Conflict(size)) if size > c.size => {
                        held = Some(size);
                        break Ok(None);
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
                    cosigned_at = Some(c.size);
                    size_gauge.set(i64::try_from(c.size).unwrap_or(i64::MAX));
                    backoff = Duration::from_millis(250);
                    self.keep(&c, &w.name, line);
                }
                Ok(None) => {
                    cosigned_at = Some(c.size);
                    if latest.changed().await.is_err() {
                        return;
                    }
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
        let resp = self
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
        let text = resp
            .text()
            .await
            .map_err(|e| Failed::Other("unreachable", format!("{url}: reading the answer: {e}")))?;
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

    /// Keeps the alarm: raised naming the witnesses that failed for
    /// [`ALARM_AFTER`] (raised again when they change), cleared once none
    /// does. Why each fails is in the metric and the log, not the alarm,
    /// so a changing error text is not an event each time.
    async fn keep_alarm(&self, bus: CommandBus) {
        let mut changed = self.changed.subscribe();
        let mut said: Option<Vec<String>> = None;
        loop {
            let failing: Vec<String> = {
                let g = self.gathered();
                g.failing
                    .iter()
                    .filter(|(_, (since, _))| since.elapsed() >= ALARM_AFTER)
                    .map(|(w, _)| w.clone())
                    .collect()
            };
            let raised = bus
                .published()
                .state
                .upgrades
                .alarms
                .get(&stratum_domain::upgrade::alarm_key(
                    WITNESS_ALARM,
                    None,
                    None,
                ))
                .is_some_and(|a| a.cleared_at.is_none());
            let wanted = !failing.is_empty();
            if wanted != raised || (wanted && said.as_ref() != Some(&failing)) {
                let req = CommandRequest::new(
                    stratum_domain::Command::Upgrade(
                        stratum_domain::upgrade::UpgradeCommand::KeepWitnessAlarm {
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
