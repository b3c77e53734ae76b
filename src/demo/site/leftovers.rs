//! A page that leaves behind everything a browser can keep between visits
//! (a cookie, local storage, session storage, an IndexedDB database and a
//! script its HTTP cache may keep for an hour) and reports what it found of
//! an earlier visit: `/leftovers/found?cookie=&local=&session=&indexeddb=`
//! (in the request log; empty values for nothing found). A crawl isolated
//! from the one before finds nothing, and fetches the script again.

use axum::extract::Query;
use axum::http::header;
use axum::response::{Html, IntoResponse};

use super::shop::{Params, item_html, page_html, product};

const LEAVE_AND_REPORT: &str = r#"<script src="/leftovers/cached.js"></script>
<script>
(async () => {
  const found = {
    cookie: document.cookie.includes('left=') ? 'yes' : '',
    local: localStorage.getItem('left') || '',
    session: sessionStorage.getItem('left') || '',
    indexeddb: '',
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
  await fetch('/leftovers/found?' + new URLSearchParams(found));
  document.body.insertAdjacentHTML('beforeend', '<div id="ready"></div>');
})();
</script>"#;

pub(super) async fn page(Query(p): Query<Params>) -> Html<String> {
    let item = item_html(&product("leftovers", p.page.unwrap_or(1).clamp(1, 15)));
    page_html(
        "Leftovers",
        &format!("<ul id=\"results\">{item}</ul>\n{LEAVE_AND_REPORT}"),
    )
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
