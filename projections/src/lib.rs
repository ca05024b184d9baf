//! Read models of stratum, as deterministic folds over recorded events.
//!
//! [`ReadModels`] folds events (through the domain's `evolve`, so the read
//! models and the decisions can never disagree about what happened) and
//! tracks which rows each event touched, so the command path can write
//! exactly those rows in the transaction that appended the events. Rendering
//! is pure and ordered: replaying the log from zero yields byte-identical
//! rows. Projections never read the clock.

// Clocks, random ids, randomness, the environment and files are refused
// by clippy.toml; a use of one is an error, not a warning.
#![deny(clippy::disallowed_methods)]

pub mod digest;
pub mod dump;
pub mod iam;
pub mod members;
pub mod storage;
pub mod upgrades;
pub mod versions;

use std::collections::BTreeSet;

use stratum_domain::log::Recorded;
use stratum_domain::state::{EventCtx, State};
use stratum_domain::stored::{decode, DecodeError};
use stratum_domain::DomainEvent;

pub use digest::MemberDocs;
pub use members::{
    member_record, member_records, membership_summary, peers, transport_admission, with_lagging,
    JoinRequestRecord, MemberRecord,
};

/// A projection: one fold of the log into read models, and the version of
/// what it makes of the log.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Projection {
    pub name: &'static str,
    /// Bumped whenever the fold makes other read models of the same
    /// events (another field, another value, another row): the golden
    /// dumps of the recorded logs (`replay-tests/dumps/`) fail until it
    /// is, and snapshots of another version are never loaded. See
    /// `docs/replay-tests.md`, "Changing a projection".
    pub version: u32,
}

/// Every projection of this build; [`dump::KINDS`] names what each makes.
pub const PROJECTIONS: &[Projection] = &[
    Projection {
        name: "members",
        version: 1,
    },
    Projection {
        name: "iam",
        version: 1,
    },
    Projection {
        name: "upgrades",
        version: 1,
    },
];

/// The format of snapshot bytes. Snapshots are a cache: when the state's
/// shape changes, bump this and old snapshots are ignored (and replaced).
/// From format 7 on a snapshot names the projection versions that folded
/// it, and one of other versions is ignored the same way.
pub const SNAPSHOT_FORMAT: u32 = 7;

#[derive(serde::Deserialize)]
struct Snapshot {
    format: u32,
    /// `(name, version)` of every projection, in [`PROJECTIONS`]' order.
    projections: Vec<(String, u32)>,
    state: State,
    /// The hash of the event at the state's position, when known: what a
    /// reader holds to the log before trusting the snapshot.
    head_hash: Option<[u8; 32]>,
}

/// What [`Snapshot`] reads, written from a borrowed state: a snapshot
/// never clones the state it keeps.
#[derive(serde::Serialize)]
struct SnapshotOf<'a> {
    format: u32,
    projections: Vec<(&'static str, u32)>,
    state: &'a State,
    head_hash: Option<[u8; 32]>,
}

/// One row of the `rm_members` table.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MemberRow {
    pub node_id: String,
    pub state: &'static str,
    pub role: &'static str,
    pub rack: Option<String>,
    pub ordinal: u32,
    pub version: u64,
    /// The member record as JSON (without `lagging`, which depends on the
    /// cluster's generation and is added when read).
    pub doc: String,
}

/// One row of the `rm_join_requests` table.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct JoinRequestRow {
    pub request_id: String,
    pub status: &'static str,
    pub version: u64,
    pub doc: String,
}

/// One row of the `rm_tokens` table: what authentication looks up. The
/// secret itself is never known here: a generated one's SHA-256 (the
/// lookup key), or a chosen one's Argon2id hash.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TokenRow {
    pub token_id: String,
    pub secret_sha256: Option<[u8; 32]>,
    pub secret_argon2id: Option<String>,
    pub principal: String,
    /// The policy names, as a JSON array.
    pub policies: String,
    pub expires_at: Option<i64>,
    pub revoked_at: Option<i64>,
    pub doc: String,
}

