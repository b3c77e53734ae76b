//! crawlfleet as its users run it: the api and the scheduler up, a worker
//! process with `concurrency` browser slots, every crawl asked for through
//! the REST API and read back from it.

use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use serde_json::{Value, json};

use crate::{
    Batch,
    support::{ON_DEMAND, RoleProcess, TestApp},
};

/// The demo site's JavaScript-rendered search as a crawlfleet site, allowed
/// as many runs at once and requests per second as the benchmark needs.
pub async fn demo_shop_site(app: &TestApp, delay_ms: u64) -> i64 {
    app.create_site(demo_shop_spec(app, delay_ms)).await
}

fn demo_shop_spec(app: &TestApp, delay_ms: u64) -> Value {
    let field = |selector: &str, attr: Option<&str>| match attr {
        Some(attr) => json!({"selector": selector, "attr": attr}),
        None => json!({"selector": selector}),
    };
    json!({
        "name": "bench-demo-shop",
        "search_url": format!(
            "{}/js-search?q={{keyword}}&page={{page}}&delay_ms={delay_ms}",
            app.site.base_url()
        ),
        "render": "browser",
        "item_selector": "li.product",
        "fields": {
            "title": field("a.title", None),
            "link": field("a.title", Some("href")),
            "price": field(".price", None),
            "image": field("img.thumb", Some("src")),
        },
        "wait_for": "#ready",
        // Crawlee's crawler downloads every image, font and script of the
        // page: so does this site, so both sides' figures hold the same bytes.
        "browser_resources": {"allow": ["image", "media", "font", "tracker"]},
        "max_pages": 3,
        "max_concurrent_runs": 50,
        "max_requests_per_sec": 1000.0,
    })
}

/// The demo shop's search as `demo_shop_site` reads it, and each product's
/// own page, read in the browser for its title and price when the product is
/// new or its list values changed.
pub async fn demo_catalog_site(app: &TestApp, delay_ms: u64) -> i64 {
    let mut site = demo_shop_spec(app, delay_ms);
    site["name"] = json!("bench-demo-catalog");
    site["fields"]["link"] = json!({"selector": "a.title", "attr": "href", "link": true});
    site["detail"] = json!({
        "url_field": "link",
        "fields": {
            "name": {"selector": "h1"},
            "detail_price": {"selector": ".price"},
        },
        "render": "browser",
        "read": "new_or_changed",
    });
    app.create_site(site).await
}

/// A worker process with `concurrency` browser slots, its Chrome the one
/// BENCH_CHROME_PATH names when set (a wrapper adding flags, to measure them).
pub fn worker(app: &TestApp, concurrency: usize) -> RoleProcess {
    let mut env = vec![("WORKER_CONCURRENCY", concurrency.to_string())];
    if let Ok(chrome) = std::env::var("BENCH_CHROME_PATH") {
        env.push(("CHROME_PATH", chrome));
    }
    RoleProcess::spawn("worker", &app.config, &env)
}

/// Keywords created ahead of a batch (not timed): one run each on `site`.
pub async fn keywords(app: &TestApp, site: i64, names: &[String]) -> Vec<i64> {
    let mut ids = Vec::with_capacity(names.len());
    for name in names {
        ids.push(app.create_keyword(name, &[site], ON_DEMAND).await);
    }
    ids
}

/// Asks for a crawl of each keyword and waits until every run ended; the
/// batch's seconds run from the first crawl asked for to the last run's end
/// as the runs say.
pub async fn crawl(app: &TestApp, keywords: &[i64]) -> Batch {
    let asked_at: DateTime<Utc> = Utc::now();
    let started = Instant::now();
    let mut runs = Vec::with_capacity(keywords.len());
    for &keyword in keywords {
        runs.extend(app.crawl(keyword).await);
    }
    let mut ended: Vec<Value> = Vec::with_capacity(runs.len());
    let mut waiting = runs;
    while !waiting.is_empty() {
        assert!(
            started.elapsed() < Duration::from_secs(600),
            "the fleet's batch ends within 10 minutes"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
        let mut still = Vec::new();
        for run in waiting {
            let (_, body) = app.get(&format!("/api/runs/{run}")).await;
            if matches!(body["state"].as_str(), Some("completed" | "failed")) {
                ended.push(body);
            } else {
                still.push(run);
            }
        }
        waiting = still;
    }
    let last_end = ended
        .iter()
        .filter_map(|run| run["finished_at"].as_str())
        .filter_map(|at| at.parse::<DateTime<Utc>>().ok())
        .max()
        .expect("ended runs say when");
    Batch {
        pages: ended
            .iter()
            .map(|r| r["pages_crawled"].as_u64().unwrap_or(0))
            .sum(),
        failed: ended.iter().filter(|r| r["state"] == "failed").count() as u64,
        items: ended
            .iter()
            .map(|r| r["items_found"].as_u64().unwrap_or(0))
            .sum(),
        secs: (last_end - asked_at).as_seconds_f64(),
    }
}

/// The sum and count of a histogram on the worker's /metrics.
pub async fn histogram(app: &TestApp, metrics: std::net::SocketAddr, name: &str) -> (f64, f64) {
    let text = app
        .http
        .get(format!("http://{metrics}/metrics"))
        .send()
        .await
        .and_then(|r| r.error_for_status())
        .expect("the worker serves /metrics")
        .text()
        .await
        .expect("as text");
    let value = |suffix: &str| {
        text.lines()
            .find_map(|line| line.strip_prefix(&format!("{name}{suffix} ")))
            .and_then(|v| v.trim().parse::<f64>().ok())
            .unwrap_or(0.0)
    };
    (value("_sum"), value("_count"))
}
