//! Chain verification over a store: the log read in chunks and its hash
//! chain recomputed up to the head (SPEC §3, tamper evidence). It lives
//! beside the log, for the API's `/events/verify` and the CLI alike, and
//! checks the Merkle tree kept beside the chain.

pub use stratum_domain::log::Verification;
use stratum_domain::log::{ChainVerifier, RecordedHead};

use super::{EventStore, StoreError, READ_CHUNK};

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
    while v.position < head.position {
        let chunk = store.read_after(v.position, READ_CHUNK).await?;
        if chunk.is_empty() {
            break;
        }
        for e in chunk.iter().take_while(|e| e.position <= head.position) {
            if let Err(b) = v.check(e) {
                return Ok(b.into());
            }
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
    if let Err((position, reason)) = super::tree::check_rows(store, head.position).await? {
        return Ok(Verification::Broken { position, reason });
    }
    Ok(v.verdict())
}
