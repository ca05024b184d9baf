//! Releases (SPEC §5): signed manifests of what a cluster runs, the
//! component comparison an upgrade plan is made of, and the signature check.
//!
//! A manifest is kept in the log as its canonical JSON text (RFC 8785), the
//! very bytes its signature covers, so an auditor can check the signature of
//! any recorded release again.

use std::cmp::Ordering;
use std::collections::BTreeMap;

use base64::Engine;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::error::{FieldError, Findings};

string_enum! {
    /// What a pinned component is.
    pub enum ComponentKind {
        Image = "image",
        Package = "package",
    }
}

/// One pinned component: a container image `{kind: "image", name,
/// version, digest}` or a host package `{kind: "package", name, epoch,
/// version, release, arch}`. One flat shape (not a tagged enum) so the
/// state's compact binary snapshots can hold it; [`parse_manifest`] checks
/// that each kind has its fields.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Component {
    pub kind: ComponentKind,
    pub name: String,
    pub version: String,
    #[serde(default)]
    pub digest: String,
    #[serde(default)]
    pub epoch: u32,
    #[serde(default)]
    pub release: String,
    #[serde(default)]
    pub arch: String,
}

impl Component {
    pub fn kind(&self) -> &'static str {
        self.kind.as_str()
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    /// The name of `kind` as a manifest spells it.
    pub fn kind_of(&self, kind: ComponentKind) -> &'static str {
        kind.as_str()
    }

    /// What runs, for reading: an image's version and short digest, a
    /// package's `[epoch:]version-release`.
    pub fn display(&self) -> String {
        match self.kind {
            ComponentKind::Image => {
                let hex = self.digest.strip_prefix("sha256:").unwrap_or(&self.digest);
                format!("{}@{}", self.version, &hex[..hex.len().min(12)])
            }
            ComponentKind::Package => match self.epoch {
                0 => format!("{}-{}", self.version, self.release),
                e => format!("{e}:{}-{}", self.version, self.release),
            },
        }
    }

    /// Exact: the digest, or `name-epoch:version-release.arch`.
    pub fn exact_id(&self) -> String {
        match self.kind {
            ComponentKind::Image => self.digest.clone(),
            ComponentKind::Package => format!(
                "{}-{}:{}-{}.{}",
                self.name, self.epoch, self.version, self.release, self.arch
            ),
        }
    }
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct OsSpec {
    pub version: String,
    #[serde(default)]
    pub kernel: String,
    #[serde(default)]
    pub kernel_args: Vec<String>,
    /// The OS is installed A/B: the previous OS stays bootable after an
    /// upgrade to this one. Absent: false.
    #[serde(default)]
    pub ab_slots: bool,
}

/// The control plane's database schema a release runs.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SchemaSpec {
    pub version: u32,
    /// The oldest schema this release migrates from.
    #[serde(default)]
    pub min_upgrade_from: Option<u32>,
    /// The oldest schema whose control plane still runs on this one; an
    /// older release cannot, so going back from this one means a restore.
    #[serde(default)]
    pub readable_by: Option<u32>,
}

/// A system extension a release pins.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Sysext {
    pub name: String,
    pub version: String,
}

/// An upgrade path that is known not to work, and the way round it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct KnownBroken {
    pub from: String,
    pub reason: String,
    pub way_round: String,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Signature {
    pub key_id: String,
    pub value: String,
}

/// A release manifest as registered.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Release {
    pub version: String,
    #[serde(default)]
    pub components: Vec<Component>,
    pub os: OsSpec,
    #[serde(default)]
    pub required_stops: Vec<String>,
    #[serde(default)]
    pub known_broken: Vec<KnownBroken>,
    #[serde(default)]
    pub cves: Vec<String>,
    /// The bytes a node needs free to fetch the release's bundle.
    #[serde(default)]
    pub bundle_bytes: Option<u64>,
    #[serde(default)]
    pub schema: Option<SchemaSpec>,
    #[serde(default)]
    pub sysext: Vec<Sysext>,
    pub signature: Signature,
}

pub fn release_stream(version: &str) -> String {
    format!("release/{version}")
}

/// The stream of the cluster's running release.
pub const RUNNING_RELEASE_STREAM: &str = "cluster/release";

/// A release version: semantic versioning (`2026.11.0`, `1.4.2-rc.1`).
pub fn parse_version(v: &str) -> Option<semver::Version> {
    semver::Version::parse(v).ok()
}

