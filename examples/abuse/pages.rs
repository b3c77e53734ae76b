//! Class 7: hostile pages. Sites crawl the fixture's pages that attack the
//! crawler (`demo/site/hostile.rs`, and in their structured data
//! `demo/site/hostile_structured.rs`), in browser and http modes, while the
//! other classes run; at the end each run and its results are read back,
//! and anything a bound should have stopped fails the catalogue: a field
//! longer than the fleet's FIELD_MAX_CHARS, more items than PAGE_MAX_ITEMS
//! from a page, an oversized page read, an item URL that is not http(s), an
//! item a page forged in its own JavaScript, a listing answer over
//! API_ANSWER_MAX_BYTES.

use std::time::{Duration, Instant};

use anyhow::Context;
use reqwest::Method;
use serde_json::{Value, json};

use crate::{
    Targets,
    client::{Api, Token},
    ledger::Expect,
};

/// The fleet's bounds: the defaults, but a page's size, which the fleet is
/// given (main.rs), so the oversized pages need not be 20 MiB: a worker
/// logging at trace level takes its time over every byte.
const FIELD_MAX_CHARS: usize = 10_000;
const PAGE_MAX_ITEMS: i64 = 1_000;
pub const PAGE_MAX_BYTES: usize = 4 * 1024 * 1024;
const API_ANSWER_MAX_BYTES: usize = 4 * 1024 * 1024;

const CRAWL_LIMIT: Duration = Duration::from_secs(120);

/// How a hostile page's run must come out.
#[derive(Clone, Copy)]
enum Check {
    /// Completed, every value within FIELD_MAX_CHARS.
    FieldsCut,
    /// Completed with PAGE_MAX_ITEMS items at most.
    ItemsCut,
    /// Failed as page_too_large.
    TooLarge,
    /// Completed, every item URL null or http(s).
    WebUrlsOnly,
    /// Completed with the page's three true items.
    TrueItems,
}

/// Runs started by [`start`]: (run, site name, check).
pub struct Started(Vec<(i64, String, Check)>);

fn sites(fixture: &str) -> Vec<(String, Value, Check)> {
    let pages = [
        (
            "huge-field",
            "/hostile/items?n=2&chars=200000",
            Check::FieldsCut,
        ),
        ("many-items", "/hostile/items?n=5000", Check::ItemsCut),
        (
            "oversized",
            "/hostile/padded?bytes=6000000",
            Check::TooLarge,
        ),
        ("bad-links", "/hostile/bad-links", Check::WebUrlsOnly),
        ("formula-links", "/hostile/formula-base", Check::WebUrlsOnly),
    ];
    let mut sites = Vec::new();
    for render in ["http", "browser"] {
        for (name, path, check) in pages {
            let name = format!("{name}-{render}");
            sites.push((name.clone(), site(&name, render, fixture, path), check));
        }
    }
    // The same attacks in structured data, read without a selector.
    let structured = [
        (
            "sd-huge-field",
            "huge-field&n=2&chars=200000",
            Check::FieldsCut,
        ),
        ("sd-many-items", "many-items&n=5000", Check::ItemsCut),
        ("sd-oversized", "padded&bytes=6000000", Check::TooLarge),
        ("sd-bad-links", "bad-links", Check::WebUrlsOnly),
        ("sd-deep", "deep", Check::TrueItems),
        ("sd-malformed", "malformed", Check::TrueItems),
    ];
    for render in ["http", "browser"] {
        for (name, attack, check) in structured {
            let name = format!("{name}-{render}");
            let path = format!("/hostile/structured?kind={attack}");
            let mut body = site(&name, render, fixture, &path);
            let body_map = body.as_object_mut().expect("a site body");
            body_map.remove("item_selector");
            body_map.insert("structured_items".into(), json!("Product"));
            body_map.insert(
                "fields".into(),
                json!({"title": {"structured": "name"}, "link": {"structured": "url", "link": true}}),
            );
            sites.push((name, body, check));
        }
    }
    let grows = "/hostile/grows?bytes=6000000";
    sites.push((
        "grown-browser".into(),
        site("grown-browser", "browser", fixture, grows),
        Check::TooLarge,
    ));
    let forger = "/hostile/forger";
    sites.push((
        "forger-browser".into(),
        site("forger-browser", "browser", fixture, forger),
        Check::TrueItems,
    ));
    sites
}

fn site(name: &str, render: &str, fixture: &str, path: &str) -> Value {
    let sep = if path.contains('?') { '&' } else { '?' };
    json!({
        "name": name, "render": render, "search_url": format!("{fixture}{path}{sep}q={{keyword}}"),
        "item_selector": "li.product", "max_attempts": 1, "stuck_timeout_secs": 60,
        "fields": {"title": {"selector": "a.title"}, "link": {"selector": "a.title", "attr": "href"}},
    })
}

