//! robots.txt: a page the fixture's robots.txt disallows for our user agent is
//! never requested (the fixture counts), a run stops before such a page and
//! says so, a missing or broken file allows everything, a Crawl-delay paces
//! the site, the file is asked for once per origin within its TTL, previews
//! obey it too, and the console shows where a run stopped and the site's switch.

use std::time::{Duration, Instant};

use crawlfleet_demo::site::RobotsTxt;
use serde_json::{Value, json};

use crate::support::{ConsoleBrowser, ON_DEMAND, Roles, TestApp, eventually, free_port};

// A run is one to three plain-HTTP pages (under 1 ms each) after a 100 ms
// dispatch tick and a 300 ms worker poll, or a Chrome start and a page in
// browser mode, or 4 s of Crawl-delay: seconds; 90 s is ten times that and more.
const LIMIT: Duration = Duration::from_secs(90);

/// A site of the fixture shop searching `path` in `render` mode, paged by
/// `{page}` up to three pages, with `extra` settings.
fn shop_site(app: &TestApp, name: &str, path: &str, render: &str, extra: Value) -> Value {
    let mut body = app.site_body(name, path);
    body["render"] = json!(render);
    body["max_pages"] = json!(3);
    for (key, value) in extra.as_object().expect("settings object") {
        body[key] = value.clone();
    }
    body
}

/// The `page` parameters of the fixture's requests for `path` with keyword `keyword`.
fn pages_requested(app: &TestApp, path: &str, keyword: &str) -> Vec<String> {
    app.site
        .requests(path)
        .into_iter()
        .filter(|h| h.param("q").as_deref() == Some(keyword))
        .map(|h| h.param("page").unwrap_or_default())
        .collect()
}

#[tokio::test]
async fn a_page_robots_txt_disallows_is_never_requested_while_allowed_ones_are() {
    let app = TestApp::spawn_without_browsers(Roles::fleet(), |_| {}).await;
    app.site
        .serve_robots(RobotsTxt::File("User-agent: *\nDisallow: /static\n".into()));
    let barred = app
        .create_site(shop_site(&app, "barred", "/static", "http", json!({})))
        .await;
    let open = app
        .create_site(shop_site(&app, "open", "/search", "http", json!({})))
        .await;
    let keyword = app.create_keyword("lamp", &[barred, open], ON_DEMAND).await;
    let runs = app.crawl(keyword).await;
    let mut ended = Vec::new();
    for run in runs {
        ended.push(app.wait_for_run(run, &["completed", "failed"], LIMIT).await);
    }
    let barred_run = ended.iter().find(|r| r["site_id"] == barred).unwrap();
    assert_eq!(barred_run["state"], "failed", "{barred_run}");
    assert_eq!(
        barred_run["error_kind"], "robots_disallowed",
        "{barred_run}"
    );
    assert_eq!(barred_run["attempt"], 1, "not retried: {barred_run}");
    let error = barred_run["error"].as_str().unwrap();
    assert!(
        error.contains("robots.txt") && error.contains("/static") && error.contains("crawlfleet"),
        "{error}"
    );
    let (_, detail) = app.get(&format!("/api/runs/{}", barred_run["id"])).await;
    assert_eq!(
        detail["attempts"][0]["error_kind"], "robots_disallowed",
        "{detail}"
    );
    assert_eq!(
        app.site.hits("/static"),
        0,
        "a disallowed page was requested"
    );

    let open_run = ended.iter().find(|r| r["site_id"] == open).unwrap();
    assert_eq!(open_run["state"], "completed", "{open_run}");
    assert_eq!(open_run["items_found"], 15, "{open_run}");
    assert_eq!(open_run["stopped_at_url"], Value::Null, "{open_run}");
    assert_eq!(pages_requested(&app, "/search", "lamp"), ["1", "2", "3"]);
    // Both runs asked at once; the worker asked the origin once.
    assert_eq!(app.site.hits("/robots.txt"), 1);
    app.stop().await;
}

