//! The online rebuild of read-model rows: a server whose projections are
//! of newer (or other) versions than the rows in the database writes them
//! again, from its own fold, while it serves.
//!
//! Every row names the projection version that made it. A server answers
//! from its fold in memory at once, whatever the rows hold; the rows are
//! for `replay --check`, `replay --diff` and SQL readers. While replicas of
//! other projection versions are live (a rolling upgrade), each build
//! writes the rows its own commits change, in its own version, and each
//! build's `replay --check` compares only the rows of its versions. Once
//! every live replica folds this build's versions (at once on a single
//! replica; in a rolling upgrade when the last replica of the old build
//! stops, which finalization requires), one replica rewrites every row of
//! another version: first the whole of each projection whose rows are of
//! another version, in (kind, id) order, up to the last row the fold held
//! as the walk began (rows made later were written at this build's
//! versions by the commits that made them), then whatever is left of
//! another version (rows an older build wrote since, rows this fold has
//! no entity for, which are deleted). A pass that fails part-way (a
//! database call that failed) goes on from where it stopped, half a second
//! later and twice as long after each failure in a row, up to `EVERY`; a
//! rebuild held back by a replica of other versions, or led by another
//! replica meanwhile, starts over. Each chunk is written under the log's
//! lock, from the fold at the log's head, so no commit is overwritten with
//! older rows; and at most `--rebuild-rows-per-second` rows are written a
//! second, so the rebuild takes the write path's lock for a short moment
//! now and then, never for long.

use std::num::NonZeroU32;
use std::sync::Arc;
use std::time::{Duration, Instant};

use stratum_projections::versions::{same_as_this_build, Cursor};
use stratum_projections::{Changes, ReadModels, PROJECTIONS};
use stratum_store::EventStore;
use tokio_util::sync::CancellationToken;

use crate::command::CommandBus;

/// The advisory lock key of the rebuild (PostgreSQL): one replica at a time.
pub const REBUILD_LOCK: i64 = 0x5354_5241_0002;

/// How often a server looks for rows of other versions (and once at
/// start). A look reads the four read-model tables where it finds none:
/// a scan that costs milliseconds per hundred thousand rows.
const EVERY: Duration = Duration::from_secs(10);

/// Rows per chunk, at most (fewer when the rate is lower).
const CHUNK: u32 = 200;

/// The default of `--rebuild-rows-per-second`.
pub const DEFAULT_RATE: u32 = 2_000;

/// The first wait after a pass that failed; it doubles, up to [`EVERY`].
const AGAIN: Duration = Duration::from_millis(500);

/// How far a rebuild got. A pass that fails part-way (a database call that
/// failed) leaves it, and the next pass goes on from it rather
/// than writing every row again.
#[derive(Default)]
struct Progress {
    began: Option<Instant>,
    /// The projections written whole.
    done: Vec<&'static str>,
    /// The projection being written.
    walk: Option<Walk>,
    written: usize,
    removed: usize,
}

/// Where the walk of one projection's rows is.
struct Walk {
    projection: &'static str,
    /// The last row written; `None` before the first chunk.
    after: Option<Cursor>,
    /// The last row the walk writes.
    last: Cursor,
}

/// The rebuild task of one server.
pub struct Rebuild {
    pub store: Arc<dyn EventStore>,
    pub bus: CommandBus,
    /// This replica's registry id: it does not wait for itself.
    pub me: String,
    pub rows_per_second: NonZeroU32,
}

impl Rebuild {
    pub async fn run(self, stop: CancellationToken) {
        let mut waiting_for: Option<String> = None;
        let mut progress = Progress::default();
        let mut failures: u32 = 0;
        loop {
            let wait = match self.pass(&mut waiting_for, &mut progress).await {
                Ok(()) => {
                    failures = 0;
                    EVERY
                }
                // A database that failed a call (or did not answer in
                // time): the rebuild goes on from where it stopped, soon.
                Err(e) => {
                    failures += 1;
                    let wait = AGAIN.saturating_mul(1 << (failures - 1).min(5)).min(EVERY);
                    tracing::warn!(
                        error = %e,
                        written = progress.written,
                        again_in_ms = wait.as_millis() as u64,
                        "could not rebuild the read-model rows; trying again from where it stopped"
                    );
                    wait
                }
            };
            tokio::select! {
                () = tokio::time::sleep(wait) => {}
                () = stop.cancelled() => return,
            }
        }
    }

