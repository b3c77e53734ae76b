//! The REST contract: shapes, status codes, and every bad input refused with a
//! JSON error naming the field, with nothing half-written.

use std::time::Duration;

use reqwest::StatusCode;
use serde_json::json;

use crate::support::{CuttableProxy, OwnRedis, TestApp, database_server, eventually};

fn assert_error(
    status: StatusCode,
    body: &serde_json::Value,
    want: StatusCode,
    field: Option<&str>,
) {
    assert_eq!(status, want, "{body}");
    let error = &body["error"];
    assert!(error["code"].is_string(), "{body}");
    assert!(error["message"].is_string(), "{body}");
    if let Some(field) = field {
        assert_eq!(error["field"], field, "{body}");
    }
}

#[tokio::test]
async fn sites_can_be_created_read_updated_listed_and_deleted() {
    let app = TestApp::spawn().await;
    let body = app.site_body("shop", "/search");
    let (status, site) = app.post("/api/sites", body.clone()).await;
    assert_eq!(status, StatusCode::CREATED, "{site}");
    let id = site["id"].as_i64().unwrap();
    assert_eq!(site["name"], "shop");
    assert_eq!(site["render"], "browser");
    assert_eq!(site["fields"]["link"]["attr"], "href");

    let (status, got) = app.get(&format!("/api/sites/{id}")).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(got, site);

    let mut changed = body.clone();
    changed["max_pages"] = json!(2);
    changed["wait_for"] = json!("#results");
    let (status, updated) = app.put(&format!("/api/sites/{id}"), changed).await;
    assert_eq!(status, StatusCode::OK, "{updated}");
    assert_eq!(updated["max_pages"], 2);
    assert_eq!(updated["wait_for"], "#results");

    let (_, list) = app.get("/api/sites").await;
    assert_eq!(list["items"].as_array().unwrap().len(), 1);

    let (status, _) = app.delete(&format!("/api/sites/{id}")).await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    let (status, body) = app.get(&format!("/api/sites/{id}")).await;
    assert_error(status, &body, StatusCode::NOT_FOUND, None);
    app.stop().await;
}

#[tokio::test]
async fn bad_sites_are_refused_naming_the_field() {
    let app = TestApp::spawn().await;
    let good = app.site_body("shop", "/search");
    let cases = [
        ("search_url", json!("https://shop.example/search?q=shoes")),
        ("search_url", json!("not a url {keyword}")),
        ("item_selector", json!("li[")),
        ("render", json!("teleport")),
        ("max_pages", json!(0)),
    ];
    for (field, value) in cases {
        let mut body = good.clone();
        body[field] = value.clone();
        let (status, error) = app.post("/api/sites", body).await;
        assert_error(
            status,
            &error,
            StatusCode::UNPROCESSABLE_ENTITY,
            Some(field),
        );
    }
    let mut body = good.clone();
    body["fields"]["title"]["selector"] = json!("a..title");
    let (status, error) = app.post("/api/sites", body).await;
    assert_error(
        status,
        &error,
        StatusCode::UNPROCESSABLE_ENTITY,
        Some("fields.title.selector"),
    );

    let mut body = good.clone();
    body.as_object_mut().unwrap().remove("item_selector");
    let (status, error) = app.post("/api/sites", body).await;
    assert_error(status, &error, StatusCode::UNPROCESSABLE_ENTITY, None);
    assert!(
        error["error"]["message"]
            .as_str()
            .unwrap()
            .contains("item_selector"),
        "{error}"
    );

    let mut body = good.clone();
    body["max_pages"] = json!("three");
    let (status, error) = app.post("/api/sites", body).await;
    assert_error(
        status,
        &error,
        StatusCode::UNPROCESSABLE_ENTITY,
        Some("max_pages"),
    );

    // Nothing was written by any of them.
    let (_, list) = app.get("/api/sites").await;
    assert_eq!(list["items"], json!([]));

    app.create_site(good.clone()).await;
    let (status, error) = app.post("/api/sites", good).await;
    assert_error(status, &error, StatusCode::CONFLICT, Some("name"));
    app.stop().await;
}

