//! `scripts/screenshots`: a PNG of each console page, for docs/console/ and
//! the README. Starts a throwaway fleet (`--process=all --demo`, its own
//! database and queue), lets it crawl the demo shop and fail on the shop's
//! hanging page, then opens the console in headless Chromium and saves each
//! page as it shows it.
//!
//!   cargo run --example screenshots -- [OUT_DIR]     (default docs/console)

use std::{
    path::PathBuf,
    process::Stdio,
    time::{Duration, Instant},
};

use anyhow::{Context, bail};
use serde_json::{Value, json};
use tokio::process::Command;

#[allow(dead_code)]
#[path = "common/throwaway.rs"]
mod throwaway;

#[allow(dead_code)]
#[path = "../tests/it/support/console.rs"]
mod console;

use console::ConsoleBrowser;
use throwaway::{Scratch, crawlfleet_binary, free_port, ready_api_client};

/// The API token of this throwaway fleet.
const TOKEN: &str = "screenshots-local-token";
/// How long the demo crawl and the failing one get to end.
const CRAWLS_END_WITHIN: Duration = Duration::from_secs(180);

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let out = PathBuf::from(
        std::env::args()
            .nth(1)
            .unwrap_or_else(|| "docs/console".into()),
    );
    std::fs::create_dir_all(&out)?;
    let scratch = Scratch::create("cf_screenshots").await?;
    let (api_port, demo_port) = (free_port()?, free_port()?);
    let log = std::env::temp_dir().join(format!("{}.log", scratch.db));
    let mut fleet = Command::new(crawlfleet_binary())
        .args(["--process=all", "--demo"])
        .env("DATABASE_URL", scratch.database_url.as_str())
        .env("REDIS_URL", &scratch.redis_url)
        .env("QUEUE_NAME", &scratch.queue)
        .env("API_HOST", "127.0.0.1")
        .env("API_PORT", api_port.to_string())
        .env("DEMO_PORT", demo_port.to_string())
        .env("API_METRICS_PORT", "0")
        .env("API_TOKENS", TOKEN)
        .env("ALLOW_PRIVATE_TARGETS", "true")
        .env(
            "SESSION_KEY",
            "5c5c5c5c5c5c5c5c5c5c5c5c5c5c5c5c5c5c5c5c5c5c5c5c5c5c5c5c5c5c5c5c",
        )
        .env_remove("HTTP_PROXY")
        .env_remove("HTTPS_PROXY")
        .env_remove("ALL_PROXY")
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(&log)?)
        .stderr(std::fs::File::create(&log)?)
        .kill_on_drop(true)
        .spawn()
        .context("starting crawlfleet")?;
    let api = format!("http://127.0.0.1:{api_port}");
    // Its own task: a page that does not show what it should panics there,
    // and the fleet below is still stopped the clean way (its Chrome with it).
    let shop = format!("http://127.0.0.1:{demo_port}");
    let shot = match tokio::spawn(async move { shoot(&api, &shop, &out).await }).await {
        Ok(shot) => shot,
        Err(panicked) => Err(anyhow::anyhow!(
            "a page was not shown as expected: {panicked}"
        )),
    };
    if let Some(pid) = fleet.id() {
        // SIGTERM: the worker closes its browsers.
        unsafe { libc::kill(pid as i32, libc::SIGTERM) };
    }
    let _ = tokio::time::timeout(Duration::from_secs(30), fleet.wait()).await;
    let _ = fleet.kill().await;
    scratch.drop().await?;
    if shot.is_err() {
        eprintln!("the fleet's log: {}", log.display());
    } else {
        let _ = std::fs::remove_file(&log);
    }
    shot
}