/// The kinds of document in the `rm_docs` table.
pub mod doc_kind {
    pub const UPGRADE: &str = "upgrade";
    pub const RELEASE: &str = "release";
    /// One row, id [`RUNNING`]: the release the cluster runs.
    pub const CLUSTER: &str = "cluster";
    pub const RUNNING: &str = "release";
    /// Custom IAM policies, by name.
    pub const POLICY: &str = "policy";
    /// The policies attached to a principal, by principal.
    pub const PRINCIPAL: &str = "principal";
    /// Resource policies, by `member/<nodeId>` or `upgrade/<id>`.
    pub const RESOURCE_POLICY: &str = "resource-policy";
    /// Alarms, by `name/upgrade/node`, listed in the order raised.
    pub const ALARM: &str = "alarm";
    /// Each node's newest facts report, by node id.
    pub const FACTS: &str = "facts";
}

/// One row of the `rm_docs` table: a read model kept as one JSON document
/// per id (upgrades, releases, the running release), listed by `sort_key`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DocRow {
    pub kind: &'static str,
    pub id: String,
    pub sort_key: i64,
    pub doc: String,
}

/// The rows a fold changed, to be written in one transaction.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Changes {
    pub members: Vec<MemberRow>,
    pub join_requests: Vec<JoinRequestRow>,
    pub tokens: Vec<TokenRow>,
    pub docs: Vec<DocRow>,
    /// The membership generation, when it changed.
    pub generation: Option<u64>,
    /// Rows to delete, by entity kind ([`dump::KINDS`]) and id: rows a
    /// fold of another projection version made that this one does not.
    pub removed: Vec<(String, String)>,
}

impl Changes {
    pub fn is_empty(&self) -> bool {
        self.members.is_empty()
            && self.join_requests.is_empty()
            && self.tokens.is_empty()
            && self.docs.is_empty()
            && self.generation.is_none()
            && self.removed.is_empty()
    }
}

/// Every read model, kept in memory by the command path and rebuilt by replay.
#[derive(Clone, Debug)]
pub struct ReadModels {
    pub state: State,
    /// Whether folds record which rows they touch (a replay that rewrites
    /// every row, or none, need not).
    tracking: bool,
    dirty_members: BTreeSet<String>,
    dirty_requests: BTreeSet<String>,
    dirty_tokens: BTreeSet<String>,
    dirty_docs: BTreeSet<(&'static str, String)>,
    generation_dirty: bool,
    /// Generated tokens by the SHA-256 of their secret: how the gate finds
    /// a presented token without a scan. A hash map (persistent, so a copy
    /// shares it): every request looks a secret up, and the B-tree's
    /// lookups and their key comparisons were 2.8 % of the server's samples
    /// as 5,000 agents' long-polls were answered (`docs/benchmarks.md`).
    secrets: imbl::HashMap<[u8; 32], String>,
    /// The hash of the event at `state.position` (zeros at position 0), when
    /// the fold saw it: what a replica compares with the database's log to
    /// know the log it holds is still the database's. A fold of events
    /// without their hashes (a replay) leaves it unknown.
    pub head_hash: Option<[u8; 32]>,
    /// The hash of the event at `state.membership.generation` (zeros at
    /// generation 0), when the fold saw it: with the generation, what
    /// names the peer lists. A generation is a position, and a failover
    /// that lost the log's tail may see another event fill it again.
    pub generation_hash: Option<[u8; 32]>,
}

impl Default for ReadModels {
    fn default() -> Self {
        Self {
            state: State::default(),
            tracking: true,
            dirty_members: BTreeSet::new(),
            dirty_requests: BTreeSet::new(),
            dirty_tokens: BTreeSet::new(),
            dirty_docs: BTreeSet::new(),
            generation_dirty: false,
            secrets: imbl::HashMap::new(),
            head_hash: Some([0; 32]),
            generation_hash: Some([0; 32]),
        }
    }
}

impl ReadModels {
    /// Turns the tracking of changed rows on or off (off while replaying).
    pub fn set_tracking(&mut self, on: bool) {
        self.tracking = on;
        if !on {
            self.discard_changes();
        }
    }

    /// Whether a log whose head is `position` with `hash`, read after these
    /// read models were folded, still holds them: such a head cannot be
    /// behind their position, nor another event at it. One that is means
    /// the log lost events they folded (a failover).
    pub fn held_by(&self, position: u64, hash: [u8; 32]) -> bool {
        let at = self.state.position;
        position > at || (position == at && self.head_hash.is_none_or(|h| h == hash))
    }

