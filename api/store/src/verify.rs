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
    // The hashes of one chunk are recomputed on a blocking thread while the
    // next chunk is read.
    let mut chunk = store.read_after(0, READ_CHUNK).await?;
    while v.position < head.position && !chunk.is_empty() {
        let last = chunk.last().map_or(0, |e| e.position);
        let read_next = async {
            if last < head.position {
                store.read_after(last, READ_CHUNK).await
            } else {
                Ok(Vec::new())
            }
        };
        let until = head.position;
        let check = tokio::task::spawn_blocking(move || {
            for e in chunk.iter().take_while(|e| e.position <= until) {
                v.check(e)?;
            }
            Ok::<_, stratum_domain::log::ChainBreak>(v)
        });
        let (next, checked) = tokio::join!(read_next, check);
        match checked.map_err(|e| StoreError::Corrupt(format!("the chain check stopped: {e}")))? {
            Ok(checked) => v = checked,
            Err(b) => return Ok(b.into()),
        }
        chunk = next?;
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
