//! `POST /api/sites/preview`: a worker crawls page 1 (and 2) of a site that
//! need not be saved, through the lane, guard, pace and identity of a crawl,
//! and the api answers with what it read; nothing is stored.

use std::time::Duration;

use base64::{Engine, engine::general_purpose::STANDARD};
use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::support::{RoleProcess, Roles, TestApp, redis_url};

/// Just the worker beside the api: no scheduler, so nothing else is crawled.
fn worker_only() -> Roles {
    Roles {
        scheduler: false,
        worker: true,
    }
}

async fn preview(app: &TestApp, body: Value) -> (StatusCode, Value) {
    app.post("/api/sites/preview", body).await
}

/// Nothing a preview does is a run or a result.
async fn nothing_stored(app: &TestApp) {
    let (runs, results): (i64, i64) = sqlx::query_as(
        "SELECT (SELECT count(*) FROM crawl_runs), (SELECT count(*) FROM crawl_results)",
    )
    .fetch_one(app.pool())
    .await
    .unwrap();
    assert_eq!((runs, results), (0, 0), "a preview stores nothing");
}

#[tokio::test]
async fn a_browser_preview_reads_two_pages_on_a_worker_with_a_screenshot_and_stores_nothing() {
    let app = TestApp::spawn_with(worker_only(), |_| {}).await;
    let mut site = app.site_body("shop", "/search");
    site["fields"]["sku"] = json!({"selector": ".no-such-thing"});
    let (status, answer) =
        preview(&app, json!({"site": site, "keyword": "lamp", "pages": 2})).await;
    assert_eq!(status, StatusCode::OK, "{answer}");

    assert_eq!(answer["render"], "browser");
    assert!(answer["worker_id"].as_str().is_some_and(|w| !w.is_empty()));
    assert_eq!(answer["refusal"], Value::Null, "{answer}");
    let pages = answer["pages"].as_array().unwrap();
    assert_eq!(pages.len(), 2, "{answer}");
    assert_eq!(
        (pages[0]["page"].clone(), pages[1]["page"].clone()),
        (json!(1), json!(2))
    );
    assert!(
        pages[1]["url"].as_str().unwrap().contains("page=2"),
        "{answer}"
    );
    let items = answer["items"].as_array().unwrap();
    let on_page = |n: i64| items.iter().filter(|i| i["page"] == n).count();
    assert!(on_page(1) > 0 && on_page(2) > 0, "{answer}");
    assert_eq!(pages[0]["items"], on_page(1));
    assert!(
        items[0]["fields"]["title"]
            .as_str()
            .unwrap()
            .to_lowercase()
            .contains("lamp")
    );
    // Every item has a title; none has the field whose selector finds nothing.
    assert_eq!(answer["empty_fields"]["title"], 0);
    assert_eq!(answer["empty_fields"]["sku"], items.len());
    let final_url = answer["final_url"].as_str().unwrap();
    assert!(final_url.starts_with(&app.site.base_url()), "{final_url}");
    let png = STANDARD
        .decode(answer["screenshot_png"].as_str().expect("a screenshot"))
        .unwrap();
    assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n");
    let timings = &answer["timings"];
    assert!(timings["total_ms"].as_u64().unwrap() >= timings["crawl_ms"].as_u64().unwrap());
    assert_eq!(app.site.hits("/search"), 2, "each page fetched once");
    nothing_stored(&app).await;
    app.stop().await;
}

