//! Witnessed checkpoints (C2SP tlog-witness, tlog-cosignature).
//!
//! A witness is an independent party that cosigns a checkpoint only if it
//! is consistent with every checkpoint of the same log it cosigned before.
//! An auditor that requires a quorum of witnesses' cosignatures cannot be
//! shown a log that forks from the one the witnesses saw (a split view),
//! even by the log's own operators.
//!
//! - [`Cosigner`] and [`CosignatureVerifier`]: Ed25519 `cosignature/v1`
//!   keys in the signed-note formats (verifier key type 0x04);
//! - [`policy`]: which witnesses a log asks and an auditor requires
//!   (`witness NAME VKEY [URL]`, `quorum K`);
//! - [`serve`]: `stratum witness serve`, the witness side for any C2SP log;
//! - [`submit`]: the log's side, which asks the witnesses after each
//!   signed checkpoint and serves what they cosigned.

pub mod policy;
pub mod serve;
pub mod submit;

use base64::prelude::{Engine as _, BASE64_STANDARD};
use ed25519_dalek::{Signer as _, SigningKey, VerifyingKey};
use signed_note::{Note, Signature, Verifier, VerifierList};

pub use policy::Policy;

/// The signature type of a `cosignature/v1` verifier key.
pub const COSIGNATURE_V1: u8 = 0x04;

/// The message a `cosignature/v1` signs: its header, the time, and the
/// checkpoint's note text (with its final newline).
pub fn cosigned_message(text: &[u8], time: u64) -> Vec<u8> {
    let mut m = format!("cosignature/v1\ntime {time}\n").into_bytes();
    m.extend_from_slice(text);
    m
}

/// A witness's signing key.
pub struct Cosigner {
    name: String,
    id: u32,
    key: SigningKey,
}

impl std::fmt::Debug for Cosigner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Cosigner")
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
}

fn key_id(name: &str, public: &[u8; 32]) -> u32 {
    let mut encoded = vec![COSIGNATURE_V1];
    encoded.extend_from_slice(public);
    signed_note::key_id(name, &encoded)
}

fn encoded(key: &[u8; 32]) -> String {
    let mut bytes = vec![COSIGNATURE_V1];
    bytes.extend_from_slice(key);
    BASE64_STANDARD.encode(bytes)
}

/// Splits `<name>+<hex id>+<base64(0x04 || key)>`.
fn split_key(text: &str) -> Result<(String, u32, [u8; 32]), String> {
    // A name has no `+`; base64 may.
    let mut parts = text.trim().splitn(3, '+');
    let (Some(name), Some(hex_id), Some(b64)) = (parts.next(), parts.next(), parts.next()) else {
        return Err("not <name>+<hash>+<base64>".into());
    };
    if !crate::note::valid_name(name) {
        return Err(format!("{name:?} cannot be a key name"));
    }
    let bytes = BASE64_STANDARD
        .decode(b64)
        .map_err(|_| "its key is not base64".to_owned())?;
    let (&kind, key) = bytes.split_first().ok_or("its key is empty")?;
    if kind != COSIGNATURE_V1 {
        return Err(format!(
            "its key is of type 0x{kind:02x}, not a cosignature/v1 key (0x04)"
        ));
    }
    let key: [u8; 32] = key
        .try_into()
        .map_err(|_| "its key is not 32 bytes".to_owned())?;
    let id = u32::from_str_radix(hex_id, 16)
        .ok()
        .filter(|_| hex_id.len() == 8)
        .ok_or("its hash is not 8 hex digits")?;
    Ok((name.to_owned(), id, key))
}

impl Cosigner {
    /// A new key pair named `name`: the private key's text and the
    /// verifier key's.
    pub fn generate(name: &str) -> Result<(String, String), String> {
        if !crate::note::valid_name(name) {
            return Err(format!(
                "{name:?} cannot be a key name: no space, no `+`, not empty"
            ));
        }
        let key = SigningKey::generate(&mut rand::rngs::OsRng);
        let public = key.verifying_key().to_bytes();
        let id = key_id(name, &public);
        let private = format!("PRIVATE+KEY+{name}+{id:08x}+{}", encoded(&key.to_bytes()));
        Ok((private, format!("{name}+{id:08x}+{}", encoded(&public))))
    }

    /// Reads `PRIVATE+KEY+<name>+<hash>+<base64(0x04 || seed)>`.
    pub fn from_text(text: &str) -> Result<Self, String> {
        let rest = text
            .trim()
            .strip_prefix("PRIVATE+KEY+")
            .ok_or("not a witness private key (PRIVATE+KEY+<name>+<hash>+<base64>)")?;
        let (name, id, seed) = split_key(rest)?;
        let key = SigningKey::from_bytes(&seed);
        if id != key_id(&name, &key.verifying_key().to_bytes()) {
            return Err("its hash is not that of its name and public key".into());
        }
        Ok(Self { name, id, key })
    }

    /// The verifier key auditors and logs are given.
    pub fn verifier_key(&self) -> String {
        let public = self.key.verifying_key().to_bytes();
        format!("{}+{:08x}+{}", self.name, self.id, encoded(&public))
    }