/// Compares two release versions by SemVer precedence: build metadata
/// (`+evil`) has none, so `2026.11.1+evil` is neither newer nor older than
/// `2026.11.1`. Versions that do not parse compare by text (only
/// registered, hence valid, versions reach a comparison).
pub fn compare_versions(a: &str, b: &str) -> Ordering {
    match (parse_version(a), parse_version(b)) {
        (Some(a), Some(b)) => a.cmp_precedence(&b),
        _ => a.cmp(b),
    }
}

/// The trusted release keys: key id to Ed25519 public key.
#[derive(Clone, Debug, Default)]
pub struct TrustedKeys(pub BTreeMap<String, ed25519_dalek::VerifyingKey>);

impl TrustedKeys {
    /// Parses `keyId=base64-public-key` pairs, comma-separated (the form of
    /// `STRATUM_RELEASE_KEYS`).
    pub fn parse(spec: &str) -> Result<Self, String> {
        let mut keys = BTreeMap::new();
        for pair in spec.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let (id, key) = pair
                .split_once('=')
                .ok_or_else(|| format!("`{pair}` is not keyId=base64-public-key"))?;
            let bytes = base64::engine::general_purpose::STANDARD
                .decode(key.trim())
                .map_err(|e| format!("key {id}: not base64: {e}"))?;
            let bytes: [u8; 32] = bytes
                .try_into()
                .map_err(|_| format!("key {id}: an Ed25519 public key is 32 bytes"))?;
            let key = ed25519_dalek::VerifyingKey::from_bytes(&bytes)
                .map_err(|e| format!("key {id}: {e}"))?;
            keys.insert(id.trim().to_owned(), key);
        }
        Ok(Self(keys))
    }
}

/// The bytes a release signature covers: the RFC 8785 canonical JSON of the
/// manifest without its `signature` member.
pub fn signed_bytes(manifest: &Value) -> Vec<u8> {
    let mut unsigned = manifest.clone();
    if let Value::Object(m) = &mut unsigned {
        m.remove("signature");
    }
    serde_json_canonicalizer::to_vec(&unsigned).expect("a JSON value canonicalizes")
}

/// Checks a manifest's signature against the trusted keys.
pub fn verify_signature(manifest: &Value, keys: &TrustedKeys) -> Result<(), FieldError> {
    let sig = manifest.get("signature");
    let key_id = sig.and_then(|s| s.get("keyId")).and_then(Value::as_str);
    let value = sig.and_then(|s| s.get("value")).and_then(Value::as_str);
    let (Some(key_id), Some(value)) = (key_id, value) else {
        return Err(FieldError::new(
            "signature",
            "is required: {keyId, value} with an Ed25519 signature in standard base64",
        ));
    };
    let Some(key) = keys.0.get(key_id) else {
        return Err(FieldError::new(
            "signature.keyId",
            format!("`{key_id}` is not a trusted release key"),
        ));
    };
    let sig = base64::engine::general_purpose::STANDARD
        .decode(value)
        .ok()
        .and_then(|b| ed25519_dalek::Signature::from_slice(&b).ok())
        .ok_or_else(|| {
            FieldError::new(
                "signature.value",
                "is not an Ed25519 signature in standard base64",
            )
        })?;
    key.verify_strict(&signed_bytes(manifest), &sig)
        .map_err(|_| {
            FieldError::new(
                "signature",
                format!("does not match the manifest for key `{key_id}`"),
            )
        })
}

/// A release manifest as it came, with what checking its signature against
/// the trusted keys found. It is the only form
/// [`RegisterRelease`](crate::upgrade::UpgradeCommand::RegisterRelease)
/// takes, and it can only be made by [`SignedManifest::verify`]: whichever
/// edge registers a release (the API, install media on the host, a future
/// one), the check has run, and the domain refuses what it found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SignedManifest {
    manifest: Value,
    signature: Result<String, FieldError>,
}

impl SignedManifest {
    /// Checks `manifest`'s signature against `keys` (configuration, not
    /// state: that is why the edge holds them and the domain does not).
    pub fn verify(manifest: Value, keys: &TrustedKeys) -> Self {
        let signature = verify_signature(&manifest, keys).map(|()| {
            manifest["signature"]["keyId"]
                .as_str()
                .unwrap_or_default()
                .to_owned()
        });
        Self {
            manifest,
            signature,
        }
    }

    /// The manifest, signed or not.
    pub fn manifest(&self) -> &Value {
        &self.manifest
    }

