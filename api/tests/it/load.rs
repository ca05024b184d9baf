//! Load as the linearizability checker reads it: writers that take members
//! through their whole life, each write retried with its `Idempotency-Key`
//! until it is decided, and readers of the members the writers work on,
//! against the replicas in turn. What the clients saw is kept as a history
//! for `stratum-history`, with every 5xx answer. The failover tests and the
//! rolling upgrade of stratum itself run it.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use stratum_history::member::{MemberOp, MemberRet};
use stratum_history::Operation;

use crate::support::ADMIN_TOKEN;

const MEMBERS: &str = "/v1/admin/cluster/members";

/// Writers and readers running against `bases` (which a test may change
/// as replicas come and go), until [`Load::finish`].
pub(crate) struct Load {
    pub(crate) t0: Instant,
    pub(crate) bases: Arc<Mutex<Vec<String>>>,
    pub(crate) seen: Arc<Mutex<Seen>>,
    stop: Arc<std::sync::atomic::AtomicBool>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

impl Load {
    /// `writers` writers, each through its own members, and `readers`
    /// readers of the members the writers work on, so reads overlap
    /// writes. Requests carry [`ADMIN_TOKEN`].
    pub(crate) fn start(bases: Vec<String>, writers: usize, readers: usize) -> Self {
        let t0 = Instant::now();
        let bases = Arc::new(Mutex::new(bases));
        let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let seen = Arc::new(Mutex::new(Seen::default()));
        let current: Arc<Vec<_>> = Arc::new(
            (0..writers)
                .map(|_| std::sync::atomic::AtomicUsize::new(0))
                .collect(),
        );
        let tasks = (0..writers)
            .map(|i| {
                tokio::spawn(client_loop(
                    i,
                    bases.clone(),
                    t0,
                    stop.clone(),
                    seen.clone(),
                    current.clone(),
                ))
            })
            .chain((0..readers).map(|r| {
                tokio::spawn(reader_loop(
                    r,
                    bases.clone(),
                    current.clone(),
                    t0,
                    stop.clone(),
                    seen.clone(),
                ))
            }))
            .collect();
        Load {
            t0,
            bases,
            seen,
            stop,
            tasks,
        }
    }

    /// Writes acknowledged after `t` (since the start).
    pub(crate) fn acknowledged_after(&self, t: Duration) -> usize {
        self.seen
            .lock()
            .unwrap()
            .acknowledged
            .iter()
            .filter(|a| **a > t)
            .count()
    }

    /// Stops the clients, waits for them, and answers what they saw.
    pub(crate) async fn finish(self) -> Seen {
        self.stop.store(true, std::sync::atomic::Ordering::Release);
        for t in self.tasks {
            t.await.unwrap();
        }
        Arc::try_unwrap(self.seen)
            .ok()
            .expect("every client stopped")
            .into_inner()
            .unwrap()
    }
}

/// What a replica answered, as the checker reads it.
pub(crate) struct Answer {
    pub(crate) status: u16,
    pub(crate) body: Value,
    pub(crate) etag: Option<u64>,
}

pub(crate) async fn call(
    client: &reqwest::Client,
    base: &str,
    path: &str,
    body: Option<&Value>,
    key: Option<&str>,
) -> Option<Answer> {
    let req = match body {
        Some(b) => client.post(format!("{base}{path}")).json(b),
        None => client.get(format!("{base}{path}")),
    };
    let req = match key {
        Some(k) => req.header("Idempotency-Key", k),
        None => req,
    };
    let res = req
        .bearer_auth(ADMIN_TOKEN)
        .timeout(Duration::from_secs(15))
        .send()
        .await
        .ok()?;
    let status = res.status().as_u16();
    let etag = res
        .headers()
        .get("etag")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim_matches(['"', 'W', '/']).parse().ok());
    let body = res.json().await.unwrap_or(Value::Null);
    Some(Answer { status, body, etag })
}

