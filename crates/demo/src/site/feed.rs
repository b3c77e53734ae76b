//! A newest-first feed per keyword, for incremental crawls: a keyword lists
//! 15 posts until [`super::DemoSite::publish`] adds newer ones on top.

use std::collections::HashMap;

use axum::extract::{Query, State};
use axum::response::Html;
use serde::Deserialize;

use super::AppState;
use super::shop::{PER_PAGE, Product, item_html, page_html, price, slug};

/// Posts every keyword's feed starts with.
pub const INITIAL_POSTS: u32 = 15;

fn post(keyword: &str, n: u32) -> Product {
    let slug = slug(keyword);
    Product {
        title: format!("{keyword} post {n}"),
        url: format!("/post/{slug}-{n}"),
        price: price(n),
        image: format!("/img/{slug}-{n}.png"),
        page: 0,
    }
}

/// Posts `newest` down to `newest - count + 1` of a keyword's feed, URLs made
/// absolute against `base_url`, as a crawler should report them.
pub fn expected_posts(base_url: &str, keyword: &str, newest: u32, count: u32) -> Vec<Product> {
    let base = base_url.trim_end_matches('/');
    (0..count.min(newest))
        .map(|i| {
            let p = post(keyword, newest - i);
            Product {
                url: format!("{base}{}", p.url),
                image: format!("{base}{}", p.image),
                ..p
            }
        })
        .collect()
}

/// Posts of a keyword's feed so far.
pub(super) fn published(feed: &HashMap<String, u32>, keyword: &str) -> u32 {
    feed.get(keyword).copied().unwrap_or(INITIAL_POSTS)
}

#[derive(Deserialize)]
pub(super) struct FeedParams {
    q: Option<String>,
    page: Option<u32>,
    /// Ends every page that has posts with the same sponsored post.
    #[serde(default)]
    ad: bool,
}

/// `/feed?q=&page=&ad=`: page 1 lists the newest posts.
pub(super) async fn feed(State(s): State<AppState>, Query(p): Query<FeedParams>) -> Html<String> {
    let keyword = p.q.as_deref().unwrap_or("");
    let page = p.page.unwrap_or(1).max(1);
    let total = published(&s.feed.lock().expect("feed lock"), keyword);
    let newest = total.saturating_sub((page - 1).saturating_mul(PER_PAGE));
    let mut items: String = (0..PER_PAGE.min(newest))
        .map(|i| item_html(&post(keyword, newest - i)))
        .collect();
    if p.ad && newest > 0 {
        items.push_str(&item_html(&Product {
            title: "Sponsored".into(),
            url: "/sponsored".into(),
            price: price(0),
            image: "/img/sponsored.png".into(),
            page: 0,
        }));
    }
    page_html(
        &format!("Feed: {}", super::shop::esc(keyword)),
        &format!("<ul id=\"results\">{items}</ul>"),
    )
}
