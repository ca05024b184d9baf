//! A witness policy: which witnesses a log asks for cosignatures and how
//! many an auditor requires, in the line form C2SP clients use:
//!
//! ```text
//! # comments and blank lines are ignored
//! witness NAME VKEY [URL]
//! quorum K
//! ```
//!
//! `NAME` is the policy's own label for the witness (in messages and
//! metrics); `VKEY` its `cosignature/v1` verifier key; `URL` its
//! submission prefix (the log POSTs `URL/add-checkpoint`), which the log
//! needs and an auditor does not.

use std::path::Path;

use signed_note::Note;

use super::{signed_by, CosignatureVerifier};

/// One witness of a policy.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Witness {
    pub name: String,
    pub verifier: CosignatureVerifier,
    pub url: Option<url::Url>,
}

/// The witnesses and the quorum.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Policy {
    pub witnesses: Vec<Witness>,
    pub quorum: usize,
}

/// What each witness of a policy said of a checkpoint.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Cosigned {
    /// The witnesses whose valid cosignature it carries.
    pub signed: Vec<String>,
    /// Those whose key made no signature on it.
    pub missing: Vec<String>,
    /// Those whose key's signature on it does not verify.
    pub invalid: Vec<String>,
}

impl Policy {
    /// Reads a policy file; errors name the file and the line.
    pub fn load(path: &Path) -> anyhow::Result<Self> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| anyhow::anyhow!("witness policy {}: {e}", path.display()))?;
        Self::parse(&text).map_err(|e| anyhow::anyhow!("witness policy {}: {e}", path.display()))
    }

    pub fn parse(text: &str) -> Result<Self, String> {
        let mut witnesses: Vec<Witness> = Vec::new();
        let mut quorum = None;
        for (i, line) in text.lines().enumerate() {
            let at = |e: String| format!("line {}: {e}", i + 1);
            let line = line.split('#').next().unwrap_or("").trim();
            let words: Vec<&str> = line.split_whitespace().collect();
            match words.as_slice() {
                [] => {}
                ["witness", name, vkey, rest @ ..] if rest.len() <= 1 => {
                    if witnesses.iter().any(|w| w.name == *name) {
                        return Err(at(format!("the witness {name} is named twice")));
                    }
                    let verifier = CosignatureVerifier::new(vkey)
                        .map_err(|e| at(format!("the witness {name}'s key: {e}")))?;
                    // A cosignature/v1 does not sign the cosigner's name:
                    // one key under two names would count twice.
                    if witnesses.iter().any(|w| w.verifier.key() == verifier.key()) {
                        return Err(at(format!("the witness {name}'s key is another's too")));
                    }
                    let url = match rest.first() {
                        None => None,
                        Some(u) => {
                            let url = url::Url::parse(u)
                                .ok()
                                .filter(|u| matches!(u.scheme(), "http" | "https"))
                                .ok_or_else(|| {
                                    at(format!("the witness {name}'s URL {u:?} is not http(s)"))
                                })?;
                            // A prefix the service appends to, and logs.
                            if !url.username().is_empty()
                                || url.password().is_some()
                                || url.query().is_some()
                                || url.fragment().is_some()
                            {
                                return Err(at(format!(
                                    "the witness {name}'s URL must be a plain prefix: no user, \
                                     password, query or fragment"
                                )));
                            }
                            Some(url)
                        }
                    };
                    witnesses.push(Witness {
                        name: (*name).to_owned(),
                        verifier,
                        url,
                    });
                }
                ["quorum", k] => {
                    if quorum.is_some() {
                        return Err(at("a second quorum line".into()));
                    }
                    let k: usize = k
                        .parse()
                        .map_err(|_| at(format!("quorum {k:?} is not a number")))?;
                    quorum = Some(k);
                }
                _ => {
                    return Err(at(format!(
                        "{line:?} is neither `witness NAME VKEY [URL]` nor `quorum K`"
                    )))
                }
            }
        }
        let quorum = quorum.ok_or("no `quorum K` line")?;
        if quorum == 0 || quorum > witnesses.len() {
            return Err(format!(
                "quorum {quorum} of {} witnesses: it must be from 1 to the number of witnesses",
                witnesses.len()
            ));
        }
        Ok(Self { witnesses, quorum })
    }

    /// What each witness said of a signed checkpoint note.
    pub fn cosigned(&self, note: &str) -> Result<Cosigned, String> {
        let note =
            Note::from_bytes(note.as_bytes()).map_err(|e| format!("not a signed note: {e}"))?;
        let mut c = Cosigned::default();
        for w in &self.witnesses {
            match signed_by(&note, &w.verifier) {
                Ok(true) => c.signed.push(w.name.clone()),
                Ok(false) => c.missing.push(w.name.clone()),
                Err(_) => c.invalid.push(w.name.clone()),
            }
        }
        Ok(c)
    }

    /// Checks a checkpoint note carries the quorum: answers the witnesses
    /// that cosigned it, or says which did and which did not.
    pub fn require(&self, note: &str) -> Result<Vec<String>, String> {
        let c = self.cosigned(note)?;
        // A signature by a known key that does not verify makes the note
        // malformed (C2SP signed-note): refused whatever else it carries.
        if c.signed.len() >= self.quorum && c.invalid.is_empty() {
            return Ok(c.signed);
        }
        let list = |v: &[String]| {
            if v.is_empty() {
                "none".to_owned()
            } else {
                v.join(", ")
            }
        };
        let mut why = format!(
            "the checkpoint is cosigned by {} of the {} witnesses the policy requires \
             (signed: {}; not signed: {}",
            c.signed.len(),
            self.quorum,
            list(&c.signed),
            list(&c.missing),
        );
        if !c.invalid.is_empty() {
            why.push_str(&format!(
                "; signatures that do not verify: {}",
                c.invalid.join(", ")
            ));
        }
        why.push(')');
        Err(why)
    }
}