/// What the clients saw: the history, and every status beside 2xx/4xx.
#[derive(Default)]
pub(crate) struct Seen {
    pub(crate) history: Vec<Operation<MemberOp, MemberRet, Duration>>,
    /// (status, code) of every 5xx answer.
    pub(crate) errors: Vec<(u16, String)>,
    /// When each acknowledged write was answered (since the start).
    pub(crate) acknowledged: Vec<Duration>,
    /// The members whose admission was acknowledged.
    pub(crate) admitted: Vec<String>,
}

impl Seen {
    /// No answer beyond 2xx and 4xx was anything but a 503 (no 500).
    pub(crate) fn assert_only_unavailable(&self) {
        assert!(
            self.errors.iter().all(|(s, _)| *s == 503),
            "answers other than 503: {:?}",
            count(&self.errors)
        );
    }
}

/// A write retried with its `Idempotency-Key` until it is decided: the one
/// operation it is, from its first sending to its last answer, unknown if
/// any attempt may have stored it and none said what happened.
pub(crate) async fn write(
    client: &reqwest::Client,
    bases: &[String],
    path: &str,
    body: &Value,
    key: &str,
    t0: Instant,
    seen: &Mutex<Seen>,
) -> (Duration, Option<MemberRet>, Duration) {
    let invoked = t0.elapsed();
    let mut maybe_stored = false;
    let give_up = Instant::now() + Duration::from_secs(90);
    let mut attempt = 0usize;
    while Instant::now() < give_up {
        let base = &bases[attempt % bases.len()];
        attempt += 1;
        match call(client, base, path, Some(body), Some(key)).await {
            Some(a) if a.status < 300 => return (invoked, Some(MemberRet::Accepted), t0.elapsed()),
            Some(a) if a.status < 500 && a.status != 429 => {
                let code = a.body["code"].as_str().unwrap_or_default().to_owned();
                return (invoked, Some(MemberRet::Refused(code)), t0.elapsed());
            }
            Some(a) => {
                let code = a.body["code"].as_str().unwrap_or_default().to_owned();
                if a.status != 503 || code == "OUTCOME_UNKNOWN" {
                    maybe_stored = true;
                }
                seen.lock().unwrap().errors.push((a.status, code));
            }
            // No answer: it may have been stored.
            None => maybe_stored = true,
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let ret = (!maybe_stored).then_some(MemberRet::NotStored);
    (invoked, ret, t0.elapsed())
}

/// One client: member after member, each through its whole life (admit,
/// join-complete, decommission) with a read after each step, sending to
/// the replicas in turn, until `stop`.
pub(crate) async fn client_loop(
    client_id: usize,
    bases: Arc<Mutex<Vec<String>>>,
    t0: Instant,
    stop: Arc<std::sync::atomic::AtomicBool>,
    seen: Arc<Mutex<Seen>>,
    current: Arc<Vec<std::sync::atomic::AtomicUsize>>,
) {
    let http = reqwest::Client::new();
    let mut k = 0usize;
    while !stop.load(std::sync::atomic::Ordering::Acquire) {
        let node = format!("c{client_id}-m{k}");
        let ip = format!("10.{}.{}.{}", 100 + client_id, k / 250, k % 250 + 1);
        let steps: [(MemberOp, String, Value); 3] = [
            (
                MemberOp::Admit {
                    node_id: node.clone(),
                    mgmt_ip: ip.clone(),
                },
                MEMBERS.to_owned(),
                json!({"nodeId": node, "role": "compute", "mgmtIp": ip}),
            ),
            (
                MemberOp::CompleteJoin {
                    node_id: node.clone(),
                },
                format!("{MEMBERS}/{node}/join-complete"),
                json!({}),
            ),
            (
                MemberOp::Decommission {
                    node_id: node.clone(),
                    reason: "retired in the failover test".into(),
                },
                format!("{MEMBERS}/{node}/decommission"),
                json!({"reason": "retired in the failover test"}),
            ),
        ];
        for (i, (op, path, body)) in steps.into_iter().enumerate() {
            let key = format!("{node}-{i}");
            let bases = bases.lock().unwrap().clone();
            let rotated: Vec<String> = bases
                .iter()
                .cycle()
                .skip(client_id + i)
                .take(bases.len())
                .cloned()
                .collect();
            let (invoked, ret, answered) =
                write(&http, &rotated, &path, &body, &key, t0, &seen).await;
            {
                let mut s = seen.lock().unwrap();
                if matches!(ret, Some(MemberRet::Accepted)) {
                    s.acknowledged.push(answered);
                    if i == 0 {
                        s.admitted.push(node.clone());
                    }
                }
                s.history.push(match ret {
                    Some(ret) => Operation::returned(client_id, op, invoked, ret, answered),
                    None => Operation::unknown(client_id, op, invoked),
                });
            }
            // A read, from the next replica.
            read(
                &http,
                &rotated[1 % rotated.len()],
                &node,
                client_id,
                t0,
                &seen,
            )
            .await;
        }
        k += 1;
        current[client_id].store(k, std::sync::atomic::Ordering::Release);
    }
}

/// A read of a member, recorded as answered (200 or 404), or left out (a
/// 503 says nothing of the state).
pub(crate) async fn read(
    http: &reqwest::Client,
    base: &str,
    node: &str,
    client_id: usize,
    t0: Instant,
    seen: &Mutex<Seen>,
) {
    let invoked = t0.elapsed();
    let Some(a) = call(http, base, &format!("{MEMBERS}/{node}"), None, None).await else {
        return;
    };
    let answered = t0.elapsed();
    let ret = match a.status {
        200 => MemberRet::Found {
            state: a.body["state"].as_str().unwrap_or_default().to_owned(),
            version: a.etag,
        },
        404 => MemberRet::NotFound,
        s => {
            let code = a.body["code"].as_str().unwrap_or_default().to_owned();
            seen.lock().unwrap().errors.push((s, code));
            return;
        }
    };
    let get = MemberOp::Get {
        node_id: node.to_owned(),
    };
    seen.lock()
        .unwrap()
        .history
        .push(Operation::returned(client_id, get, invoked, ret, answered));
}

/// A reader: the member a writer is working on now, read from a replica
/// at random, concurrently with that writer's own steps, until `stop`.
pub(crate) async fn reader_loop(
    reader_id: usize,
    bases: Arc<Mutex<Vec<String>>>,
    current: Arc<Vec<std::sync::atomic::AtomicUsize>>,
    t0: Instant,
    stop: Arc<std::sync::atomic::AtomicBool>,
    seen: Arc<Mutex<Seen>>,
) {
    let http = reqwest::Client::new();
    // xorshift: a fixed, different sequence per reader.
    let mut x = 0x9e37_79b9_7f4a_7c15u64 ^ (reader_id as u64 + 1);
    while !stop.load(std::sync::atomic::Ordering::Acquire) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let writer = (x % current.len() as u64) as usize;
        let k = current[writer].load(std::sync::atomic::Ordering::Acquire);
        let base = {
            let bases = bases.lock().unwrap();
            bases[(x >> 32) as usize % bases.len()].clone()
        };
        let node = format!("c{writer}-m{k}");
        read(&http, &base, &node, 1000 + reader_id, t0, &seen).await;
    }
}

/// The longest time no write was acknowledged, and when it began.
pub(crate) fn longest_gap(acknowledged: &[Duration]) -> (Duration, Duration) {
    let mut times = acknowledged.to_vec();
    times.sort();
    times
        .windows(2)
        .map(|w| (w[1] - w[0], w[0]))
        .max()
        .unwrap_or_default()
}

pub(crate) async fn get(client: &reqwest::Client, base: &str, path: &str) -> (u16, Value) {
    match call(client, base, path, None, None).await {
        Some(a) => (a.status, a.body),
        None => (0, Value::Null),
    }
}

pub(crate) fn count(errors: &[(u16, String)]) -> std::collections::BTreeMap<String, usize> {
    let mut by = std::collections::BTreeMap::new();
    for (s, code) in errors {
        *by.entry(format!("{s} {code}")).or_insert(0) += 1;
    }
    by
}
