//! Signed notes' keys (C2SP signed-note), as the log's checkpoints and the
//! witnesses use them: which names a key may have, and a verifier key read
//! from a file or given inline.

use std::io::Write as _;
use std::path::Path;

use signed_note::StandardVerifier;

/// Whether a name may be a key's name or an origin: C2SP signed-note's
/// rule (no space, no `+`), and printable.
pub fn valid_name(name: &str) -> bool {
    signed_note::is_key_name_valid(name) && !name.chars().any(char::is_control)
}

/// Keeps a note (a signed checkpoint), or any text (a read-model dump), in
/// a file so that a crash leaves the old file or the new one: written
/// beside it, synced, renamed over it, and the directory synced.
pub fn keep(path: &Path, note: &str) -> std::io::Result<()> {
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(".new");
    let mut f = std::fs::File::create(&tmp)?;
    f.write_all(note.as_bytes())?;
    f.sync_all()?;
    std::fs::rename(&tmp, path)?;
    let dir = path
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    std::fs::File::open(dir)?.sync_all()
}

/// A verifier key (`<name>+<hash>+<base64>`) read from a file or given
/// inline.
pub fn verifier(key: &str) -> anyhow::Result<StandardVerifier> {
    let text = match std::fs::read_to_string(key) {
        Ok(t) => t,
        Err(_) if key.contains('+') => key.to_owned(),
        Err(e) => anyhow::bail!("verifier key {key}: {e}"),
    };
    StandardVerifier::new(text.trim()).map_err(|e| {
        anyhow::anyhow!("{key}: not a note verifier key (<name>+<hash>+<base64>): {e}")
    })
}
