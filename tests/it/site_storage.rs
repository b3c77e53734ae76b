//! A site's columns (`store::sites`): every part of a spec is written by the
//! INSERT and by the UPDATE and read back as it was, secrets included, in
//! each kind of extraction; and read back again from the version each write
//! recorded.

use crawlfleet::{
    domain::site::{Identity, SiteInput, SiteSpec, VersionReason},
    store::{
        self,
        sealing::SessionKey,
        sites::{Revision, versions},
    },
};
use serde_json::json;

use crate::support::{TEST_SESSION_KEY, TestDb};

fn spec(body: serde_json::Value) -> SiteSpec {
    serde_json::from_value::<SiteInput>(body)
        .expect("a site body")
        .parse()
        .expect("a valid site")
}

/// Three sites that differ in every column a spec is stored in.
fn three_sites() -> [SiteSpec; 3] {
    let selectors = spec(json!({
        "name": "by-selector", "search_url": "https://shop.example/?q={keyword}",
        "render": "http", "item_selector": "li.product",
        "fields": {
            "title": {"selector": "a", "required": true},
            "price": {"selector": ".price", "number": {"locale": "de-DE", "currency_field": "currency"}},
            "sku": {"selector": "[data-sku]", "attr": "data-sku", "regex": "(\\d+)"},
        },
        "item_key": "sku", "wait_for": "#ready", "blocked_selector": ".captcha",
        "max_pages": 7, "paging": {"form": "next_link", "selector": "a[rel=next]"}, "stuck_timeout_secs": 33, "max_attempts": 4,
        "max_requests_per_sec": 0.25, "max_concurrent_runs": 2, "stop_on_seen": true,
        "expect_items": true,
        "expect": {"min_items": 3, "required_fields": ["title"], "max_empty_runs": 5},
        "enabled": false, "respect_robots": false, "keep_session": true,
        "exclusive_session": true, "user_agent": "crawlfleet-test/1",
        "headers": {"x-api-key": "k1"}, "proxy": "http://user:secret@proxy.example:3128",
    }));
    let json_api = spec(json!({
        "name": "json-api", "search_url": "https://api.example/s?q={keyword}",
        "render": "json",
        "json": {"items": "/data/items", "next_token": "/next", "token_param": "cursor"},
        "fields": {"title": {"pointer": "/title"}, "url": {"pointer": "/url", "link": true}},
        "max_pages": 9, "stuck_timeout_secs": 44, "max_attempts": 6,
        "max_requests_per_sec": 3.5, "max_concurrent_runs": 5,
        "expect": {"min_items": 1, "max_empty_runs": 2},
        "user_agent": "other/2", "headers": {"authorization": "Bearer t", "x-b": "b"},
        "proxy": "socks5://proxy2.example:1080",
    }));
    let structured = spec(json!({
        "name": "structured", "search_url": "https://shop.example/list?q={keyword}&from={offset}",
        "structured_items": "Product",
        "paging": {"form": "offset", "page_size": 24},
        "actions": [
            {"action": "dismiss", "selector": "#cookies button"},
            {"action": "type", "selector": "input[name=q]", "text": "{keyword}", "timeout_ms": 7000},
            {"action": "press", "key": "Enter"},
            {"action": "wait", "ms": 300},
        ],
        "fields": {
            "name": {"structured": "name"},
            "when": {"structured": "releaseDate", "date": {"formats": ["%d.%m.%Y"], "time_zone": "Europe/Berlin"}},
            "tags": {"structured": "keywords", "all": true, "default": []},
        },
    }));
    [selectors, json_api, structured]
}

#[tokio::test]
async fn every_column_of_a_site_is_read_back_as_written_by_its_insert_and_its_update() {
    let db = TestDb::new().await;
    let key: SessionKey = TEST_SESSION_KEY.parse().unwrap();
    let [first, second, third] = three_sites();
    assert_ne!(first, second);
    assert_ne!(second, third);

    let edited = Revision::new(VersionReason::Edited, Some("token:test".into()));
    let created = store::sites::create(
        &db.pool,
        &first,
        Some(&key),
        &Revision::new(VersionReason::Created, None),
    )
    .await
    .unwrap();
    assert_eq!(created.version, 1);
    let read = store::sites::get(&db.pool, created.id, Some(&key))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(read.spec, first, "as inserted");
    assert_eq!(read.created_at, created.created_at);

    let written = [second, third, first.clone()];
    for (version, replacement) in (2..).zip(&written) {
        let updated = store::sites::update(&db.pool, created.id, replacement, Some(&key), &edited)
            .await
            .unwrap()
            .expect("the site exists");
        assert_eq!(&updated.spec, replacement);
        assert_eq!(updated.version, version);
        let read = store::sites::get(&db.pool, created.id, Some(&key))
            .await
            .unwrap()
            .unwrap();
        assert_eq!(
            &read.spec, replacement,
            "as updated to {}",
            replacement.name
        );
        assert_eq!(read.created_at, created.created_at);
        assert!(read.updated_at >= created.updated_at);
    }
    // Each version reads back every column it keeps as it was written, with
    // today's identity (header values and the proxy are not versioned).
    let today = first.identity.clone();
    for (version, replacement) in (2..).zip(&written) {
        let (kept, as_kept) = versions::get(&db.pool, created.id, version, Some(&key))
            .await
            .unwrap()
            .expect("the version was recorded");
        assert_eq!(kept.reason, VersionReason::Edited);
        assert_eq!(kept.changed_by.as_deref(), Some("token:test"));
        let expected = SiteSpec {
            identity: Identity {
                user_agent: replacement.identity.user_agent.clone(),
                ..today.clone()
            },
            ..replacement.clone()
        };
        assert_eq!(as_kept.spec, expected, "version {version}");
    }

    // Writing what is there already makes no version.
    let same = store::sites::update(&db.pool, created.id, &first, Some(&key), &edited)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(same.version, 4);
    let listed = versions::list(&db.pool, created.id, None, 10)
        .await
        .unwrap();
    let numbers: Vec<i32> = listed.iter().map(|v| v.version).collect();
    assert_eq!(numbers, [4, 3, 2, 1]);

    let missing = store::sites::update(&db.pool, created.id + 1000, &first, Some(&key), &edited)
        .await
        .unwrap();
    assert!(missing.is_none(), "no such site: nothing updated");
    let all = store::sites::list(&db.pool, Some(&key)).await.unwrap();
    assert_eq!(all.len(), 1);
}