    /// Folds one decoded event.
    pub fn apply(&mut self, rec: &Recorded, event: &DomainEvent) {
        self.apply_at(&EventCtx::of(rec), &rec.stream_id, event);
        self.head_hash = Some(rec.hash);
        if event.is_topology_change() {
            self.generation_hash = Some(rec.hash);
        }
    }

    /// Folds one decoded event, given its envelope's parts.
    pub fn apply_at(&mut self, ctx: &EventCtx, stream_id: &str, event: &DomainEvent) {
        self.head_hash = None;
        if event.is_topology_change() {
            self.generation_hash = None;
        }
        let before = self.state.membership.generation;
        self.state.evolve(ctx, stream_id, event);
        if let DomainEvent::TokenIssued(t) = event {
            self.index_token(&t.token_id);
        }
        if !self.tracking {
            return;
        }
        if let Some(node_id) = stratum_domain::membership::member_of(event) {
            self.dirty_members.insert(node_id.to_owned());
        }
        match event {
            DomainEvent::JoinRequested(r) => {
                self.dirty_requests.insert(r.request_id.clone());
            }
            DomainEvent::JoinRequestApproved { request_id, .. }
            | DomainEvent::JoinRequestRejected { request_id, .. } => {
                self.dirty_requests.insert(request_id.clone());
            }
            DomainEvent::TokenIssued(t) => {
                self.dirty_tokens.insert(t.token_id.clone());
            }
            DomainEvent::TokenRevoked(t) => {
                self.dirty_tokens.insert(t.token_id.clone());
            }
            DomainEvent::PolicyCreated(p) => {
                self.dirty_docs.insert((doc_kind::POLICY, p.name.clone()));
            }
            DomainEvent::PrincipalPoliciesSet(p) => {
                self.dirty_docs
                    .insert((doc_kind::PRINCIPAL, p.principal.clone()));
            }
            DomainEvent::ResourcePolicySet(p) => {
                self.dirty_docs
                    .insert((doc_kind::RESOURCE_POLICY, p.resource.clone()));
            }
            DomainEvent::ReleaseRegistered(r) => {
                self.dirty_docs
                    .insert((doc_kind::RELEASE, r.version.clone()));
            }
            DomainEvent::RunningReleaseSet(_) => {
                self.dirty_docs
                    .insert((doc_kind::CLUSTER, doc_kind::RUNNING.to_owned()));
            }
            DomainEvent::NodeFactsReported(f) => {
                self.dirty_docs.insert((doc_kind::FACTS, f.node_id.clone()));
            }
            DomainEvent::AlarmRaised(stratum_domain::upgrade::AlarmRaised {
                name,
                node_id,
                upgrade_id,
                ..
            })
            | DomainEvent::AlarmCleared(stratum_domain::upgrade::AlarmCleared {
                name,
                node_id,
                upgrade_id,
            }) => {
                self.dirty_docs.insert((
                    doc_kind::ALARM,
                    stratum_domain::upgrade::alarm_key(
                        name,
                        upgrade_id.as_deref(),
                        node_id.as_deref(),
                    ),
                ));
            }
            DomainEvent::RaftPeerReturned(stratum_domain::event::RaftPeerReturned {
                node_id,
                raft,
                ..
            })
            | DomainEvent::RaftPeerRemoved { node_id, raft, .. } => {
                // A return raises its alarm; the removal again clears it
                // (a removal with no return before it has no alarm row).
                self.dirty_docs.insert((
                    doc_kind::ALARM,
                    stratum_domain::upgrade::raft_peer_returned_key(*raft, node_id),
                ));
            }
            DomainEvent::EventsLost(e) => {
                self.dirty_docs.insert((
                    doc_kind::ALARM,
                    stratum_domain::upgrade::events_lost_key(e.first),
                ));
            }
            DomainEvent::CheckpointForkFound(stratum_domain::upgrade::CheckpointForkFound {
                signed_size,
                signed_root,
                ..
            })
            | DomainEvent::CheckpointForkAcknowledged(
                stratum_domain::upgrade::CheckpointForkAcknowledged {
                    signed_size,
                    signed_root,
                    ..
                },
            ) => {
                self.dirty_docs.insert((
                    doc_kind::ALARM,
                    stratum_domain::upgrade::checkpoint_fork_key(*signed_size, signed_root),
                ));
            }
            // Named, not a wildcard: a new event type must be decided here
            // (member and upgrade events are tracked below, by subject).
            DomainEvent::MemberAdmitted(_)
            | DomainEvent::JoinProgressReported { .. }
            | DomainEvent::MemberJoinCompleted { .. }
            | DomainEvent::MemberJoinFailed(_)
            | DomainEvent::RaftCleanupCompleted { .. }
            | DomainEvent::MemberJoinRetried { .. }
            | DomainEvent::MemberRemovalStarted(_)
            | DomainEvent::MemberDecommissioned { .. }
            | DomainEvent::MemberUpdated(_)
            | DomainEvent::AppliedGenerationReported { .. }
            | DomainEvent::UpgradePlanned(_)
            | DomainEvent::UpgradeStateChanged(_)
            | DomainEvent::UpgradePrechecked(_)
            | DomainEvent::UpgradeNodeTurnStarted(_)
            | DomainEvent::UpgradeNodeReported(_)
            | DomainEvent::UpgradeBackupReported(_)
            | DomainEvent::UpgradeFailed(_)
            | DomainEvent::UpgradeCompleted(_)
            | DomainEvent::UpgradeCanceled(_)
            | DomainEvent::UpgradeRolledBack(_)
            | DomainEvent::UpgradeAcknowledged(_) => {}
            // The storage version is read from the state, not from a row;
            // members whose records it changes (record-only removals shown
            // from its level on) are written again with it.
            DomainEvent::StorageVersionFinalized(_) => {
                for (id, m) in &self.state.membership.members {
                    if !m.rafts_recorded_only.is_empty() {
                        self.dirty_members.insert(id.clone());
                    }
                }
            }
        }
        if let Some(id) = stratum_domain::upgrade::upgrade_of(event) {
            self.dirty_docs.insert((doc_kind::UPGRADE, id.to_owned()));
            if let DomainEvent::UpgradeCompleted(_) = event {
                self.dirty_docs
                    .insert((doc_kind::CLUSTER, doc_kind::RUNNING.to_owned()));
            }
        }
        self.generation_dirty |= self.state.membership.generation != before;
    }