#[cfg(test)]
mod tests {
    use super::super::Cosigner;
    use super::*;

    fn keys(n: usize) -> Vec<(Cosigner, String)> {
        (0..n)
            .map(|i| {
                let (private, public) = Cosigner::generate(&format!("w{i}.example/w")).unwrap();
                (Cosigner::from_text(&private).unwrap(), public)
            })
            .collect()
    }

    #[test]
    fn a_policy_reads_its_lines_and_refuses_what_is_not_one() {
        let k = keys(2);
        let text = format!(
            "# witnesses\nwitness a {} http://127.0.0.1:1/w\n\nwitness b {}  # no URL\nquorum 2\n",
            k[0].1, k[1].1
        );
        let p = Policy::parse(&text).unwrap();
        assert_eq!(p.quorum, 2);
        assert_eq!(
            p.witnesses[0].url.as_ref().unwrap().as_str(),
            "http://127.0.0.1:1/w"
        );
        assert_eq!(p.witnesses[1].url, None);
        for (bad, says) in [
            (format!("witness a {}\nquorum 2", k[0].1), "quorum 2 of 1"),
            (format!("witness a {}\n", k[0].1), "no `quorum K`"),
            (
                format!("witness a {}\nwitness a {}\nquorum 1", k[0].1, k[1].1),
                "line 2: the witness a is named twice",
            ),
            (
                format!("witness a {}\nwitness b {}\nquorum 1", k[0].1, k[0].1),
                "another's too",
            ),
            (
                format!("witness a {} ftp://x\nquorum 1", k[0].1),
                "not http(s)",
            ),
            (
                format!("witness a {} http://u:p@x/\nquorum 1", k[0].1),
                "a plain prefix",
            ),
            (
                format!("witness a {} http://x/?k=v\nquorum 1", k[0].1),
                "a plain prefix",
            ),
            (
                {
                    let b64 = k[0].1.splitn(3, '+').nth(2).unwrap();
                    use base64::Engine as _;
                    let other_name = "z.example/w";
                    let mut enc = vec![0x04u8];
                    enc.extend_from_slice(
                        &base64::prelude::BASE64_STANDARD.decode(b64).unwrap()[1..],
                    );
                    let id = signed_note::key_id(other_name, &enc);
                    format!(
                        "witness a {}\nwitness z {other_name}+{id:08x}+{b64}\nquorum 1",
                        k[0].1
                    )
                },
                "line 2: the witness z's key is another's too",
            ),
            (
                "witness a b+00000000+AAAA\nquorum 1".to_owned(),
                "line 1: the witness a's key",
            ),
            ("quorum one".to_owned(), "not a number"),
            ("witnesses a\n".to_owned(), "neither"),
        ] {
            let e = Policy::parse(&bad).unwrap_err();
            assert!(e.contains(says), "{bad:?}: {e}");
        }
    }

    #[test]
    fn a_quorum_counts_valid_cosignatures_and_names_who_signed() {
        let k = keys(3);
        let text = format!(
            "witness a {}\nwitness b {}\nwitness c {}\nquorum 2\n",
            k[0].1, k[1].1, k[2].1
        );
        let p = Policy::parse(&text).unwrap();
        let body = "example.com/log\n5\nAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=\n";
        let (log_private, _) = signed_note::generate_key(&mut rand::rngs::OsRng, "example.com/log");
        let signer = signed_note::StandardSigner::new(&log_private).unwrap();
        let mut n = Note::new(body.as_bytes(), &[]).unwrap();
        n.add_sigs(&[&signer]).unwrap();
        let note = String::from_utf8(n.to_bytes()).unwrap();
        let e = p.require(&note).unwrap_err();
        assert!(
            e.contains("0 of the 2") && e.contains("not signed: a, b, c"),
            "{e}"
        );
        let one = format!("{note}{}", k[0].0.cosign(body.as_bytes(), 1));
        let e = p.require(&one).unwrap_err();
        assert!(
            e.contains("signed: a;") && e.contains("not signed: b, c"),
            "{e}"
        );
        let two = format!("{one}{}", k[2].0.cosign(body.as_bytes(), 2));
        assert_eq!(p.require(&two).unwrap(), ["a", "c"]);
        // b's key over another checkpoint's text does not count.
        let other = k[1].0.cosign(
            b"example.com/log\n6\nAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=\n",
            3,
        );
        let c = p.cosigned(&format!("{one}{other}")).unwrap();
        assert_eq!(c.invalid, ["b"]);
        let e = p.require(&format!("{one}{other}")).unwrap_err();
        assert!(e.contains("do not verify: b"), "{e}");
    }
}
