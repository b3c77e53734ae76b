//! Kept sessions: the cookies (and, in Chrome, local storage) a run ends with
//! are sealed into Postgres and the site's next run, on another worker,
//! starts with them; a user can forget them; an exclusive session is used by
//! one run at a time.

use std::time::Duration;

use crawlfleet_demo::site::member_cookie;
use serde_json::{Value, json};

use crate::support::{
    Backend, ON_DEMAND, RoleProcess, Roles, TestApp, TestProxy, browser_slots, on_each_backend,
};

// A run here includes starting its worker process and, for the browser site,
// Chrome, or waits behind three 1 s runs: seconds; 90 s is over ten times that.
const LIMIT: Duration = Duration::from_secs(90);

/// The member cookie each visit of `/members` came with, in order.
fn member_cookies(app: &TestApp) -> Vec<Option<String>> {
    app.site
        .requests("/members")
        .iter()
        .map(|h| member_cookie(&h.headers))
        .collect()
}

/// The visit counts the page's script reported from local storage.
fn reported_visits(app: &TestApp) -> Vec<String> {
    app.site
        .requests("/members/visits")
        .iter()
        .map(|h| h.param("n").unwrap())
        .collect()
}

/// Runs one crawl of `keyword` on a worker process of its own, then stops it.
async fn crawl_on_a_new_worker(app: &TestApp, keyword: i64) -> Value {
    let worker = RoleProcess::worker(&app.config);
    let runs = app.crawl(keyword).await;
    let run = app.wait_until_completed(runs[0], LIMIT).await;
    assert_eq!(worker.terminate(Duration::from_secs(30)).await, 0);
    run
}

async fn sealed_bytes(app: &TestApp, site: i64) -> Vec<u8> {
    sqlx::query_scalar("SELECT sealed FROM site_sessions WHERE site_id = $1")
        .bind(site)
        .fetch_one(app.pool())
        .await
        .unwrap()
}

on_each_backend!(a_browser_session_kept_by_one_worker_is_used_by_the_next);
async fn a_browser_session_kept_by_one_worker_is_used_by_the_next(backend: Backend) {
    let _slots = browser_slots(1).await;
    let app = TestApp::spawn_on(&backend, Roles::scheduler_only(), |_| {}).await;
    let site = app
        .one_page_site(
            "members-browser",
            "/members?q={keyword}",
            json!({"render": "browser", "keep_session": true, "wait_for": "#ready"}),
        )
        .await;
    let keyword = app.create_keyword("club", &[site], ON_DEMAND).await;

    let first = crawl_on_a_new_worker(&app, keyword).await;
    let second = crawl_on_a_new_worker(&app, keyword).await;
    assert_ne!(first["worker_id"], second["worker_id"]);
    // Run 1 arrived as a stranger and was given m1 (HttpOnly); run 2, on
    // another worker, came back with it and with its local storage.
    assert_eq!(member_cookies(&app), [None, Some("m1".to_owned())]);
    assert_eq!(reported_visits(&app), ["1", "2"]);
    let sealed = sealed_bytes(&app, site).await;
    assert!(
        !String::from_utf8_lossy(&sealed).contains("m1"),
        "the session is sealed, not stored in the clear"
    );
    let (_, shown) = app.get(&format!("/api/sites/{site}")).await;
    assert!(shown["session_saved_at"].is_string(), "{shown}");

    // Forgotten: the next run is a stranger again.
    let (status, _) = app.delete(&format!("/api/sites/{site}/session")).await;
    assert_eq!(status, 204);
    let (status, _) = app.delete(&format!("/api/sites/{site}/session")).await;
    assert_eq!(status, 404, "nothing left to forget");
    crawl_on_a_new_worker(&app, keyword).await;
    assert_eq!(member_cookies(&app)[2], None);
    assert_eq!(reported_visits(&app)[2], "1");
    app.stop().await;
}

#[tokio::test]
async fn an_http_session_kept_by_one_worker_is_used_by_the_next() {
    let app = TestApp::spawn_without_browsers(Roles::scheduler_only(), |_| {}).await;
    let site = app
        .one_page_site(
            "members-http",
            "/members?q={keyword}",
            json!({"render": "http", "keep_session": true}),
        )
        .await;
    let plain = app
        .one_page_site(
            "members-forgetful",
            "/members?q={keyword}&plain=1",
            json!({"render": "http"}),
        )
        .await;
    let keyword = app.create_keyword("guild", &[site], ON_DEMAND).await;
    let forgetful = app.create_keyword("crowd", &[plain], ON_DEMAND).await;

    let first = crawl_on_a_new_worker(&app, keyword).await;
    let second = crawl_on_a_new_worker(&app, keyword).await;
    assert_ne!(first["worker_id"], second["worker_id"]);
    assert_eq!(member_cookies(&app), [None, Some("m1".to_owned())]);

    // A site that keeps no session starts as a stranger every time.
    crawl_on_a_new_worker(&app, forgetful).await;
    crawl_on_a_new_worker(&app, forgetful).await;
    assert_eq!(member_cookies(&app)[2..], [None, None]);
    app.stop().await;
}

