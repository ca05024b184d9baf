//! The one error shape of every 4xx and 5xx answer (SPEC §2), the exhaustive
//! table from error code to HTTP status, and the request id every error
//! body carries.

use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use serde::Serialize;
use serde_json::{json, Value};
use stratum_domain::{ErrorCode, FieldError, Refusal};

use stratum_store::StoreError;

/// Seconds a client waits before retrying a 503 of an unreachable
/// dependency.
pub const RETRY_AFTER_SECS: u64 = 2;

/// Seconds a client waits before retrying a write the full disk refused:
/// space is made by a person, not in a moment.
pub const DISK_FULL_RETRY_SECS: u64 = 30;

tokio::task_local! {
    /// The request id of the request being answered.
    pub static REQUEST_ID: String;
    /// The caller's own `X-Request-Id`, when it sent a valid one.
    pub static CLIENT_REQUEST_ID: Option<String>;
}

/// The current request's id, or `-` outside a request.
pub fn current_request_id() -> String {
    REQUEST_ID
        .try_with(Clone::clone)
        .unwrap_or_else(|_| "-".to_owned())
}

/// The HTTP status of every error code. No catch-all arm: a new code
/// cannot silently become a 500.
pub fn status_of(code: ErrorCode) -> StatusCode {
    match code {
        ErrorCode::InvalidInput | ErrorCode::PolicyRejected => StatusCode::BAD_REQUEST,
        ErrorCode::Unauthenticated => StatusCode::UNAUTHORIZED,
        ErrorCode::AccessDenied => StatusCode::FORBIDDEN,
        ErrorCode::NotFound => StatusCode::NOT_FOUND,
        ErrorCode::MethodNotAllowed => StatusCode::METHOD_NOT_ALLOWED,
        ErrorCode::MemberExists
        | ErrorCode::MemberNotJoining
        | ErrorCode::MemberNotFailed
        | ErrorCode::MemberDecommissioned
        | ErrorCode::RaftCleanupPending
        | ErrorCode::QuorumAtRisk
        | ErrorCode::RestoreRequired
        | ErrorCode::JoinApprovalRefused
        | ErrorCode::JoinRequestClosed
        | ErrorCode::VersionConflict
        | ErrorCode::UpgradeAlreadyActive
        | ErrorCode::UpgradeNotCancelable
        | ErrorCode::UpgradeStateConflict
        | ErrorCode::NotNodeTurn
        | ErrorCode::ReleaseExists
        | ErrorCode::RunningReleaseAlreadySet
        | ErrorCode::RunningReleaseNotSet
        | ErrorCode::PolicyExists => StatusCode::CONFLICT,
        ErrorCode::PreconditionFailed => StatusCode::PRECONDITION_FAILED,
        ErrorCode::PayloadTooLarge => StatusCode::PAYLOAD_TOO_LARGE,
        ErrorCode::UriTooLong => StatusCode::URI_TOO_LONG,
        ErrorCode::HeadersTooLarge => StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE,
        ErrorCode::UnsupportedMediaType => StatusCode::UNSUPPORTED_MEDIA_TYPE,
        ErrorCode::IdempotencyKeyReused => StatusCode::UNPROCESSABLE_ENTITY,
        ErrorCode::RateLimited => StatusCode::TOO_MANY_REQUESTS,
        ErrorCode::UpgradeInProgress | ErrorCode::Unavailable | ErrorCode::OutcomeUnknown => {
            StatusCode::SERVICE_UNAVAILABLE
        }
        ErrorCode::Internal => StatusCode::INTERNAL_SERVER_ERROR,
    }
}

/// An error answer: a refusal (the domain's, or one the service makes of
/// a request it cannot take) in the one JSON shape, with its status. It
/// holds the [`Refusal`] itself rather than a copy of its fields.
#[derive(Clone, Debug, PartialEq)]
pub struct ApiError(pub Refusal);

impl std::ops::Deref for ApiError {
    type Target = Refusal;
    fn deref(&self) -> &Refusal {
        &self.0
    }
}

impl std::ops::DerefMut for ApiError {
    fn deref_mut(&mut self) -> &mut Refusal {
        &mut self.0
    }
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Body<'a> {
    code: &'static str,
    message: &'a str,
    request_id: &'a str,
    #[serde(skip_serializing_if = "<[_]>::is_empty")]
    field_errors: &'a [FieldError],
    #[serde(skip_serializing_if = "<[_]>::is_empty")]
    issues: &'a [Value],
    #[serde(skip_serializing_if = "Option::is_none")]
    details: Option<&'a Value>,
}

