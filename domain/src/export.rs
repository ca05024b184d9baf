//! An export (`stratum events export`, one JSON line per event): a line
//! written from a recorded event, and offline a line parsed and held to its
//! stored bytes, and a whole export verified against its chain and a
//! recorded head. Pure: the caller reads and writes the lines.
//!
//! An export may end with one more line, `{"checkpoint": "<signed note>"}`:
//! the signed checkpoint of the log's tree at the export's last position,
//! which `stratum events verify --file --key` holds the export to.

use crate::log::{ChainVerifier, LogLine, Recorded, RecordedHead, Verification};
use crate::tree::Frontier;

/// The trailer line of an export: the signed checkpoint at its size.
pub fn checkpoint_line(note: &str) -> Vec<u8> {
    let mut out = serde_json::to_vec(&serde_json::json!({ "checkpoint": note }))
        .expect("a string serializes");
    out.push(b'\n');
    out
}

/// The signed checkpoint a trailer line carries; `None` for an event line.
pub fn checkpoint_of(line: &str) -> Option<String> {
    #[derive(serde::Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Trailer {
        checkpoint: String,
    }
    if !line.starts_with("{\"checkpoint\"") {
        return None;
    }
    serde_json::from_str::<Trailer>(line)
        .ok()
        .map(|t| t.checkpoint)
}

/// What verifying an export found: the chain's verdict, the root of the
/// tree of its events, and the signed checkpoint it ends with, if any.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ExportCheck {
    pub verification: Verification,
    pub root: [u8; 32],
    pub checkpoint: Option<String>,
    /// The root at the size asked for (a checkpoint held earlier), if the
    /// export reaches it.
    pub root_at: Option<[u8; 32]>,
}

/// The export line of a recorded event, newline included: every envelope
/// field, the stored bytes, and the payload decoded for people.
pub fn line(e: &Recorded) -> Result<Vec<u8>, String> {
    let payload = crate::stored::decode(&e.event_type, e.schema_version, &e.payload)
        .map_err(|err| format!("position {}: {err}", e.position))?;
    let line = LogLine::new(e, serde_json::to_value(payload).expect("events serialize"));
    let mut out = serde_json::to_vec(&line).expect("export lines serialize");
    out.push(b'\n');
    Ok(out)
}

/// Parses one export line (`n` counts from 0) and checks that its decoded
/// payload is what its stored bytes say: the chain covers the bytes,
/// people read the JSON.
pub fn parse_line(n: usize, line: &str) -> Result<Recorded, String> {
    let parsed: LogLine = serde_json::from_str(line).map_err(|e| format!("line {}: {e}", n + 1))?;
    let e = parsed
        .to_recorded()
        .map_err(|e| format!("line {}: {e}", n + 1))?;
    let decoded = crate::stored::decode(&e.event_type, e.schema_version, &e.payload)
        .map_err(|err| format!("line {}: {err}", n + 1))?;
    // The export shows the payload as the service decoded it then: today's
    // shape, or, for an export made before an upcast, the shape of the
    // version it was stored at, read through the same upcasters.
    let decoded = serde_json::to_value(&decoded).ok();
    let then = crate::stored::decode_exported(&e.event_type, e.schema_version, &parsed.payload)
        .and_then(|d| serde_json::to_value(d).ok());
    if decoded.as_ref() != Some(&parsed.payload) && (then.is_none() || then != decoded) {
        return Err(format!(
            "line {}: the decoded payload is not what payloadPostcard holds",
            n + 1
        ));
    }
    Ok(e)
}

/// Verifies an export: every line parses, its payload matches its bytes,
/// the chain holds from position 1, and it reaches the recorded head if one
/// is given; the tree of its events is computed, and a checkpoint trailer,
/// which must be the last line, is kept for the caller to check. An error
/// reading a line is answered as it is.
pub fn verify<E>(
    lines: impl IntoIterator<Item = Result<String, E>>,
    recorded: Option<RecordedHead>,
    root_at: Option<u64>,
) -> Result<ExportCheck, E> {
    let mut v = ChainVerifier::expecting(recorded);
    let mut tree = Frontier::default();
    let mut checkpoint = None;
    let mut at = (root_at == Some(0)).then(|| tree.root());
    let broken = |position, reason| Verification::Broken { position, reason };
    for (n, line) in lines.into_iter().enumerate() {
        let line = line?;
        if checkpoint.is_some() {
            let reason = format!(
                "line {}: a line after the checkpoint, which ends an export",
                n + 1
            );
            return Ok(ExportCheck {
                verification: broken(v.position + 1, reason),
                root: tree.root(),
                checkpoint,
                root_at: at,
            });
        }
        if let Some(c) = checkpoint_of(&line) {
            checkpoint = Some(c);
            continue;
        }
        let checked = match parse_line(n, &line) {
            Err(reason) => Err((v.position + 1, reason)),
            Ok(e) => match v.check(&e) {
                Err(b) => Err((b.position(), format!("line {}: {b}", n + 1))),
                Ok(()) => Ok(e),
            },
        };
        match checked {
            Ok(e) => {
                tree.push(&e.hash, &mut Vec::new());
                if Some(tree.size()) == root_at {
                    at = Some(tree.root());
                }
            }
            Err((position, reason)) => {
                return Ok(ExportCheck {
                    verification: broken(position, reason),
                    root: tree.root(),
                    checkpoint,
                    root_at: at,
                })
            }
        }
    }
    Ok(ExportCheck {
        verification: v.verdict(),
        root: tree.root(),
        checkpoint,
        root_at: at,
    })
}
