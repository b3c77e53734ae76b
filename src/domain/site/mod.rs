//! A crawl target: where to search, how to read the results, and how politely.

mod detail;
mod expectations;
mod extraction;
mod identity;
pub(in crate::domain) mod locator;
mod masked;
mod proxy_pool;
pub(in crate::domain) mod render;
mod resources;
mod standing;
mod structured;
pub(in crate::domain) mod template;
mod version;

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

pub use detail::{
    DetailInput, DetailRead, DetailSpec, KnownDetail, MAX_EVERY_HOURS, PREVIEW_DETAIL_PAGES,
};
pub use expectations::{Expectations, ExpectationsInput, RunTally};
pub use extraction::{
    Extraction, FieldInput, FieldSpec, HtmlItems, JsonInput, TokenPaging, item_field_names,
};
pub use identity::{Identity, MASK, ProxyUrl};
pub use locator::{CssSelector, JsonPointer};
pub use masked::restore_masked;
pub use proxy_pool::{
    FIRST_BACKOFF, MAX_BACKOFF, MAX_POOL_MEMBERS, MAX_WEIGHT, PoolMember, PoolMemberInput,
    ProxyPool, ProxyPoolInput, Rotation, backoff, metric_label,
};
pub use render::RenderMode;
pub use resources::{BrowserResources, BrowserResourcesInput, ResourceKind};
pub use standing::{RunVerdict, SiteStatus, Streak};
pub use structured::{
    MAX_PATH_STEPS, OPEN_GRAPH_PREFIXES, PathAlternative, PathStart, SchemaType, Step,
    StructuredPath, short_type_name,
};
pub use template::{MAX_URL_CHARS, SearchUrlTemplate, with_query_param};
pub use version::{Difference, VersionReason, differences};

use super::{
    FieldError,
    action::{self, ActionInput, parse_actions},
    paging::{Paging, PagingInput},
    repair::RepairPolicy,
    text,
};
use extraction::ExtractionInput;

/// Runs of one site active at once across the fleet, when the site sets none.
pub const DEFAULT_MAX_CONCURRENT_RUNS: i32 = 3;
/// Pages a paged search goes through at most, when the site sets no `max_pages`.
pub const DEFAULT_MAX_PAGES: i32 = 100;
/// Longest site name.
const MAX_NAME_CHARS: usize = 200;

/// How hard the fleet may press on a site, across every worker.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Politeness {
    /// Page requests per second, fleet-wide; `None`: unlimited.
    pub max_requests_per_sec: Option<f64>,
    /// Runs of the site active at once, fleet-wide.
    pub max_concurrent_runs: i32,
}

/// Whether cookies and local storage survive between runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct SessionPolicy {
    /// Keep the site's session (encrypted in Postgres) for the next run, on any worker.
    pub keep: bool,
    /// Only one run at a time uses the stored session.
    pub exclusive: bool,
}