    /// The key that signed it, or why the signature does not hold.
    pub fn signed_by(&self) -> Result<&str, &FieldError> {
        self.signature.as_deref()
    }
}

/// Signs a manifest (the release tooling's side; tests and fixtures use it).
pub fn sign(manifest: &mut Value, key_id: &str, key: &ed25519_dalek::SigningKey) {
    use ed25519_dalek::Signer;
    let sig = key.sign(&signed_bytes(manifest));
    manifest["signature"] = serde_json::json!({
        "keyId": key_id,
        "value": base64::engine::general_purpose::STANDARD.encode(sig.to_bytes()),
    });
}

/// The canonical JSON text of a manifest, as the log keeps it.
pub fn canonical(manifest: &Value) -> String {
    serde_json_canonicalizer::to_string(manifest).expect("a JSON value canonicalizes")
}

fn is_sha256_digest(d: &str) -> bool {
    d.strip_prefix("sha256:")
        .is_some_and(|h| h.len() == 64 && h.bytes().all(|c| matches!(c, b'0'..=b'9' | b'a'..=b'f')))
}

/// Parses and validates a manifest, naming every problem at its field.
pub fn parse_manifest(manifest: &Value) -> Result<Release, Vec<FieldError>> {
    let release: Release = serde_json::from_value(manifest.clone()).map_err(|e| {
        vec![FieldError::new(
            "",
            format!("is not a release manifest: {e}"),
        )]
    })?;
    let mut f = Findings::default();
    if parse_version(&release.version).is_none() {
        f.push("version", "is not a semantic version such as 2026.11.0");
    }
    let mut names = std::collections::BTreeSet::new();
    for (i, c) in release.components.iter().enumerate() {
        let at = |field: &str| format!("components[{i}].{field}");
        if c.name().is_empty() {
            f.push(&at("name"), "is required");
        }
        if !names.insert((c.kind(), c.name().to_owned())) {
            f.push(&at("name"), format!("`{}` is listed twice", c.name()));
        }
        let required: &[(&str, &String)] = match c.kind {
            ComponentKind::Image => &[("version", &c.version), ("digest", &c.digest)],
            ComponentKind::Package => &[
                ("version", &c.version),
                ("release", &c.release),
                ("arch", &c.arch),
            ],
        };
        for (field, v) in required {
            if v.is_empty() {
                f.push(&at(field), "is required");
            }
        }
        if c.kind == ComponentKind::Image && !c.digest.is_empty() && !is_sha256_digest(&c.digest) {
            f.push(&at("digest"), "is not sha256:<64 hex digits>");
        }
    }
    if release.os.version.is_empty() {
        f.push("os.version", "is required");
    }
    for (i, s) in release.required_stops.iter().enumerate() {
        if parse_version(s).is_none() {
            f.push(&format!("requiredStops[{i}]"), "is not a semantic version");
        }
    }
    for (i, k) in release.known_broken.iter().enumerate() {
        if parse_version(&k.from).is_none() {
            f.push(
                &format!("knownBroken[{i}].from"),
                "is not a semantic version",
            );
        }
    }
    if f.0.is_empty() {
        Ok(release)
    } else {
        Err(f.0)
    }
}

