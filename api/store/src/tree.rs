//! The log's Merkle tree in the store (see [`stratum_domain::tree`]): the
//! rows every append adds in its own commit, the tree's right edge kept
//! between writes, the tiles read back, and the proofs and roots computed
//! from them.

use std::sync::Arc;

use stratum_domain::log::Recorded;
use stratum_domain::tree::{self, Frontier, Hash, Pass, Tiles, TreeError, TreeRow, TILE_WIDTH};

use super::{EventStore, Head, StoreError, StoreResult};

/// The tree's right edge as the last commit of this process left it, so a
/// write needs no reads for it; taken by a write, put back by its commit.
/// Keyed by the head it was left at, position and hash: the same position
/// with another hash (a failover that lost events, as many written since
/// by another replica) is another log.
#[derive(Default)]
pub(crate) struct TreeCache(std::sync::Mutex<Option<(Head, Frontier)>>);

/// What one write adds to the tree.
pub(crate) struct TreeWrite {
    cache: Arc<TreeCache>,
    /// The edge, or why it could not be read: a write that appends fails
    /// with it, one that does not (a rebuild of the tree) goes on.
    frontier: Result<Frontier, StoreError>,
}

impl TreeWrite {
    /// Begins with the cached edge if it is the locked head's (another
    /// process may have written since).
    pub(crate) fn begin(cache: &Arc<TreeCache>, head: Head) -> Self {
        let frontier = cache
            .0
            .lock()
            .expect("the tree cache is never poisoned")
            .take()
            .filter(|(at, f)| *at == head && f.size() == head.position)
            .map(|(_, f)| f)
            .ok_or_else(|| StoreError::Corrupt("the tree's edge was not read".into()));
        Self {
            cache: cache.clone(),
            frontier,
        }
    }

    /// Whether the edge must be read (under the write lock) first.
    pub(crate) fn needs_load(&self) -> bool {
        self.frontier.is_err()
    }

    pub(crate) fn load(&mut self, f: StoreResult<Frontier>) {
        self.frontier = f;
    }

    /// The rows `events` complete.
    pub(crate) fn extend(&mut self, events: &[Recorded]) -> StoreResult<Vec<TreeRow>> {
        let f = self.frontier.as_mut().map_err(|e| e.clone())?;
        let mut rows = Vec::new();
        for e in events {
            if e.position != f.size() + 1 {
                return Err(StoreError::Conflict(format!(
                    "event {} does not follow the tree's {} leaves",
                    e.position,
                    f.size()
                )));
            }
            f.push(&e.hash, &mut rows);
        }
        Ok(rows)
    }

    /// The edge no longer holds (the rows were replaced): the next write
    /// reads it again.
    pub(crate) fn forget(&mut self) {
        self.frontier = Err(StoreError::Corrupt(
            "the tree's rows were replaced in this write".into(),
        ));
    }

    /// The write committed at `head`: its edge is the next write's.
    pub(crate) fn committed(self, head: Head) {
        *self
            .cache
            .0
            .lock()
            .expect("the tree cache is never poisoned") = self.frontier.ok().map(|f| (head, f));
    }
}

/// A write's tree, which every begun write has.
pub(crate) fn tree_of(t: &mut Option<TreeWrite>) -> StoreResult<&mut TreeWrite> {
    t.as_mut()
        .ok_or_else(|| StoreError::Corrupt("a write without the tree's edge".into()))
}

/// The hashes of tile level `level` at indexes `start..end` of a tree of
/// at least `end` leaves (level 0) or subtrees: leaf hashes from the
/// events' chain hashes, kept rows above.
pub async fn level_hashes(
    store: &dyn EventStore,
    level: u8,
    start: u64,
    end: u64,
) -> StoreResult<Vec<[u8; 32]>> {
    let hashes = if level == 0 {
        store
            .entries(start, end)
            .await?
            .iter()
            .map(tree::leaf_hash)
            .collect()
    } else {
        store.tree_rows(level, start, end).await?
    };
    if hashes.len() as u64 != end - start {
        let what = format!(
            "tile level {level} holds {} of the hashes {start}..{end}",
            hashes.len()
        );
        // The log's own entries short is a broken log; kept rows short is
        // derived data not caught up (another build appended the events
        // without them), which a write of this build fills.
        return Err(if level == 0 {
            StoreError::Corrupt(what)
        } else {
            StoreError::Behind(what)
        });
    }
    Ok(hashes)
}