    /// Decodes and folds one stored event.
    pub fn apply_recorded(&mut self, rec: &Recorded) -> Result<(), DecodeError> {
        let event = decode(&rec.event_type, rec.schema_version, &rec.payload)?;
        self.apply(rec, &event);
        Ok(())
    }

    /// The rows changed since the last call.
    pub fn take_changes(&mut self) -> Changes {
        let m = &self.state.membership;
        let members = std::mem::take(&mut self.dirty_members)
            .into_iter()
            .filter_map(|id| {
                m.members
                    .get(&id)
                    .map(|member| member_row(member, m.record_only_shown))
            })
            .collect();
        let join_requests = std::mem::take(&mut self.dirty_requests)
            .into_iter()
            .filter_map(|id| m.join_requests.get(&id).map(join_request_row))
            .collect();
        let tokens = std::mem::take(&mut self.dirty_tokens)
            .into_iter()
            .filter_map(|id| self.state.iam.tokens.get(&id).map(token_row))
            .collect();
        let docs = std::mem::take(&mut self.dirty_docs)
            .into_iter()
            .filter_map(|(kind, id)| doc_row(&self.state, kind, &id))
            .collect();
        let generation = std::mem::take(&mut self.generation_dirty).then_some(m.generation);
        Changes {
            members,
            join_requests,
            tokens,
            docs,
            generation,
            removed: Vec::new(),
        }
    }

    /// Forgets what changed (the rows were written by another writer).
    pub fn discard_changes(&mut self) {
        self.dirty_members.clear();
        self.dirty_requests.clear();
        self.dirty_tokens.clear();
        self.dirty_docs.clear();
        self.generation_dirty = false;
    }