#[tokio::test]
async fn a_disallowed_second_page_ends_the_run_after_the_first_and_the_run_says_so() {
    let app = TestApp::spawn_without_browsers(Roles::fleet(), |_| {}).await;
    app.site.serve_robots(RobotsTxt::File(
        "User-agent: *\nDisallow: /*page=2\n".into(),
    ));
    let site = app
        .create_site(shop_site(&app, "two-barred", "/search", "http", json!({})))
        .await;
    let run = app.crawl_to_completion("desk", site, LIMIT).await;
    assert_eq!(run["pages_crawled"], 1, "{run}");
    assert_eq!(run["items_found"], 5, "{run}");
    assert_eq!(run["stop_reason"], "robots_disallowed", "{run}");
    let stopped_at = run["stopped_at_url"].as_str().unwrap();
    assert!(
        stopped_at.ends_with("/search?q=desk&page=2"),
        "{stopped_at}"
    );
    assert_eq!(
        app.results_of_run(run["id"].as_i64().unwrap()).await.len(),
        5
    );
    assert_eq!(pages_requested(&app, "/search", "desk"), ["1"]);
    app.stop().await;
}

#[tokio::test]
async fn a_site_that_does_not_respect_robots_txt_fetches_what_it_disallows() {
    let app = TestApp::spawn_without_browsers(Roles::fleet(), |_| {}).await;
    app.site
        .serve_robots(RobotsTxt::File("User-agent: *\nDisallow: /\n".into()));
    let body = shop_site(
        &app,
        "rude",
        "/search",
        "http",
        json!({"respect_robots": false}),
    );
    let site = app.create_site(body).await;
    let (_, shown) = app.get(&format!("/api/sites/{site}")).await;
    assert_eq!(shown["respect_robots"], false, "{shown}");
    let run = app.crawl_to_completion("chair", site, LIMIT).await;
    assert_eq!(run["items_found"], 15, "{run}");
    assert_eq!(pages_requested(&app, "/search", "chair"), ["1", "2", "3"]);
    assert_eq!(
        app.site.hits("/robots.txt"),
        0,
        "robots.txt was not even asked"
    );

    // A site respects robots.txt unless it says otherwise.
    let polite = app
        .create_site(shop_site(&app, "polite", "/search", "http", json!({})))
        .await;
    let (_, shown) = app.get(&format!("/api/sites/{polite}")).await;
    assert_eq!(shown["respect_robots"], true, "{shown}");
    let run = app.crawl_to_end("sofa", polite, LIMIT).await;
    assert_eq!(run["error_kind"], "robots_disallowed", "{run}");
    assert!(pages_requested(&app, "/search", "sofa").is_empty());
    app.stop().await;
}

#[tokio::test]
async fn a_missing_broken_or_unreachable_robots_txt_allows_everything() {
    // Every run asks again: nothing is kept.
    let app =
        TestApp::spawn_without_browsers(Roles::fleet(), |c| c.worker.robots_cache_secs = 0).await;
    let nowhere = format!(
        "http://127.0.0.1:{}/robots.txt",
        free_port().expect("a free port")
    );
    let site = app
        .create_site(shop_site(&app, "lenient", "/search", "http", json!({})))
        .await;
    let answers = [
        ("missing", RobotsTxt::Missing),
        ("gone", RobotsTxt::Status(410)),
        ("failing", RobotsTxt::Status(500)),
        ("unavailable", RobotsTxt::Status(503)),
        (
            "html",
            RobotsTxt::File("<html><body><h1>Welcome</h1></body></html>".into()),
        ),
        (
            "garbage",
            RobotsTxt::File("\u{0}\u{1}Disallow\u{7f}: ???\n%%%".into()),
        ),
        ("unreachable", RobotsTxt::Redirect(nowhere)),
    ];
    for (n, (keyword, answer)) in answers.into_iter().enumerate() {
        app.site.serve_robots(answer);
        let run = app.crawl_to_completion(keyword, site, LIMIT).await;
        assert_eq!(run["items_found"], 15, "{keyword}: {run}");
        assert_eq!(pages_requested(&app, "/search", keyword), ["1", "2", "3"]);
        assert!(
            app.site.hits("/robots.txt") > n as u64,
            "{keyword}: robots.txt was asked for"
        );
    }
    app.stop().await;
}

