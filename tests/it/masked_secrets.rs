//! A secret sent back masked (`***`) keeps its stored value only while it
//! would go where it went before: header values to the search URL's origin,
//! proxy credentials to the proxy. Pointing a site (or a preview of it)
//! elsewhere with a mask is a 422 naming the field, and the new target hears
//! nothing of the stored secret.

use std::time::Duration;

use crawlfleet_demo::site::DemoSite;
use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::support::{Roles, TestApp, TestProxy};

// One http page per crawl or preview: well under a second; 60 s for a loaded machine.
const LIMIT: Duration = Duration::from_secs(60);
const AUTHORIZATION: &str = "Bearer stored-secret-8812";
const API_KEY: &str = "key-stored-5521";
const CREDENTIALS: (&str, &str) = ("crawler", "proxy-pass-93");

/// An http site searching `base` (a fixture shop), with two secret headers.
fn site_at(name: &str, base: &str, extra: Value) -> Value {
    let mut body = json!({
        "name": name, "render": "http",
        "search_url": format!("{base}/search?q={{keyword}}"),
        "item_selector": "li.product",
        "fields": {"title": {"selector": "a.title"}},
        "headers": {"Authorization": AUTHORIZATION, "X-Api-Key": API_KEY},
    });
    for (key, value) in extra.as_object().unwrap() {
        body[key] = value.clone();
    }
    body
}

/// The site as a client that read it sends it back: secrets masked.
async fn as_shown(app: &TestApp, id: i64) -> Value {
    let (status, mut shown) = app.get(&format!("/api/sites/{id}")).await;
    assert_eq!(status, StatusCode::OK, "{shown}");
    for key in ["id", "created_at", "updated_at", "session_saved_at"] {
        shown.as_object_mut().unwrap().remove(key);
    }
    assert_eq!(shown["headers"]["Authorization"], "***", "{shown}");
    shown
}

/// Requests `fixture` got carrying any of the stored secret headers.
fn secrets_heard(fixture: &DemoSite) -> usize {
    fixture
        .requests("/search")
        .iter()
        .filter(|hit| {
            hit.header("authorization") == Some(AUTHORIZATION)
                || hit.header("x-api-key") == Some(API_KEY)
        })
        .count()
}

fn refused_naming(status: StatusCode, body: &Value, field: &str) {
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{body}");
    assert_eq!(body["error"]["field"], field, "{body}");
    let message = body["error"]["message"].as_str().unwrap();
    assert!(message.contains("send the value again"), "{message}");
    assert!(!message.contains(AUTHORIZATION), "{message}");
}