/// Pairs of `site`'s attempts that were under way at the same time.
async fn overlapping_attempts(app: &TestApp, site: i64) -> i64 {
    sqlx::query_scalar(
        "SELECT count(*) FROM crawl_attempts a JOIN crawl_attempts b
           ON a.id < b.id AND a.started_at < b.ended_at AND b.started_at < a.ended_at
         JOIN crawl_runs ra ON ra.id = a.run_id JOIN crawl_runs rb ON rb.id = b.run_id
         WHERE ra.site_id = $1 AND rb.site_id = $1",
    )
    .bind(site)
    .fetch_one(app.pool())
    .await
    .unwrap()
}

#[tokio::test]
async fn an_exclusive_session_is_used_by_one_run_at_a_time() {
    let app = TestApp::spawn_without_browsers(Roles::fleet(), |_| {}).await;
    let settings = |exclusive: bool| {
        json!({"render": "http", "keep_session": true, "exclusive_session": exclusive,
               "max_concurrent_runs": 5})
    };
    let exclusive = app
        .one_page_site("exclusive", "/slow?ms=1000&q={keyword}", settings(true))
        .await;
    let shared = app
        .one_page_site("shared", "/slow?ms=1000&q={keyword}", settings(false))
        .await;

    // The control: the same runs on the same site but for exclusivity do
    // overlap (the worker has slots for them all), so an overlap is seen
    // when there is one.
    for run in app.queue_crawls(shared, "all at once ", 4).await {
        app.wait_until_completed(run, LIMIT).await;
    }
    assert!(
        overlapping_attempts(&app, shared).await > 0,
        "without an exclusive session, runs of one site overlap"
    );

    for run in app.queue_crawls(exclusive, "one at a time ", 4).await {
        app.wait_until_completed(run, LIMIT).await;
    }
    assert_eq!(
        overlapping_attempts(&app, exclusive).await,
        0,
        "two runs used the session at once"
    );
    app.stop().await;
}

#[tokio::test]
async fn keeping_a_session_needs_the_key_that_seals_it() {
    let app = TestApp::spawn_with(Roles::default(), |c| c.common.session_key = None).await;
    let mut site = app.site_body("no-key", "/members");
    site["keep_session"] = json!(true);
    let (status, body) = app.post("/api/sites", site).await;
    assert_eq!(status, 422, "{body}");
    assert_eq!(body["error"]["field"], "keep_session");
    app.stop().await;
}

/// What must never reach a log, whatever RUST_LOG says: a kept session's
/// cookie (it goes into Chrome through CDP, and comes back out), a site's
/// header values, and its proxy's credentials.
#[tokio::test]
async fn secrets_never_reach_a_workers_log_even_at_trace_level() {
    let _slots = browser_slots(1).await;
    let app = TestApp::spawn_with(Roles::scheduler_only(), |_| {}).await;
    let proxy = TestProxy::start(Some(("proxy-user-5150", "proxy-pass-5150"))).await;
    let browser = app
        .one_page_site(
            "members-traced",
            "/members?tag=cookie-secret-5150&q={keyword}",
            json!({"render": "browser", "keep_session": true, "wait_for": "#ready",
                   "headers": {"X-Api-Key": "header-secret-5150"}}),
        )
        .await;
    let http = app
        .one_page_site(
            "proxied-traced",
            "/members?tag=cookie-secret-5150&q={keyword}",
            json!({"render": "http", "keep_session": true,
                   "headers": {"X-Api-Key": "header-secret-5150"},
                   "proxy": proxy.url("http", Some(("proxy-user-5150", "proxy-pass-5150")))}),
        )
        .await;
    let keyword = app
        .create_keyword("club", &[browser, http], ON_DEMAND)
        .await;
    let worker = RoleProcess::spawn("worker", &app.config, &[("RUST_LOG", "trace".into())]);
    // Twice: the second runs put the kept cookies into Chrome and the HTTP
    // client.
    for _ in 0..2 {
        for run in app.crawl(keyword).await {
            app.wait_until_completed(run, LIMIT).await;
        }
    }
    let mut cookies = member_cookies(&app);
    cookies.sort();
    assert_eq!(
        cookies,
        [
            None,
            None,
            Some("cookie-secret-5150-m1".to_owned()),
            Some("cookie-secret-5150-m2".to_owned())
        ]
    );
    let log_path = worker.log.clone();
    assert_eq!(worker.terminate(Duration::from_secs(30)).await, 0);
    let log = std::fs::read_to_string(&log_path).unwrap();
    // The log is the trace of two crawls, so the check below saw them.
    assert!(log.contains("TRACE"), "{}", log_path.display());
    for secret in [
        "cookie-secret-5150",
        "header-secret-5150",
        "proxy-user-5150",
        "proxy-pass-5150",
    ] {
        assert!(
            !log.contains(secret),
            "{secret} in the log {}",
            log_path.display()
        );
    }
    app.stop().await;
}
