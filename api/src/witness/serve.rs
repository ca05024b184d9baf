//! `stratum witness serve`: the witness side of C2SP tlog-witness, for any
//! log whose note verifier key it is given.
//!
//! For each log (by origin) it keeps the newest checkpoint it cosigned, in
//! a file of its own under the state directory (the file's name is the
//! SHA-256 of the origin, hex), written to a temporary file, synced and
//! renamed over the old one before the answer goes out. The check of the
//! submitted `old` size against that file and the write of the new one
//! happen under one lock, so two submissions never race a size back (the
//! spec's rollback race); a witness killed at any point restarts from the
//! last file renamed, which is never smaller than a size it answered.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use base64::prelude::{Engine as _, BASE64_STANDARD};
use sha2::{Digest, Sha256};
use signed_note::{Note, StandardVerifier, VerifierList};
use stratum_domain::tree::{check_tree, parse_checkpoint, Hash, EMPTY_HASH};

use super::Cosigner;

/// The most consistency proof lines a request may carry.
const MAX_PROOF: usize = 63;
/// The largest request body read.
const MAX_BODY: usize = 64 * 1024;

/// What the witness knows: its key, the logs it witnesses, its state.
pub struct Witness {
    key: Cosigner,
    /// Each log's keys, by origin.
    logs: HashMap<String, Vec<StandardVerifier>>,
    state: PathBuf,
    /// Held from the check of `old` to the write of the new checkpoint.
    lock: Mutex<()>,
    /// An exclusive `flock` on the state directory's `.lock`, held while
    /// the witness lives: a second process on the same state would race
    /// the first's sizes back.
    _state_lock: std::fs::File,
}

/// A refusal: the status and a one-line reason.
type Refused = (StatusCode, String);

fn refuse(status: StatusCode, why: impl Into<String>) -> Refused {
    (status, why.into())
}

/// The hex SHA-256 of an origin: its state file's name, and its path in
/// the monitoring API.
pub fn origin_hash(origin: &str) -> String {
    hex::encode(Sha256::digest(origin.as_bytes()))
}

/// A submission, parsed.
struct Submission {
    old: u64,
    proof: Vec<Hash>,
    note: String,
}

fn parse(body: &[u8]) -> Result<Submission, Refused> {
    let bad = |why: &str| refuse(StatusCode::BAD_REQUEST, why);
    let text = std::str::from_utf8(body).map_err(|_| bad("the body is not UTF-8"))?;
    let (head, note) = text
        .split_once("\n\n")
        .ok_or_else(|| bad("no empty line before the checkpoint"))?;
    let mut lines = head.split('\n');
    let old = lines
        .next()
        .and_then(|l| l.strip_prefix("old "))
        .filter(|n| n == &"0" || (!n.starts_with('0') && n.bytes().all(|b| b.is_ascii_digit())))
        .and_then(|n| n.parse::<u64>().ok())
        .ok_or_else(|| bad("the first line is not `old <size>`"))?;
    let mut proof = Vec::new();
    for l in lines {
        let h: [u8; 32] = BASE64_STANDARD
            .decode(l)
            .ok()
            .and_then(|b| b.try_into().ok())
            .ok_or_else(|| bad("a consistency proof line is not a base64 hash"))?;
        proof.push(Hash(h));
    }
    if proof.len() > MAX_PROOF {
        return Err(bad("more than 63 consistency proof lines"));
    }
    Ok(Submission {
        old,
        proof,
        note: note.to_owned(),
    })
}

impl Witness {
    /// A witness of `logs` (each an origin and a key; a log may have
    /// several), keeping its state in `state`, which no other process may
    /// hold.
    pub fn new(
        key: Cosigner,
        logs: Vec<(String, StandardVerifier)>,
        state: PathBuf,
    ) -> anyhow::Result<Self> {
        let at = |e: std::io::Error| anyhow::anyhow!("--state {}: {e}", state.display());
        std::fs::create_dir_all(&state).map_err(at)?;
        if let Some(parent) = state.parent().filter(|p| !p.as_os_str().is_empty()) {
            std::fs::File::open(parent)
                .and_then(|d| d.sync_all())
                .map_err(at)?;
        }
        let lock = std::fs::File::create(state.join(".lock")).map_err(at)?;
        rustix::fs::flock(&lock, rustix::fs::FlockOperation::NonBlockingLockExclusive).map_err(
            |e| {
                anyhow::anyhow!(
                    "--state {}: another witness holds it ({e}); one process per state directory",
                    state.display()
                )
            },
        )?;
        let mut by_origin: HashMap<String, Vec<StandardVerifier>> = HashMap::new();
        for (origin, k) in logs {
            by_origin.entry(origin).or_default().push(k);
        }
        Ok(Self {
            key,
            logs: by_origin,
            state,
            lock: Mutex::new(()),
            _state_lock: lock,
        })
    }

