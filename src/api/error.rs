//! The one error type of the HTTP edge: every failure becomes a JSON body
//! `{"error": {"code", "message", "field"?}}`; 5xx are logged and hidden.

use axum::{
    Json,
    http::StatusCode,
    response::{IntoResponse, Response},
};
use serde::Serialize;
use utoipa::ToSchema;

use crate::domain::FieldError;

/// The body of every error response.
#[derive(Debug, Serialize, ToSchema)]
pub struct ErrorBody {
    pub error: ErrorDetail,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct ErrorDetail {
    /// Machine-readable: bad_request, unauthorized, forbidden, not_found,
    /// conflict, payload_too_large, unsupported_media_type, invalid_field,
    /// overloaded, internal.
    pub code: String,
    pub message: String,
    /// The offending field, when one is at fault (`fields.title.selector`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub field: Option<String>,
}

#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    /// The request could not be read (malformed JSON, a query value of the wrong type).
    #[error("{message}")]
    BadRequest {
        message: String,
        field: Option<String>,
    },
    #[error("{0}")]
    NotFound(String),
    /// The request is fine but clashes with what is stored.
    #[error("{message}")]
    Conflict {
        message: String,
        field: Option<String>,
    },
    /// The request was read but breaks a rule of the domain.
    #[error(transparent)]
    Invalid(#[from] FieldError),
    #[error("a valid bearer token is required")]
    Unauthorized,
    #[error("this token may only read")]
    Forbidden,
    #[error("request body is larger than the limit of {0} bytes")]
    PayloadTooLarge(usize),
    /// The body is not of the type the route reads (named here).
    #[error("unsupported content type: send {0}")]
    UnsupportedMediaType(&'static str),
    /// A cap of the server is reached; try again shortly.
    #[error("{0}")]
    Overloaded(String),
    #[error(transparent)]
    Internal(#[from] anyhow::Error),
}

impl ApiError {
    pub fn not_found(what: &str, id: i64) -> Self {
        ApiError::NotFound(format!("{what} {id} does not exist"))
    }

    fn parts(&self) -> (StatusCode, &'static str, Option<&str>) {
        match self {
            ApiError::BadRequest { field, .. } => {
                (StatusCode::BAD_REQUEST, "bad_request", field.as_deref())
            }
            ApiError::NotFound(_) => (StatusCode::NOT_FOUND, "not_found", None),
            ApiError::Unauthorized => (StatusCode::UNAUTHORIZED, "unauthorized", None),
            ApiError::Forbidden => (StatusCode::FORBIDDEN, "forbidden", None),
            ApiError::Conflict { field, .. } => {
                (StatusCode::CONFLICT, "conflict", field.as_deref())
            }
            ApiError::Invalid(e) => (
                StatusCode::UNPROCESSABLE_ENTITY,
                "invalid_field",
                Some(e.field.as_str()),
            ),
            ApiError::PayloadTooLarge(_) => {
                (StatusCode::PAYLOAD_TOO_LARGE, "payload_too_large", None)
            }
            ApiError::UnsupportedMediaType(_) => (
                StatusCode::UNSUPPORTED_MEDIA_TYPE,
                "unsupported_media_type",
                None,
            ),
            ApiError::Overloaded(_) => (StatusCode::SERVICE_UNAVAILABLE, "overloaded", None),
            ApiError::Internal(_) => (StatusCode::INTERNAL_SERVER_ERROR, "internal", None),
        }
    }
}

impl From<sqlx::Error> for ApiError {
    fn from(e: sqlx::Error) -> Self {
        ApiError::Internal(anyhow::Error::new(e).context("database"))
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let (status, code, field) = self.parts();
        let message = match &self {
            ApiError::Internal(e) => {
                tracing::error!(error = ?e, "request failed");
                "internal error".to_owned()
            }
            other => other.to_string(),
        };
        let body = ErrorBody {
            error: ErrorDetail {
                code: code.to_owned(),
                message,
                field: field.map(str::to_owned),
            },
        };
        let mut response = (status, Json(body)).into_response();
        if status == StatusCode::PAYLOAD_TOO_LARGE {
            // The body is not read: the server closes the connection after
            // this answer, and a client that kept it for its next request
            // would find it closed under that request.
            response.headers_mut().insert(
                axum::http::header::CONNECTION,
                axum::http::HeaderValue::from_static("close"),
            );
        }
        if status == StatusCode::UNAUTHORIZED {
            response.headers_mut().insert(
                axum::http::header::WWW_AUTHENTICATE,
                axum::http::HeaderValue::from_static("Bearer"),
            );
        }
        response
    }
}
