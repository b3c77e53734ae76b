//! A site's versions through the api: every change recorded with why and by
//! which token, what it changed, an earlier version read and compared, and
//! brought back as a new version that keeps today's secrets.

use crawlfleet::store;
use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::support::{Roles, TEST_SESSION_KEY, TestApp};

const WRITER: &str = "versions-writer-6621";
const READER: &str = "versions-reader-1187";
const SECRET: &str = "Bearer versions-secret-4410";

fn site_body(base: &str, item_selector: &str) -> Value {
    json!({
        "name": "versioned", "render": "http",
        "search_url": format!("{base}/search?q={{keyword}}"),
        "item_selector": item_selector,
        "fields": {"title": {"selector": "a.title"}, "price": {"selector": ".price"}},
        "headers": {"Authorization": SECRET},
    })
}

fn paths(changes: &Value) -> Vec<&str> {
    changes
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["path"].as_str().unwrap())
        .collect()
}

#[tokio::test]
async fn every_change_is_a_version_that_can_be_compared_and_brought_back() {
    let app = TestApp::spawn_without_browsers(Roles::default(), |c| {
        c.api.auth_disabled = false;
        c.api.api_tokens = vec![WRITER.into()];
        c.api.api_read_tokens = vec![READER.into()];
    })
    .await;
    let base = app.site.base_url();
    let id = app.create_site(site_body(&base, "li.product")).await;
    // A token is named by the first 8 bytes of its SHA-256, never by itself.
    let digest = <sha2::Sha256 as sha2::Digest>::digest(WRITER.as_bytes());
    let writer = format!(
        "token:{}",
        digest[..8]
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect::<String>()
    );

    let (status, listed) = app.get(&format!("/api/sites/{id}/versions")).await;
    assert_eq!(status, StatusCode::OK, "{listed}");
    let first = &listed["items"][0];
    assert_eq!(first["version"], 1, "{listed}");
    assert_eq!(first["reason"], "created");
    assert_eq!(first["changed_by"], writer.as_str());
    assert!(
        paths(&first["changes"]).contains(&"item_selector"),
        "{first}"
    );
    assert!(
        !listed.to_string().contains("versions-secret"),
        "no secret in a version: {listed}"
    );

    // An edit of the item selector: one version, one change.
    let (status, body) = app
        .put(&format!("/api/sites/{id}"), site_body(&base, "div.card"))
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let (_, listed) = app.get(&format!("/api/sites/{id}/versions")).await;
    let newest = &listed["items"][0];
    assert_eq!(newest["version"], 2, "{listed}");
    assert_eq!(newest["reason"], "edited");
    assert_eq!(
        newest["changes"],
        json!([{"path": "item_selector", "before": "li.product", "after": "div.card"}])
    );

    // The same body again, with the secret sent back masked: no version.
    let mut same = site_body(&base, "div.card");
    same["headers"]["Authorization"] = json!("***");
    let (status, body) = app.put(&format!("/api/sites/{id}"), same).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let (_, listed) = app.get(&format!("/api/sites/{id}/versions")).await;
    assert_eq!(listed["items"].as_array().unwrap().len(), 2, "{listed}");

    // Version 1 reads as it was; compared with the site now, one change.
    let (status, one) = app.get(&format!("/api/sites/{id}/versions/1")).await;
    assert_eq!(status, StatusCode::OK, "{one}");
    assert_eq!(one["site"]["item_selector"], "li.product", "{one}");
    assert_eq!(one["site"]["headers"]["Authorization"], "***", "{one}");
    let (status, diff) = app.get(&format!("/api/sites/{id}/versions/1/diff")).await;
    assert_eq!(status, StatusCode::OK, "{diff}");
    assert_eq!(
        (diff["from"].clone(), diff["to"].clone()),
        (json!(1), json!(2))
    );
    assert_eq!(paths(&diff["changes"]), ["item_selector"]);

    // A read token may look, not restore.
    let as_reader = app
        .http
        .post(format!("{}/api/sites/{id}/versions/1/restore", app.base))
        .bearer_auth(READER)
        .send()
        .await
        .unwrap();
    assert_eq!(as_reader.status(), StatusCode::FORBIDDEN);

    // Restored: version 3, from 1, the old selector back, the secret kept.
    let (status, restored) = app
        .post(&format!("/api/sites/{id}/versions/1/restore"), json!({}))
        .await;
    assert_eq!(status, StatusCode::OK, "{restored}");
    assert_eq!(restored["item_selector"], "li.product", "{restored}");
    let (_, listed) = app.get(&format!("/api/sites/{id}/versions")).await;
    let newest = &listed["items"][0];
    assert_eq!(
        (
            &newest["version"],
            &newest["reason"],
            &newest["restored_from"]
        ),
        (&json!(3), &json!("restored"), &json!(1)),
        "{listed}"
    );
    let key = TEST_SESSION_KEY.parse().unwrap();
    let stored = store::sites::get(app.pool(), id, Some(&key))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        stored
            .spec
            .identity
            .headers
            .get("Authorization")
            .map(String::as_str),
        Some(SECRET)
    );

    // Restoring the version the site is at changes nothing.
    let (status, _) = app
        .post(&format!("/api/sites/{id}/versions/3/restore"), json!({}))
        .await;
    assert_eq!(status, StatusCode::OK);
    let (_, listed) = app.get(&format!("/api/sites/{id}/versions?limit=1")).await;
    assert_eq!(listed["items"][0]["version"], 3, "{listed}");
    assert_eq!(listed["next_cursor"], "3", "{listed}");
    let (_, older) = app
        .get(&format!("/api/sites/{id}/versions?limit=1&cursor=3"))
        .await;
    assert_eq!(older["items"][0]["version"], 2, "{older}");
    assert_eq!(paths(&older["items"][0]["changes"]), ["item_selector"]);

    // What does not exist is a 404; a bad cursor or version a 400 naming it.
    for path in [
        format!("/api/sites/{id}/versions/9"),
        format!("/api/sites/{id}/versions/1/diff?to=9"),
        format!("/api/sites/{}/versions", id + 1000),
        format!("/api/sites/{}/versions/1", id + 1000),
    ] {
        let (status, body) = app.get(&path).await;
        assert_eq!(status, StatusCode::NOT_FOUND, "{path}: {body}");
    }
    for (path, field) in [
        (format!("/api/sites/{id}/versions?cursor=x"), "cursor"),
        (format!("/api/sites/{id}/versions/99999999999"), "version"),
        (format!("/api/sites/{id}/versions?limit=0"), "limit"),
    ] {
        let (status, body) = app.get(&path).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{path}: {body}");
        assert_eq!(body["error"]["field"], field, "{path}: {body}");
    }
}