#[tokio::test]
async fn unreadable_and_oversized_bodies_are_refused() {
    let app = TestApp::spawn().await;
    let resp = app
        .http
        .post(format!("{}/api/sites", app.base))
        .header("content-type", "application/json")
        .body("{\"name\": ")
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::BAD_REQUEST);
    let body: serde_json::Value = resp.json().await.unwrap();
    assert_eq!(body["error"]["code"], "bad_request");

    let resp = app
        .http
        .post(format!("{}/api/sites", app.base))
        .header("content-type", "text/plain")
        .body("{}")
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::UNSUPPORTED_MEDIA_TYPE);

    let mut big = app.site_body("big", "/search");
    big["name"] = json!("x".repeat(1024 * 1024 + 10));
    let (status, error) = app.post("/api/sites", big).await;
    assert_error(status, &error, StatusCode::PAYLOAD_TOO_LARGE, None);

    let (status, error) = app.get("/api/sites/abc").await;
    assert_error(status, &error, StatusCode::BAD_REQUEST, Some("id"));
    let (status, error) = app.get("/api/nowhere").await;
    assert_error(status, &error, StatusCode::NOT_FOUND, None);
    let (status, error) = app.get("/api/runs?keyword_id=seven").await;
    assert_error(status, &error, StatusCode::BAD_REQUEST, Some("keyword_id"));
    let (status, error) = app.get("/api/runs?state=done").await;
    assert_error(status, &error, StatusCode::BAD_REQUEST, Some("state"));
    let (status, error) = app.get("/api/results?limit=0").await;
    assert_error(status, &error, StatusCode::BAD_REQUEST, Some("limit"));
    app.stop().await;
}

#[tokio::test]
async fn keywords_are_validated_and_never_half_written() {
    let app = TestApp::spawn().await;
    let site = app.create_site(app.site_body("shop", "/search")).await;
    let good = json!({"keyword": "laptop", "site_ids": [site], "schedule": "0 0 * * * *", "enabled": true});

    let mut bad_cron = good.clone();
    bad_cron["schedule"] = json!("every day at noon");
    let (status, error) = app.post("/api/keywords", bad_cron).await;
    assert_error(
        status,
        &error,
        StatusCode::UNPROCESSABLE_ENTITY,
        Some("schedule"),
    );

    let mut five_fields = good.clone();
    five_fields["schedule"] = json!("0 * * * *");
    let (status, error) = app.post("/api/keywords", five_fields).await;
    assert_error(
        status,
        &error,
        StatusCode::UNPROCESSABLE_ENTITY,
        Some("schedule"),
    );

    let mut unknown = good.clone();
    unknown["site_ids"] = json!([site, 999_999]);
    let (status, error) = app.post("/api/keywords", unknown).await;
    assert_error(
        status,
        &error,
        StatusCode::UNPROCESSABLE_ENTITY,
        Some("site_ids"),
    );
    assert!(
        error["error"]["message"]
            .as_str()
            .unwrap()
            .contains("999999"),
        "{error}"
    );

    let mut empty = good.clone();
    empty["keyword"] = json!("  ");
    let (status, error) = app.post("/api/keywords", empty).await;
    assert_error(
        status,
        &error,
        StatusCode::UNPROCESSABLE_ENTITY,
        Some("keyword"),
    );

    let (_, list) = app.get("/api/keywords").await;
    assert_eq!(
        list["items"],
        json!([]),
        "a refused keyword left rows behind"
    );
    let links: i64 = sqlx::query_scalar("SELECT count(*) FROM keyword_sites")
        .fetch_one(app.pool())
        .await
        .unwrap();
    assert_eq!(links, 0);

    let (status, kw) = app.post("/api/keywords", good.clone()).await;
    assert_eq!(status, StatusCode::CREATED, "{kw}");
    let id = kw["id"].as_i64().unwrap();
    assert_eq!(kw["site_ids"], json!([site]));
    assert_eq!(kw["enabled"], true);

    // A failed update leaves the keyword as it was.
    let mut unknown = good.clone();
    unknown["keyword"] = json!("changed");
    unknown["site_ids"] = json!([424242]);
    let (status, _) = app.put(&format!("/api/keywords/{id}"), unknown).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY);
    let (_, same) = app.get(&format!("/api/keywords/{id}")).await;
    assert_eq!(same["keyword"], "laptop");
    assert_eq!(same["site_ids"], json!([site]));

    let mut disabled = good.clone();
    disabled["enabled"] = json!(false);
    let (status, kw) = app.put(&format!("/api/keywords/{id}"), disabled).await;
    assert_eq!(status, StatusCode::OK, "{kw}");
    assert_eq!(kw["enabled"], false);

    let (status, _) = app.delete(&format!("/api/keywords/{id}")).await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    let (status, error) = app.get(&format!("/api/keywords/{id}")).await;
    assert_error(status, &error, StatusCode::NOT_FOUND, None);
    let (status, error) = app
        .post(&format!("/api/keywords/{id}/crawl"), json!({}))
        .await;
    assert_error(status, &error, StatusCode::NOT_FOUND, None);
    app.stop().await;
}