    /// What it holds for each log, for the start-up line.
    fn holds(&self) -> Vec<String> {
        let mut held: Vec<String> = self
            .logs
            .keys()
            .map(|o| match self.kept(o) {
                Ok(Some((size, _, _))) => format!("{o} at size {size}"),
                Ok(None) => format!("{o} (nothing cosigned yet)"),
                Err(e) => format!("{o}: {e}"),
            })
            .collect();
        held.sort();
        held
    }

    fn file(&self, origin: &str) -> PathBuf {
        self.state.join(origin_hash(origin))
    }

    /// The newest checkpoint cosigned for `origin`: its size, root and
    /// note (with the cosignature).
    fn kept(&self, origin: &str) -> Result<Option<(u64, [u8; 32], String)>, String> {
        let path = self.file(origin);
        let note = match std::fs::read_to_string(&path) {
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(format!("{}: {e}", path.display())),
        };
        let n =
            Note::from_bytes(note.as_bytes()).map_err(|e| format!("{}: {e}", path.display()))?;
        let (_, size, root) =
            parse_checkpoint(n.text()).map_err(|e| format!("{}: {e}", path.display()))?;
        Ok(Some((size, root, note)))
    }

    /// Handles one `add-checkpoint`: the cosignature line, or why not.
    pub fn add_checkpoint(&self, body: &[u8], now: u64) -> Result<String, Refused> {
        let s = parse(body)?;
        let note = Note::from_bytes(s.note.as_bytes())
            .map_err(|e| refuse(StatusCode::BAD_REQUEST, format!("not a signed note: {e}")))?;
        let (origin, size, root) = parse_checkpoint(note.text())
            .map_err(|e| refuse(StatusCode::BAD_REQUEST, format!("not a checkpoint: {e}")))?;
        let keys = self
            .logs
            .get(&origin)
            .ok_or_else(|| refuse(StatusCode::NOT_FOUND, format!("unknown log {origin}")))?;
        let known = VerifierList::new(
            keys.iter()
                .map(|k| Box::new(k.clone()) as Box<dyn signed_note::Verifier>)
                .collect(),
        );
        let (verified, _) = note.verify(&known).map_err(|e| {
            refuse(
                StatusCode::FORBIDDEN,
                format!("not signed by the log's key: {e}"),
            )
        })?;
        if s.old > size {
            return Err(refuse(
                StatusCode::BAD_REQUEST,
                format!("old size {} is larger than the checkpoint's {size}", s.old),
            ));
        }
        let _held = self.lock.lock().unwrap_or_else(|e| e.into_inner());
        let kept = self
            .kept(&origin)
            .map_err(|e| refuse(StatusCode::INTERNAL_SERVER_ERROR, e))?;
        let (kept_size, kept_root) = kept.as_ref().map_or((0, EMPTY_HASH.0), |k| (k.0, k.1));
        if s.old != kept_size {
            return Err((StatusCode::CONFLICT, format!("{kept_size}\n")));
        }
        let unprocessable = |why: &str| refuse(StatusCode::UNPROCESSABLE_ENTITY, why);
        if size == 0 && root != EMPTY_HASH.0 {
            return Err(unprocessable(
                "a checkpoint of size 0 must have the empty tree's root",
            ));
        }
        if s.old == 0 {
            if !s.proof.is_empty() {
                return Err(unprocessable(
                    "a consistency proof from size 0 must be empty",
                ));
            }
        } else if s.old == size {
            if root != kept_root {
                return Err(unprocessable(
                    "the checkpoint's root is not the one cosigned at its size",
                ));
            }
        } else if check_tree(&s.proof, size, Hash(root), s.old, Hash(kept_root)).is_err() {
            return Err(unprocessable("the consistency proof does not verify"));
        }
        let line = self.key.cosign(note.text(), now);
        // Kept and served: the text, the log's signatures that verified,
        // and this cosignature; nothing else the submission carried.
        let mut kept_note = Note::new(note.text(), &verified)
            .map(|n| String::from_utf8_lossy(&n.to_bytes()).into_owned())
            .map_err(|e| refuse(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()))?;
        kept_note.push_str(&line);
        let file = self.file(&origin);
        crate::note::keep(&file, &kept_note).map_err(|e| {
            refuse(
                StatusCode::INTERNAL_SERVER_ERROR,
                format!("keeping {}: {e}", file.display()),
            )
        })?;
        tracing::info!(%origin, size, "cosigned");
        Ok(line)
    }
}

