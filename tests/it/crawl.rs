//! A keyword crawled end to end in real headless Chromium, and the fencing
//! that keeps retried or superseded attempts from writing twice.

use std::time::Duration;

use crawlfleet::{
    domain::{
        failure::{Failure, FailureKind},
        item::PageItem,
        page::{CrawledPage, PagesRead, PagingEnd},
        run::{RunState, Trigger},
    },
    store::{self, runs::FenceError},
};
use crawlfleet_demo::site::expected_products;
use serde_json::json;

use crate::support::{Backend, ON_DEMAND, Roles, TestApp, dispatch_and_claim, on_each_backend};

// A crawl here takes seconds: Chrome starts, then at most 4 pages (under
// 0.1 s each in Chrome, README; 0.7 s each on /slow). 90 s is over ten times
// that, for a loaded machine; waiting for a browser slot comes before, in spawn.
const CRAWL_LIMIT: Duration = Duration::from_secs(90);

on_each_backend!(a_keyword_is_crawled_in_chrome_with_items_in_order_across_pages);
async fn a_keyword_is_crawled_in_chrome_with_items_in_order_across_pages(backend: Backend) {
    let app = TestApp::spawn_on(&backend, Roles::fleet(), |_| {}).await;
    let mut site = app.site_body("js-shop", "/js-search");
    site["wait_for"] = json!("#ready");
    site["fields"]["image"] = json!({"selector": "img.thumb", "attr": "src"});
    let site_id = app.create_site(site).await;
    let keyword = app.create_keyword("red shoes", &[site_id], ON_DEMAND).await;
    let runs = app.crawl(keyword).await;
    assert_eq!(runs.len(), 1);

    let run = app.wait_until_completed(runs[0], CRAWL_LIMIT).await;
    // Pages 1-3 hold 5 items each; page 4 is empty and ends the crawl.
    assert_eq!(run["pages_crawled"], 4);
    assert_eq!(run["items_found"], 15);
    assert_eq!(run["attempt"], 1);
    assert!(run["finished_at"].is_string());

    let results = app.results_of_run(runs[0]).await;
    let expected = expected_products(&app.site.base_url(), "red shoes");
    assert_eq!(results.len(), expected.len());
    for (got, want) in results.iter().zip(&expected) {
        assert_eq!(got["fields"]["title"], want.title.as_str());
        assert_eq!(
            got["fields"]["link"],
            want.url.as_str(),
            "relative links are made absolute"
        );
        assert_eq!(got["fields"]["image"], want.image.as_str());
        assert_eq!(got["fields"]["price"], want.price.as_str());
        assert_eq!(got["item_url"], want.url.as_str());
        assert_eq!(got["page"], want.page);
        assert_eq!(got["keyword_id"], keyword);
    }
    // The results API filters by keyword and site too.
    let (_, by_keyword) = app
        .get(&format!("/api/results?keyword_id={keyword}&limit=1000"))
        .await;
    assert_eq!(by_keyword["items"].as_array().unwrap().len(), 15);
    let (_, other) = app
        .get(&format!("/api/results?site_id={}", site_id + 1))
        .await;
    assert_eq!(other["items"], json!([]));
    app.stop().await;
}

#[tokio::test]
async fn a_single_static_page_and_a_slow_paged_search_are_crawled() {
    let app = TestApp::spawn_with(Roles::fleet(), |_| {}).await;
    let single = app
        .one_page_site("static", "/static?q={keyword}", json!({}))
        .await;
    let mut slow = app.site_body("slow", "/slow");
    slow["search_url"] = json!(format!(
        "{}/slow?ms=700&q={{keyword}}&page={{page}}",
        app.site.base_url()
    ));
    slow["max_pages"] = json!(2);
    let slow = app.create_site(slow).await;
    let keyword = app.create_keyword("desk", &[single, slow], ON_DEMAND).await;
    let runs = app.crawl(keyword).await;
    assert_eq!(runs.len(), 2);
    for run_id in &runs {
        let run = app.wait_until_completed(*run_id, CRAWL_LIMIT).await;
        if run["site_id"] == single {
            assert_eq!(
                run["pages_crawled"], 1,
                "a template without {{page}} is one page"
            );
            assert_eq!(run["items_found"], 5);
        } else {
            assert_eq!(run["pages_crawled"], 2, "max_pages bounds the crawl");
            assert_eq!(run["items_found"], 10);
        }
    }
    assert_eq!(app.site.hits("/static"), 1);
    assert_eq!(app.site.hits("/slow"), 2);
    app.stop().await;
}

