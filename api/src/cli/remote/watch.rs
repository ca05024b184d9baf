//! `stratum log watch`: the auditor's witness. Each run fetches the
//! server's signed checkpoint and holds it to the one kept from the last
//! run: signed by the log's key, not smaller, and extending it (an RFC
//! 6962 consistency proof, checked here). Only then is it kept.

use std::path::Path;

use reqwest::Method;
use stratum_domain::tree::{check_tree, Hash};

use super::client::{say, usage, Client, Failure, Reply, Result};
use crate::checkpoint::{open, Opened};
use crate::note::verifier;

/// The file the newest verified checkpoint is kept in, in the state
/// directory.
const KEPT: &str = "checkpoint";

/// What broke: printed, and the run exits 1.
fn broke(what: String) -> Result<i32> {
    eprintln!("stratum log watch: {what}");
    Ok(1)
}

fn hash(hex_text: &serde_json::Value) -> Option<Hash> {
    let bytes = hex::decode(hex_text.as_str()?).ok()?;
    Some(Hash(bytes.try_into().ok()?))
}

pub(super) async fn watch(
    c: &Client,
    key: &str,
    state: &Path,
    witness_policy: Option<&Path>,
) -> Result<i32> {
    let key = verifier(key).map_err(|e| usage(e.to_string()))?;
    let policy = witness_policy
        .map(crate::witness::Policy::load)
        .transpose()
        .map_err(|e| usage(format!("--witness-policy: {e}")))?;
    std::fs::create_dir_all(state)
        .map_err(|e| usage(format!("--state {}: {e}", state.display())))?;
    let kept_path = state.join(KEPT);
    let kept = match std::fs::read_to_string(&kept_path) {
        Ok(note) => match open(&note, &key) {
            Ok(k) => Some(k),
            Err(e) => {
                return broke(format!(
                    "the kept checkpoint {} does not verify with the key: {e}",
                    kept_path.display()
                ))
            }
        },
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(e) => return Err(usage(format!("{}: {e}", kept_path.display()))),
    };
    let res = match c
        .send(c.request(Method::GET, "/v1/log/checkpoint", &[]))
        .await?
    {
        Ok(res) => res,
        Err(code) => return Ok(code),
    };
    let note = res
        .text()
        .await
        .map_err(|e| Failure::Unreachable(format!("the checkpoint broke off: {e}")))?;
    let new = match open(&note, &key) {
        Ok(n) => n,
        Err(e) => return broke(format!("the server's checkpoint is refused: {e}")),
    };
    let witnessed = match &policy {
        None => None,
        Some(p) => match p.require(&note) {
            Ok(signed) => Some(signed),
            Err(why) => {
                return broke(format!(
                    "the server's checkpoint (size {}) is refused: {why}",
                    new.size
                ))
            }
        },
    };
    if let Some(k) = &kept {
        if let Some(why) = compare(c, k, &new).await? {
            return broke(why);
        }
    }
    crate::note::keep(&kept_path, &new.note)
        .map_err(|e| usage(format!("{}: {e}", kept_path.display())))?;
    let root = base64_root(&new);
    if let Some(signed) = &witnessed {
        say(&format!("cosigned by the witnesses {}", signed.join(", ")))?;
    }
    match kept {
        Some(k) if k.size < new.size => say(&format!(
            "verified: {} at size {} (root {root}), consistent with the kept size {}",
            new.origin, new.size, k.size
        ))?,
        Some(_) => say(&format!(
            "verified: {} at size {} (root {root}), as kept",
            new.origin, new.size
        ))?,
        None => say(&format!(
            "verified: {} at size {} (root {root}); kept as the first checkpoint",
            new.origin, new.size
        ))?,
    }
    Ok(0)
}

fn base64_root(o: &Opened) -> String {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD.encode(o.root)
}

/// Why the new checkpoint does not extend the kept one, if it does not.
async fn compare(c: &Client, kept: &Opened, new: &Opened) -> Result<Option<String>> {
    if new.origin != kept.origin {
        return Ok(Some(format!(
            "the origin changed from {} to {}: another log",
            kept.origin, new.origin
        )));
    }
    if new.size < kept.size {
        return Ok(Some(format!(
            "the log shrank: the kept checkpoint is of size {}, the server's of size {}",
            kept.size, new.size
        )));
    }
    if new.size == kept.size {
        return Ok((new.root != kept.root).then(|| {
            format!(
                "fork: the log was rewritten: size {} has another root ({} kept, {} now)",
                new.size,
                base64_root(kept),
                base64_root(new)
            )
        }));
    }
    let q = [
        ("from", kept.size.to_string()),
        ("to", new.size.to_string()),
    ];
    let proof = match c
        .json(c.request(Method::GET, "/v1/log/consistency", &q))
        .await?
    {
        Reply::Ok(v) => v,
        Reply::Failed(code) => {
            return Ok(Some(format!(
                "no consistency proof from size {} to {} (exit {code})",
                kept.size, new.size
            )))
        }
    };
    let hashes: Option<Vec<Hash>> = proof["proof"]
        .as_array()
        .map(|a| a.iter().map(hash).collect())
        .unwrap_or(None);
    let Some(hashes) = hashes else {
        return Ok(Some("the consistency proof is not a list of hashes".into()));
    };
    Ok(check_tree(
        &hashes,
        new.size,
        Hash(new.root),
        kept.size,
        Hash(kept.root),
    )
    .err()
    .map(|e| {
        format!(
            "fork: the checkpoint of size {} does not extend the kept one of size {} ({e})",
            new.size, kept.size
        )
    }))
}