/// Reads a recorded manifest as it was recorded. It was validated when it
/// was registered; a later, stricter [`parse_manifest`] must never make a
/// stored release vanish on replay, so this reads every field it knows,
/// leniently, and ignores what it does not (the way
/// [`crate::policy::read_recorded`] reads recorded policies). A component
/// of a kind it does not know is left out.
pub fn read_recorded(text: &str) -> Release {
    let doc: Value = serde_json::from_str(text).unwrap_or(Value::Null);
    let s = |v: &Value, k: &str| v.get(k).and_then(Value::as_str).unwrap_or("").to_owned();
    let strings = |v: &Value, k: &str| -> Vec<String> {
        v.get(k)
            .and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .filter_map(Value::as_str)
                    .map(str::to_owned)
                    .collect()
            })
            .unwrap_or_default()
    };
    let objects = |k: &str| -> Vec<Value> {
        doc.get(k)
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default()
    };
    let components = objects("components")
        .iter()
        .filter_map(|c| {
            let kind = match c.get("kind").and_then(Value::as_str)? {
                "image" => ComponentKind::Image,
                "package" => ComponentKind::Package,
                _ => return None,
            };
            Some(Component {
                kind,
                name: s(c, "name"),
                version: s(c, "version"),
                digest: s(c, "digest"),
                epoch: c
                    .get("epoch")
                    .and_then(Value::as_u64)
                    .and_then(|e| u32::try_from(e).ok())
                    .unwrap_or(0),
                release: s(c, "release"),
                arch: s(c, "arch"),
            })
        })
        .collect();
    let os = doc.get("os").cloned().unwrap_or(Value::Null);
    let signature = doc.get("signature").cloned().unwrap_or(Value::Null);
    Release {
        version: s(&doc, "version"),
        components,
        os: OsSpec {
            version: s(&os, "version"),
            kernel: s(&os, "kernel"),
            kernel_args: strings(&os, "kernelArgs"),
            ab_slots: os.get("abSlots").and_then(Value::as_bool).unwrap_or(false),
        },
        required_stops: strings(&doc, "requiredStops"),
        known_broken: objects("knownBroken")
            .iter()
            .map(|k| KnownBroken {
                from: s(k, "from"),
                reason: s(k, "reason"),
                way_round: s(k, "wayRound"),
            })
            .collect(),
        cves: strings(&doc, "cves"),
        bundle_bytes: doc.get("bundleBytes").and_then(Value::as_u64),
        schema: doc.get("schema").and_then(|sc| {
            let n = |k: &str| {
                sc.get(k)
                    .and_then(Value::as_u64)
                    .and_then(|v| u32::try_from(v).ok())
            };
            Some(SchemaSpec {
                version: n("version")?,
                min_upgrade_from: n("minUpgradeFrom"),
                readable_by: n("readableBy"),
            })
        }),
        sysext: objects("sysext")
            .iter()
            .map(|x| Sysext {
                name: s(x, "name"),
                version: s(x, "version"),
            })
            .collect(),
        signature: Signature {
            key_id: s(&signature, "keyId"),
            value: s(&signature, "value"),
        },
    }
}

/// One pinned component an upgrade changes.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ComponentChange {
    pub kind: String,
    pub name: String,
    pub from: String,
    pub to: String,
    pub from_id: String,
    pub to_id: String,
}