    /// The cosignature line (`— <name> <base64>` and a newline) over a
    /// checkpoint's note text, at `time` (seconds since the epoch).
    pub fn cosign(&self, text: &[u8], time: u64) -> String {
        let sig = self.key.sign(&cosigned_message(text, time));
        let mut bytes = time.to_be_bytes().to_vec();
        bytes.extend_from_slice(&sig.to_bytes());
        let line = Signature::new(self.name.clone(), self.id, bytes)
            .expect("a valid name")
            .to_bytes();
        String::from_utf8(line).expect("a note signature line is text")
    }
}

/// A witness's verifier key: checks its `cosignature/v1` signatures.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CosignatureVerifier {
    name: String,
    id: u32,
    key: [u8; 32],
}

impl CosignatureVerifier {
    /// Reads `<name>+<hash>+<base64(0x04 || key)>`.
    pub fn new(text: &str) -> Result<Self, String> {
        let (name, id, key) = split_key(text)?;
        if id != key_id(&name, &key) {
            return Err("its hash is not that of its name and key".into());
        }
        VerifyingKey::from_bytes(&key).map_err(|_| "its key is not an Ed25519 key")?;
        Ok(Self { name, id, key })
    }

    /// What a cosignature by this key says: when it was made, if it is
    /// this key's and valid over `text`.
    pub fn check(&self, text: &[u8], sig: &[u8]) -> Option<u64> {
        let (time, sig) = sig.split_at_checked(8)?;
        let time = u64::from_be_bytes(time.try_into().ok()?);
        // A witness's cosignature must carry its time (C2SP tlog-witness).
        if time == 0 || time > i64::MAX as u64 {
            return None;
        }
        let sig = ed25519_dalek::Signature::from_slice(sig).ok()?;
        let key = VerifyingKey::from_bytes(&self.key).ok()?;
        key.verify_strict(&cosigned_message(text, time), &sig)
            .ok()
            .map(|()| time)
    }

    /// The Ed25519 public key.
    pub fn key(&self) -> &[u8; 32] {
        &self.key
    }
}

impl Verifier for CosignatureVerifier {
    fn name(&self) -> &str {
        &self.name
    }

    fn key_id(&self) -> u32 {
        self.id
    }

    fn verify(&self, msg: &[u8], sig: &[u8]) -> bool {
        self.check(msg, sig).is_some()
    }
}

/// Whether a checkpoint note carries a valid signature by `verifier`.
/// `Err` names a signature by its key that does not verify.
pub fn signed_by(note: &Note, verifier: &CosignatureVerifier) -> Result<bool, String> {
    match note.verify(&VerifierList::new(vec![Box::new(verifier.clone())])) {
        Ok(_) => Ok(true),
        Err(signed_note::NoteError::UnverifiedNote) => Ok(false),
        Err(e) => Err(e.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cosignature_verifies_with_its_key_only_over_its_text() {
        let (private, public) = Cosigner::generate("witness.example/w1").unwrap();
        let signer = Cosigner::from_text(&private).unwrap();
        assert_eq!(signer.verifier_key(), public);
        let verifier = CosignatureVerifier::new(&public).unwrap();
        let text = b"example.com/log\n3\nAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=\n";
        let line = signer.cosign(text, 1_679_315_147);
        let note_text = format!("{}\n{line}", std::str::from_utf8(text).unwrap());
        let note = Note::from_bytes(note_text.as_bytes()).unwrap();
        assert_eq!(signed_by(&note, &verifier), Ok(true));
        // Another text, the same signature line: refused.
        let other = format!("example.com/log\n4\n{}\n\n{line}", "A".repeat(43) + "=");
        let note = Note::from_bytes(other.as_bytes()).unwrap();
        assert!(signed_by(&note, &verifier).is_err());
        // Another witness's key does not count it.
        let (_, stranger) = Cosigner::generate("witness.example/w2").unwrap();
        let stranger = CosignatureVerifier::new(&stranger).unwrap();
        let note = Note::from_bytes(note_text.as_bytes()).unwrap();
        assert_eq!(signed_by(&note, &stranger), Ok(false));
    }

    #[test]
    fn keys_of_another_kind_or_with_a_wrong_hash_are_refused() {
        let (_, public) = Cosigner::generate("w").unwrap();
        let (name, hash, b64) = {
            let mut p = public.splitn(3, '+');
            (p.next().unwrap(), p.next().unwrap(), p.next().unwrap())
        };
        assert!(CosignatureVerifier::new(&format!("{name}+00000000+{b64}")).is_err());
        let (_, note_key) = signed_note::generate_key(&mut rand::rngs::OsRng, "w");
        let e = CosignatureVerifier::new(&note_key).unwrap_err();
        assert!(e.contains("0x01"), "{e}");
        assert!(CosignatureVerifier::new(&format!("{name}+{hash}+!!")).is_err());
    }

    #[test]
    fn the_message_is_the_spec_s_example() {
        // C2SP tlog-cosignature, "Ed25519 signed message".
        let text = b"example.com/behind-the-sofa\n20852163\nCsUYapGGPo4dkMgIAUqom/Xajj7h2fB2MPA3j2jxq2I=\n";
        assert_eq!(
            cosigned_message(text, 1_679_315_147),
            b"cosignature/v1\ntime 1679315147\nexample.com/behind-the-sofa\n20852163\nCsUYapGGPo4dkMgIAUqom/Xajj7h2fB2MPA3j2jxq2I=\n"
        );
    }
}
