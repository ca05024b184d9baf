//! The read path: every `GET` and the gate before every route answer from
//! the read models the writer published in memory, never stale.
//!
//! The rule (Kubernetes' consistent reads from the watch cache, KEP-2340):
//! a read answers at least the log as it stood when the request arrived.
//! So a request first learns the log's head with a check that *started
//! after it arrived*, then waits until the published read models include
//! that position (the writer folds in what other processes committed:
//! other replicas, or `stratum token revoke` on the host), then reads them.
//! The checks are shared: the requests that arrive while one check is in
//! flight share the next one, so the database sees one head query per
//! round trip however many requests wait, and a request costs no query of
//! its own. See `docs/architecture.md`, "The read path".

use std::sync::{Arc, Mutex};

use stratum_projections::ReadModels;

use crate::command::CommandBus;
use crate::error::{ApiError, ApiResult};
use stratum_store::EventStore;

/// The shared head check, one in flight at a time.
pub struct Freshness {
    store: Arc<dyn EventStore>,
    flights: Mutex<Flights>,
    /// Held by the one check in flight.
    lane: tokio::sync::Mutex<()>,
}

#[derive(Default)]
struct Flights {
    /// How many checks have started.
    started: u64,
    /// The newest finished check: its number and what it found (an error
    /// too is shared: the callers that waited for it get it at once).
    last: Option<(u64, ApiResult<u64>)>,
}

impl Freshness {
    pub fn new(store: Arc<dyn EventStore>) -> Self {
        Self {
            store,
            flights: Mutex::default(),
            lane: tokio::sync::Mutex::new(()),
        }
    }

    fn flights(&self) -> std::sync::MutexGuard<'_, Flights> {
        self.flights.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The log's head as a check that started after this call began found
    /// it. A check already in flight started too early to count: the
    /// callers that arrive during it wait for it, then share the next.
    ///
    /// The check also holds the head to what `bus` published before it
    /// started: a head behind it means the database lost events this
    /// process serves (a failover), and the writer is asked to reload.
    pub async fn head(&self, bus: &CommandBus) -> ApiResult<u64> {
        let ticket = self.flights().started;
        let later = |f: &Flights| {
            f.last
                .as_ref()
                .filter(|(n, _)| *n > ticket)
                .map(|(_, h)| h.clone())
        };
        if let Some(h) = later(&self.flights()) {
            return h;
        }
        let _lane = self.lane.lock().await;
        let number = {
            let mut f = self.flights();
            if let Some(h) = later(&f) {
                return h;
            }
            f.started += 1;
            f.started
        };
        let held = bus.published();
        let head = self.store.head().await.map_err(ApiError::from);
        let head = match head {
            // What this replica serves is a log the database no longer
            // has: the writer reloads what it holds, and until that is
            // published (a few milliseconds; 503 past a few seconds) no
            // read is answered from the old log.
            Ok(h) if bus.observe_database_head(&held, h) => {
                let mut published = bus.publications();
                let reloaded = tokio::time::timeout(
                    std::time::Duration::from_secs(5),
                    published.wait_for(|rm| rm.held_by(h.position, h.hash)),
                )
                .await;
                match reloaded {
                    Ok(Ok(_)) => Ok(h.position),
                    _ => Err(ApiError::unavailable(format!(
                        "the database's log is at {} and no longer holds position {} as this \
                         replica served it; reloading",
                        h.position, held.state.position
                    ))),
                }
            }
            other => other.map(|h| h.position),
        };
        let mut f = self.flights();
        if f.last.as_ref().is_none_or(|(n, _)| *n < number) {
            f.last = Some((number, head.clone()));
        }
        head
    }

    /// The published read models, including at least the log as it stood
    /// when this call began.
    pub async fn fresh(&self, bus: &CommandBus) -> ApiResult<Arc<ReadModels>> {
        let head = self.head(bus).await?;
        Ok(bus.reached(head).await?)
    }
}

/// The read models a request answers from: the ones its gate checked the
/// caller against, so the gate and the answer see the same moment.
#[derive(Clone)]
pub struct View(pub Arc<ReadModels>);

