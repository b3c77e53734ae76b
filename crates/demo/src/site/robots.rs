//! The shop's robots.txt, as a test sets it: none (404, the default), a
//! file (rules, or garbage served as one), a status, or a redirect (to a
//! server that is not there, say).

use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};

use super::AppState;

/// What `/robots.txt` answers.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum RobotsTxt {
    /// 404: the shop has none.
    #[default]
    Missing,
    /// 200 with this body, as text/plain.
    File(String),
    /// This status, with an empty body.
    Status(u16),
    /// 302 to this URL.
    Redirect(String),
}

pub(super) async fn robots_txt(State(s): State<AppState>) -> Response {
    let answer = s.robots.lock().unwrap().clone();
    match answer {
        RobotsTxt::Missing => StatusCode::NOT_FOUND.into_response(),
        RobotsTxt::File(body) => ([(header::CONTENT_TYPE, "text/plain")], body).into_response(),
        RobotsTxt::Status(code) => StatusCode::from_u16(code)
            .unwrap_or(StatusCode::INTERNAL_SERVER_ERROR)
            .into_response(),
        RobotsTxt::Redirect(to) => (StatusCode::FOUND, [(header::LOCATION, to)]).into_response(),
    }
}
