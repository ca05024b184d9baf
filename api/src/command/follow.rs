//! How the writer follows the log other processes write, and what it does
//! when the database no longer holds the log it served (a failover that
//! lost a tail): reload, say so, and record the loss.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use stratum_domain::upgrade::{EventsLost, LostEvent};
use stratum_projections::ReadModels;
use stratum_store::{Head, StoreError, StoreResult, READ_CHUNK};

use super::replay::reload;
use super::writer::{Action, Event, State, Writer};

impl Writer {
    /// Folds in, without the write lock, what other processes committed
    /// since this writer last saw the log, and publishes the result. Commit
    /// order is position order, so what it reads has no gaps.
    pub(super) async fn follow_log(&mut self, state: &mut State) {
        let recheck = self.recheck.swap(false, Ordering::AcqRel);
        let Action::Follow { reload } = state.step(Event::Follow) else {
            unreachable!("following the log is following it")
        };
        // A reader that saw this writer's own commit before it was
        // published asked for nothing the writer does not have now.
        if !reload && !recheck && self.rm.state.position >= self.wanted.load(Ordering::Acquire) {
            // What a fold that failed part-way applied is the log as
            // stored: it is published now, not at the next commit.
            if self.publish.borrow().state.position < self.rm.state.position {
                self.publish_current();
            }
            return;
        }
        let followed = async {
            if reload {
                self.reload_from_the_log(state).await?;
            }
            loop {
                let at = self.rm.state.position;
                let events = self.store.read_after(at, READ_CHUNK).await?;
                // The database must still hold, at this writer's position,
                // the event it folded there: the next one chains from it,
                // or else the head is it.
                let gone = match events.first() {
                    Some(next) => self.rm.head_hash.is_some_and(|h| h != next.prev_hash),
                    None => {
                        let head = self.store.head().await?;
                        !self.rm.held_by(head.position, head.hash)
                    }
                };
                if gone {
                    self.reload_from_the_log(state).await?;
                    continue;
                }
                for e in &events {
                    if let Err(err) = self.rm.apply_recorded(e) {
                        state.note(Event::Broken);
                        return Err(StoreError::Corrupt(format!(
                            "position {}: {err}",
                            e.position
                        )));
                    }
                    self.recent.remember(e.position, e.hash);
                    if let Some(f) = self.rm.state.storage.finalized.as_ref() {
                        // Another build finalized a level this one does not
                        // read: it serves nothing more from here on.
                        if let Err(why) = stratum_domain::storage::readable_after(
                            self.rm.state.storage.level,
                            f.position,
                        ) {
                            state.note(Event::Broken);
                            tracing::error!("{why}; stop this replica");
                            return Err(StoreError::Schema(why));
                        }
                    }
                }
                self.rm.discard_changes();
                if events.is_empty() {
                    return Ok(());
                }
                // Raised per chunk: a fold that fails later still says it.
                self.folded_others();
            }
        }
        .await;
        match followed {
            Ok(()) => self.publish_current(),
            Err(e) => {
                tracing::warn!(error = %e, "could not follow the log; trying again in a second");
                // Readers waiting for the fold ask again; so does this.
                let follow = self.follow.clone();
                tokio::spawn(async move {
                    tokio::time::sleep(std::time::Duration::from_secs(1)).await;
                    follow.notify_one();
                });
            }
        }
    }