impl View {
    /// These read models, or the ones of position `p` (`asOf`): one read
    /// shape, whether now or then. `p` must not be beyond these.
    pub async fn at(
        &self,
        store: &Arc<dyn EventStore>,
        p: Option<u64>,
    ) -> ApiResult<Arc<ReadModels>> {
        match p {
            None => Ok(self.0.clone()),
            Some(p) if p == self.0.state.position => Ok(self.0.clone()),
            Some(p) => Ok(Arc::new(crate::command::state_at(store.clone(), p).await?)),
        }
    }

    /// The log's last position these read models include.
    pub fn position(&self) -> u64 {
        self.0.state.position
    }
}

impl std::ops::Deref for View {
    type Target = ReadModels;
    fn deref(&self) -> &ReadModels {
        &self.0
    }
}

/// One value rendered from the read models, kept for the key it was
/// rendered at (a generation, a position and its hash) and rendered again
/// only for a newer one: what many callers ask for between two changes.
pub struct Memo<K, T>(std::sync::Mutex<Option<(K, T)>>);

impl<K, T> Default for Memo<K, T> {
    fn default() -> Self {
        Self(std::sync::Mutex::new(None))
    }
}

impl<K: Ord + Copy, T: Clone> Memo<K, T> {
    /// The value kept for `key`, or `render()` (kept when no newer key is).
    /// Rendered outside the lock: callers at other keys do not wait on it.
    pub fn get_or(&self, key: K, render: impl FnOnce() -> T) -> T {
        let kept = self
            .0
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .as_ref()
            .filter(|(k, _)| *k == key)
            .map(|(_, v)| v.clone());
        kept.unwrap_or_else(|| {
            let value = render();
            let mut memo = self.0.lock().unwrap_or_else(|e| e.into_inner());
            if memo.as_ref().is_none_or(|(k, _)| *k < key) {
                *memo = Some((key, value.clone()));
            }
            value
        })
    }
}

/// What the read endpoints render once and serve many times.
#[derive(Default)]
pub struct Rendered {
    /// The peer lists, as JSON, by generation and the hash of its event:
    /// every node agent asks for the same lists after each change. The
    /// lists are a function of the generation: only topology events
    /// (`DomainEvent::is_topology_change`) change what they show, and each
    /// one is the new generation. With its event's hash, a generation that
    /// a failover took back and the log filled with another event
    /// (`command::follow`) is another key. Read models whose generation's
    /// hash is unknown (a fold of events without their hashes, as an
    /// `asOf` read folds) are rendered every time.
    peers: Memo<(u64, [u8; 32]), bytes::Bytes>,
    /// The membership digest, by position and the hash of the event there:
    /// a summary polled while nothing changes hashes the members'
    /// documents once (at 5,000 members, some 14 ms of a core). Any event
    /// may change a member's document (a report of its applied generation
    /// is no new generation), so the key is the position; and with its
    /// hash, a position that a failover took back and the log filled with
    /// other events (`command::follow`) is another key. Read models whose
    /// head hash is unknown (a fold of events without their hashes) are
    /// rendered every time.
    digest: Memo<(u64, [u8; 32]), String>,
    /// Each member's document, kept with the record it was rendered from,
    /// for the digest at a new position: while agents report, each
    /// position is a new digest, yet a report changes one member, and
    /// only changed members are rendered again. Read models of another
    /// position (an `asOf` read whose head hash is known) replace the
    /// documents kept with theirs: a cost, never another digest.
    member_docs: std::sync::Mutex<stratum_projections::MemberDocs>,
}

impl Rendered {
    /// The peer lists of `rm`, as JSON.
    pub fn peers(&self, rm: &ReadModels) -> bytes::Bytes {
        let m = &rm.state.membership;
        let render = || {
            bytes::Bytes::from(
                serde_json::to_vec(&stratum_projections::peers(m)).expect("peers serialize"),
            )
        };
        match rm.generation_hash {
            Some(hash) => self.peers.get_or((m.generation, hash), render),
            None => render(),
        }
    }