#[tokio::test]
async fn a_crawl_delay_stricter_than_the_site_rate_spaces_its_pages() {
    let app = TestApp::spawn_without_browsers(Roles::fleet(), |_| {}).await;
    app.site
        .serve_robots(RobotsTxt::File("User-agent: *\nCrawl-delay: 2\n".into()));
    let body = shop_site(
        &app,
        "delayed",
        "/search",
        "http",
        json!({"max_requests_per_sec": 10}),
    );
    let site = app.create_site(body).await;
    let started = Instant::now();
    let run = app.crawl_to_completion("clock", site, LIMIT).await;
    assert_eq!(run["items_found"], 15, "{run}");
    let at: Vec<Instant> = app
        .site
        .requests("/search")
        .iter()
        .filter(|h| h.param("q").as_deref() == Some("clock"))
        .map(|h| h.at)
        .collect();
    assert_eq!(at.len(), 3);
    let gaps: Vec<Duration> = at.windows(2).map(|w| w[1] - w[0]).collect();
    eprintln!(
        "Crawl-delay 2 at 10 requests/s: pages {gaps:?} apart, run {:?}",
        started.elapsed()
    );
    // The limiter grants them 2 s apart by Redis' clock; the fixture logs
    // each a moment later, a moment that varies by a few ms. At the site's
    // own 10 a second they would be 100 ms apart.
    for gap in gaps {
        assert!(gap >= Duration::from_millis(1800), "pages {gap:?} apart");
    }
    app.stop().await;
}

#[tokio::test]
async fn robots_txt_is_fetched_once_per_origin_for_the_runs_within_its_ttl() {
    let app = TestApp::spawn_without_browsers(Roles::fleet(), |_| {}).await;
    app.site.serve_robots(RobotsTxt::File(
        "User-agent: *\nDisallow: /private\n".into(),
    ));
    let body = json!({
        "name": "cached", "render": "json",
        "search_url": format!("{}/api/search?q={{keyword}}&page={{page}}", app.site.base_url()),
        "json": {"items": "/items"}, "fields": {"title": {"pointer": "/title"}},
        "max_pages": 2,
    });
    let json_site = app.create_site(body).await;
    let html_site = app
        .create_site(shop_site(&app, "cached-html", "/search", "http", json!({})))
        .await;
    for keyword in ["one", "two", "three"] {
        app.crawl_to_completion(keyword, json_site, LIMIT).await;
        app.crawl_to_completion(keyword, html_site, LIMIT).await;
    }
    assert_eq!(
        app.site.hits("/robots.txt"),
        1,
        "six runs, one origin, one fetch"
    );
    app.stop().await;
}

#[tokio::test]
async fn in_a_browser_robots_txt_is_read_for_the_sites_user_agent_and_obeyed() {
    let app = TestApp::spawn_with(Roles::fleet(), |_| {}).await;
    // FerrisBot may not have page 2; everyone else may have everything.
    app.site.serve_robots(RobotsTxt::File(
        "User-agent: ferrisbot\nDisallow: /*page=2\n\nUser-agent: *\nDisallow:\n".into(),
    ));
    let ferris = shop_site(
        &app,
        "ferris",
        "/search",
        "browser",
        json!({"user_agent": "FerrisBot/1.0"}),
    );
    let ferris = app.create_site(ferris).await;
    let run = app.crawl_to_completion("ferris", ferris, LIMIT).await;
    assert_eq!(run["pages_crawled"], 1, "{run}");
    assert_eq!(run["stop_reason"], "robots_disallowed", "{run}");
    assert_eq!(pages_requested(&app, "/search", "ferris"), ["1"]);
    let asked = app.site.requests("/robots.txt");
    assert_eq!(asked.len(), 1);
    assert_eq!(asked[0].header("user-agent"), Some("FerrisBot/1.0"));

    let other = shop_site(&app, "other", "/search", "browser", json!({}));
    let other = app.create_site(other).await;
    let run = app.crawl_to_completion("other", other, LIMIT).await;
    assert_eq!(run["pages_crawled"], 3, "{run}");
    assert_eq!(pages_requested(&app, "/search", "other"), ["1", "2", "3"]);
    app.stop().await;
}