    /// Every row of every read model, as a rebuild writes them.
    pub fn all_rows(&self) -> Changes {
        let m = &self.state.membership;
        Changes {
            members: m
                .members
                .values()
                .map(|member| member_row(member, m.record_only_shown))
                .collect(),
            join_requests: m.join_requests.values().map(join_request_row).collect(),
            tokens: self.state.iam.tokens.values().map(token_row).collect(),
            docs: all_docs(&self.state),
            generation: Some(m.generation),
            removed: Vec::new(),
        }
    }

    /// The fold as snapshot bytes: a cache for time travel and start-up,
    /// never the truth.
    pub fn snapshot(&self) -> Vec<u8> {
        let s = SnapshotOf {
            format: SNAPSHOT_FORMAT,
            projections: PROJECTIONS.iter().map(|p| (p.name, p.version)).collect(),
            state: &self.state,
            head_hash: self.head_hash,
        };
        postcard::to_allocvec(&s).expect("the state serializes")
    }

    /// Read models from snapshot bytes; `None` for bytes of another format,
    /// or folded by projections of other versions than this build's (a
    /// snapshot is only a cache: the caller replays instead).
    pub fn from_snapshot(bytes: &[u8]) -> Option<Self> {
        // The format comes first: bytes of another format are not read on.
        let (format, _): (u32, _) = postcard::take_from_bytes(bytes).ok()?;
        if format != SNAPSHOT_FORMAT {
            return None;
        }
        let s: Snapshot = postcard::from_bytes(bytes).ok()?;
        let same_folds = s.format == SNAPSHOT_FORMAT
            && s.projections.len() == PROJECTIONS.len()
            && s.projections
                .iter()
                .zip(PROJECTIONS)
                .all(|((name, version), p)| name == p.name && *version == p.version);
        same_folds.then(|| {
            let mut rm = Self {
                generation_hash: (s.state.membership.generation == s.state.position)
                    .then_some(s.head_hash)
                    .flatten(),
                state: s.state,
                head_hash: s.head_hash,
                ..Self::default()
            };
            let ids: Vec<String> = rm.state.iam.tokens.keys().cloned().collect();
            for id in &ids {
                rm.index_token(id);
            }
            rm
        })
    }

    fn index_token(&mut self, token_id: &str) {
        if let Some(h) = self
            .state
            .iam
            .tokens
            .get(token_id)
            .and_then(|t| t.verifier.sha256())
        {
            self.secrets.insert(*h, token_id.to_owned());
        }
    }

    /// The token whose generated secret has this SHA-256, if any. The
    /// caller compares the hash again in constant time.
    pub fn token_by_secret(&self, sha256: &[u8; 32]) -> Option<&stratum_domain::iam::Token> {
        self.state.iam.tokens.get(self.secrets.get(sha256)?)
    }

    /// The unrevoked tokens whose chosen secret only an Argon2id hash
    /// recognizes (the bootstrap token): few, checked one by one.
    pub fn argon2id_tokens(&self) -> impl Iterator<Item = &stratum_domain::iam::Token> {
        self.state
            .iam
            .tokens
            .values()
            .filter(|t| t.revoked_at.is_none() && t.verifier.argon2id().is_some())
    }

    /// The digest of the membership read model as these rows are stored.
    /// Renders the member rows only: not the tokens, join requests and
    /// documents [`ReadModels::all_rows`] renders as well.
    pub fn membership_digest(&self) -> String {
        let m = &self.state.membership;
        let docs: Vec<(&str, String)> = m
            .members
            .values()
            .map(|member| {
                (
                    member.node_id.as_str(),
                    member_doc(member, m.record_only_shown),
                )
            })
            .collect();
        members::membership_digest(
            m.generation,
            docs.iter().map(|(id, doc)| (*id, doc.as_str())),
        )
    }

    /// Every read model as entities ([`dump::Dump`]): what `stratum
    /// replay --dump` writes.
    pub fn dump(&self) -> dump::Dump {
        dump::Dump::of_changes(&self.all_rows(), self.state.position)
    }

    /// Replays stored events from position 0.
    pub fn replay<'a>(events: impl IntoIterator<Item = &'a Recorded>) -> Result<Self, DecodeError> {
        let mut rm = ReadModels::default();
        for e in events {
            rm.apply_recorded(e)?;
        }
        rm.discard_changes();
        Ok(rm)
    }
}