    /// Rewrites every row of another projection version, when there is one
    /// and no live replica folds other versions; goes on from `progress`.
    async fn pass(
        &self,
        waiting_for: &mut Option<String>,
        progress: &mut Progress,
    ) -> anyhow::Result<()> {
        let kinds = self.store.other_version_kinds().await?;
        // A walk that stopped part-way is finished even when every row of
        // another version is behind it: the rows ahead of it may be rows
        // the old version did not make.
        let walking = progress.walk.as_ref().map(|w| w.projection);
        if kinds.is_empty() && walking.is_none() {
            *progress = Progress::default();
            return Ok(());
        }
        if self.waits(waiting_for).await? {
            // The replica that holds it back writes rows meanwhile, maybe
            // behind where the walk got: the next pass starts over.
            *progress = Progress::default();
            return Ok(());
        }
        let Some(_lead) = self.store.try_lead(REBUILD_LOCK).await? else {
            // Another replica leads the rebuild: what this one did is
            // stale by the time it leads again.
            *progress = Progress::default();
            return Ok(());
        };
        // Every projection with a row of another version is written whole:
        // a new version may make rows the old one did not. Rows of a kind
        // no projection of this build makes are deleted with the leftovers.
        let projections: Vec<&'static str> = PROJECTIONS
            .iter()
            .map(|p| p.name)
            .filter(|p| {
                walking == Some(*p)
                    || !progress.done.contains(p)
                        && kinds
                            .iter()
                            .any(|k| stratum_projections::dump::projection_of(k) == Some(*p))
            })
            .collect();
        let began = match progress.began {
            Some(began) => began,
            None => {
                tracing::info!(
                    projections = %projections.join(","),
                    versions = %stratum_projections::versions::this_build(),
                    rows_per_second = self.rows_per_second.get(),
                    "rebuilding the read-model rows of other projection versions; answers come from this build's fold meanwhile"
                );
                *progress.began.insert(Instant::now())
            }
        };
        for p in projections {
            // A walk begins at the rows the fold holds then: rows made
            // later were written, at this build's versions, by their
            // commits.
            if walking != Some(p) {
                let Some(last) = self.bus.published().last_row(p) else {
                    progress.done.push(p);
                    continue;
                };
                progress.walk = Some(Walk {
                    projection: p,
                    after: None,
                    last,
                });
            }
            while let Some(walk) = &progress.walk {
                // A replica of other versions that started meanwhile
                // writes rows of its own: the rebuild waits for it again.
                if self.waits(waiting_for).await? {
                    *progress = Progress::default();
                    return Ok(());
                }
                let chunk = self.chunk();
                let mut next = None;
                let (n, _) = self
                    .write_at_head(|rm| {
                        let (rows, cursor) =
                            rm.rows_through(p, walk.after.as_ref(), &walk.last, chunk);
                        next = cursor;
                        rows
                    })
                    .await?;
                progress.written += n;
                self.pace(n).await;
                match (next, &mut progress.walk) {
                    (Some(at), Some(walk)) => walk.after = Some(at),
                    _ => progress.walk = None,
                }
            }
            progress.done.push(p);
        }
        // What is left: rows of another version written since, and rows
        // this fold has no entity for.
        loop {
            if self.waits(waiting_for).await? {
                *progress = Progress::default();
                return Ok(());
            }
            let left = self.store.other_version_rows(self.chunk() as u32).await?;
            if left.is_empty() {
                break;
            }
            let (w, r) = self.write_at_head(|rm| rm.rows_of(&left)).await?;
            progress.written += w;
            progress.removed += r;
            self.pace(w + r).await;
        }
        tracing::info!(
            projections = %progress.done.join(","),
            written = progress.written,
            removed = progress.removed,
            seconds = format!("{:.3}", began.elapsed().as_secs_f64()),
            "rebuilt the read-model rows: every row is of this build's projection versions"
        );
        *progress = Progress::default();
        Ok(())
    }