/// A site as a client sends it; [`SiteInput::parse`] checks every rule.
#[derive(Debug, Clone, Default, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct SiteInput {
    pub name: String,
    /// URL template with `{keyword}` and, for paged searches, `{page}` or `{offset}`.
    pub search_url: String,
    /// `browser` (default), `http` or `json`.
    pub render: Option<String>,
    /// CSS selector of one item (browser, http).
    pub item_selector: Option<String>,
    /// Instead of `item_selector` (browser, http): the schema.org type whose
    /// items in a page's structured data (JSON-LD, else microdata) are the
    /// site's items, e.g. `Product` for each product of a list page or the
    /// one of a product page. Each field then reads a path inside the item
    /// (`"structured": "offers.price"`). The preview lists the types a page has.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub structured_items: Option<String>,
    pub fields: BTreeMap<String, FieldInput>,
    /// The field (one of `fields`) whose value identifies an item that has no
    /// URL: a SKU, an id. Items are identified by their URL, else by this
    /// field, else by their content (any change makes another item).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub item_key: Option<String>,
    /// Element to wait for (up to 10 s) before reading a page (browser).
    pub wait_for: Option<String>,
    /// An element whose presence means the site refused us (browser, http).
    pub blocked_selector: Option<String>,
    /// Where items and the next-page token are (json).
    pub json: Option<JsonInput>,
    /// Pages at most (default 100 for paged searches, else 1).
    pub max_pages: Option<i32>,
    /// How one page leads to the next (default: `{page}` or the JSON token).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub paging: Option<PagingInput>,
    /// Steps a browser takes on the first page before reading it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub actions: Option<Vec<ActionInput>>,
    pub stuck_timeout_secs: Option<i32>,
    pub max_attempts: Option<i32>,
    /// Page requests per second across the fleet (fractions allowed); none: unlimited.
    pub max_requests_per_sec: Option<f64>,
    /// Runs active at once across the fleet (default 3).
    pub max_concurrent_runs: Option<i32>,
    /// Incremental crawl of a newest-first feed: items an earlier completed run
    /// stored are not stored again, and paging stops where the feed reaches them.
    pub stop_on_seen: Option<bool>,
    /// The first page must have items: none is a failure (`no_items`: the
    /// site changed), not an empty result.
    pub expect_items: Option<bool>,
    /// What a healthy completed run finds; a run below it is completed with
    /// `health: "degraded"` and a reason (and the `run.degraded` event).
    pub expect: Option<ExpectationsInput>,
    /// Queue runs for the site (default true). A disabled site keeps its
    /// settings and history; neither schedules nor a crawl now queue it.
    pub enabled: Option<bool>,
    /// Obey the site's robots.txt (default true): a page it disallows for our
    /// user agent (the product token of `user_agent`, else `crawlfleet`) is
    /// not fetched (`robots_disallowed`), and its Crawl-delay paces the site
    /// fleet-wide when stricter than `max_requests_per_sec`.
    pub respect_robots: Option<bool>,
    /// Keep cookies and local storage between runs (needs SESSION_KEY).
    pub keep_session: Option<bool>,
    /// Only one run at a time uses the kept session.
    pub exclusive_session: Option<bool>,
    pub user_agent: Option<String>,
    /// Extra request headers. On a replacement (or a preview with
    /// `site_id`), `***` keeps the stored value while `search_url` keeps its
    /// origin (and, over plain http, its proxy); otherwise send the value again.
    pub headers: Option<BTreeMap<String, String>>,
    /// `http://` or `socks5://` proxy, credentials allowed; responses mask the
    /// user name and password, and sending them back masked keeps them for
    /// the same proxy (scheme, host and port) only.
    pub proxy: Option<String>,
    /// Instead of `proxy`: several proxies, each weighted, one chosen among
    /// those the fleet has not retired (a proxy that draws refusals is
    /// retired for a back-off) per run, per page or per kept session
    /// (`rotation`). Credentials are masked in responses, as `proxy`'s.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub proxy_pool: Option<ProxyPoolInput>,
    /// Detail pages: the list field holding each item's detail URL, the
    /// fields read there (merged into the item), and which items' detail
    /// pages a run reads.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detail: Option<DetailInput>,
    /// What a repair may do when the site's runs turn degraded or find no
    /// items (its markup changed): `off`, `suggest` (default: verified
    /// proposals wait for a person) or `auto` (a proposal that passes every
    /// verification is applied, and undone if the next run is degraded again).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub repair: Option<String>,
    /// What browser pages download besides what reading them needs: by
    /// default no images, media, web fonts nor requests to known tracker and
    /// ad hosts; `{"allow": ["image", "media", "font", "tracker"]}` (any of
    /// them) downloads those again.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub browser_resources: Option<BrowserResourcesInput>,
}

/// A stored site: the spec it passed the rules with, and its bookkeeping.
#[derive(Debug, Clone, PartialEq)]
pub struct Site {
    pub id: i64,
    pub spec: SiteSpec,
    /// The version the site is at (0: stored before versions were kept and
    /// not changed since).
    pub version: i32,
    /// When a run last kept the site's session (`spec.session.keep`).
    pub session_saved_at: Option<DateTime<Utc>>,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}

/// A site that passed every rule, ready to store.
#[derive(Debug, Clone, PartialEq)]
pub struct SiteSpec {
    pub name: String,
    pub search_url: SearchUrlTemplate,
    pub render: RenderMode,
    pub extraction: Extraction,
    /// The field (one of the extraction's) whose value identifies an item
    /// that has no URL.
    pub item_key: Option<String>,
    pub max_pages: i32,
    /// How one page leads to the next.
    pub paging: Paging,
    /// Steps a browser takes on the first page before reading it.
    pub actions: Vec<action::Step>,
    pub stuck_timeout_secs: Option<i32>,
    pub max_attempts: Option<i32>,
    pub politeness: Politeness,
    pub stop_on_seen: bool,
    /// A first page without items fails the attempt.
    pub expect_items: bool,
    /// What a healthy completed run finds.
    pub expect: Expectations,
    /// Queued for its keywords (by their schedules or a crawl now).
    pub enabled: bool,
    /// Obeys its robots.txt: disallowed pages are not fetched, and its
    /// Crawl-delay paces the site when stricter than `politeness`.
    pub respect_robots: bool,
    pub session: SessionPolicy,
    pub identity: Identity,
    /// Detail pages read for each item, merged into it.
    pub detail: Option<DetailSpec>,
    /// What a repair may do when the site's markup changed.
    pub repair: RepairPolicy,
    /// The kinds of requests its browser pages make besides what reading
    /// them needs (by default none).
    pub browser_resources: BrowserResources,
}