/// The root of the tree of `size` leaves.
pub async fn root(store: &dyn EventStore, size: u64) -> StoreResult<[u8; 32]> {
    with_reader(store, size, |r| tree::tree_hash(size, r).map(|h| h.0)).await
}

/// The inclusion proof of leaf `index` in the tree of `size` leaves.
pub async fn inclusion(
    store: &dyn EventStore,
    size: u64,
    index: u64,
) -> StoreResult<Vec<[u8; 32]>> {
    with_reader(store, size, |r| {
        tree::prove_record(size, index, r).map(|p| p.into_iter().map(|h| h.0).collect())
    })
    .await
}

/// The consistency proof from the tree of `from` leaves to that of `to`.
pub async fn consistency(store: &dyn EventStore, from: u64, to: u64) -> StoreResult<Vec<[u8; 32]>> {
    with_reader(store, to, |r| {
        tree::prove_tree(to, from, r).map(|p| p.into_iter().map(|h| h.0).collect())
    })
    .await
}

/// A computation over the tree of `size` leaves (a root, a proof), run
/// twice: on a recorder to find the tiles it reads, then on those tiles.
async fn with_reader<T, F>(store: &dyn EventStore, size: u64, compute: F) -> StoreResult<T>
where
    F: Fn(&Pass<'_>) -> Result<T, TreeError>,
{
    let bad = |e: TreeError| StoreError::Corrupt(format!("the tree of {size}: {e}"));
    let needs = tree::needs(|r| compute(&Pass::Find(r))).map_err(bad)?;
    let mut tiles = Tiles::default();
    for ((level, index), width) in needs {
        let start = index * TILE_WIDTH;
        let end = (start + width as u64).min(tree::level_len(size, level));
        tiles.tiles.insert(
            (level, index),
            level_hashes(store, level, start, end).await?,
        );
    }
    compute(&Pass::Read(&tiles)).map_err(bad)
}

/// The root of the tree of `size` leaves, if it is consistent with the
/// tree of `held.0` leaves whose root is `held.1`: it extends it, or is a
/// prefix of it. Root and proof come from one set of tiles, and the proof
/// is checked against the held root, so whatever the database answered,
/// the root returned provably does not fork from the held one.
pub async fn root_consistent_with(
    store: &dyn EventStore,
    size: u64,
    held: (u64, [u8; 32]),
) -> StoreResult<Option<[u8; 32]>> {
    let (other, other_root) = held;
    let (small, big) = (size.min(other), size.max(other));
    let (small_root, big_root, proof) = with_reader(store, big, |r| {
        let proof = if small > 0 && small < big {
            tree::prove_tree(big, small, r)?
        } else {
            Vec::new()
        };
        Ok((tree::tree_hash(small, r)?, tree::tree_hash(big, r)?, proof))
    })
    .await?;
    let (mine, theirs) = if size <= other {
        (small_root, big_root)
    } else {
        (big_root, small_root)
    };
    let consistent = if small == big {
        mine.0 == other_root
    } else if small == 0 {
        // Everything extends the empty tree; a held empty tree is only
        // extended, never equal to a bigger one.
        other == 0 || theirs.0 == other_root
    } else if size > other {
        // The new tree must extend the held one.
        tree::check_tree(&proof, size, mine, other, Hash(other_root)).is_ok()
    } else {
        // The new tree is a prefix of the held one.
        theirs.0 == other_root
            && tree::check_tree(&proof, other, Hash(other_root), size, mine).is_ok()
    };
    Ok(consistent.then_some(mine.0))
}

/// The tree's right edge at `size`, read from the store.
pub async fn frontier(store: &dyn EventStore, size: u64) -> StoreResult<Frontier> {
    let mut levels = Vec::new();
    for level in 0..Frontier::levels_of(size) {
        let start = Frontier::partial_start(size, level);
        levels.push(level_hashes(store, level, start, tree::level_len(size, level)).await?);
    }
    Frontier::from_levels(size, levels).map_err(StoreError::Corrupt)
}

/// The tree's right edge at `size`, and the rows the log needs that are
/// not kept: those of events another build appended without keeping the
/// tree (a replica of an earlier build beside this one during an upgrade).
/// They are built from the log's entries, from the edge where the kept
/// rows end; the caller writes them in its transaction.
pub async fn frontier_repairing(
    store: &dyn EventStore,
    size: u64,
) -> StoreResult<(Frontier, Vec<TreeRow>)> {
    match frontier(store, size).await {
        Ok(f) => return Ok((f, Vec::new())),
        Err(StoreError::Behind(_)) => {}
        Err(e) => return Err(e),
    }
    // Rows are kept as a prefix of each level; where the first level's
    // end is, every row below it is kept.
    let kept = kept_rows(store, 1, tree::level_len(size, 1)).await?;
    let mut from = (kept * TILE_WIDTH).min(size);
    let mut f = match frontier(store, from).await {
        Ok(f) => f,
        Err(StoreError::Behind(_)) => {
            from = 0;
            Frontier::default()
        }
        Err(e) => return Err(e),
    };
    let mut rows = push_entries(store, &mut f, size).await?;
    // Only the missing ones, past each level's kept prefix: a row kept
    // already is the same (`check_rows` says so where it is not).
    let mut kept = std::collections::BTreeMap::new();
    for level in 1..=Frontier::levels_of(size) {
        kept.insert(
            level,
            kept_rows(store, level, tree::level_len(size, level)).await?,
        );
    }
    rows.retain(|r| r.index >= kept.get(&r.level).copied().unwrap_or(0));
    let missing = rows;
    tracing::info!(
        from,
        size,
        rows = missing.len(),
        "the log's tree caught up: rows of events another build appended"
    );
    Ok((f, missing))
}

/// How many rows of `level` are kept, of at most `max`: the end of the
/// kept prefix, found by halving.
async fn kept_rows(store: &dyn EventStore, level: u8, max: u64) -> StoreResult<u64> {
    let (mut lo, mut hi) = (0u64, max);
    while lo < hi {
        let mid = lo + (hi - lo).div_ceil(2);
        if store.tree_rows(level, mid - 1, mid).await?.is_empty() {
            hi = mid - 1;
        } else {
            lo = mid;
        }
    }
    Ok(lo)
}

/// Pushes the log's entries from the edge's size up to `size` onto it,
/// `READ_CHUNK` at a time; the rows they complete.
async fn push_entries(
    store: &dyn EventStore,
    f: &mut Frontier,
    size: u64,
) -> StoreResult<Vec<TreeRow>> {
    let mut rows = Vec::new();
    while f.size() < size {
        let end = (f.size() + u64::from(super::READ_CHUNK)).min(size);
        let entries = store.entries(f.size(), end).await?;
        if entries.len() as u64 != end - f.size() {
            return Err(StoreError::Corrupt(format!(
                "the log has gaps between positions {} and {end}",
                f.size() + 1
            )));
        }
        for e in &entries {
            f.push(e, &mut rows);
        }
    }
    Ok(rows)
}

/// Builds every tree row from the log's entries, `READ_CHUNK` at a time.
async fn rows_from_log(store: &dyn EventStore, size: u64) -> StoreResult<Vec<TreeRow>> {
    push_entries(store, &mut Frontier::default(), size).await
}

/// Whether the newest kept row of every level is the root of the 256
/// hashes below it, and no row lies beyond the log.
async fn newest_rows_hold(store: &dyn EventStore, size: u64) -> StoreResult<bool> {
    for level in 1..=Frontier::levels_of(size) {
        let n = tree::level_len(size, level);
        if !store.tree_rows(level, n, n + 1).await?.is_empty() {
            return Ok(false);
        }
        if n == 0 {
            continue;
        }
        let newest = store.tree_rows(level, n - 1, n).await?;
        let below = match level_hashes(store, level - 1, (n - 1) * TILE_WIDTH, n * TILE_WIDTH).await
        {
            Ok(b) => b,
            Err(StoreError::Corrupt(_) | StoreError::Behind(_)) => return Ok(false),
            Err(e) => return Err(e),
        };
        if newest.first().copied() != tree::row_over(&below) {
            return Ok(false);
        }
    }
    Ok(true)
}

/// At start, under the write lock: a database from before the tree was
/// kept (or whose newest rows do not hold) gets every row built again from
/// the log's entries; `Some(rows)` says it was. A full check of every row
/// is `events verify`'s and `replay --check`'s.
pub async fn ensure(store: &dyn EventStore) -> StoreResult<Option<usize>> {
    let tx = store.begin_write().await?;
    let size = tx.head().position;
    let holds = newest_rows_hold(store, size).await?;
    tx.rollback().await?;
    if holds {
        return Ok(None);
    }
    rebuild(store).await.map(Some)
}

/// The first position whose tree rows are not kept yet (events another
/// build appended without keeping the tree), `None` when the rows cover
/// the log of `size` events: what `events verify` says beside a verified
/// chain, and what [`catch_up`] fills.
pub async fn behind(store: &dyn EventStore, size: u64) -> StoreResult<Option<u64>> {
    let mut first = None;
    for level in 1..=Frontier::levels_of(size) {
        let n = tree::level_len(size, level);
        if n == 0 || !store.tree_rows(level, n - 1, n).await?.is_empty() {
            continue;
        }
        let kept = kept_rows(store, level, n).await?;
        let at = kept * TILE_WIDTH.pow(u32::from(level)) + 1;
        first = Some(first.map_or(at, |f: u64| f.min(at)));
    }
    Ok(first)
}

/// Catches the tree up with the log when it is behind: a write that
/// appends nothing, whose start builds the missing rows under the log's
/// lock (see [`frontier_repairing`]). Whether it was behind; an error when
/// the rows are still missing after it (the start could not build them,
/// and a write that appends nothing commits without them).
pub async fn catch_up(store: &dyn EventStore) -> StoreResult<bool> {
    let head = store.head().await?;
    if behind(store, head.position).await?.is_none() {
        return Ok(false);
    }
    let tx = store.begin_write().await?;
    let size = tx.head().position;
    tx.commit().await?;
    match behind(store, size).await? {
        None => Ok(true),
        Some(first) => Err(StoreError::Behind(format!(
            "the tree's rows from position {first} of {size} could not be built"
        ))),
    }
}

/// Builds every tree row again from the log's entries, under the write
/// lock; how many rows it keeps.
pub async fn rebuild(store: &dyn EventStore) -> StoreResult<usize> {
    let mut tx = store.begin_write().await?;
    let size = tx.head().position;
    let rows = rows_from_log(store, size).await?;
    tx.replace_tree(&rows).await?;
    tx.commit().await?;
    Ok(rows.len())
}

/// Checks every kept row against the rows the log's entries give, up to
/// `size`: the first that differs, as the first position it covers and why.
pub async fn check_rows(
    store: &dyn EventStore,
    size: u64,
) -> StoreResult<Result<(), (u64, String)>> {
    let rows = rows_from_log(store, size).await?;
    check_rows_are(store, size, &rows).await
}

/// [`check_rows`] against the rows of the log's first `size` entries as
/// the caller computed them (a verifier that read every hash already).
pub(crate) async fn check_rows_are(
    store: &dyn EventStore,
    size: u64,
    rows: &[TreeRow],
) -> StoreResult<Result<(), (u64, String)>> {
    'levels: for level in 1..=Frontier::levels_of(size).max(1) {
        let want: Vec<&TreeRow> = rows.iter().filter(|r| r.level == level).collect();
        let mut at = 0u64;
        for chunk in want.chunks(super::READ_CHUNK as usize) {
            let kept = store.tree_rows(level, at, at + chunk.len() as u64).await?;
            for (i, r) in chunk.iter().enumerate() {
                // The rows end here and none is kept beyond: the tree is
                // behind the log (another build appended without it, see
                // `behind`), which is no break of the log.
                if kept.get(i).is_none()
                    && store
                        .tree_rows(level, r.index, tree::level_len(size, level))
                        .await?
                        .is_empty()
                {
                    continue 'levels;
                }
                if kept.get(i) != Some(&r.hash) {
                    let leaves = TILE_WIDTH.pow(u32::from(level));
                    return Ok(Err((r.index * leaves + 1, format!(
                        "the tree hash kept for positions {}..={} (tile level {level}, index {}) {}",
                        r.index * leaves + 1,
                        (r.index + 1) * leaves,
                        r.index,
                        if kept.get(i).is_some() {
                            "is not the root of their hashes"
                        } else {
                            "is missing"
                        }
                    ))));
                }
            }
            at += chunk.len() as u64;
        }
        // A row beyond the log is one of events appended since `size` was
        // read (servers go on writing), unless the log still does not
        // reach it.
        if !store.tree_rows(level, at, at + 1).await?.is_empty()
            && store.head().await?.position < (at + 1) * TILE_WIDTH.pow(u32::from(level))
        {
            return Ok(Err((
                size + 1,
                format!(
                    "a tree hash is kept at tile level {level}, index {at}, beyond the log's {size} events"
                ),
            )));
        }
    }
    Ok(Ok(()))
}