    /// Whether the rebuild must wait ([`Self::held_back`]); says why once.
    async fn waits(&self, waiting_for: &mut Option<String>) -> anyhow::Result<bool> {
        match self.held_back().await? {
            Some(why) => {
                if waiting_for.as_deref() != Some(why.as_str()) {
                    tracing::info!(
                        "read-model rows of other projection versions are rewritten once no replica folds them: {why}"
                    );
                    *waiting_for = Some(why);
                }
                Ok(true)
            }
            None => {
                *waiting_for = None;
                Ok(false)
            }
        }
    }

    /// Why the rebuild waits: a live replica that folds other projection
    /// versions (or, on PostgreSQL, a build from before the replica
    /// registry with sessions open), which writes rows of its versions.
    async fn held_back(&self) -> anyhow::Result<Option<String>> {
        let all = self.store.replicas().await?;
        let others: Vec<String> = crate::replicas::live_others(&all, &self.me)
            .filter(|r| !same_as_this_build(&r.projections))
            .map(|r| {
                let folds = if r.projections.is_empty() {
                    "every projection at version 1"
                } else {
                    r.projections.as_str()
                };
                format!("replica {} on {} folds {folds}", r.id, r.host)
            })
            .collect();
        if !others.is_empty() {
            return Ok(Some(others.join("; ")));
        }
        let unregistered = self.store.unregistered_clients().await?;
        if !unregistered.is_empty() {
            return Ok(Some(format!(
                "a build from before the replica registry has sessions open: {}",
                unregistered.join(", ")
            )));
        }
        Ok(None)
    }

    /// Rows per chunk: [`CHUNK`], or the rate when it is lower.
    fn chunk(&self) -> usize {
        CHUNK.min(self.rows_per_second.get()) as usize
    }

    /// Sleeps as long as `rows` take at the rate.
    async fn pace(&self, rows: usize) {
        let secs = rows as f64 / f64::from(self.rows_per_second.get());
        tokio::time::sleep(Duration::from_secs_f64(secs)).await;
    }

    /// Writes the rows `make` renders from the fold at the log's head, in
    /// one write under the log's lock, with nothing appended: the rows and
    /// the log agree when it commits. Answers the rows written and deleted.
    async fn write_at_head(
        &self,
        mut make: impl FnMut(&ReadModels) -> Changes,
    ) -> anyhow::Result<(usize, usize)> {
        const ATTEMPTS: u32 = 50;
        for _ in 0..ATTEMPTS {
            let tx = self.store.begin_write().await?;
            let head = tx.head();
            // The writer folds what other processes committed without the
            // lock; it may be waiting for this one, so the wait is short.
            let rm =
                tokio::time::timeout(Duration::from_millis(200), self.bus.reached(head.position))
                    .await;
            let at_head = match rm {
                Ok(Ok(rm))
                    if rm.state.position == head.position
                        && rm.held_by(head.position, head.hash) =>
                {
                    Some(rm)
                }
                _ => None,
            };
            let Some(rm) = at_head else {
                tx.rollback().await?;
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            };
            let rows = make(&rm);
            let written =
                rows.members.len() + rows.join_requests.len() + rows.tokens.len() + rows.docs.len();
            let removed = rows.removed.len();
            let mut tx = tx;
            if let Err(e) = tx.write_changes(&rows, head.position).await {
                let _ = tx.rollback().await;
                return Err(e.into());
            }
            tx.commit().await?;
            crate::metrics::global()
                .rows_rebuilt
                .inc_by((written + removed) as u64);
            return Ok((written, removed));
        }
        Err(anyhow::anyhow!(
            "the log moved on under each of {ATTEMPTS} attempts to write a chunk at its head"
        ))
    }
}