impl SiteSpec {
    /// The page after page `page` of a search for `keyword` whose first page
    /// is `first`: by the JSON API's token (none: that was the last page),
    /// by the page's next link (`next_link` paging; none: the last page), by
    /// `{page}` or `{offset}`, or the same document shown further (in-place
    /// paging); `None` when the search has no next page.
    pub fn next_page_url(
        &self,
        keyword: &str,
        first: &url::Url,
        page: u32,
        next: NextOnPage<'_>,
    ) -> Result<Option<url::Url>, url::ParseError> {
        if let Some(paging) = self.extraction.token_paging() {
            return Ok(next
                .token
                .map(|token| with_query_param(first, &paging.token_param, token)));
        }
        match &self.paging {
            Paging::NextLink { .. } => Ok(next.link.cloned()),
            Paging::LoadMore { .. } | Paging::InfiniteScroll => Ok(Some(first.clone())),
            Paging::Numbered | Paging::Offset { .. } if self.search_url.is_paged() => self
                .search_url
                .url_for(keyword, page + 1, self.paging.offset(page + 1))
                .map(Some),
            Paging::Numbered | Paging::Offset { .. } => Ok(None),
        }
    }
}

/// What a page said of the next one.
#[derive(Debug, Clone, Copy, Default)]
pub struct NextOnPage<'a> {
    /// A JSON API's next token.
    pub token: Option<&'a str>,
    /// The href of the page's next link (`next_link` paging), made absolute.
    pub link: Option<&'a url::Url>,
}

impl SiteInput {
    pub fn parse(self) -> Result<SiteSpec, FieldError> {
        let name = text::non_empty(&self.name, "name", MAX_NAME_CHARS)?;
        let search_url = SearchUrlTemplate::parse(&self.search_url)?;
        let render = self
            .render
            .as_deref()
            .map(RenderMode::parse)
            .transpose()?
            .unwrap_or_default();
        let item_key = self.item_key;
        let extraction = ExtractionInput {
            item_selector: self.item_selector,
            structured_items: self.structured_items,
            fields: self.fields,
            wait_for: self.wait_for,
            blocked_selector: self.blocked_selector,
            json: self.json,
        };
        let extraction = match render {
            RenderMode::Json => extraction.parse_json()?,
            RenderMode::Browser | RenderMode::Http => extraction.parse_html()?,
        };
        let expect = self
            .expect
            .unwrap_or_default()
            .parse(extraction.fields().keys().map(String::as_str))?;
        if let Some(key) = &item_key
            && !extraction.fields().contains_key(key)
        {
            text::check(key, "item_key", extraction::MAX_NAME_CHARS)?;
            let names: Vec<&str> = extraction.fields().keys().map(String::as_str).collect();
            return Err(FieldError::new(
                "item_key",
                format!(
                    "{key:?} is not one of the site's fields ({})",
                    names.join(", ")
                ),
            ));
        }
        let detail = self
            .detail
            .map(|detail| detail.parse(render, extraction.fields()))
            .transpose()?;
        let item_selector = extraction.structured_items().is_none();
        let paging = self
            .paging
            .unwrap_or_default()
            .parse(render, &search_url, item_selector)?;
        let actions = parse_actions(
            self.actions.unwrap_or_default(),
            render == RenderMode::Browser,
        )?;
        let paged = search_url.is_paged()
            || extraction.token_paging().is_some()
            || paging.pages_by_itself();
        let max_pages = self
            .max_pages
            .unwrap_or(if paged { DEFAULT_MAX_PAGES } else { 1 });
        if !(1..=1000).contains(&max_pages) {
            return Err(FieldError::new("max_pages", "must be between 1 and 1000"));
        }
        in_range(self.stuck_timeout_secs, 1..=3600, "stuck_timeout_secs")?;
        in_range(self.max_attempts, 1..=100, "max_attempts")?;
        in_range(self.max_concurrent_runs, 1..=1000, "max_concurrent_runs")?;
        if let Some(rate) = self.max_requests_per_sec
            && !(rate.is_finite() && rate > 0.0 && rate <= 1000.0)
        {
            return Err(FieldError::new(
                "max_requests_per_sec",
                "must be more than 0 and at most 1000 (fractions allowed, e.g. 0.5)",
            ));
        }
        let session = SessionPolicy {
            keep: self.keep_session.unwrap_or(false),
            exclusive: self.exclusive_session.unwrap_or(false),
        };
        if session.exclusive && !session.keep {
            return Err(FieldError::new(
                "exclusive_session",
                "needs keep_session: there is no kept session to share",
            ));
        }
        let repair = match self.repair.as_deref() {
            None => RepairPolicy::default(),
            Some(policy) => policy
                .parse()
                .map_err(|_| FieldError::new("repair", "must be off, suggest or auto"))?,
        };
        let mut identity = Identity::parse(self.user_agent, self.headers, self.proxy)?;
        if let Some(pool) = self.proxy_pool {
            if identity.proxy.is_some() {
                return Err(FieldError::new(
                    "proxy_pool",
                    "set either proxy or proxy_pool, not both",
                ));
            }
            identity.pool = Some(pool.parse()?);
        }
        let browser_resources = self
            .browser_resources
            .map(BrowserResourcesInput::parse)
            .transpose()?
            .unwrap_or_default();
        Ok(SiteSpec {
            name: name.to_owned(),
            search_url,
            render,
            extraction,
            item_key,
            max_pages,
            paging,
            actions,
            stuck_timeout_secs: self.stuck_timeout_secs,
            max_attempts: self.max_attempts,
            politeness: Politeness {
                max_requests_per_sec: self.max_requests_per_sec,
                max_concurrent_runs: self
                    .max_concurrent_runs
                    .unwrap_or(DEFAULT_MAX_CONCURRENT_RUNS),
            },
            stop_on_seen: self.stop_on_seen.unwrap_or(false),
            expect_items: self.expect_items.unwrap_or(false),
            expect,
            enabled: self.enabled.unwrap_or(true),
            respect_robots: self.respect_robots.unwrap_or(true),
            session,
            identity,
            detail,
            repair,
            browser_resources,
        })
    }
}