#[tokio::test]
async fn http_and_json_previews_read_their_items_without_a_browser() {
    let app = TestApp::spawn_without_browsers(worker_only(), |_| {}).await;
    let mut site = app.site_body("shop", "/search");
    site["render"] = json!("http");
    site["user_agent"] = json!("crawlfleet-preview-test/1.0");
    site["headers"] = json!({"X-Api-Key": "stored-secret"});
    let (status, answer) = preview(&app, json!({"site": site, "keyword": "desk"})).await;
    assert_eq!(status, StatusCode::OK, "{answer}");
    assert_eq!(answer["render"], "http");
    assert_eq!(
        answer["pages"].as_array().unwrap().len(),
        1,
        "page 1 by default"
    );
    assert!(!answer["items"].as_array().unwrap().is_empty(), "{answer}");
    assert_eq!(answer["screenshot_png"], Value::Null);
    // The site's identity, as a crawl would send it.
    let seen = app.site.requests("/search");
    let header = |name: &str| seen[0].headers[name].to_str().unwrap().to_owned();
    assert_eq!(header("user-agent"), "crawlfleet-preview-test/1.0");
    assert_eq!(header("x-api-key"), "stored-secret");

    // An edit of the stored site, its secret sent back masked as a response
    // shows it: the stored value is the one sent.
    let stored = app.create_site(site.clone()).await;
    let (_, shown) = app.get(&format!("/api/sites/{stored}")).await;
    let mut edited = site.clone();
    edited["headers"] = shown["headers"].clone();
    assert_eq!(edited["headers"]["X-Api-Key"], "***");
    let body = json!({"site": edited, "keyword": "chair", "site_id": stored});
    let (status, answer) = preview(&app, body).await;
    assert_eq!(status, StatusCode::OK, "{answer}");
    let seen = app.site.requests("/search");
    assert_eq!(seen[1].headers["x-api-key"], "stored-secret");
    app.delete(&format!("/api/sites/{stored}")).await;

    let api = json!({
        "name": "api",
        "render": "json",
        "search_url": format!("{}/api/search?q={{keyword}}&page_size=4", app.site.base_url()),
        "json": {"items": "/items", "next_token": "/next_token", "token_param": "token"},
        "fields": {"title": {"pointer": "/title"}, "url": {"pointer": "/url", "link": true}},
    });
    let (status, answer) = preview(&app, json!({"site": api, "keyword": "lamp", "pages": 2})).await;
    assert_eq!(status, StatusCode::OK, "{answer}");
    let items = answer["items"].as_array().unwrap();
    assert_eq!(
        items.len(),
        8,
        "4 a page, the second by its token: {answer}"
    );
    assert!(
        answer["pages"][1]["url"]
            .as_str()
            .unwrap()
            .contains("token="),
        "{answer}"
    );
    assert!(
        items[0]["item_url"]
            .as_str()
            .unwrap()
            .starts_with("http://127.0.0.1")
    );
    nothing_stored(&app).await;
    app.stop().await;
}

#[tokio::test]
async fn a_refusal_is_reported_at_once_not_waited_out() {
    let app = TestApp::spawn_without_browsers(worker_only(), |_| {}).await;
    let mut site = app.site_body("limited", "/");
    site["render"] = json!("http");
    site["search_url"] = json!(format!("{}/status/429?q={{keyword}}", app.site.base_url()));
    let (status, answer) = preview(&app, json!({"site": site, "keyword": "lamp"})).await;
    assert_eq!(status, StatusCode::OK, "a site's refusal is data: {answer}");
    assert_eq!(answer["refusal"]["kind"], "blocked", "{answer}");
    assert!(
        answer["refusal"]["message"]
            .as_str()
            .unwrap()
            .contains("429")
    );
    assert_eq!(app.site.hits("/status/429"), 1, "not tried again");
    // Not waited out, but the fleet slows down for that host as after a
    // crawl's refusal (an unsaved site is paced by its host).
    let mut redis = crawlfleet::queue::connect(&redis_url()).await.unwrap();
    let key = format!("{}:limit:host:127.0.0.1", app.config.common.queue_name);
    let paused: Option<String> = redis::cmd("HGET")
        .arg(&key)
        .arg("pause_until")
        .query_async(&mut redis)
        .await
        .unwrap();
    assert!(paused.is_some(), "{key} paused");
    app.stop().await;
}

#[tokio::test]
async fn a_redirect_to_a_refused_target_is_reported_by_the_workers_guard() {
    // The api stores and checks what the test asks for; the worker, a process
    // of its own, allows only the fixture.
    let app = TestApp::spawn_without_browsers(Roles::default(), |_| {}).await;
    let worker = RoleProcess::spawn(
        "worker",
        &app.config,
        &[
            ("ALLOW_PRIVATE_TARGETS", "false".to_owned()),
            ("ALLOWED_PRIVATE_TARGETS", app.site.addr().to_string()),
        ],
    );
    worker
        .log_line("worker started", Duration::from_secs(60))
        .await;
    let mut site = app.site_body("redirecting", "/");
    site["render"] = json!("http");
    site["search_url"] = json!(format!(
        "{}/redirect?to=http%3A%2F%2Flocalhost%3A1%2F&q={{keyword}}",
        app.site.base_url()
    ));
    let (status, answer) = preview(&app, json!({"site": site, "keyword": "lamp"})).await;
    assert_eq!(status, StatusCode::OK, "{answer}");
    assert_eq!(answer["refusal"]["kind"], "target_refused", "{answer}");
    assert_eq!(answer["items"], json!([]));
    assert_eq!(worker.terminate(Duration::from_secs(30)).await, 0);
    app.stop().await;
}