impl ApiError {
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        Self(Refusal::new(code, message))
    }

    /// The same answer, with `details` (what a client acts on).
    pub fn with_details(mut self, details: Value) -> Self {
        self.0.details = Some(details);
        self
    }

    pub fn invalid(field_errors: Vec<FieldError>) -> Self {
        Refusal::invalid(field_errors).into()
    }

    pub fn not_found(what: impl Into<String>) -> Self {
        Refusal::not_found(what).into()
    }

    pub fn unauthenticated() -> Self {
        Self::new(
            ErrorCode::Unauthenticated,
            "A valid bearer token is required.",
        )
    }

    pub fn access_denied(action: &str, resource: &str) -> Self {
        Self::new(
            ErrorCode::AccessDenied,
            format!("Your policies do not allow {action} on {resource}."),
        )
        .with_details(json!({ "action": action, "resource": resource }))
    }

    pub fn unavailable(what: impl std::fmt::Display) -> Self {
        tracing::warn!(error = %what, "dependency unavailable");
        Self::new(
            ErrorCode::Unavailable,
            "Upstream temporarily unavailable; retry shortly.",
        )
    }

    pub fn internal(what: impl std::fmt::Display) -> Self {
        tracing::error!(error = %what, "internal error");
        Self::new(
            ErrorCode::Internal,
            "An unexpected error occurred; quote the request id when reporting it.",
        )
    }

    pub fn status(&self) -> StatusCode {
        status_of(self.code)
    }

    /// The JSON body, with the given request id.
    pub fn body(&self, request_id: &str) -> Value {
        serde_json::to_value(Body {
            code: self.code.as_str(),
            message: &self.message,
            request_id,
            field_errors: &self.field_errors,
            issues: &self.issues,
            details: self.details.as_ref(),
        })
        .expect("error bodies serialize")
    }
}

impl From<Refusal> for ApiError {
    fn from(r: Refusal) -> Self {
        Self(r)
    }
}

impl From<StoreError> for ApiError {
    fn from(e: StoreError) -> Self {
        match e {
            StoreError::Unavailable(_) | StoreError::Conflict(_) => ApiError::unavailable(e),
            StoreError::Full(_) => {
                tracing::error!(error = %e, "a write cannot be stored: the database's disk is full");
                Self::new(
                        ErrorCode::Unavailable,
                        "The database's disk is full: nothing of this request was stored. Retry once space is made.",
                    ).with_details(json!({ "retryAfterSeconds": DISK_FULL_RETRY_SECS }))
            }
            StoreError::OutcomeUnknown(_) => {
                tracing::warn!(error = %e, "a write's commit was in flight when the database connection broke");
                Self::new(
                    ErrorCode::OutcomeUnknown,
                    "The connection to the database broke while this write was being committed: it may have been stored. Retry with the same Idempotency-Key to get its answer if it was; without one, read before writing again.",
                )
            }
            StoreError::Behind(_) => {
                tracing::info!(error = %e, "a read waits for derived data to catch up");
                Self::new(
                    ErrorCode::Unavailable,
                    "The log's tree is catching up with events another build of stratum appended; retry in a second.",
                )
                .with_details(json!({ "retryAfterSeconds": 1 }))
            }
            StoreError::Corrupt(_) | StoreError::Schema(_) => ApiError::internal(e),
        }
    }
}

impl From<crate::command::CommandError> for ApiError {
    fn from(e: crate::command::CommandError) -> Self {
        use crate::command::CommandError;
        match e {
            CommandError::Store(e) => e.into(),
            CommandError::Stopped | CommandError::Behind { .. } => ApiError::unavailable(e),
        }
    }
}

/// Builds a JSON response with the headers every answer of ours carries.
pub fn json_response(status: StatusCode, body: &Value) -> Response {
    let mut res = (status, axum::Json(body)).into_response();
    set_retry_after(&mut res, body);
    res
}

/// Gives a 503 its `Retry-After`: what the refusal says it waits for (the
/// write freeze knows what its upgrade waits on), or a short default for
/// an unreachable dependency.
pub fn set_retry_after(res: &mut Response, body: &Value) {
    if matches!(
        res.status(),
        StatusCode::SERVICE_UNAVAILABLE | StatusCode::TOO_MANY_REQUESTS
    ) {
        let secs = body["details"]["retryAfterSeconds"]
            .as_u64()
            .unwrap_or(RETRY_AFTER_SECS);
        res.headers_mut()
            .insert(header::RETRY_AFTER, HeaderValue::from(secs));
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        json_response(self.status(), &self.body(&current_request_id()))
    }
}

pub type ApiResult<T> = Result<T, ApiError>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_commit_of_unknown_outcome_is_a_503_that_says_it_may_be_stored() {
        let e = ApiError::from(StoreError::OutcomeUnknown("connection reset".into()));
        assert_eq!(e.code, ErrorCode::OutcomeUnknown);
        let res = e.clone().into_response();
        assert_eq!(res.status(), StatusCode::SERVICE_UNAVAILABLE);
        assert!(res.headers().contains_key(header::RETRY_AFTER));
        let body = e.body("req-1");
        assert_eq!(body["code"], "OUTCOME_UNKNOWN");
        assert!(body["message"]
            .as_str()
            .unwrap()
            .contains("may have been stored"));
        // Nothing was stored: the other 503.
        let e = ApiError::from(StoreError::Unavailable("refused".into()));
        assert_eq!(e.code, ErrorCode::Unavailable);
    }
}