fn in_range(
    value: Option<i32>,
    range: std::ops::RangeInclusive<i32>,
    field: &str,
) -> Result<(), FieldError> {
    match value {
        Some(v) if !range.contains(&v) => Err(FieldError::new(
            field,
            format!("must be between {} and {}", range.start(), range.end()),
        )),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn site(extra: serde_json::Value) -> Result<SiteSpec, FieldError> {
        let mut body = serde_json::json!({
            "name": "s", "search_url": "https://x.example/?q={keyword}&p={page}",
            "item_selector": "li", "fields": {"title": {"selector": "a"}}
        });
        for (k, v) in extra.as_object().unwrap() {
            if v.is_null() {
                body.as_object_mut().unwrap().remove(k);
            } else {
                body[k] = v.clone();
            }
        }
        serde_json::from_value::<SiteInput>(body).unwrap().parse()
    }

    #[test]
    fn a_field_selector_error_names_the_field_path() {
        let err = site(serde_json::json!({"fields": {"title": {"selector": "a["}}})).unwrap_err();
        assert_eq!(err.field, "fields.title.selector");
    }

    #[test]
    fn defaults_are_browser_three_runs_no_limit_and_a_hundred_pages_when_paged() {
        let spec = site(serde_json::json!({})).unwrap();
        assert_eq!(spec.render, RenderMode::Browser);
        assert!(
            spec.respect_robots,
            "robots.txt is obeyed unless a site says not to"
        );
        assert!(
            !site(serde_json::json!({"respect_robots": false}))
                .unwrap()
                .respect_robots
        );
        assert_eq!(spec.max_pages, DEFAULT_MAX_PAGES);
        assert_eq!(spec.politeness.max_concurrent_runs, 3);
        assert_eq!(spec.politeness.max_requests_per_sec, None);
        let one_page = site(serde_json::json!({"search_url": "https://x.example/?q={keyword}"}));
        assert_eq!(one_page.unwrap().max_pages, 1);
    }

    #[test]
    fn rates_may_be_fractions_but_not_zero_negative_or_huge() {
        let spec = site(serde_json::json!({"max_requests_per_sec": 0.5})).unwrap();
        assert_eq!(spec.politeness.max_requests_per_sec, Some(0.5));
        for bad in [0.0, -1.0, 5000.0] {
            let err = site(serde_json::json!({"max_requests_per_sec": bad})).unwrap_err();
            assert_eq!(err.field, "max_requests_per_sec");
        }
    }

    #[test]
    fn an_exclusive_session_needs_a_kept_session() {
        let err = site(serde_json::json!({"exclusive_session": true})).unwrap_err();
        assert_eq!(err.field, "exclusive_session");
        assert!(site(serde_json::json!({"exclusive_session": true, "keep_session": true})).is_ok());
    }

    #[test]
    fn json_sites_take_pointers_and_no_selectors() {
        let spec = site(serde_json::json!({
            "render": "json", "item_selector": null,
            "json": {"items": "/items", "next_token": "/next_token", "token_param": "token"},
            "fields": {"title": {"pointer": "/title"}, "url": {"pointer": "/url", "link": true}},
            "search_url": "https://api.example/s?q={keyword}"
        }))
        .unwrap();
        assert!(spec.extraction.token_paging().is_some());
        assert_eq!(spec.max_pages, DEFAULT_MAX_PAGES);
        let err = site(serde_json::json!({"render": "json"})).unwrap_err();
        assert_eq!(err.field, "item_selector");
        let err = site(serde_json::json!({"render": "json", "item_selector": null})).unwrap_err();
        assert_eq!(err.field, "json");
    }

    #[test]
    fn an_item_key_must_name_one_of_the_sites_fields() {
        let spec = site(serde_json::json!({"item_key": "title"})).unwrap();
        assert_eq!(spec.item_key.as_deref(), Some("title"));
        let err = site(serde_json::json!({"item_key": "sku"})).unwrap_err();
        assert_eq!(err.field, "item_key");
        assert!(err.message.contains("title"), "{}", err.message);
        assert_eq!(site(serde_json::json!({})).unwrap().item_key, None);
    }

    #[test]
    fn a_proxy_pool_excludes_a_proxy_and_names_its_bad_member() {
        let pool = serde_json::json!({"members": [
            {"url": "http://u:p@10.0.0.1:3128", "weight": 3},
            {"url": "socks5://10.0.0.2:1080"}], "rotation": "per_page"});
        let spec = site(serde_json::json!({"proxy_pool": pool})).unwrap();
        let kept = spec.identity.pool.as_ref().unwrap();
        assert_eq!(kept.rotation(), Rotation::PerPage);
        assert_eq!(kept.members()[0].weight, 3);
        assert_eq!(kept.members()[1].weight, 1);
        assert!(spec.identity.has_secrets(), "a member's credentials");
        assert_eq!(spec.identity.egress().unwrap(), *kept);
        let both = site(serde_json::json!({"proxy_pool": pool, "proxy": "http://10.0.0.3:1"}));
        assert_eq!(both.unwrap_err().field, "proxy_pool");
        let bad =
            serde_json::json!({"members": [{"url": "http://10.0.0.1:1"}, {"url": "ftp://x:1"}]});
        let err = site(serde_json::json!({"proxy_pool": bad})).unwrap_err();
        assert_eq!(err.field, "proxy_pool.members[1].url");
        let single = site(serde_json::json!({"proxy": "http://10.0.0.3:1"})).unwrap();
        let egress = single.identity.egress().unwrap();
        assert_eq!(egress.members().len(), 1);
        assert_eq!(egress.rotation(), Rotation::PerRun);
        assert!(
            site(serde_json::json!({}))
                .unwrap()
                .identity
                .egress()
                .is_none()
        );
    }

    #[test]
    fn browser_pages_download_no_images_media_fonts_or_trackers_unless_allowed() {
        let spec = site(serde_json::json!({})).unwrap();
        assert_eq!(spec.browser_resources, BrowserResources::default());
        let spec = site(serde_json::json!({"browser_resources": {"allow": ["image"]}})).unwrap();
        assert_eq!(spec.browser_resources.allowed(), [ResourceKind::Image]);
        let err = site(serde_json::json!({"browser_resources": {"allow": ["video"]}})).unwrap_err();
        assert_eq!(err.field, "browser_resources.allow[0]");
    }

    #[test]
    fn an_unknown_render_mode_lists_the_supported_ones() {
        let err = site(serde_json::json!({"render": "curl"})).unwrap_err();
        assert_eq!(err.field, "render");
        assert!(err.message.contains("\"http\""), "{}", err.message);
    }
}