fn text(status: StatusCode, content_type: &'static str, body: String) -> Response {
    (status, [(header::CONTENT_TYPE, content_type)], body).into_response()
}

async fn add_checkpoint(State(w): State<Arc<Witness>>, body: Bytes) -> Response {
    if body.len() > MAX_BODY {
        return text(
            StatusCode::PAYLOAD_TOO_LARGE,
            "text/plain; charset=utf-8",
            "too large\n".into(),
        );
    }
    let now = chrono::Utc::now().timestamp().max(1) as u64;
    let answer = tokio::task::spawn_blocking(move || w.add_checkpoint(&body, now)).await;
    match answer {
        Ok(Ok(line)) => text(StatusCode::OK, "text/plain; charset=utf-8", line),
        Ok(Err((StatusCode::CONFLICT, size))) => {
            text(StatusCode::CONFLICT, "text/x.tlog.size", size)
        }
        Ok(Err((status, why))) => {
            tracing::info!(%status, %why, "refused a checkpoint");
            text(status, "text/plain; charset=utf-8", format!("{why}\n"))
        }
        Err(e) => text(
            StatusCode::INTERNAL_SERVER_ERROR,
            "text/plain; charset=utf-8",
            format!("{e}\n"),
        ),
    }
}

async fn checkpoint(
    State(w): State<Arc<Witness>>,
    axum::extract::Path(hash): axum::extract::Path<String>,
) -> Response {
    let origin = w.logs.keys().find(|o| origin_hash(o) == hash).cloned();
    let kept = origin.map(|o| w.kept(&o));
    match kept {
        Some(Ok(Some((_, _, note)))) => text(StatusCode::OK, "text/plain; charset=utf-8", note),
        Some(Err(e)) => text(
            StatusCode::INTERNAL_SERVER_ERROR,
            "text/plain; charset=utf-8",
            format!("{e}\n"),
        ),
        _ => text(
            StatusCode::NOT_FOUND,
            "text/plain; charset=utf-8",
            "no checkpoint cosigned for that log\n".into(),
        ),
    }
}

/// The witness's routes: `POST /add-checkpoint` and `GET /<origin
/// hash>/checkpoint`, under the prefix the URL it is given names.
pub fn router(w: Arc<Witness>) -> axum::Router {
    axum::Router::new()
        .route("/add-checkpoint", axum::routing::post(add_checkpoint))
        .route("/{hash}/checkpoint", axum::routing::get(checkpoint))
        .with_state(w)
}

/// A `--log-key`: `VKEY` (a file or the key itself; the log's origin is
/// the key's name) or `ORIGIN=VKEY` for a log whose origin is another.
pub fn log_key(text: &str) -> anyhow::Result<(String, StandardVerifier)> {
    // A key's name has no `+` and its base64 may end in `=`: an `=` before
    // the first `+` is the origin's.
    let split = text
        .find('=')
        .filter(|i| text.find('+').is_none_or(|p| *i < p));
    let (origin, key) = match split {
        Some(i) => (Some(&text[..i]), &text[i + 1..]),
        None => (None, text),
    };
    let v = crate::note::verifier(key).map_err(|e| anyhow::anyhow!("--log-key {e}"))?;
    let origin = origin.map_or_else(|| signed_note::Verifier::name(&v).to_owned(), str::to_owned);
    if origin.is_empty() || origin.contains('\n') {
        anyhow::bail!("--log-key {text}: the origin must be one non-empty line");
    }
    Ok((origin, v))
}

