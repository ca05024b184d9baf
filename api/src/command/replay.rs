//! Folding the log into read models: at start, after a failed commit, for
//! `asOf` reads and `replay --check`; from the newest snapshot at or before
//! the position wanted, then the events after it.

use std::sync::Arc;

use stratum_domain::state::EventCtx;
use stratum_domain::stored::decode;
use stratum_domain::DomainEvent;
use stratum_projections::ReadModels;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use stratum_store::{EventStore, ReplayChunk, StoreError, StoreResult, READ_CHUNK};

/// The read models as the log stands: from the newest snapshot, then the
/// events after it.
pub(super) async fn reload(store: &Arc<dyn EventStore>) -> StoreResult<ReadModels> {
    let head = store.head().await?;
    let mut rm = state_at(store.clone(), head.position).await?;
    rm.head_hash = Some(head.hash);
    if rm.generation_hash.is_none() {
        rm.generation_hash = hash_at(&**store, rm.state.membership.generation).await?;
    }
    Ok(rm)
}

/// Folds the log (up to `until`, or all of it) into fresh read models. One
/// task reads the next chunks (two at a time) while this one folds the
/// last.
pub async fn load(store: Arc<dyn EventStore>, until: Option<u64>) -> StoreResult<ReadModels> {
    replay(store, until, |_| {}).await
}

/// [`load`], telling `progress` the position reached after each chunk.
pub async fn replay(
    store: Arc<dyn EventStore>,
    until: Option<u64>,
    progress: impl FnMut(u64) + Send + 'static,
) -> StoreResult<ReadModels> {
    replay_onto(store, ReadModels::default(), until, progress).await
}

/// How far a time-travel read may replay before it keeps a snapshot of
/// where it arrived.
pub const SNAPSHOT_DISTANCE: u64 = 10_000;

/// The read models as they stood right after position `p`: from the newest
/// snapshot at or before `p` (a cache; one of another format is ignored),
/// then replaying the rest. When that replay was long, the result is kept
/// as a snapshot for the next reader.
pub async fn state_at(store: Arc<dyn EventStore>, p: u64) -> StoreResult<ReadModels> {
    state_at_with(store, p, SNAPSHOT_DISTANCE).await
}

pub async fn state_at_with(
    store: Arc<dyn EventStore>,
    p: u64,
    snapshot_distance: u64,
) -> StoreResult<ReadModels> {
    // Decoding and encoding a snapshot is CPU work: off the async workers.
    let mut stale = None;
    let start = match store.snapshot_at_or_before(p).await? {
        Some((at, bytes)) => {
            let decoded = tokio::task::spawn_blocking(move || ReadModels::from_snapshot(&bytes))
                .await
                .ok()
                .flatten();
            match decoded.filter(|rm| rm.state.position == at) {
                // A snapshot is trusted only for the log it was taken of:
                // one taken of events a failover lost is never used.
                Some(rm)
                    if rm.head_hash.is_some() && rm.head_hash == hash_at(&*store, at).await? =>
                {
                    rm
                }
                Some(_) => {
                    tracing::warn!(
                        position = at,
                        "ignoring a snapshot of events the log no longer holds (or of no known event)"
                    );
                    stale = Some(at);
                    ReadModels::default()
                }
                None => {
                    tracing::info!(position = at, "ignoring a snapshot of another format");
                    stale = Some(at);
                    ReadModels::default()
                }
            }
        }
        None => ReadModels::default(),
    };
    // A snapshot that was ignored is replaced by one of the same position:
    // pruning keeps snapshots by position, so one kept as the first of its
    // spacing would otherwise stay, and send every read near it back to zero.
    let start = match stale {
        Some(at) => {
            keep(
                &store,
                replay_onto(store.clone(), start, Some(at), |_| {}).await?,
            )
            .await?
        }
        None => start,
    };
    let from = start.state.position;
    let rm = replay_onto(store.clone(), start, Some(p), |_| {}).await?;
    if rm.state.position - from < snapshot_distance {
        return Ok(rm);
    }
    keep(&store, rm).await
}

/// Keeps `rm` as a snapshot of its position (nothing at position 0).
async fn keep(store: &Arc<dyn EventStore>, mut rm: ReadModels) -> StoreResult<ReadModels> {
    if rm.state.position == 0 {
        return Ok(rm);
    }
    if rm.head_hash.is_none() {
        rm.head_hash = hash_at(&**store, rm.state.position).await?;
    }
    let rm = Arc::new(rm);
    let kept = rm.clone();
    if let Ok(bytes) = tokio::task::spawn_blocking(move || kept.snapshot()).await {
        if let Err(e) = store.put_snapshot(rm.state.position, &bytes).await {
            tracing::warn!(error = %e, "could not keep a snapshot; time travel stays correct, only slower");
        }
    }
    Ok(Arc::try_unwrap(rm).unwrap_or_else(|rm| (*rm).clone()))
}