/// A worker that claimed a run, for driving the fenced writes by hand.
pub(crate) async fn claimed(app: &TestApp, worker: &str) -> (i64, store::runs::Fence) {
    let site = app.create_site(app.site_body("shop", "/search")).await;
    let keyword = app.create_keyword("fence", &[site], ON_DEMAND).await;
    let queued = store::runs::queue_for_keyword(app.pool(), keyword, Trigger::Manual, None, 3)
        .await
        .unwrap()
        .unwrap();
    let run_id = queued.queued[0].id;
    let claim = dispatch_and_claim(app.pool(), run_id, 1, worker)
        .await
        .unwrap();
    (run_id, claim.fence)
}

fn items(n: usize, tag: &str) -> Vec<PageItem> {
    (1..=n)
        .map(|i| {
            let fields = json!({"title": format!("{tag} {i}")});
            PageItem {
                content_hash: crawlfleet::worker::content_hash(&fields),
                fields,
                item_url: None,
            }
        })
        .collect()
}

#[tokio::test]
async fn a_retried_page_replaces_its_rows_and_a_superseded_worker_writes_nothing() {
    let app = TestApp::spawn().await;
    let pool = app.pool();
    let (run_id, first) = claimed(&app, "worker-a").await;
    // A duplicate delivery of the same message finds nothing to claim.
    assert!(
        store::runs::claim(pool, run_id, 1, "worker-b")
            .await
            .unwrap()
            .is_none()
    );

    store::runs::enter_url_call(pool, &first, "http://x/1")
        .await
        .unwrap();
    store::runs::store_page(
        pool,
        &first,
        &CrawledPage {
            page: 1,
            url: "http://x/1",
            items: &items(5, "old"),
            item_key: None,
            stored_before: &[],
            details_read: &[],
        },
    )
    .await
    .unwrap();
    let stuck = Failure::new(FailureKind::Stuck, "stuck: test");
    let run = store::runs::fail_attempt(pool, &first, &stuck)
        .await
        .unwrap();
    assert_eq!(run.state, RunState::Queued);
    assert_eq!(run.attempt, 2);
    assert!(run.not_before.is_some(), "a retry waits for its backoff");

    let second = dispatch_and_claim(pool, run_id, 2, "worker-b")
        .await
        .unwrap()
        .fence;
    store::runs::enter_url_call(pool, &second, "http://x/1")
        .await
        .unwrap();
    let found = store::runs::store_page(
        pool,
        &second,
        &CrawledPage {
            page: 1,
            url: "http://x/1",
            items: &items(4, "new"),
            item_key: None,
            stored_before: &[],
            details_read: &[],
        },
    )
    .await
    .unwrap();
    assert_eq!(
        found.run.items_found, 4,
        "the retried page replaced its rows"
    );

    // The first worker comes back: none of its writes land.
    for result in [
        store::runs::enter_url_call(pool, &first, "http://x/2")
            .await
            .map(|_| ()),
        store::runs::heartbeat(pool, &first).await,
        store::runs::store_page(
            pool,
            &first,
            &CrawledPage {
                page: 2,
                url: "http://x/2",
                items: &items(5, "late"),
                item_key: None,
                stored_before: &[],
                details_read: &[],
            },
        )
        .await
        .map(|_| ()),
        store::runs::complete(pool, &first, PagesRead::new(2, PagingEnd::LastPage))
            .await
            .map(|_| ()),
        store::runs::fail_attempt(pool, &first, &Failure::new(FailureKind::Network, "late"))
            .await
            .map(|_| ()),
    ] {
        assert!(
            matches!(result, Err(FenceError::Superseded { .. })),
            "{result:?}"
        );
    }
    // Nor does the session it ended with replace the live attempt's.
    let site_id: i64 = sqlx::query_scalar("SELECT site_id FROM crawl_runs WHERE id = $1")
        .bind(run_id)
        .fetch_one(pool)
        .await
        .unwrap();
    let session = |tag: &str| crawlfleet::store::sealing::Sealed {
        nonce: vec![0; 12],
        sealed: tag.as_bytes().to_vec(),
    };
    assert!(
        !store::sessions::save(pool, site_id, &first, &session("late"))
            .await
            .unwrap()
    );
    assert!(
        store::sessions::save(pool, site_id, &second, &session("live"))
            .await
            .unwrap()
    );
    let kept = store::sessions::load(pool, site_id).await.unwrap().unwrap();
    assert_eq!(kept.sealed, b"live");

    let done = store::runs::complete(pool, &second, PagesRead::new(1, PagingEnd::LastPage))
        .await
        .unwrap();
    assert_eq!(done.run.state, RunState::Completed);
    assert_eq!(done.run.items_found, 4);
    let titles: Vec<String> = sqlx::query_scalar(
        "SELECT fields->>'title' FROM crawl_results WHERE run_id = $1 ORDER BY position",
    )
    .bind(run_id)
    .fetch_all(pool)
    .await
    .unwrap();
    assert_eq!(titles, ["new 1", "new 2", "new 3", "new 4"]);
    app.stop().await;
}

