//! What a test crawls: sites searching the fixture shop, and keywords on them.

use reqwest::StatusCode;
use serde_json::{Value, json};

use super::TestApp;

/// The schedule of a keyword a test crawls only when it asks to: midnight
/// on 1 January, so the scheduler never fires it while a test runs.
pub const ON_DEMAND: &str = "0 0 0 1 1 *";

/// The fields of a site reading the fixture's heavy page (`/heavy`): each
/// item's title, link, price and image URL.
pub fn heavy_page_fields() -> Value {
    json!({
        "title": {"selector": "a.title"},
        "link": {"selector": "a.title", "attr": "href", "link": true},
        "price": {"selector": ".price"},
        "image": {"selector": "img", "attr": "src", "link": true},
    })
}

impl TestApp {
    /// A site searching the fixture shop at `path` (e.g. "/search").
    pub fn site_body(&self, name: &str, path: &str) -> Value {
        json!({
            "name": name,
            "search_url": format!("{}{path}?q={{keyword}}&page={{page}}", self.site.base_url()),
            "item_selector": "li.product",
            "fields": {
                "title": {"selector": "a.title"},
                "link": {"selector": "a.title", "attr": "href"},
                "price": {"selector": ".price"},
            },
            "max_pages": 5,
            "render": "browser",
        })
    }

    /// Creates the site; its id.
    pub async fn create_site(&self, body: Value) -> i64 {
        let (status, site) = self.post("/api/sites", body).await;
        assert_eq!(status, StatusCode::CREATED, "{site}");
        site["id"].as_i64().unwrap()
    }

    /// Creates an enabled keyword on `site_ids`, fired on `schedule`
    /// ([`ON_DEMAND`] for none); its id.
    pub async fn create_keyword(&self, keyword: &str, site_ids: &[i64], schedule: &str) -> i64 {
        let (status, kw) = self
            .post(
                "/api/keywords",
                json!({"keyword": keyword, "site_ids": site_ids, "schedule": schedule, "enabled": true}),
            )
            .await;
        assert_eq!(status, StatusCode::CREATED, "{kw}");
        kw["id"].as_i64().unwrap()
    }

    /// A one-page site at `path_and_query` on the fixture shop (`{keyword}` in
    /// it), with `extra` settings over the defaults.
    pub async fn one_page_site(&self, name: &str, path_and_query: &str, extra: Value) -> i64 {
        let mut body = self.site_body(name, "/");
        body["search_url"] = json!(format!("{}{path_and_query}", self.site.base_url()));
        for (key, value) in extra.as_object().expect("settings object") {
            body[key] = value.clone();
        }
        self.create_site(body).await
    }
}
