//! What the writer decides a request with and answers it with: the
//! context, `If-Match`, a kept answer given again, and the record an
//! answer shows, rendered once.

use stratum_domain::iam::principal_stream;
use stratum_domain::log::log_precision;
use stratum_domain::state::Subject;
use stratum_domain::{CommandContext, ErrorCode, FieldError, Refusal};
use stratum_projections::iam::{policy_record, principal_record};
use stratum_projections::upgrades::{release_record, running_release_record, upgrade_record};
use stratum_projections::{member_record, token_record, JoinRequestRecord, ReadModels};
use stratum_store::IdempotencyRecord;

use super::{Clock, CommandRequest, Committed, IdempotencyKey, Outcome};

/// What the domain decides a request with: the time, who asks, what they hold.
pub(super) fn context(clock: &Clock, req: &CommandRequest) -> CommandContext {
    CommandContext {
        now: log_precision(clock.now()),
        principal: req.meta.principal.clone(),
        held_policies: req.held_policies.clone(),
    }
}

/// `If-Match`, as the domain holds it (412 when the stream moved on).
pub(super) fn if_match_refusal(rm: &ReadModels, req: &CommandRequest) -> Option<Refusal> {
    let expected = req.if_match?;
    rm.state
        .expect_version(&req.command.stream_id(), expected)
        .err()
}

/// The reading errors of a request with the domain's findings on the other
/// fields, so one answer names every bad field.
pub(super) fn merge_input_errors(
    input: &[FieldError],
    decided: Result<stratum_domain::Decision, Refusal>,
) -> Refusal {
    let mut all = input.to_vec();
    if let Err(r) = decided {
        if r.code == ErrorCode::InvalidInput {
            all.extend(
                r.field_errors
                    .into_iter()
                    .filter(|f| !input.iter().any(|i| i.field == f.field)),
            );
        }
    }
    Refusal::invalid(all)
}

pub(super) fn replay_kept(kept: &IdempotencyRecord, idem: &IdempotencyKey) -> Outcome {
    if kept.request_hash != idem.request_hash {
        return Outcome::Refused(Refusal::new(
            ErrorCode::IdempotencyKeyReused,
            "This Idempotency-Key was used with a different request.",
        ));
    }
    Outcome::Committed(Committed {
        subject: None,
        body: kept.body.clone(),
        etag: kept.etag,
        position: None,
        created: kept.status == 201,
        replayed: true,
    })
}

/// The record a command's answer shows, as JSON text, and its version.
pub(super) fn render(rm: &ReadModels, subject: &Subject) -> (String, Option<u64>) {
    fn json<T: serde::Serialize>(v: &T) -> String {
        serde_json::to_string(v).expect("records serialize")
    }
    let m = &rm.state.membership;
    let found = match subject {
        Subject::Member(id) => m.members.get(id).map(|member| {
            (
                json(&member_record(member, Some(m.generation))),
                member.version,
            )
        }),
        Subject::JoinRequest(id) => m
            .join_requests
            .get(id)
            .map(|r| (json(&JoinRequestRecord::from(r)), r.version)),
        Subject::Token(id) => rm
            .state
            .iam
            .tokens
            .get(id)
            .map(|t| (json(&token_record(t)), 1)),
        Subject::Upgrade(id) => rm
            .state
            .upgrades
            .upgrades
            .get(id)
            .map(|u| (json(&upgrade_record(u)), u.version)),
        Subject::Release(v) => rm
            .state
            .upgrades
            .releases
            .get(v)
            .map(|r| (json(&release_record(r)), 1)),
        Subject::RunningRelease => rm
            .state
            .upgrades
            .running
            .as_ref()
            .map(|r| (json(&running_release_record(r)), r.changes)),
        Subject::Policy(name) => rm
            .state
            .iam
            .policies
            .get(name)
            .map(|p| (json(&policy_record(p)), p.version)),
        Subject::ResourcePolicy(key) => rm
            .state
            .iam
            .resource_policies
            .get(key)
            .map(|p| (json(&policy_record(p)), p.version)),
        Subject::StorageVersion => Some((
            json(&stratum_projections::storage::storage_version_record(
                &rm.state.storage,
            )),
            rm.state
                .stream_version(stratum_domain::storage::STORAGE_STREAM),
        )),
        Subject::Facts(node) => rm.state.upgrades.facts.get(node).map(|f| {
            (
                json(&stratum_projections::upgrades::facts_record(node, f)),
                f.version,
            )
        }),
        Subject::Alarm(key) => rm
            .state
            .upgrades
            .alarms
            .get(key)
            .map(|a| (json(&stratum_projections::upgrades::alarm_record(a)), 1)),
        Subject::Principal(p) => rm.state.iam.principal_policies.get(p).map(|a| {
            (
                json(&principal_record(p, a)),
                rm.state.stream_version(&principal_stream(p)),
            )
        }),
    };
    match found {
        Some((body, version)) => (body, Some(version)),
        None => ("null".to_owned(), None),
    }
}