    /// [`ReadModels::membership_digest`] of `rm`.
    pub fn membership_digest(&self, rm: &ReadModels) -> String {
        match rm.head_hash {
            Some(hash) => self.digest.get_or((rm.state.position, hash), || {
                // A caller at another key does not wait for the documents
                // kept while one renders with them: it renders them all.
                match self.member_docs.try_lock() {
                    Ok(mut docs) => docs.membership_digest(rm),
                    Err(std::sync::TryLockError::Poisoned(e)) => {
                        e.into_inner().membership_digest(rm)
                    }
                    Err(std::sync::TryLockError::WouldBlock) => rm.membership_digest(),
                }
            }),
            None => rm.membership_digest(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Memo;

    #[test]
    fn a_memo_renders_once_per_key_and_keeps_only_the_newest() {
        let memo = Memo::default();
        let renders = std::cell::Cell::new(0);
        let at = |key: u64, value: &'static str| {
            memo.get_or(key, || {
                renders.set(renders.get() + 1);
                value
            })
        };
        assert_eq!(at(5, "five"), "five");
        assert_eq!(at(5, "again"), "five", "kept for its key");
        assert_eq!(at(3, "three"), "three", "an older key is rendered");
        assert_eq!(at(5, "again"), "five", "and does not displace the newer");
        assert_eq!(at(7, "seven"), "seven");
        assert_eq!(at(5, "five again"), "five again");
        assert_eq!(at(7, "again"), "seven");
        assert_eq!(renders.get(), 4);
    }

    /// A failover that lost the log's tail takes the position back, and
    /// other events fill the positions again: the digest at a position
    /// the memo kept, with another event there, is rendered again.
    #[test]
    fn the_digest_is_kept_for_a_position_and_the_hash_of_its_event() {
        use stratum_domain::membership::Role;
        use stratum_domain::testing::{admitted, given};
        let rendered = super::Rendered::default();
        let mut held = super::ReadModels::default();
        held.state = given(&[admitted("n-1", Role::Compute, 1)]);
        held.head_hash = Some([1; 32]);
        let kept = rendered.membership_digest(&held);
        assert_eq!(kept, held.membership_digest());
        let mut other = super::ReadModels::default();
        other.state = given(&[admitted("n-2", Role::Storage, 1)]);
        other.head_hash = Some([2; 32]);
        assert_eq!(other.state.position, held.state.position);
        assert_ne!(other.membership_digest(), kept);
        assert_eq!(
            rendered.membership_digest(&other),
            other.membership_digest()
        );
        other.head_hash = None;
        assert_eq!(
            rendered.membership_digest(&other),
            other.membership_digest()
        );
    }

    /// The same for the peer lists, kept for a generation and the hash of
    /// the event there.
    #[test]
    fn the_peer_lists_are_kept_for_a_generation_and_the_hash_of_its_event() {
        use stratum_domain::membership::Role;
        use stratum_domain::testing::{admitted, given};
        let rendered = super::Rendered::default();
        let models = |node: &str, hash: u8| {
            let mut rm = super::ReadModels::default();
            rm.state = given(&[admitted(node, Role::Control, 1)]);
            rm.generation_hash = Some([hash; 32]);
            rm
        };
        let lists = |rm: &super::ReadModels| -> serde_json::Value {
            serde_json::from_slice(&rendered.peers(rm)).unwrap()
        };
        let held = models("n-1", 1);
        assert_eq!(lists(&held)["openbao"][0]["nodeId"], "n-1");
        let mut other = models("n-2", 2);
        assert_eq!(
            other.state.membership.generation,
            held.state.membership.generation
        );
        assert_eq!(lists(&other)["openbao"][0]["nodeId"], "n-2");
        other.generation_hash = None;
        assert_eq!(lists(&other)["openbao"][0]["nodeId"], "n-2");
        assert_eq!(lists(&held)["openbao"][0]["nodeId"], "n-1");
    }
}