/// `stratum witness serve`: serves until SIGTERM or Ctrl-C.
pub async fn run(
    listen: &str,
    key: &Path,
    state: PathBuf,
    log_keys: &[String],
) -> anyhow::Result<i32> {
    let text = std::fs::read_to_string(key)
        .map_err(|e| anyhow::anyhow!("--key {}: {e}", key.display()))?;
    let cosigner =
        Cosigner::from_text(&text).map_err(|e| anyhow::anyhow!("--key {}: {e}", key.display()))?;
    if log_keys.is_empty() {
        anyhow::bail!("--log-key: name at least one log to witness");
    }
    let logs = log_keys
        .iter()
        .map(|k| log_key(k))
        .collect::<anyhow::Result<Vec<_>>>()?;
    let vkey = cosigner.verifier_key();
    let w = Arc::new(Witness::new(cosigner, logs, state)?);
    for h in w.holds() {
        tracing::info!(log = %h, "witnessing");
    }
    let listener = tokio::net::TcpListener::bind(listen)
        .await
        .map_err(|e| anyhow::anyhow!("--listen {listen}: {e}"))?;
    tracing::info!(addr = %listener.local_addr()?, %vkey, logs = w.logs.len(), "witness listening");
    axum::serve(listener, router(w))
        .with_graceful_shutdown(async {
            let mut term =
                tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
                    .expect("a SIGTERM handler");
            tokio::select! {
                _ = term.recv() => {}
                _ = tokio::signal::ctrl_c() => {}
            }
        })
        .await?;
    Ok(0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use signed_note::StandardSigner;
    use stratum_domain::tree::{prove_tree, stored_hashes, tree_hash, HashReader, TreeError};

    /// A log in memory: its stored hashes, as Go's tlog keeps them.
    struct Mem(Vec<Hash>);

    impl HashReader for Mem {
        fn read_hashes(&self, indexes: &[u64]) -> Result<Vec<Hash>, TreeError> {
            Ok(indexes.iter().map(|i| self.0[*i as usize]).collect())
        }
    }

    thread_local! {
        /// The logs' keys made on this thread: (verifier, private).
        static KEYS: std::cell::RefCell<Vec<(String, String)>> = const { std::cell::RefCell::new(Vec::new()) };
    }

    /// A log of `n` records, signed with a key named `origin`: each
    /// size's signed checkpoint, and the tree to prove from.
    fn log(origin: &str, n: u64) -> (Vec<String>, Mem, String) {
        let (private, public) = signed_note::generate_key(&mut rand::rngs::OsRng, origin);
        KEYS.with(|k| k.borrow_mut().push((public.clone(), private.clone())));
        let signer = StandardSigner::new(&private).unwrap();
        let mut mem = Mem(Vec::new());
        let mut notes = vec![String::new()];
        for i in 0..n {
            let more = stored_hashes(i, &i.to_be_bytes(), &mem).unwrap();
            mem.0.extend(more);
            let root = tree_hash(i + 1, &mem).unwrap();
            let text = stratum_domain::tree::checkpoint_text(origin, i + 1, &root.0).unwrap();
            let mut note = Note::new(text.as_bytes(), &[]).unwrap();
            note.add_sigs(&[&signer]).unwrap();
            notes.push(String::from_utf8(note.to_bytes()).unwrap());
        }
        (notes, mem, public)
    }

    fn body(old: u64, size: u64, notes: &[String], mem: &Mem) -> String {
        let mut b = format!("old {old}\n");
        if old > 0 && old < size {
            for h in prove_tree(size, old, mem).unwrap() {
                b.push_str(&BASE64_STANDARD.encode(h.0));
                b.push('\n');
            }
        }
        b.push('\n');
        b.push_str(&notes[size as usize]);
        b
    }

    fn witness(dir: &Path, public: &str) -> Witness {
        let (private, _) = Cosigner::generate("w.test/w").unwrap();
        let key = Cosigner::from_text(&private).unwrap();
        let log = StandardVerifier::new(public).unwrap();
        let origin = signed_note::Verifier::name(&log).to_owned();
        Witness::new(key, vec![(origin, log)], dir.to_owned()).unwrap()
    }

    #[test]
    fn the_spec_s_answers() {
        let dir = tempfile::tempdir().unwrap();
        let (notes, mem, public) = log("example.test/log", 20);
        let w = witness(dir.path(), &public);
        let status = |r: Result<String, Refused>| r.map(|_| StatusCode::OK).unwrap_or_else(|e| e.0);
        assert_eq!(
            status(w.add_checkpoint(body(0, 5, &notes, &mem).as_bytes(), 7)),
            StatusCode::OK
        );
        // A wrong old size: 409 and the size held.
        let r = w.add_checkpoint(body(3, 9, &notes, &mem).as_bytes(), 7);
        assert_eq!(r.unwrap_err(), (StatusCode::CONFLICT, "5\n".to_owned()));
        assert_eq!(
            status(w.add_checkpoint(body(5, 9, &notes, &mem).as_bytes(), 7)),
            StatusCode::OK
        );
        // The same size again, the same root: cosigned again.
        assert_eq!(
            status(w.add_checkpoint(body(9, 9, &notes, &mem).as_bytes(), 8)),
            StatusCode::OK
        );
        // A proof from another size: 422; the right one: cosigned.
        let proof_of_8 = body(8, 12, &notes, &mem);
        let swapped = format!("old 9{}", &proof_of_8["old 8".len()..]);
        assert_eq!(
            status(w.add_checkpoint(swapped.as_bytes(), 8)),
            StatusCode::UNPROCESSABLE_ENTITY
        );
        assert_eq!(
            status(w.add_checkpoint(body(9, 12, &notes, &mem).as_bytes(), 8)),
            StatusCode::OK
        );
        // Old larger than the checkpoint: 400; an unknown origin: 404;
        // another key: 403.
        assert_eq!(
            status(w.add_checkpoint(body(12, 3, &notes, &mem).as_bytes(), 8)),
            StatusCode::BAD_REQUEST
        );
        let (other, other_mem, _) = log("elsewhere.test/log", 3);
        assert_eq!(
            status(w.add_checkpoint(body(0, 3, &other, &other_mem).as_bytes(), 8)),
            StatusCode::NOT_FOUND
        );
        let (forged, forged_mem, _) = log("example.test/log", 13);
        assert_eq!(
            status(w.add_checkpoint(body(12, 13, &forged, &forged_mem).as_bytes(), 8)),
            StatusCode::FORBIDDEN
        );
        // Old 0 with a proof: 409 where it holds another size (the size
        // is checked first), 422 where it holds none.
        let with_proof = format!("old 0\n{}", &body(5, 13, &notes, &mem)["old 5\n".len()..]);
        assert_eq!(
            status(w.add_checkpoint(with_proof.as_bytes(), 8)),
            StatusCode::CONFLICT
        );
        let fresh_dir = tempfile::tempdir().unwrap();
        let fresh = witness(fresh_dir.path(), &public);
        assert_eq!(
            status(fresh.add_checkpoint(with_proof.as_bytes(), 8)),
            StatusCode::UNPROCESSABLE_ENTITY
        );
        assert_eq!(w.kept("example.test/log").unwrap().unwrap().0, 12);
    }

    #[test]
    fn concurrent_submissions_never_roll_the_size_back() {
        // The spec's race: two submissions checked against the same old
        // size, the larger written first, then the smaller over it.
        let dir = tempfile::tempdir().unwrap();
        let (notes, mem, public) = log("example.test/log", 64);
        let w = Arc::new(witness(dir.path(), &public));
        let (notes, mem) = (Arc::new(notes), Arc::new(mem));
        // The largest size cosigned so far: no answer may say less.
        let largest_so_far = Arc::new(std::sync::atomic::AtomicU64::new(0));
        let threads: Vec<_> = (0..8u64)
            .map(|t| {
                let (w, notes, mem) = (w.clone(), notes.clone(), mem.clone());
                let largest_so_far = largest_so_far.clone();
                std::thread::spawn(move || {
                    use std::sync::atomic::Ordering::SeqCst;
                    let mut cosigned = Vec::new();
                    for round in 0..40u64 {
                        let size = 1 + (t * 7 + round * 13) % 64;
                        let floor = largest_so_far.load(SeqCst);
                        let held = match w.add_checkpoint(body(0, size, &notes, &mem).as_bytes(), 1)
                        {
                            Ok(_) => {
                                largest_so_far.fetch_max(size, SeqCst);
                                cosigned.push(size);
                                continue;
                            }
                            Err((StatusCode::CONFLICT, s)) => s.trim().parse::<u64>().unwrap(),
                            Err(e) => panic!("{e:?}"),
                        };
                        assert!(held >= floor, "it holds {held} after cosigning {floor}");
                        if held <= size
                            && w.add_checkpoint(body(held, size, &notes, &mem).as_bytes(), 1)
                                .is_ok()
                        {
                            largest_so_far.fetch_max(size, SeqCst);
                            cosigned.push(size);
                        }
                    }
                    cosigned
                })
            })
            .collect();
        let largest = threads
            .into_iter()
            .flat_map(|t| t.join().unwrap())
            .max()
            .unwrap();
        assert_eq!(w.kept("example.test/log").unwrap().unwrap().0, largest);
    }

    #[test]
    fn malformed_submissions_are_refused_as_the_spec_says() {
        let dir = tempfile::tempdir().unwrap();
        let (notes, _, public) = log("example.test/log", 4);
        let w = witness(dir.path(), &public);
        let code = |b: &str| w.add_checkpoint(b.as_bytes(), 1).err().map(|e| e.0);
        // Size 0 with a root that is not the empty tree's: 422.
        let private = log_private(&public);
        let zero = signed("example.test/log", 0, &[7; 32], &private);
        assert_eq!(
            code(&format!("old 0\n\n{zero}")),
            Some(StatusCode::UNPROCESSABLE_ENTITY)
        );
        let empty = signed("example.test/log", 0, &EMPTY_HASH.0, &private);
        assert_eq!(code(&format!("old 0\n\n{empty}")), None);
        // More than 63 proof lines: 400.
        let many = format!(
            "old 0\n{}\n{}",
            "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=\n".repeat(64),
            notes[3]
        );
        assert_eq!(code(&many), Some(StatusCode::BAD_REQUEST));
        // A signature line in the log key's name and id that does not
        // verify: 403.
        let mut forged: Vec<&str> = notes[3].lines().collect();
        let last = forged.pop().unwrap();
        let bad_line = format!("{}AAAA", &last[..last.len() - 4]);
        let bad = format!("{}\n{bad_line}\n", forged.join("\n"));
        assert_eq!(
            code(&format!("old 0\n\n{bad}")),
            Some(StatusCode::FORBIDDEN)
        );
        // What it keeps carries only the log's verified signature and its own.
        let extra = format!(
            "{}— someone.else/w AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=\n",
            notes[3]
        );
        assert_eq!(code(&format!("old 0\n\n{extra}")), None);
        let kept = w.kept("example.test/log").unwrap().unwrap().2;
        assert!(!kept.contains("someone.else"), "{kept}");
        assert_eq!(kept.matches("\n— ").count(), 2, "{kept}");
    }

    /// The private key of the log whose verifier key is `public`, from
    /// the keys [`log`] made.
    fn log_private(public: &str) -> String {
        KEYS.with(|k| {
            k.borrow()
                .iter()
                .find(|(p, _)| p == public)
                .unwrap()
                .1
                .clone()
        })
    }

    fn signed(origin: &str, size: u64, root: &[u8; 32], private: &str) -> String {
        let text = stratum_domain::tree::checkpoint_text(origin, size, root).unwrap();
        let mut note = Note::new(text.as_bytes(), &[]).unwrap();
        note.add_sigs(&[&StandardSigner::new(private).unwrap()])
            .unwrap();
        String::from_utf8(note.to_bytes()).unwrap()
    }

    #[test]
    fn a_log_key_names_its_origin_or_takes_the_key_s_name() {
        let (_, public) = signed_note::generate_key(&mut rand::rngs::OsRng, "sum.golang.org");
        let (origin, _) = log_key(&public).unwrap();
        assert_eq!(origin, "sum.golang.org");
        let (origin, _) = log_key(&format!("go.sum database tree={public}")).unwrap();
        assert_eq!(origin, "go.sum database tree");
        assert!(log_key(&format!("={public}")).is_err());
    }

    #[test]
    fn a_submission_is_read_as_the_spec_writes_it() {
        let body = "old 3\nPlRNCrwHpqhGrupue0L7gxbjbMiKA9temvuZZDDpkaw=\n\nexample.com/log\n5\nAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=\n\n— example.com/log AAAA\n";
        let s = parse(body.as_bytes()).unwrap();
        assert_eq!((s.old, s.proof.len()), (3, 1));
        assert!(s.note.starts_with("example.com/log\n5\n"));
        for bad in [
            "old 03\n\nx",
            "old -1\n\nx",
            "new 1\n\nx",
            "old 1\nnot base64\n\nx",
            "old 1\n",
        ] {
            assert_eq!(
                parse(bad.as_bytes()).err().map(|e| e.0),
                Some(StatusCode::BAD_REQUEST),
                "{bad:?}"
            );
        }
    }
}
