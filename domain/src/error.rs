//! Business refusals: the one error type `decide` returns, carrying the
//! spec's error code, a sentence for a person, and structured findings.

use serde::Serialize;
use serde_json::Value;

string_enum! {
    /// Every error code the product answers with (SPEC §2 and the sections that
    /// name conflict codes). The HTTP status of each code is decided in one
    /// exhaustive table in the API crate. `as_str` is the code as it
    /// appears in the `code` member of an error body.
    pub enum ErrorCode {
        InvalidInput = "INVALID_INPUT",
        PolicyRejected = "POLICY_REJECTED",
        Unauthenticated = "UNAUTHENTICATED",
        AccessDenied = "ACCESS_DENIED",
        NotFound = "NOT_FOUND",
        MethodNotAllowed = "METHOD_NOT_ALLOWED",
        MemberExists = "MEMBER_EXISTS",
        MemberNotJoining = "MEMBER_NOT_JOINING",
        MemberNotFailed = "MEMBER_NOT_FAILED",
        MemberDecommissioned = "MEMBER_DECOMMISSIONED",
        RaftCleanupPending = "RAFT_CLEANUP_PENDING",
        QuorumAtRisk = "QUORUM_AT_RISK",
        RestoreRequired = "RESTORE_REQUIRED",
        JoinApprovalRefused = "JOIN_APPROVAL_REFUSED",
        JoinRequestClosed = "JOIN_REQUEST_CLOSED",
        VersionConflict = "VERSION_CONFLICT",
        PreconditionFailed = "PRECONDITION_FAILED",
        PayloadTooLarge = "PAYLOAD_TOO_LARGE",
        /// 414: the request line is longer than the server reads.
        UriTooLong = "URI_TOO_LONG",
        /// 431: the request's headers are larger than the server reads.
        HeadersTooLarge = "HEADERS_TOO_LARGE",
        UnsupportedMediaType = "UNSUPPORTED_MEDIA_TYPE",
        IdempotencyKeyReused = "IDEMPOTENCY_KEY_REUSED",
        UpgradeInProgress = "UPGRADE_IN_PROGRESS",
        UpgradeAlreadyActive = "UPGRADE_ALREADY_ACTIVE",
        UpgradeNotCancelable = "UPGRADE_NOT_CANCELABLE",
        UpgradeStateConflict = "UPGRADE_STATE_CONFLICT",
        NotNodeTurn = "NOT_NODE_TURN",
        ReleaseExists = "RELEASE_EXISTS",
        RunningReleaseAlreadySet = "RUNNING_RELEASE_ALREADY_SET",
        RunningReleaseNotSet = "RUNNING_RELEASE_NOT_SET",
        PolicyExists = "POLICY_EXISTS",
        /// Too many refused secrets from one address, or a node agent
        /// reporting faster than it needs to: 429 with `Retry-After`.
        RateLimited = "RATE_LIMITED",
        Unavailable = "UNAVAILABLE",
        /// The connection to the database broke while a write was being
        /// committed: it may have been stored. 503; a retry with the same
        /// `Idempotency-Key` answers what was stored, if it was.
        OutcomeUnknown = "OUTCOME_UNKNOWN",
        Internal = "INTERNAL",
    }
}

/// One field's problem: `field` is the field's path (`links[0].interface`,
/// `mgmtIp`), empty for the whole request.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct FieldError {
    pub field: String,
    pub message: String,
}

impl FieldError {
    pub fn new(field: impl Into<String>, message: impl Into<String>) -> Self {
        Self {
            field: field.into(),
            message: message.into(),
        }
    }
}

/// A refusal of a command by the domain.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
#[error("{code:?}: {message}")]
pub struct Refusal {
    pub code: ErrorCode,
    pub message: String,
    pub field_errors: Vec<FieldError>,
    /// The findings of a rejected policy document (`POLICY_REJECTED`).
    pub issues: Vec<Value>,
    pub details: Option<Value>,
}

impl Refusal {
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        Self {
            code,
            message: message.into(),
            field_errors: Vec::new(),
            issues: Vec::new(),
            details: None,
        }
    }

    pub fn invalid(field_errors: Vec<FieldError>) -> Self {
        let message = match field_errors.as_slice() {
            [one] if one.field.is_empty() => one.message.clone(),
            [one] => format!("{} {}.", one.field, one.message),
            _ => format!("The request has {} invalid fields.", field_errors.len()),
        };
        Self {
            code: ErrorCode::InvalidInput,
            message,
            field_errors,
            issues: Vec::new(),
            details: None,
        }
    }

    pub fn not_found(what: impl Into<String>) -> Self {
        Self::new(
            ErrorCode::NotFound,
            format!("{} does not exist.", what.into()),
        )
    }

    pub fn with_details(mut self, details: Value) -> Self {
        self.details = Some(details);
        self
    }

    pub fn with_issues(mut self, issues: Vec<Value>) -> Self {
        self.issues = issues;
        self
    }

    pub fn with_field_errors(mut self, field_errors: Vec<FieldError>) -> Self {
        self.field_errors = field_errors;
        self
    }
}

/// Collects field errors so that a request with several problems lists all
/// of them at once.
#[derive(Debug, Default)]
pub struct Findings(pub Vec<FieldError>);

impl Findings {
    pub fn push(&mut self, field: &str, message: impl Into<String>) {
        self.0.push(FieldError::new(field, message));
    }

    /// The value of a required field, or a finding that it is missing.
    pub fn required<'a, T>(&mut self, field: &str, value: &'a Option<T>) -> Option<&'a T> {
        if value.is_none() {
            self.push(field, "is required");
        }
        value.as_ref()
    }

    /// The checked value when nothing was found wrong. Every check that
    /// answers `None` pushes a finding, so `None` without one is a check
    /// that forgot to: still a refusal, never a panic.
    pub fn conclude<T>(self, value: Option<T>) -> Result<T, Refusal> {
        match value {
            Some(v) if self.0.is_empty() => Ok(v),
            _ => Err(Refusal::invalid(self.0)),
        }
    }

    pub fn into_result(self) -> Result<(), Refusal> {
        if self.0.is_empty() {
            Ok(())
        } else {
            Err(Refusal::invalid(self.0))
        }
    }
}