/// The document row of one (kind, id), as the state renders it now.
fn doc_row(state: &State, kind: &'static str, id: &str) -> Option<DocRow> {
    let up = &state.upgrades;
    let (sort_key, doc) = match kind {
        doc_kind::UPGRADE => {
            let u = up.upgrades.get(id)?;
            (
                u.created_position as i64,
                json(&upgrades::upgrade_record(u)),
            )
        }
        doc_kind::RELEASE => {
            let r = up.releases.get(id)?;
            (
                r.registered_position as i64,
                json(&upgrades::release_record(r)),
            )
        }
        doc_kind::CLUSTER => (
            0,
            json(&upgrades::running_release_record(up.running.as_ref()?)),
        ),
        doc_kind::POLICY => (0, json(&iam::policy_record(state.iam.policies.get(id)?))),
        doc_kind::RESOURCE_POLICY => (
            0,
            json(&iam::policy_record(state.iam.resource_policies.get(id)?)),
        ),
        doc_kind::PRINCIPAL => (
            0,
            json(&iam::principal_record(
                id,
                state.iam.principal_policies.get(id)?,
            )),
        ),
        doc_kind::ALARM => {
            let a = up.alarms.get(id)?;
            (a.raised_position as i64, json(&upgrades::alarm_record(a)))
        }
        doc_kind::FACTS => (0, json(&upgrades::facts_record(id, up.facts.get(id)?))),
        _ => return None,
    };
    Some(DocRow {
        kind,
        id: id.to_owned(),
        sort_key,
        doc,
    })
}

/// The ids of every document of one kind.
fn doc_ids<'a>(state: &'a State, kind: &'static str) -> Box<dyn Iterator<Item = &'a str> + 'a> {
    let up = &state.upgrades;
    let iam = &state.iam;
    match kind {
        doc_kind::UPGRADE => Box::new(up.upgrades.keys().map(String::as_str)),
        doc_kind::RELEASE => Box::new(up.releases.keys().map(String::as_str)),
        doc_kind::ALARM => Box::new(up.alarms.keys().map(String::as_str)),
        doc_kind::FACTS => Box::new(up.facts.keys().map(String::as_str)),
        doc_kind::CLUSTER => Box::new(std::iter::once(doc_kind::RUNNING)),
        doc_kind::POLICY => Box::new(iam.policies.keys().map(String::as_str)),
        doc_kind::PRINCIPAL => Box::new(iam.principal_policies.keys().map(String::as_str)),
        doc_kind::RESOURCE_POLICY => Box::new(iam.resource_policies.keys().map(String::as_str)),
        _ => Box::new(std::iter::empty()),
    }
}

/// Every kind of `rm_docs` row a fold writes.
pub(crate) const DOC_KINDS: [&str; 8] = [
    doc_kind::UPGRADE,
    doc_kind::RELEASE,
    doc_kind::ALARM,
    doc_kind::FACTS,
    doc_kind::CLUSTER,
    doc_kind::POLICY,
    doc_kind::PRINCIPAL,
    doc_kind::RESOURCE_POLICY,
];

fn all_docs(state: &State) -> Vec<DocRow> {
    DOC_KINDS
        .into_iter()
        .flat_map(|kind| doc_ids(state, kind).filter_map(move |id| doc_row(state, kind, id)))
        .collect()
}

impl ReadModels {
    /// One document, as its `rm_docs` row holds it.
    pub fn doc(&self, kind: &'static str, id: &str) -> Option<DocRow> {
        doc_row(&self.state, kind, id)
    }

    /// Every document of one kind, as `rm_docs` lists them: in (sort key,
    /// id) order.
    pub fn docs(&self, kind: &'static str) -> Vec<DocRow> {
        let mut rows: Vec<DocRow> = doc_ids(&self.state, kind)
            .filter_map(|id| doc_row(&self.state, kind, id))
            .collect();
        rows.sort_by(|a, b| (a.sort_key, &a.id).cmp(&(b.sort_key, &b.id)));
        rows
    }
}

fn json<T: serde::Serialize>(v: &T) -> String {
    serde_json::to_string(v).expect("records serialize")
}