/// Creates the sites and queues their crawls.
pub async fn start(api: &Api, targets: &Targets) -> anyhow::Result<Started> {
    let mut ids = Vec::new();
    for (name, body, check) in sites(&targets.fixture) {
        let id = api
            .create_site(&body, "a hostile page's site")
            .await
            .with_context(|| format!("creating site {name}"))?;
        ids.push((id, name, check));
    }
    let site_ids: Vec<i64> = ids.iter().map(|(id, _, _)| *id).collect();
    let keyword = json!({"keyword": "hostile", "site_ids": site_ids, "schedule": "0 0 0 1 1 *"});
    let keyword = api
        .json(
            Method::POST,
            "/api/keywords",
            Token::Write,
            &keyword,
            "the hostile pages' keyword",
            Expect::Status(&[201]),
        )
        .await
        .and_then(|a| a.json()?["id"].as_i64())
        .context("creating the hostile pages' keyword")?;
    let queued = api
        .call(
            "a crawl of the hostile pages",
            api.request(
                Method::POST,
                &format!("/api/keywords/{keyword}/crawl"),
                Token::Write,
            ),
            Expect::Status(&[202]),
        )
        .await
        .and_then(|a| a.json())
        .context("queueing the hostile pages' crawl")?;
    let mut runs = Vec::new();
    for run in queued["queued"].as_array().into_iter().flatten() {
        let (Some(run), Some(site)) = (run["id"].as_i64(), run["site_id"].as_i64()) else {
            continue;
        };
        if let Some((_, name, check)) = ids.iter().find(|(id, _, _)| *id == site) {
            runs.push((run, name.clone(), *check));
        }
    }
    Ok(Started(runs))
}

/// Waits for the runs, then judges each with its results.
pub async fn finish(api: &Api, Started(runs): Started) {
    let deadline = Instant::now() + CRAWL_LIMIT;
    for (run, name, check) in runs {
        let what = format!("hostile page {name} (run {run})");
        let Some(ended) = wait(api, run, deadline).await else {
            api.ledger.unexpected(&what, "did not end in time");
            continue;
        };
        let state = ended["state"].as_str().unwrap_or_default();
        if let Check::TooLarge = check {
            if state != "failed" || ended["error_kind"] != "page_too_large" {
                api.ledger
                    .let_through(&what, format!("read, not refused: {state}"));
            }
            continue;
        }
        if state != "completed" {
            let error = &ended["error"];
            api.ledger
                .unexpected(&what, format!("ended {state}: {error}"));
            continue;
        }
        let path = format!("/api/results?run_id={run}&limit=1000");
        let Some(answer) = api
            .call(
                "a hostile page's results",
                api.request(Method::GET, &path, Token::Read),
                Expect::Status(&[200]),
            )
            .await
        else {
            continue;
        };
        if answer.body.len() > API_ANSWER_MAX_BYTES + 1024 {
            let bytes = answer.body.len();
            api.ledger
                .let_through(&what, format!("a results answer of {bytes} bytes"));
        }
        let items = answer
            .json()
            .and_then(|page| page["items"].as_array().cloned())
            .unwrap_or_default();
        judge(api, &what, check, &ended, &items);
    }
}

fn judge(api: &Api, what: &str, check: Check, run: &Value, items: &[Value]) {
    let titles = || {
        items
            .iter()
            .map(|r| r["fields"]["title"].as_str().unwrap_or_default())
    };
    match check {
        Check::FieldsCut => {
            if let Some(long) = titles().map(|t| t.chars().count()).max()
                && long > FIELD_MAX_CHARS
            {
                api.ledger
                    .let_through(what, format!("a field of {long} characters stored"));
            }
        }
        Check::ItemsCut => {
            let found = run["items_found"].as_i64().unwrap_or_default();
            if found > PAGE_MAX_ITEMS {
                api.ledger
                    .let_through(what, format!("{found} items stored from one page"));
            }
        }
        Check::WebUrlsOnly => {
            for url in items.iter().filter_map(|r| r["item_url"].as_str()) {
                if !url.starts_with("http://") && !url.starts_with("https://") {
                    api.ledger
                        .let_through(what, format!("item URL {url:?} stored"));
                }
            }
        }
        Check::TrueItems => {
            let read: Vec<&str> = titles().collect();
            if read != ["True item 1", "True item 2", "True item 3"] {
                api.ledger.let_through(
                    what,
                    format!("other items than the page's three true ones stored: {read:?}"),
                );
            }
        }
        Check::TooLarge => {}
    }
}

async fn wait(api: &Api, run: i64, deadline: Instant) -> Option<Value> {
    while Instant::now() < deadline {
        let answer = api
            .call(
                "a hostile page's run",
                api.request(Method::GET, &format!("/api/runs/{run}"), Token::Read),
                Expect::Status(&[200]),
            )
            .await
            .and_then(|a| a.json());
        if let Some(run) = answer
            && matches!(
                run["state"].as_str(),
                Some("completed" | "failed" | "cancelled")
            )
        {
            return Some(run);
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    None
}