#[tokio::test]
async fn a_late_message_of_a_run_taken_back_from_redis_claims_nothing() {
    let app = TestApp::spawn().await;
    let pool = app.pool();
    let site = app.create_site(app.site_body("shop", "/search")).await;
    let keyword = app.create_keyword("late", &[site], ON_DEMAND).await;
    let run_id = app.crawl(keyword).await[0];
    let modes = crawlfleet::domain::site::RenderMode::ALL;
    let taken = store::runs::take_for_dispatch(pool, &modes, 10)
        .await
        .unwrap();
    assert_eq!(taken.len(), 1);
    // Its message sat in Redis past the claim timeout: the dispatcher takes
    // the run back, and the site's slot may go to another run meanwhile.
    let back = store::runs::redispatch_unclaimed(pool, Duration::ZERO)
        .await
        .unwrap();
    assert_eq!(back, 1);
    assert!(
        store::runs::claim(pool, run_id, 1, "late-worker")
            .await
            .unwrap()
            .is_none(),
        "the old message is stale until the run is dispatched again"
    );
    store::runs::take_for_dispatch(pool, &modes, 10)
        .await
        .unwrap();
    let claimed = store::runs::claim(pool, run_id, 1, "w").await.unwrap();
    assert!(claimed.is_some(), "either message claims a dispatched run");
    app.stop().await;
}

#[tokio::test]
async fn the_last_attempt_fails_the_run_and_keeps_its_reason() {
    let app = TestApp::spawn().await;
    let pool = app.pool();
    let (run_id, mut fence) = claimed(&app, "w").await;
    for attempt in 1..=3 {
        let boom = Failure::new(FailureKind::SiteError, format!("boom {attempt}"));
        let run = store::runs::fail_attempt(pool, &fence, &boom)
            .await
            .unwrap();
        if attempt < 3 {
            assert_eq!(run.state, RunState::Queued);
            fence = dispatch_and_claim(pool, run_id, attempt + 1, "w")
                .await
                .unwrap()
                .fence;
        } else {
            assert_eq!(run.state, RunState::Failed);
            assert_eq!(run.error.as_deref(), Some("boom 3"));
            assert_eq!(run.error_kind, Some(FailureKind::SiteError));
            assert!(run.finished_at.is_some());
        }
    }
    app.stop().await;
}