#[tokio::test]
async fn a_keyword_site_with_an_active_run_is_not_queued_twice() {
    let app = TestApp::spawn().await;
    let a = app.create_site(app.site_body("a", "/search")).await;
    let b = app.create_site(app.site_body("b", "/static")).await;
    let kw = app.create_keyword("lamp", &[a, b], "0 0 0 * * *").await;

    let (status, first) = app
        .post(&format!("/api/keywords/{kw}/crawl"), json!({}))
        .await;
    assert_eq!(status, StatusCode::ACCEPTED);
    assert_eq!(first["queued"].as_array().unwrap().len(), 2, "{first}");
    assert_eq!(first["already_active"], json!([]));
    assert_eq!(first["queued"][0]["state"], "queued");
    assert_eq!(first["queued"][0]["attempt"], 1);

    let (status, second) = app
        .post(&format!("/api/keywords/{kw}/crawl"), json!({}))
        .await;
    assert_eq!(status, StatusCode::ACCEPTED);
    assert_eq!(second["queued"], json!([]), "{second}");
    let active: Vec<i64> = second["already_active"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["id"].as_i64().unwrap())
        .collect();
    let queued: Vec<i64> = first["queued"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["id"].as_i64().unwrap())
        .collect();
    assert_eq!(active, queued);

    // Cancelling one frees its pair: the next request queues that site only.
    let (status, cancelled) = app
        .post(&format!("/api/runs/{}/cancel", queued[0]), json!({}))
        .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(cancelled["state"], "cancelled");
    let (_, third) = app
        .post(&format!("/api/keywords/{kw}/crawl"), json!({}))
        .await;
    assert_eq!(third["queued"].as_array().unwrap().len(), 1, "{third}");
    assert_eq!(third["queued"][0]["site_id"], a);

    let (_, runs) = app
        .get(&format!("/api/runs?keyword_id={kw}&state=queued"))
        .await;
    assert_eq!(runs["items"].as_array().unwrap().len(), 2);
    let (_, runs) = app.get(&format!("/api/runs?site_id={a}")).await;
    assert_eq!(runs["items"].as_array().unwrap().len(), 2);
    let (_, page) = app.get("/api/runs?limit=2").await;
    let cursor = page["next_cursor"].as_str().unwrap().to_owned();
    let (_, rest) = app.get(&format!("/api/runs?limit=2&cursor={cursor}")).await;
    assert_eq!(rest["items"].as_array().unwrap().len(), 1);
    assert!(rest.get("next_cursor").is_none(), "{rest}");

    // A site with an active run cannot be deleted out from under it.
    let (status, error) = app.delete(&format!("/api/sites/{a}")).await;
    assert_error(status, &error, StatusCode::CONFLICT, None);
    app.stop().await;
}

/// `/health` answers 200 whatever its dependencies do; asserted at each step.
async fn assert_healthy(app: &TestApp) {
    let (status, body) = app.get("/health").await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["status"], "ok");
}

