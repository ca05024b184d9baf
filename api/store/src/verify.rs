//! Chain verification over a store: the log read in chunks of whole tiles and its
//! hash chain recomputed up to the head (SPEC §3, tamper evidence). It
//! lives beside the log, for the API's `/events/verify` and the CLI alike,
//! and checks the Merkle tree kept beside the chain.
//!
//! Each event's hash depends only on its own bytes and the `prev_hash`
//! stored with it, so the chunks are read and hashed several at a time (the
//! database reading one while the hashes of others are computed on the
//! blocking threads), then joined in position order: the verdict, and the
//! first position that breaks, are those of one pass from the start.

use futures::StreamExt;
pub use stratum_domain::log::Verification;
use stratum_domain::log::{ChainVerifier, RecordedHead, Run};
use stratum_domain::tree::{self, Frontier, TILE_WIDTH};

use super::{EventStore, StoreError, VerifyChunk};

/// Events per chunk read: whole tiles, so each
/// chunk's tile roots are hashed with its chain.
const CHUNK: u64 = 8 * TILE_WIDTH;
/// Chunks read or checked at once: enough to keep the database and both
/// cores busy, few enough that memory stays a few megabytes.
const IN_FLIGHT: usize = 4;

/// Recomputes the whole chain, reading the log in chunks; with a head
/// recorded earlier, the log must still reach it with the same hash.
pub async fn verify_chain(
    store: &dyn EventStore,
    recorded: Option<RecordedHead>,
) -> Result<Verification, StoreError> {
    // Verify up to the head as it is now; later commits are not this
    // answer's business.
    let head = store.head().await?;
    let mut v = ChainVerifier::expecting(recorded);
    // The Merkle tree of the hashes the chain verified, to hold the kept
    // tree rows to.
    let (mut frontier, mut rows) = (Frontier::default(), Vec::new());
    let ranges = (0..head.position)
        .step_by(CHUNK as usize)
        .map(|after| (after, (after + CHUNK).min(head.position)));
    let mut runs = futures::stream::iter(ranges)
        .map(|(after, until)| async move {
            let chunk = store.read_for_verify(after, until).await?;
            tokio::task::spawn_blocking(move || checked(&chunk, recorded))
                .await
                .map_err(|e| StoreError::Unavailable(format!("the check stopped: {e}")))
        })
        .buffered(IN_FLIGHT);
    while let Some(checked) = runs.next().await {
        let Checked { run, tiles, leaves } = checked?;
        if let Err(b) = v.join(run) {
            return Ok(b.into());
        }
        // A run that joined is whole and starts at a tile's edge.
        for root in tiles {
            frontier
                .push_tile(root, &mut rows)
                .map_err(StoreError::Corrupt)?;
        }
        for leaf in leaves {
            frontier.push(&leaf, &mut rows);
        }
    }
    if head.position != v.position || head.hash != v.hash {
        return Ok(Verification::Broken {
            position: v.position + 1,
            reason: format!(
                "the head says position {}, the log ends at {}",
                head.position, v.position
            ),
        });
    }
    // The tree kept beside the chain must be the chain's: tiles and
    // proofs are served from it.
    if let Err((position, reason)) =
        super::tree::check_rows_are(store, head.position, &rows).await?
    {
        return Ok(Verification::Broken { position, reason });
    }
    Ok(v.verdict())
}

/// A chunk checked apart: its run of the chain, the roots of its whole
/// tiles, and the entries after them (the log's last partial tile).
struct Checked {
    run: Run,
    tiles: Vec<[u8; 32]>,
    leaves: Vec<[u8; 32]>,
}

fn checked(chunk: &VerifyChunk, recorded: Option<RecordedHead>) -> Checked {
    let run = ChainVerifier::check_run(chunk.iter(), recorded);
    let entries: Vec<[u8; 32]> = chunk.iter().map(|e| e.hash).collect();
    let whole = entries.len() - entries.len() % TILE_WIDTH as usize;
    let tiles = entries[..whole]
        .chunks(TILE_WIDTH as usize)
        .filter_map(|tile| tree::row_over(&tile.iter().map(tree::leaf_hash).collect::<Vec<_>>()))
        .collect();
    Checked {
        run,
        tiles,
        leaves: entries[whole..].to_vec(),
    }
}