/// The target release's components against the running release's, in
/// (kind, name) order; unchanged components are left out.
pub fn component_changes(running: &[Component], target: &[Component]) -> Vec<ComponentChange> {
    let key = |c: &Component| (c.kind(), c.name().to_owned());
    let from: BTreeMap<_, _> = running.iter().map(|c| (key(c), c)).collect();
    let to: BTreeMap<_, _> = target.iter().map(|c| (key(c), c)).collect();
    let mut keys: Vec<_> = from.keys().chain(to.keys()).cloned().collect();
    keys.sort();
    keys.dedup();
    keys.into_iter()
        .filter_map(|k| {
            let (f, t) = (from.get(&k), to.get(&k));
            let id = |c: Option<&&Component>| c.map(|c| c.exact_id()).unwrap_or_default();
            if id(f) == id(t) {
                return None;
            }
            Some(ComponentChange {
                kind: k.0.to_owned(),
                name: k.1,
                from: f.map(|c| c.display()).unwrap_or_default(),
                to: t.map(|c| c.display()).unwrap_or_default(),
                from_id: id(f),
                to_id: id(t),
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn key(seed: u8) -> ed25519_dalek::SigningKey {
        ed25519_dalek::SigningKey::from_bytes(&[seed; 32])
    }

    fn trusted(id: &str, k: &ed25519_dalek::SigningKey) -> TrustedKeys {
        let b64 = base64::engine::general_purpose::STANDARD.encode(k.verifying_key().to_bytes());
        TrustedKeys::parse(&format!("{id}={b64}")).unwrap()
    }

    fn manifest() -> Value {
        json!({
            "version": "2.0.0",
            "components": [{"kind": "image", "name": "api", "version": "2.0.0",
                            "digest": format!("sha256:{}", "b".repeat(64))}],
            "os": {"version": "13.1", "kernel": "6.12", "kernelArgs": []},
        })
    }

    #[test]
    fn a_signed_manifest_verifies_whatever_its_key_order() {
        let k = key(1);
        let mut m = manifest();
        sign(&mut m, "rel-1", &k);
        assert_eq!(verify_signature(&m, &trusted("rel-1", &k)), Ok(()));
        // The same manifest with its members in another order: canonical
        // JSON sorts them, so the signature still holds.
        let text = serde_json::to_string(&m).unwrap();
        let reordered: Value = serde_json::from_str(&text).unwrap();
        assert_eq!(verify_signature(&reordered, &trusted("rel-1", &k)), Ok(()));
    }

    #[test]
    fn a_changed_manifest_or_an_unknown_key_is_refused() {
        let k = key(1);
        let mut m = manifest();
        sign(&mut m, "rel-1", &k);
        let mut tampered = m.clone();
        tampered["version"] = json!("2.0.1");
        let err = verify_signature(&tampered, &trusted("rel-1", &k)).unwrap_err();
        assert_eq!(err.field, "signature");
        assert!(err.message.contains("does not match"), "{}", err.message);
        let err = verify_signature(&m, &trusted("other", &k)).unwrap_err();
        assert_eq!(err.field, "signature.keyId");
        // Signed by another key under a trusted id.
        let mut forged = manifest();
        sign(&mut forged, "rel-1", &key(2));
        assert!(verify_signature(&forged, &trusted("rel-1", &k)).is_err());
    }

    #[test]
    fn trusted_keys_parse_and_refuse_bad_input() {
        let k = key(3);
        let b64 = base64::engine::general_purpose::STANDARD.encode(k.verifying_key().to_bytes());
        let keys = TrustedKeys::parse(&format!(" a={b64} , b={b64}")).unwrap();
        assert_eq!(keys.0.len(), 2);
        assert!(TrustedKeys::parse("a").is_err());
        assert!(TrustedKeys::parse("a=!!").is_err());
        assert!(TrustedKeys::parse("a=AAAA").is_err());
    }

    #[test]
    fn a_manifest_names_every_bad_field() {
        let m = json!({
            "version": "two",
            "components": [
                {"kind": "image", "name": "api", "version": "1", "digest": "latest"},
                {"kind": "package", "name": "api", "version": "", "release": "1", "arch": "x86_64"},
                {"kind": "image", "name": "api", "version": "1", "digest": format!("sha256:{}", "c".repeat(64))},
            ],
            "os": {"version": ""},
            "requiredStops": ["x"],
            "signature": {"keyId": "k", "value": "v"},
        });
        let errs = parse_manifest(&m).unwrap_err();
        let fields: Vec<_> = errs.iter().map(|e| e.field.as_str()).collect();
        assert_eq!(
            fields,
            [
                "version",
                "components[0].digest",
                "components[1].version",
                "components[2].name",
                "os.version",
                "requiredStops[0]"
            ]
        );
    }

    #[test]
    fn component_changes_compare_by_kind_and_name() {
        let image = |name: &str, v: &str, d: char| Component {
            kind: ComponentKind::Image,
            name: name.into(),
            version: v.into(),
            digest: format!("sha256:{}", d.to_string().repeat(64)),
            epoch: 0,
            release: String::new(),
            arch: String::new(),
        };
        let img = |v: &str, d: char| image("api", v, d);
        let pkg = |v: &str| Component {
            kind: ComponentKind::Package,
            name: "kernel-tools".into(),
            version: v.into(),
            digest: String::new(),
            epoch: 1,
            release: "3".into(),
            arch: "x86_64".into(),
        };
        let gone = image("old", "1", 'e');
        let same = image("same", "1", 'f');
        let changes = component_changes(
            &[img("1.0", 'a'), gone, same.clone()],
            &[img("2.0", 'b'), pkg("6.1"), same],
        );
        assert_eq!(changes.len(), 3);
        assert_eq!(changes[0].name, "api");
        assert_eq!(changes[0].from, "1.0@aaaaaaaaaaaa");
        assert_eq!(changes[0].to_id, format!("sha256:{}", "b".repeat(64)));
        assert_eq!(changes[1].name, "old");
        assert_eq!(changes[1].to, "");
        assert_eq!(changes[2].kind, "package");
        assert_eq!(changes[2].from, "");
        assert_eq!(changes[2].to, "1:6.1-3");
        assert_eq!(changes[2].to_id, "kernel-tools-1:6.1-3.x86_64");
    }

    #[test]
    fn versions_compare_semantically() {
        assert_eq!(compare_versions("1.10.0", "1.9.0"), Ordering::Greater);
        assert_eq!(compare_versions("2.0.0-rc.1", "2.0.0"), Ordering::Less);
        // Build metadata has no precedence (SemVer 2.0.0, item 10).
        assert_eq!(
            compare_versions("2026.11.1+evil", "2026.11.1"),
            Ordering::Equal
        );
        assert!(!is_sha256_digest(&format!("sha256:{}", "A".repeat(64))));
        assert!(is_sha256_digest(&format!("sha256:{}", "a".repeat(64))));
    }
}