async fn shoot(api: &str, shop: &str, out: &std::path::Path) -> anyhow::Result<()> {
    let http = ready_api_client(api, TOKEN, Duration::from_secs(60)).await?;
    let started = Instant::now();
    let call = |method: reqwest::Method, path: &str, body: Option<Value>| {
        let mut request = http.request(method, format!("{api}{path}"));
        if let Some(body) = body {
            request = request.json(&body);
        }
        async move {
            let response = request.send().await?;
            let status = response.status();
            let body: Value = response.json().await.unwrap_or(Value::Null);
            anyhow::ensure!(status.is_success(), "{status}: {body}");
            Ok::<Value, anyhow::Error>(body)
        }
    };
    // A webhook endpoint told about every run's end: a receiver of our own
    // on loopback that answers 200, for the deliveries to show.
    let sink = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let sink_url = format!("http://{}/hooks/crawlfleet", sink.local_addr()?);
    tokio::spawn(async move {
        let app = axum::Router::new().fallback(|| async { "received, thanks" });
        let _ = axum::serve(sink, app).await;
    });
    let webhook = call(
        reqwest::Method::POST,
        "/api/webhooks",
        Some(json!({
            "url": sink_url, "events": ["run.completed", "run.failed"],
            "description": "the on-call team's alerts bridge",
        })),
    )
    .await?;
    // A site whose search page never finishes loading: its run fails as
    // stuck, and keeps what the browser showed.
    let hanging = call(
        reqwest::Method::POST,
        "/api/sites",
        Some(json!({
            "name": "hanging-shop",
            "search_url": format!("{shop}/hang?q={{keyword}}"),
            "item_selector": "li.product",
            "fields": {"title": {"selector": "a.title"}},
            "stuck_timeout_secs": 5,
            "max_attempts": 1,
        })),
    )
    .await?;
    let keyword = call(
        reqwest::Method::POST,
        "/api/keywords",
        Some(json!({
            "keyword": "desk lamp", "site_ids": [hanging["id"]], "schedule": "0 0 6 * * *",
            "timezone": "Asia/Seoul", "jitter_secs": 600,
        })),
    )
    .await?;
    call(
        reqwest::Method::POST,
        &format!("/api/keywords/{}/crawl", keyword["id"]),
        Some(json!({})),
    )
    .await?;
    let (completed, failed) = loop {
        let runs = call(reqwest::Method::GET, "/api/runs", None).await?;
        let first = |state: &str| {
            runs["items"]
                .as_array()
                .into_iter()
                .flatten()
                .find(|r| r["state"] == state)
                .map(|r| r["id"].clone())
        };
        if let (Some(completed), Some(failed)) = (first("completed"), first("failed")) {
            break (completed, failed);
        }
        if started.elapsed() > CRAWLS_END_WITHIN {
            bail!(
                "the demo crawl and the failing one did not end within {CRAWLS_END_WITHIN:?}: {runs}"
            );
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    };
    let demo_site = call(reqwest::Method::GET, "/api/sites", None).await?["items"]
        .as_array()
        .and_then(|sites| {
            sites
                .iter()
                .find(|s| s["name"] == "demo-shop")
                .map(|s| s["id"].clone())
        })
        .context("the demo site")?;
    let list = url_list(&http, api, shop, &demo_site).await?;

    let browser = ConsoleBrowser::open(api).await;
    let result = async {
        browser.client.set_window_size(1400, 1000).await?;
        browser.sign_in(TOKEN).await;
        let save = |name: &'static str| {
            let browser = &browser;
            async move {
                // Images, charts and the live feed's first tick settle.
                tokio::time::sleep(Duration::from_millis(1500)).await;
                std::fs::write(
                    out.join(format!("{name}.png")),
                    browser.client.screenshot().await?,
                )?;
                println!("saved {}", out.join(format!("{name}.png")).display());
                Ok::<(), anyhow::Error>(())
            }
        };
        browser.wait_for("#count-backlog").await;
        browser.wait_for("#overview-workers table").await;
        save("overview").await?;
        browser.go("#/runs").await;
        browser.wait_for("#runs tr").await;
        save("runs").await?;
        browser.go(&format!("#/runs/{failed}")).await;
        browser.wait_for(".evidence img").await;
        save("failed-run").await?;
        browser.go(&format!("#/runs/{completed}")).await;
        browser.wait_for("#attempts li").await;
        browser.go("#/sites").await;
        browser.wait_for("#sites tr").await;
        save("sites").await?;
        browser.go(&format!("#/sites/{demo_site}")).await;
        browser.wait_for_text("#site-title", "demo-shop").await;
        browser.type_into("#preview-keyword", "lamp").await;
        browser.click("#preview-run").await;
        browser.wait_for("#preview-summary").await;
        save("site-editor").await?;
        browser.go("#/keywords").await;
        browser.wait_for("#keywords tr").await;
        save("keywords").await?;
        browser.go(&format!("#/lists/{list}")).await;
        browser.wait_for_text("#list-entries", "/search?q=").await;
        save("url-list").await?;
        browser.go("#/results").await;
        browser.wait_for("#results tr").await;
        save("results").await?;
        browser.go("#/webhooks").await;
        browser.wait_for("#webhooks tr").await;
        save("webhooks").await?;
        browser.go(&format!("#/webhooks/{}", webhook["id"])).await;
        browser.click("#send-test").await;
        browser
            .wait_for("#deliveries tr[data-state=delivered]")
            .await;
        save("webhook").await?;
        Ok::<(), anyhow::Error>(())
    }
    .await;
    browser.close().await;
    result
}

/// A URL list of the demo shop's search pages, crawled to its end; its id.
async fn url_list(
    http: &reqwest::Client,
    api: &str,
    shop: &str,
    site: &Value,
) -> anyhow::Result<i64> {
    let list: Value = http
        .post(format!("{api}/api/url-lists"))
        .json(
            &json!({"site_id": site, "name": "lamps to watch", "schedule": "0 0 7 * * *",
                      "timezone": "Asia/Seoul"}),
        )
        .send()
        .await?
        .error_for_status()?
        .json()
        .await?;
    let id = list["id"].as_i64().context("the list's id")?;
    let urls: String = [
        "desk lamp",
        "floor lamp",
        "lamp shade",
        "reading lamp",
        "bulb",
    ]
    .iter()
    .map(|q| format!("{shop}/search?q={}\n", q.replace(' ', "+")))
    .collect();
    http.put(format!("{api}/api/url-lists/{id}/urls"))
        .header("content-type", "text/plain")
        .body(urls)
        .send()
        .await?
        .error_for_status()?;
    http.post(format!("{api}/api/url-lists/{id}/crawl"))
        .send()
        .await?
        .error_for_status()?;
    let started = Instant::now();
    loop {
        let view: Value = http
            .get(format!("{api}/api/url-lists/{id}"))
            .send()
            .await?
            .json()
            .await?;
        if view["active_run_id"].is_null() && view["read_in_period"] == view["urls"] {
            return Ok(id);
        }
        if started.elapsed() > CRAWLS_END_WITHIN {
            bail!("the URL list was not read within {CRAWLS_END_WITHIN:?}: {view}");
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}