#[tokio::test]
async fn the_console_shows_where_a_run_stopped_and_switches_robots_txt_off_for_a_site() {
    const TOKEN: &str = "robots-console-token";
    let app = TestApp::spawn_with_console(Roles::fleet(), |c| {
        c.api.auth_disabled = false;
        c.api.api_tokens = vec![TOKEN.into()];
    })
    .await;
    app.site.serve_robots(RobotsTxt::File(
        "User-agent: *\nDisallow: /*page=2\n".into(),
    ));
    let site = app
        .create_site(shop_site(&app, "stopped", "/search", "http", json!({})))
        .await;
    let run = app.crawl_to_completion("vase", site, LIMIT).await;
    let browser = ConsoleBrowser::open(&app.base).await;
    browser.sign_in(TOKEN).await;

    browser.go(&format!("#/runs/{}", run["id"])).await;
    let stopped = browser.wait_for_text("#run-stopped", "page=2").await;
    assert!(stopped.contains("disallowed by robots.txt"), "{stopped}");

    browser.go(&format!("#/sites/{site}")).await;
    browser.wait_for_text("#site-title", "stopped").await;
    let respected = "return document.getElementById('site-respect_robots').checked";
    assert_eq!(
        browser.client.execute(respected, vec![]).await.unwrap(),
        json!(true)
    );
    browser.click("#site-respect_robots").await;
    browser.click("#save-site").await;
    let app_ref = &app;
    eventually(
        Duration::from_secs(30),
        "the site no longer respects robots.txt",
        move || async move {
            let (_, shown) = app_ref.get(&format!("/api/sites/{site}")).await;
            (shown["respect_robots"] == false).then_some(())
        },
    )
    .await;
    browser.close().await;
    app.stop().await;
}

#[tokio::test]
async fn a_preview_stops_before_a_page_robots_txt_disallows() {
    let app = TestApp::spawn_without_browsers(
        Roles {
            scheduler: false,
            worker: true,
        },
        |_| {},
    )
    .await;
    app.site.serve_robots(RobotsTxt::File(
        "User-agent: *\nDisallow: /*page=2\nDisallow: /static\n".into(),
    ));
    let site = shop_site(&app, "previewed", "/search", "http", json!({}));
    let (status, answer) = app
        .post(
            "/api/sites/preview",
            json!({"site": site, "keyword": "rug", "pages": 2}),
        )
        .await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer["refusal"]["kind"], "robots_disallowed", "{answer}");
    assert_eq!(answer["pages"].as_array().unwrap().len(), 1, "{answer}");
    assert_eq!(answer["items"].as_array().unwrap().len(), 5, "{answer}");
    assert_eq!(pages_requested(&app, "/search", "rug"), ["1"]);

    let barred = shop_site(&app, "previewed-static", "/static", "http", json!({}));
    let (_, answer) = app
        .post(
            "/api/sites/preview",
            json!({"site": barred, "keyword": "rug", "pages": 1}),
        )
        .await;
    assert_eq!(answer["refusal"]["kind"], "robots_disallowed", "{answer}");
    assert_eq!(app.site.hits("/static"), 0);
    app.stop().await;
}