#[tokio::test]
async fn masked_headers_do_not_follow_an_update_or_a_preview_to_another_origin() {
    let app = TestApp::spawn_without_browsers(Roles::fleet(), |_| {}).await;
    let sink = DemoSite::start(0).await.unwrap();
    let site = app
        .create_site(site_at("kept", &app.site.base_url(), json!({})))
        .await;
    let shown = as_shown(&app, site).await;

    // Another port, and another name for the same address: other origins.
    let port = app.site.addr().port();
    for (n, elsewhere) in [sink.base_url(), format!("http://localhost:{port}")]
        .into_iter()
        .enumerate()
    {
        let mut moved = shown.clone();
        moved["search_url"] = json!(format!("{elsewhere}/search?q={{keyword}}"));
        let (status, body) = app.put(&format!("/api/sites/{site}"), moved.clone()).await;
        // Whatever the answer, a crawl of the site now goes where it points.
        let keyword = format!("after-put-{n}");
        app.crawl_to_end(&keyword, site, LIMIT).await;
        assert_eq!(
            secrets_heard(&sink),
            0,
            "the stored secrets reached {elsewhere}"
        );
        refused_naming(status, &body, "headers.Authorization");
        assert!(
            body["error"]["message"]
                .as_str()
                .unwrap()
                .contains("search_url now points to another origin"),
            "{body}"
        );

        let preview = json!({"site": moved, "keyword": "lamp", "site_id": site});
        let (status, body) = app.post("/api/sites/preview", preview).await;
        assert_eq!(
            secrets_heard(&sink),
            0,
            "a preview sent them to {elsewhere}"
        );
        refused_naming(status, &body, "site.headers.Authorization");
    }
    let (_, stored) = app.get(&format!("/api/sites/{site}")).await;
    assert_eq!(stored["search_url"], shown["search_url"], "nothing changed");
    assert!(
        secrets_heard(&app.site) >= 2,
        "the site's own origin still gets them"
    );

    // The same origin, another path: the masks keep the stored values.
    let before = secrets_heard(&app.site);
    let mut same = shown.clone();
    same["search_url"] = json!(format!(
        "{}/search?q={{keyword}}&from=edit",
        app.site.base_url()
    ));
    let preview = json!({"site": same.clone(), "keyword": "lamp", "site_id": site});
    let (status, body) = app.post("/api/sites/preview", preview).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let (status, body) = app.put(&format!("/api/sites/{site}"), same).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    app.crawl_to_completion("same-origin", site, LIMIT).await;
    assert_eq!(secrets_heard(&app.site), before + 2, "preview and crawl");
    let last = app.site.requests("/search").pop().unwrap();
    assert_eq!(last.header("authorization"), Some(AUTHORIZATION));
    assert_eq!(last.header("x-api-key"), Some(API_KEY));

    // Sent again in full, values go to the new origin: the client knows them.
    let mut moved = as_shown(&app, site).await;
    moved["search_url"] = json!(format!("{}/search?q={{keyword}}", sink.base_url()));
    moved["headers"] = json!({"Authorization": "Bearer for-the-sink", "X-Api-Key": "sink-key"});
    let (status, body) = app.put(&format!("/api/sites/{site}"), moved).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    app.crawl_to_completion("sent-again", site, LIMIT).await;
    let hit = sink
        .requests("/search")
        .pop()
        .expect("the sink was crawled");
    assert_eq!(hit.header("authorization"), Some("Bearer for-the-sink"));
    assert_eq!(secrets_heard(&sink), 0);
    sink.stop().await;
    app.stop().await;
}

#[tokio::test]
async fn masked_proxy_credentials_do_not_follow_the_proxy_to_another_host() {
    let app = TestApp::spawn_without_browsers(Roles::fleet(), |_| {}).await;
    let proxy = TestProxy::start(Some(CREDENTIALS)).await;
    // Would let the stored credentials through: it demands the same ones.
    let other = TestProxy::start(Some(CREDENTIALS)).await;
    let body = site_at(
        "proxied",
        &app.site.base_url(),
        json!({"proxy": proxy.url("http", Some(CREDENTIALS))}),
    );
    let site = app.create_site(body).await;
    let shown = as_shown(&app, site).await;

    let mut moved = shown.clone();
    moved["proxy"] = json!(format!("http://***:***@127.0.0.1:{}", other.port));
    let (status, body) = app.put(&format!("/api/sites/{site}"), moved.clone()).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{body}");
    assert_eq!(body["error"]["field"], "proxy", "{body}");
    let message = body["error"]["message"].as_str().unwrap();
    assert!(message.contains("send them again"), "{message}");
    assert!(!message.contains(CREDENTIALS.1), "{message}");
    let preview = json!({"site": moved, "keyword": "lamp", "site_id": site});
    let (status, body) = app.post("/api/sites/preview", preview).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{body}");
    assert_eq!(body["error"]["field"], "site.proxy", "{body}");

    // Over plain http a proxy reads the headers: a new one, even without
    // credentials, gets no masked header either.
    let open = TestProxy::start(None).await;
    let mut through_open = shown.clone();
    through_open["proxy"] = json!(open.url("http", None));
    let (status, body) = app.put(&format!("/api/sites/{site}"), through_open).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{body}");
    assert_eq!(body["error"]["field"], "headers.Authorization", "{body}");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("proxy is now another one"),
        "{body}"
    );
    app.crawl_to_completion("still-proxied", site, LIMIT).await;
    for stranger in [&other, &open] {
        assert!(
            stranger.log(|log| log.asked.is_empty()),
            "a refused edit reached a proxy"
        );
    }

    // The same proxy, sent back masked: its credentials are kept.
    let (status, body) = app.put(&format!("/api/sites/{site}"), shown).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    app.crawl_to_completion("same-proxy", site, LIMIT).await;
    assert_eq!(
        proxy.log(|log| log.refused),
        0,
        "the kept credentials were sent"
    );
    assert!(proxy.log(|log| log.asked.len()) >= 2);
    app.stop().await;
}
