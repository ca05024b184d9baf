//! A batch as the writer decides it, command by command, each against
//! the state the ones before it left: its events, sealed onto the log's
//! chain, and the answers it keeps for an `Idempotency-Key`.

use std::collections::HashMap;

use stratum_domain::log::Recorded;
use stratum_domain::state::stream_of;
use stratum_domain::stored::encode_at;
use stratum_store::{EventStore, Head, IdempotencyRecord, StoreResult, WriteTx};
use uuid::Uuid;

use super::Writer;
use crate::command::decide::{context, if_match_refusal, render, replay_kept};
use crate::command::{CommandRequest, Committed, Outcome};
use stratum_domain::Refusal;

/// A batch as it is decided: its events, the answers it keeps, and the
/// head of the log it follows.
#[derive(Default)]
pub(in crate::command) struct Batch {
    pub(super) events: Vec<Recorded>,
    pub(super) kept: Vec<IdempotencyRecord>,
    keys: HashMap<(String, String), usize>,
    /// The head the batch's first event follows.
    pub(super) follows: Head,
    /// The position and hash of its last event (the head it follows when
    /// it has none).
    pub(super) position: u64,
    prev_hash: [u8; 32],
}

impl Batch {
    pub(super) fn following(head: Head) -> Self {
        Self {
            follows: head,
            position: head.position,
            prev_hash: head.hash,
            ..Default::default()
        }
    }

    /// The head the log has once this batch is committed.
    pub(super) fn leaves(&self) -> Head {
        Head {
            position: self.position,
            hash: self.prev_hash,
        }
    }

    fn kept(&self, principal: &str, key: &str) -> Option<&IdempotencyRecord> {
        self.keys
            .get(&(principal.to_owned(), key.to_owned()))
            .map(|i| &self.kept[*i])
    }
}

/// Where a kept answer to an `Idempotency-Key` is looked up when the batch
/// being decided has none.
pub(super) enum KeptIn<'a> {
    /// The open transaction, under the log's lock.
    Tx(&'a mut dyn WriteTx),
    /// The batch whose commit is in flight, then what is committed. A key
    /// another process keeps meanwhile fails this batch's insert on the
    /// key's uniqueness, and the batch is decided again under the lock.
    Ahead {
        before: &'a Batch,
        store: &'a dyn EventStore,
    },
}

impl KeptIn<'_> {
    async fn find(&mut self, principal: &str, key: &str) -> StoreResult<Option<IdempotencyRecord>> {
        match self {
            KeptIn::Tx(tx) => tx.idempotency(principal, key).await,
            KeptIn::Ahead { before, store } => match before.kept(principal, key) {
                Some(k) => Ok(Some(k.clone())),
                None => store.idempotency(principal, key).await,
            },
        }
    }
}

impl Writer {
    /// Decides one command into the batch; its answer is known before commit.
    pub(super) async fn one(
        &mut self,
        kept_in: &mut KeptIn<'_>,
        batch: &mut Batch,
        req: &CommandRequest,
    ) -> StoreResult<Outcome> {
        // A caller the gate admitted against older read models is
        // authorized again here, against the state this batch is decided
        // on, before anything is decided or looked up for it: every
        // decision, a batch decided again after a conflict too.
        let held = match self.authorize_again(req) {
            Ok(held) => held,
            Err(refusal) => return Ok(Outcome::Refused(refusal)),
        };
        if let Some(idem) = &req.idempotency {
            let principal = &req.meta.principal;
            let kept = match batch.kept(principal, &idem.key) {
                Some(k) => Some(k.clone()),
                None => kept_in.find(principal, &idem.key).await?,
            };
            if let Some(kept) = kept {
                return Ok(replay_kept(&kept, idem));
            }
        }
        let outcome = tracing::debug_span!(
            parent: &req.trace,
            "decide",
            stream = %req.command.stream_id()
        )
        .in_scope(|| self.decide(batch, req, held));
        // Only answers of commands that were carried out are kept: a refusal
        // appended nothing, so a retry with the same key is decided again
        // (a 503 during an upgrade's write freeze must not stick to the key).
        if let (Some(idem), Outcome::Committed(reply)) = (&req.idempotency, &outcome) {
            // Answers the state decided are kept; a retry gets them again.
            batch.keys.insert(
                (req.meta.principal.clone(), idem.key.clone()),
                batch.kept.len(),
            );
            batch.kept.push(IdempotencyRecord {
                principal: req.meta.principal.clone(),
                key: idem.key.clone(),
                request_hash: idem.request_hash.clone(),
                status: if reply.created { 201 } else { 200 },
                body: reply.body.clone(),
                etag: reply.etag,
                position: reply.position.unwrap_or(batch.position),
            });
        }
        Ok(outcome)
    }

    /// The policies an unconfirmed caller (`req.unconfirmed`) holds in
    /// this state, or the refusal it gets here; `None` for any other.
    /// Never answered as it is: the request settles its caller against
    /// the checked read models first (`http::execute`).
    fn authorize_again(&self, req: &CommandRequest) -> Result<Option<Vec<String>>, Refusal> {
        match &req.unconfirmed {
            Some(caller) => caller.authorize_again(&self.rm, self.clock.now()).map(Some),
            None => Ok(None),
        }
    }

    /// Decides one command; `held` replaces the policies the request says
    /// its caller holds.
    fn decide(
        &mut self,
        batch: &mut Batch,
        req: &CommandRequest,
        held: Option<Vec<String>>,
    ) -> Outcome {
        if let Some(refusal) = if_match_refusal(&self.rm, req) {
            return Outcome::Refused(refusal);
        }
        let mut ctx = context(&self.clock, req);
        if held.is_some() {
            ctx.held_policies = held;
        }
        let decision = match self.rm.state.decide(&req.command, &ctx) {
            Ok(d) => d,
            Err(refusal) => return Outcome::Refused(refusal),
        };
        // Each event in the version the log's storage level allows, all
        // of them or none: a type the level does not write yet is refused.
        let level = self.rm.state.storage.level;
        let encoded: Result<Vec<_>, _> = decision
            .events
            .iter()
            .map(|e| encode_at(e, level))
            .collect();
        let encoded = match encoded {
            Ok(encoded) => encoded,
            Err(e) => {
                return Outcome::Refused(stratum_domain::Refusal::new(
                    stratum_domain::ErrorCode::VersionConflict,
                    format!("Not written: {e}."),
                ))
            }
        };
        let mut last = None;
        for (event, enc) in decision.events.iter().zip(encoded) {
            let stream_id = stream_of(event);
            let mut rec = Recorded {
                position: batch.position + 1,
                stream_version: self.rm.state.stream_version(&stream_id) + 1,
                stream_id,
                event_type: enc.event_type.to_owned(),
                schema_version: enc.schema_version,
                event_id: Uuid::now_v7(),
                occurred_at: ctx.now,
                meta: req.meta.clone(),
                payload: enc.payload,
                prev_hash: [0; 32],
                hash: [0; 32],
            };
            rec.seal(batch.prev_hash);
            self.rm.apply(&rec, event);
            batch.position = rec.position;
            batch.prev_hash = rec.hash;
            last = Some(rec.position);
            batch.events.push(rec);
        }
        let (body, etag) = render(&self.rm, &decision.subject);
        Outcome::Committed(Committed {
            subject: Some(decision.subject),
            body,
            etag,
            position: last,
            created: req.creates,
            replayed: false,
        })
    }
}