#[tokio::test]
async fn a_broken_site_is_refused_at_the_edge_naming_its_field_and_nothing_is_crawled() {
    let app = TestApp::spawn_with(Roles::default(), |config| {
        config.common.allow_private_targets = false;
        config.api.auth_disabled = false;
        config.api.api_tokens = vec!["preview-writer".into()];
        config.api.api_read_tokens = vec!["preview-reader".into()];
    })
    .await;
    let site = app.site_body("shop", "/search");
    let mut broken = site.clone();
    broken["item_selector"] = json!("li.product[");
    let mut private = site.clone();
    private["search_url"] = json!("http://10.0.0.1/search?q={keyword}");
    let mut no_selector = site.clone();
    no_selector["fields"]["title"]["selector"] = json!("a::");
    for (body, field) in [
        (
            json!({"site": broken, "keyword": "lamp"}),
            "site.item_selector",
        ),
        (
            json!({"site": no_selector, "keyword": "lamp"}),
            "site.fields.title.selector",
        ),
        (
            json!({"site": private, "keyword": "lamp"}),
            "site.search_url",
        ),
        (json!({"site": site, "keyword": " "}), "keyword"),
        (
            json!({"site": site, "keyword": "lamp", "pages": 3}),
            "pages",
        ),
    ] {
        let (status, answer) = preview(&app, body).await;
        assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{answer}");
        assert_eq!(answer["error"]["field"], field, "{answer}");
    }
    let (status, _) = preview(
        &app,
        json!({"site": site, "keyword": "lamp", "site_id": 4242}),
    )
    .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let refused = app
        .http
        .post(format!("{}/api/sites/preview", app.base))
        .bearer_auth("preview-reader")
        .json(&json!({"site": site, "keyword": "lamp"}))
        .send()
        .await
        .unwrap();
    assert_eq!(
        refused.status(),
        StatusCode::FORBIDDEN,
        "a read token may not crawl"
    );
    assert_eq!(app.site.hits("/search"), 0);
    app.stop().await;
}

#[tokio::test]
async fn without_a_worker_the_preview_times_out_sealed_and_a_late_worker_does_not_crawl_it() {
    let app = TestApp::spawn_without_browsers(Roles::default(), |config| {
        config.api.preview_timeout_secs = 3;
    })
    .await;
    let mut site = app.site_body("shop", "/search");
    site["render"] = json!("http");
    site["headers"] = json!({"X-Api-Key": "preview-secret-value"});
    let asked = tokio::spawn({
        let (http, base) = (app.http.clone(), app.base.clone());
        async move {
            let started = std::time::Instant::now();
            let response = http
                .post(format!("{base}/api/sites/preview"))
                .json(&json!({"site": site, "keyword": "lamp"}))
                .send()
                .await
                .unwrap();
            let status = response.status();
            (
                status,
                response.json::<Value>().await.unwrap(),
                started.elapsed(),
            )
        }
    });
    // While it waits, the request is in Redis, and its secret is not readable there.
    let mut redis = crawlfleet::queue::connect(&redis_url()).await.unwrap();
    let pattern = format!("{}:preview:*", app.config.common.queue_name);
    let key = crate::support::eventually(Duration::from_secs(10), "the request in Redis", || {
        let mut redis = redis.clone();
        let pattern = pattern.clone();
        async move {
            let keys: Vec<String> = redis::cmd("KEYS")
                .arg(&pattern)
                .query_async(&mut redis)
                .await
                .unwrap();
            keys.into_iter().next()
        }
    })
    .await;
    let stored: Vec<u8> = redis::cmd("GET")
        .arg(&key)
        .query_async(&mut redis)
        .await
        .unwrap();
    let shown = String::from_utf8_lossy(&stored);
    assert!(
        !shown.contains("preview-secret-value") && !shown.contains("lamp"),
        "sealed: {shown}"
    );

    let (status, answer, took) = asked.await.unwrap();
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{answer}");
    assert_eq!(answer["error"]["code"], "overloaded");
    assert!(
        took < Duration::from_secs(10),
        "answered after its 3 s timeout: {took:?}"
    );
    let left: Vec<String> = redis::cmd("KEYS")
        .arg(&pattern)
        .query_async(&mut redis)
        .await
        .unwrap();
    assert!(left.is_empty(), "withdrawn: {left:?}");

    // The job is still in the lane: a worker that starts now takes it and drops it.
    let worker = RoleProcess::worker(&app.config);
    worker
        .log_line(
            "preview expired, withdrawn or taken",
            Duration::from_secs(60),
        )
        .await;
    assert_eq!(
        app.site.hits("/search"),
        0,
        "a withdrawn preview is not crawled"
    );
    assert_eq!(worker.terminate(Duration::from_secs(30)).await, 0);
    app.stop().await;
}