    /// Replaces the read models with the log as the database holds it.
    /// When that log no longer holds what was published (a failover lost
    /// its tail), that is said loudly, the loss is recorded, and the reload
    /// is published even though the position went back: no reader is
    /// answered from events the database no longer has. Every reload is
    /// checked, whatever asked for it: one after a failed commit may follow
    /// a failover too.
    pub(super) async fn reload_from_the_log(&mut self, state: &mut State) -> StoreResult<()> {
        // What readers were served: the in-memory state may be ahead of it
        // (a commit that failed), and it is what a loss is measured from.
        let published = self.publish.borrow().clone();
        self.rm = reload(&self.store).await?;
        state.note(Event::Reloaded);
        // What it holds may be other processes' events.
        self.folded_others();
        if self.holds(&published).await? {
            return Ok(());
        }
        let held = (published.state.position, published.head_hash);
        let db = Head {
            position: self.rm.state.position,
            hash: self.rm.head_hash.unwrap_or([0; 32]),
        };
        if let Some(loss) = self.lost_events(db, held.0).await? {
            // What the database holds from the fork on is not what this
            // writer folded there.
            self.recent.0.split_off(&loss.first);
            tracing::error!(
                first = loss.first,
                last = loss.last,
                count = loss.lost.len(),
                "acknowledged events lost; recording the log-events-lost alarm"
            );
            let _ = self.losses.send(loss);
        }
        let hex = |h: Option<[u8; 32]>| h.map_or("unknown".to_owned(), hex::encode);
        tracing::error!(
            held_position = held.0,
            held_hash = %hex(held.1),
            database_position = db.position,
            database_hash = %hex::encode(db.hash),
            "the database no longer holds the log this replica served: acknowledged events \
             were lost (a failover to a standby that had not received them?); reloaded what \
             the database holds"
        );
        crate::metrics::global().log_divergences.inc();
        let at = self.rm.state.position;
        let now = Arc::new(self.rm.clone());
        self.publish.send_replace(now.clone());
        self.head.send_replace(at);
        self.wanted.store(at, Ordering::Release);
        self.snapshot_at = self.snapshot_at.min(at);
        self.after_publishing(&now);
        Ok(())
    }

    /// Whether the log just reloaded still holds, at the position
    /// `published` was at, the event it was published with (one read, and
    /// only when the log has moved past it).
    async fn holds(&self, published: &ReadModels) -> StoreResult<bool> {
        let (at, Some(hash)) = (published.state.position, published.head_hash) else {
            return Ok(true);
        };
        Ok(match self.rm.state.position.cmp(&at) {
            std::cmp::Ordering::Less => false,
            std::cmp::Ordering::Equal => self.rm.head_hash.is_none_or(|h| h == hash),
            std::cmp::Ordering::Greater => {
                super::replay::hash_at(&*self.store, at).await? == Some(hash)
            }
        })
    }

    /// The events this writer served that the database no longer holds:
    /// those after the newest position where the database's log and the
    /// one it remembers agree (the same hash means the same log up to
    /// there), to `held`, the position it published. When the fork is not
    /// among what it remembers, the loss is taken to begin after the
    /// database's head, or at the oldest position it remembers if that is
    /// lower; the hashes are those it remembers.
    async fn lost_events(&self, db: Head, held: u64) -> StoreResult<Option<EventsLost>> {
        let mut fork = None;
        if let (Some((&oldest, _)), Some((&newest, _))) = (
            self.recent.0.first_key_value(),
            self.recent.0.last_key_value(),
        ) {
            let mut top = db.position.min(newest);
            while top >= oldest && fork.is_none() {
                let from = top.saturating_sub(u64::from(READ_CHUNK) - 1).max(oldest);
                let events = self.store.read_after(from - 1, READ_CHUNK).await?;
                fork = events
                    .iter()
                    .filter(|e| e.position <= top)
                    .rev()
                    .find(|e| self.recent.0.get(&e.position) == Some(&e.hash))
                    .map(|e| e.position);
                if from == oldest {
                    break;
                }
                top = from - 1;
            }
        }
        let oldest = self
            .recent
            .0
            .first_key_value()
            .map_or(u64::MAX, |(p, _)| *p);
        let first = fork.map_or(oldest.min(db.position + 1), |f| f + 1);
        let last = self
            .recent
            .0
            .last_key_value()
            .map_or(held, |(p, _)| held.max(*p));
        if first == 0 || last < first {
            return Ok(None);
        }
        let lost: Vec<LostEvent> = self
            .recent
            .0
            .range(first..=last)
            .map(|(&position, hash)| LostEvent {
                position,
                hash: hex::encode(hash),
            })
            .collect();
        Ok(Some(EventsLost {
            first,
            last,
            database_position: db.position,
            database_hash: hex::encode(db.hash),
            lost,
        }))
    }
}