/// Waits until `/ready` answers `status` and returns its body.
async fn ready_turns(app: &TestApp, status: StatusCode, what: &str) -> serde_json::Value {
    // Each check is bounded by 2 s; a pool or a Redis connection finds its
    // server back within a second or two of it returning.
    eventually(Duration::from_secs(20), what, || async {
        let (seen, body) = app.get("/ready").await;
        (seen == status).then_some(body)
    })
    .await
}

#[tokio::test]
async fn health_is_always_ok_and_ready_follows_its_dependencies() {
    // Both dependencies of the api's own, so taking them away touches no
    // other test: Postgres behind a link that can be cut, a Redis server to stop.
    let server = database_server();
    let postgres = CuttableProxy::start((
        server.host_str().unwrap().to_owned(),
        server.port().unwrap_or(5432),
    ))
    .await;
    let redis = OwnRedis::start().await;
    let redis_port = redis.port();
    let app = TestApp::spawn_with(Default::default(), |c| {
        c.common.database_url = postgres.route(&c.common.database_url);
        c.common.redis_url = redis.url();
    })
    .await;
    let (status, body) = app.get("/ready").await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(
        body,
        json!({"status": "ready", "checks": {"postgres": "ok", "redis": "ok"}})
    );
    assert_healthy(&app).await;

    postgres.cut();
    let body = ready_turns(
        &app,
        StatusCode::SERVICE_UNAVAILABLE,
        "503 without Postgres",
    )
    .await;
    assert_eq!(body["status"], "unavailable", "{body}");
    assert_ne!(body["checks"]["postgres"], "ok", "{body}");
    assert_eq!(body["checks"]["redis"], "ok", "{body}");
    assert_healthy(&app).await;
    postgres.restore();
    let body = ready_turns(&app, StatusCode::OK, "200 with Postgres back").await;
    assert_eq!(body["checks"], json!({"postgres": "ok", "redis": "ok"}));
    assert_healthy(&app).await;

    redis.stop().await;
    let body = ready_turns(&app, StatusCode::SERVICE_UNAVAILABLE, "503 without Redis").await;
    assert_eq!(body["status"], "unavailable", "{body}");
    assert_eq!(body["checks"]["postgres"], "ok", "{body}");
    assert_ne!(body["checks"]["redis"], "ok", "{body}");
    assert_healthy(&app).await;
    let _redis = OwnRedis::start_on(redis_port).await;
    let body = ready_turns(&app, StatusCode::OK, "200 with Redis back").await;
    assert_eq!(body["checks"], json!({"postgres": "ok", "redis": "ok"}));
    assert_healthy(&app).await;
    app.stop().await;
}

#[tokio::test]
async fn a_keyword_shows_its_next_five_fire_times_while_enabled() {
    let app = TestApp::spawn().await;
    let site = app.create_site(app.site_body("shop", "/search")).await;
    let before = chrono::Utc::now();
    let hourly = json!({"keyword": "lamp", "site_ids": [site], "schedule": "0 30 * * * *"});
    let (status, created) = app.post("/api/keywords", hourly.clone()).await;
    assert_eq!(status, 201, "{created}");
    let times: Vec<chrono::DateTime<chrono::Utc>> =
        serde_json::from_value(created["next_fire_times"].clone()).unwrap();
    assert_eq!(times.len(), 5, "{created}");
    assert!(times[0] > before, "the first is ahead: {times:?}");
    for pair in times.windows(2) {
        assert_eq!(pair[1] - pair[0], chrono::TimeDelta::hours(1), "{times:?}");
    }
    assert!(
        times
            .iter()
            .all(|t| t.format("%M:%S").to_string() == "30:00")
    );

    let id = created["id"].as_i64().unwrap();
    let mut disabled = hourly;
    disabled["enabled"] = json!(false);
    let (status, shown) = app.put(&format!("/api/keywords/{id}"), disabled).await;
    assert_eq!(status, 200, "{shown}");
    assert_eq!(
        shown["next_fire_times"],
        json!([]),
        "a disabled keyword fires never"
    );
    app.stop().await;
}