/// A member's row. Its record-only removals are in it from the
/// finalization of storage level [`RECORD_ONLY_SHOWN_FROM`] on
/// (`record_only_shown`): until then the previous build, which does not
/// write them, may write the same rows, and the rows are what it writes.
///
/// [`RECORD_ONLY_SHOWN_FROM`]: stratum_domain::membership::RECORD_ONLY_SHOWN_FROM
fn member_row(m: &stratum_domain::membership::Member, record_only_shown: bool) -> MemberRow {
    MemberRow {
        node_id: m.node_id.clone(),
        state: m.state.as_str(),
        role: m.role.as_str(),
        rack: m.rack().map(str::to_owned),
        ordinal: m.ordinal,
        version: m.version,
        doc: member_doc(m, record_only_shown),
    }
}

/// A member's stored document.
fn member_doc(m: &stratum_domain::membership::Member, record_only_shown: bool) -> String {
    let mut record = member_record(m, None);
    if !record_only_shown {
        record.rafts_recorded_only.clear();
    }
    json(&record)
}

fn join_request_row(r: &stratum_domain::membership::JoinRequest) -> JoinRequestRow {
    JoinRequestRow {
        request_id: r.request_id.clone(),
        status: r.status.as_str(),
        version: r.version,
        doc: serde_json::to_string(&JoinRequestRecord::from(r)).expect("records serialize"),
    }
}

/// A token as the API lists it: never its secret.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct TokenRecord {
    pub id: String,
    pub principal: String,
    pub policies: Vec<String>,
    pub expires_at: Option<String>,
    pub created_at: String,
    pub created_by: String,
    pub revoked_at: Option<String>,
    pub revoked_by: Option<String>,
}

/// A token as the API shows it: never its secret.
pub fn token_record(t: &stratum_domain::iam::Token) -> TokenRecord {
    let time =
        |t: &chrono::DateTime<chrono::Utc>| t.to_rfc3339_opts(chrono::SecondsFormat::AutoSi, true);
    TokenRecord {
        id: t.token_id.clone(),
        principal: t.principal.clone(),
        policies: t.policies.clone(),
        expires_at: t.expires_at.as_ref().map(time),
        created_at: time(&t.created_at),
        created_by: t.created_by.clone(),
        revoked_at: t.revoked_at.as_ref().map(time),
        revoked_by: t.revoked_by.clone(),
    }
}

fn token_row(t: &stratum_domain::iam::Token) -> TokenRow {
    TokenRow {
        token_id: t.token_id.clone(),
        secret_sha256: t.verifier.sha256().copied(),
        secret_argon2id: t.verifier.argon2id().map(str::to_owned),
        principal: t.principal.clone(),
        policies: serde_json::to_string(&t.policies).expect("strings serialize"),
        expires_at: t.expires_at.map(|e| e.timestamp_micros()),
        revoked_at: t.revoked_at.map(|e| e.timestamp_micros()),
        doc: json(&token_record(t)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn snapshot_with(projections: Vec<(&'static str, u32)>) -> Vec<u8> {
        let rm = ReadModels::default();
        postcard::to_allocvec(&SnapshotOf {
            format: SNAPSHOT_FORMAT,
            projections,
            state: &rm.state,
            head_hash: rm.head_hash,
        })
        .unwrap()
    }

    #[test]
    fn a_snapshot_is_loaded_only_by_the_projection_versions_that_folded_it() {
        let ours: Vec<_> = PROJECTIONS.iter().map(|p| (p.name, p.version)).collect();
        assert!(ReadModels::from_snapshot(&snapshot_with(ours.clone())).is_some());
        assert!(ReadModels::from_snapshot(&ReadModels::default().snapshot()).is_some());
        for i in 0..ours.len() {
            let mut other = ours.clone();
            other[i].1 += 1;
            assert!(
                ReadModels::from_snapshot(&snapshot_with(other)).is_none(),
                "a snapshot of {} v{} was loaded",
                ours[i].0,
                ours[i].1 + 1
            );
        }
        assert!(ReadModels::from_snapshot(&snapshot_with(ours[..1].to_vec())).is_none());
    }

    #[test]
    fn a_snapshot_of_another_format_is_not_loaded() {
        let rm = ReadModels::default();
        let old = postcard::to_allocvec(&(SNAPSHOT_FORMAT - 1, &rm.state, rm.head_hash)).unwrap();
        assert!(ReadModels::from_snapshot(&old).is_none());
    }
}
