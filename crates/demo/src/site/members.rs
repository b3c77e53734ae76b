//! A members' search for kept sessions: the first visit gets a `member` cookie
//! (HttpOnly, so only the browser or the HTTP client can keep it), and the
//! page's script counts visits in local storage and reports the count back.
//! The request log shows which cookie and which count every visit came with.

use axum::extract::{Query, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{Html, IntoResponse, Response};

use super::AppState;
use super::shop::{Params, search_html};

const COUNT_VISITS: &str = r#"<script>
const visits = (parseInt(localStorage.getItem('visits') || '0', 10) || 0) + 1;
localStorage.setItem('visits', String(visits));
fetch('/members/visits?n=' + visits).finally(() =>
  document.body.insertAdjacentHTML('beforeend', '<div id="ready"></div>'));
</script>"#;

/// The member cookie a request carries, if any.
pub fn member_cookie(headers: &HeaderMap) -> Option<String> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .find_map(|pair| pair.trim().strip_prefix("member=").map(str::to_owned))
}

pub(super) async fn members(
    State(s): State<AppState>,
    headers: HeaderMap,
    Query(p): Query<Params>,
) -> Response {
    let Html(page) = search_html(p.q.as_deref().unwrap_or("members"), 1);
    let page = Html(page.replace("</body>", &format!("{COUNT_VISITS}\n</body>")));
    if member_cookie(&headers).is_some() {
        return page.into_response();
    }
    let n = s.members.fetch_add(1, std::sync::atomic::Ordering::SeqCst) + 1;
    (
        [(
            header::SET_COOKIE,
            format!(
                "member={}m{n}; Path=/; HttpOnly; SameSite=Lax; Max-Age=86400",
                p.tag
                    .as_deref()
                    .map(|t| format!("{t}-"))
                    .unwrap_or_default()
            ),
        )],
        page,
    )
        .into_response()
}

/// Where the page's script reports its visit count (`?n=`, kept in the request log).
pub(super) async fn visits() -> StatusCode {
    StatusCode::NO_CONTENT
}
