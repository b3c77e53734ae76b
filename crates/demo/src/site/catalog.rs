//! A catalog per keyword whose products change between crawls, for change
//! tracking: a keyword lists [`CATALOG_SIZE`] products, 5 a page, until
//! [`super::DemoSite::reprice`], [`super::DemoSite::withdraw`] and
//! [`super::DemoSite::stock`] change it. Each product shows a title (a link
//! to its page, or with `links=false` plain text), a price and a SKU.

use std::collections::{BTreeMap, BTreeSet};

use axum::extract::{Query, State};
use axum::response::Html;
use serde::Deserialize;

use super::AppState;
use super::shop::{PER_PAGE, esc, page_html, price, slug};

/// Products a keyword's catalog starts with: 5, 5 and 2 over three pages.
pub const CATALOG_SIZE: u32 = 12;

/// What changed in one keyword's catalog since it started.
#[derive(Debug, Clone, Default)]
pub(super) struct Catalog {
    /// Products added after the first [`CATALOG_SIZE`].
    added: u32,
    /// New prices, by product number.
    prices: BTreeMap<u32, String>,
    withdrawn: BTreeSet<u32>,
}

impl Catalog {
    pub(super) fn reprice(&mut self, n: u32, price: &str) {
        self.prices.insert(n, price.to_owned());
    }

    pub(super) fn withdraw(&mut self, n: u32) {
        self.withdrawn.insert(n);
    }

    pub(super) fn stock(&mut self, count: u32) {
        self.added += count;
    }

    /// The products listed, in order: (number, price).
    fn listed(&self) -> Vec<(u32, String)> {
        (1..=CATALOG_SIZE + self.added)
            .filter(|n| !self.withdrawn.contains(n))
            .map(|n| (n, self.prices.get(&n).cloned().unwrap_or_else(|| price(n))))
            .collect()
    }
}

/// A catalog product's title, SKU and URL path (relative to the site), as a
/// crawler should report them.
pub fn catalog_product(keyword: &str, n: u32) -> (String, String, String) {
    (
        format!("{keyword} item {n}"),
        format!("SKU-{n}"),
        format!("/catalog/item/{}-{n}", slug(keyword)),
    )
}

#[derive(Deserialize)]
pub(super) struct CatalogParams {
    q: Option<String>,
    page: Option<u32>,
    /// `false`: titles are plain text, so items have no URL.
    links: Option<bool>,
}

/// `/catalog?q=&page=&links=`: the keyword's catalog as it is now.
pub(super) async fn catalog(
    State(s): State<AppState>,
    Query(p): Query<CatalogParams>,
) -> Html<String> {
    let keyword = p.q.as_deref().unwrap_or("");
    let page = p.page.unwrap_or(1).max(1) as usize;
    let listed = s
        .catalogs
        .lock()
        .expect("catalog lock")
        .get(keyword)
        .cloned()
        .unwrap_or_default()
        .listed();
    let per_page = PER_PAGE as usize;
    let items: String = listed
        .iter()
        .skip((page - 1).saturating_mul(per_page))
        .take(per_page)
        .map(|(n, price)| {
            let (title, sku, path) = catalog_product(keyword, *n);
            let title = match p.links.unwrap_or(true) {
                true => format!(r#"<a class="title" href="{path}">{}</a>"#, esc(&title)),
                false => format!(r#"<span class="title">{}</span>"#, esc(&title)),
            };
            format!(
                r#"<li class="product">{title}<span class="price">{}</span><span class="sku">{sku}</span></li>"#,
                esc(price)
            )
        })
        .collect();
    page_html(
        &format!("Catalog: {}", esc(keyword)),
        &format!("<ul id=\"results\">{items}</ul>"),
    )
}
