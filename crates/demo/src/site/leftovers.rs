//! A page that leaves behind everything a browser can keep between visits
//! (a cookie, local storage, session storage, an IndexedDB database and a
//! script its HTTP cache may keep for an hour) and reports what it found of
//! an earlier visit: `/leftovers/found?cookie=&local=&session=&indexeddb=`
//! (in the request log; empty values for nothing found), with the page's
//! `visibility` (a hidden page has its timers throttled to one a second). A
//! crawl isolated from the one before finds nothing, and fetches the script
//! again.
//!
//! `/leftovers?frame=ORIGIN` also shows `ORIGIN/leftovers/framed` in a frame:
//! the same leaving and reporting from another site (`&frame=1` in its
//! report), whose storage Chrome keeps apart, under the page's site. The page
//! is `#ready` only once the frame has reported too, so a crawl that waits for
//! it ends after both reports, however fast it is.

use axum::extract::Query;
use axum::http::header;
use axum::response::{Html, IntoResponse};
use serde::Deserialize;

use super::shop::{item_html, page_html, product};

const LEAVE_AND_REPORT: &str = r#"<script src="/leftovers/cached.js"></script>
<script>
(async () => {
  const found = {
    cookie: document.cookie.includes('left=') ? 'yes' : '',
    local: localStorage.getItem('left') || '',
    session: sessionStorage.getItem('left') || '',
    indexeddb: '',
    visibility: document.visibilityState,
  };
  const db = await new Promise((ok, fail) => {
    const open = indexedDB.open('leftovers', 1);
    open.onupgradeneeded = () => open.result.createObjectStore('left');
    open.onsuccess = () => ok(open.result);
    open.onerror = () => fail(open.error);
  });
  found.indexeddb = await new Promise((ok) => {
    const get = db.transaction('left').objectStore('left').get('left');
    get.onsuccess = () => ok(get.result || '');
    get.onerror = () => ok('');
  });
  await new Promise((ok) => {
    const tx = db.transaction('left', 'readwrite');
    tx.objectStore('left').put('yes', 'left');
    tx.oncomplete = ok;
    tx.onerror = ok;
  });
  document.cookie = 'left=yes; Max-Age=86400; Path=/';
  localStorage.setItem('left', 'yes');
  sessionStorage.setItem('left', 'yes');
  const framed = window !== window.top;
  if (framed) found.frame = '1';
  await fetch('/leftovers/found?' + new URLSearchParams(found));
  if (framed) {
    window.top.postMessage('leftovers-reported', '*');
    return;
  }
  await (window.frameReported || Promise.resolve());
  document.body.insertAdjacentHTML('beforeend', '<div id="ready"></div>');
})();
</script>"#;

#[derive(Deserialize)]
pub(super) struct LeftoversParams {
    page: Option<u32>,
    /// The origin of a framed page of another site (`http://localhost:PORT`).
    frame: Option<String>,
}

pub(super) async fn page(Query(p): Query<LeftoversParams>) -> Html<String> {
    let item = item_html(&product("leftovers", p.page.unwrap_or(1).clamp(1, 15)));
    // The frame's origin comes from the test; only an http origin is shown.
    let frame = p
        .frame
        .filter(|origin| origin.starts_with("http://") && !origin.contains(['"', '<', '>']))
        .map(|origin| {
            // Listening before the frame exists: its message cannot come too early.
            format!(
                "<script>window.frameReported = new Promise((ok) => addEventListener('message', \
                 (e) => e.data === 'leftovers-reported' && ok()));</script>\n\
                 <iframe src=\"{origin}/leftovers/framed\"></iframe>"
            )
        })
        .unwrap_or_default();
    page_html(
        "Leftovers",
        &format!("<ul id=\"results\">{item}</ul>\n{frame}\n{LEAVE_AND_REPORT}"),
    )
}

/// The framed page: leaves and reports as the page does, from its own site.
pub(super) async fn framed() -> Html<String> {
    page_html("Framed leftovers", LEAVE_AND_REPORT)
}

/// Cacheable for an hour: a browser that kept its cache does not ask again.
pub(super) async fn cached_script() -> impl IntoResponse {
    (
        [
            (header::CONTENT_TYPE, "text/javascript"),
            (header::CACHE_CONTROL, "public, max-age=3600"),
        ],
        "window.cachedScriptRan = true;",
    )
}

/// Where the page reports what it found (`?cookie=&local=&session=&indexeddb=`).
pub(super) async fn found() -> axum::http::StatusCode {
    axum::http::StatusCode::NO_CONTENT
}