/// The hash of the event at `position` in the log (zeros at 0), or `None`
/// when the log does not reach it.
pub(super) async fn hash_at(
    store: &dyn EventStore,
    position: u64,
) -> StoreResult<Option<[u8; 32]>> {
    if position == 0 {
        return Ok(Some([0; 32]));
    }
    Ok(store
        .read_after(position - 1, 1)
        .await?
        .first()
        .filter(|e| e.position == position)
        .map(|e| e.hash))
}

/// Folds the log after `rm`'s position (up to `until`) into `rm`.
async fn replay_onto(
    store: Arc<dyn EventStore>,
    mut rm: ReadModels,
    until: Option<u64>,
    mut progress: impl FnMut(u64) + Send + 'static,
) -> StoreResult<ReadModels> {
    let start = rm.state.position;
    let (tx, mut rx) = mpsc::channel(2);
    // Not aborted when the fold ends first (an error, `until` reached): a
    // read cut off inside a `COPY` would leave its pooled connection
    // mid-protocol. The reader stops at its next send, which fails once
    // the fold has dropped the receiver.
    tokio::spawn(async move {
        let mut after = start;
        if until.is_some_and(|u| u <= after) {
            return;
        }
        // The next chunk is asked for while this one is read (on another
        // connection), so the database is not idle while a chunk crosses
        // and is parsed: positions are gap-free, so the next chunk starts
        // READ_CHUNK on. It is used only where this one really ended: a
        // short chunk (the log's end, which may have grown since) is
        // followed by a read from where it ended, and by no read ahead.
        // One not used is left to finish unread, as above.
        let mut ahead: Option<(u64, JoinHandle<StoreResult<ReplayChunk>>)> = None;
        let mut whole = true;
        loop {
            let this = ahead.take().filter(|(from, _)| *from == after);
            let next_after = after + u64::from(READ_CHUNK);
            if whole && until.is_none_or(|u| next_after < u) {
                let store = store.clone();
                let read =
                    tokio::spawn(
                        async move { store.read_for_replay(next_after, READ_CHUNK).await },
                    );
                ahead = Some((next_after, read));
            }
            let chunk = match this {
                Some((_, read)) => read.await.unwrap_or_else(|e| {
                    Err(StoreError::Unavailable(format!(
                        "a read of the log stopped: {e}"
                    )))
                }),
                None => store.read_for_replay(after, READ_CHUNK).await,
            };
            let next = match &chunk {
                Ok(c) => c.last_position(),
                Err(_) => None,
            };
            whole = next == Some(next_after);
            let done = next.is_none() || until.is_some_and(|u| next >= Some(u));
            if tx.send(chunk).await.is_err() || done {
                return;
            }
            after = next.unwrap_or(after);
        }
    });
    // The fold is CPU work: it runs on a blocking thread, never on the
    // async workers that answer requests, while the reader fetches ahead.
    let folded = tokio::task::spawn_blocking(move || -> StoreResult<ReadModels> {
        rm.set_tracking(false);
        'chunks: while let Some(chunk) = rx.blocking_recv() {
            let chunk = chunk?;
            // Each event is borrowed from its chunk: its texts and payload
            // are read where they are, never copied per event.
            for e in chunk.iter() {
                if until.is_some_and(|u| e.position > u) {
                    break 'chunks;
                }
                let event = decode(e.event_type, e.schema_version, e.payload).map_err(|err| {
                    StoreError::Corrupt(format!("position {}: {err}", e.position))
                })?;
                if let DomainEvent::StorageVersionFinalized(f) = &event {
                    stratum_domain::storage::readable_after(f.level, e.position)
                        .map_err(StoreError::Schema)?;
                }
                let ctx = EventCtx {
                    position: e.position,
                    stream_version: e.stream_version,
                    occurred_at: e.occurred_at,
                    principal: e.principal,
                };
                rm.apply_at(&ctx, e.stream_id, &event);
            }
            if let Some(last) = chunk.last_position() {
                progress(last);
            }
        }
        rm.set_tracking(true);
        Ok(rm)
    })
    .await
    .map_err(|e| StoreError::Unavailable(format!("the fold stopped: {e}")));
    folded?
}
