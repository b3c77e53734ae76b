//! URL lists on their cron: the scheduler fires each period once, the
//! period's run reads every URL once, a disabled list is not fired, and a
//! period already fired (by this scheduler or another) is not fired again.

use std::time::Duration;

use chrono::Utc;
use crawlfleet::{
    scheduler::fire_list,
    store::runs::{ListQueued, ScheduledFire},
};
use reqwest::StatusCode;
use serde_json::json;

use super::shop::{ListShop, list_of};
use crate::support::{Roles, TestApp, eventually};

async fn scheduled_runs(app: &TestApp, list: i64, state: Option<&str>) -> i64 {
    sqlx::query_scalar(
        "SELECT count(*) FROM crawl_runs
         WHERE url_list_id = $1 AND trigger = 'schedule' AND ($2::text IS NULL OR state = $2)",
    )
    .bind(list)
    .bind(state)
    .fetch_one(app.pool())
    .await
    .unwrap()
}

async fn active_runs(app: &TestApp, list: i64) -> i64 {
    sqlx::query_scalar(
        "SELECT count(*) FROM crawl_runs WHERE url_list_id = $1 AND finished_at IS NULL",
    )
    .bind(list)
    .fetch_one(app.pool())
    .await
    .unwrap()
}

async fn set_list(app: &TestApp, list: i64, site: i64, schedule: &str, enabled: bool) {
    let body =
        json!({"site_id": site, "name": "watched", "schedule": schedule, "enabled": enabled});
    let (status, view) = app.put(&format!("/api/url-lists/{list}"), body).await;
    assert_eq!(status, StatusCode::OK, "{view}");
}

#[tokio::test]
async fn a_list_is_read_once_each_period_of_its_cron_until_disabled() {
    let app =
        TestApp::spawn_without_browsers(Roles::fleet(), |c| c.api.min_schedule_interval_secs = 1)
            .await;
    let shop = ListShop::start().await;
    let site = app.create_site(shop.site_body("list shop", 200.0)).await;
    let urls: Vec<String> = (1..=6).map(|n| format!("{}/p/{n}", shop.base)).collect();
    let list = list_of(&app, site, "watched", &urls).await;
    set_list(&app, list, site, "*/2 * * * * *", true).await;

    // Fired every 2 s; six pages a run at 200/s take well under a period.
    eventually(
        Duration::from_secs(40),
        "three scheduled runs of the list completed",
        || async { (scheduled_runs(&app, list, Some("completed")).await >= 3).then_some(()) },
    )
    .await;
    set_list(&app, list, site, "*/2 * * * * *", false).await;
    eventually(
        Duration::from_secs(30),
        "the list's last run ended",
        || async { (active_runs(&app, list).await == 0).then_some(()) },
    )
    .await;
    let fired = scheduled_runs(&app, list, None).await;
    let completed = scheduled_runs(&app, list, Some("completed")).await;
    assert_eq!(fired, completed, "every scheduled run completed");
    // Each period's run read each URL once: no URL read twice in a period,
    // none skipped.
    for n in 1..=6 {
        assert_eq!(
            i64::from(shop.reads_of(n)),
            completed,
            "product {n} read once in each of {completed} periods"
        );
    }
    let last_fired: Option<chrono::DateTime<Utc>> =
        sqlx::query_scalar("SELECT last_fired_at FROM url_lists WHERE id = $1")
            .bind(list)
            .fetch_one(app.pool())
            .await
            .unwrap();
    assert!(last_fired.is_some(), "the period claimed on the list");

    // Disabled: no more fires, however long the cron would have gone on.
    tokio::time::sleep(Duration::from_secs(5)).await;
    assert_eq!(
        scheduled_runs(&app, list, None).await,
        fired,
        "a disabled list was fired"
    );
    app.stop().await;
}

#[tokio::test]
async fn a_period_is_fired_once_whoever_fires_it() {
    let app =
        TestApp::spawn_without_browsers(Roles::default(), |c| c.api.min_schedule_interval_secs = 1)
            .await;
    let shop = ListShop::start().await;
    let site = app.create_site(shop.site_body("list shop", 200.0)).await;
    let urls = vec![format!("{}/p/1", shop.base)];
    let list = list_of(&app, site, "watched", &urls).await;
    set_list(&app, list, site, "0 0 6 * * *", true).await;

    let at = Utc::now();
    let first = fire_list(app.pool(), list, at, 3).await.unwrap();
    let run = match first {
        ScheduledFire::Queued(ListQueued::Queued(run)) => run,
        other => panic!("expected a queued run, got {other:?}"),
    };
    assert_eq!(run.url_list_id, Some(list));
    // The same period again, as a second scheduler taking over would.
    let again = fire_list(app.pool(), list, at, 3).await.unwrap();
    assert!(
        matches!(again, ScheduledFire::AlreadyFired { .. }),
        "{again:?}"
    );
    assert_eq!(scheduled_runs(&app, list, None).await, 1);

    set_list(&app, list, site, "0 0 6 * * *", false).await;
    let disabled = fire_list(app.pool(), list, at + chrono::TimeDelta::days(1), 3)
        .await
        .unwrap();
    assert!(
        matches!(disabled, ScheduledFire::NotScheduled),
        "{disabled:?}"
    );
    assert_eq!(scheduled_runs(&app, list, None).await, 1);
    app.stop().await;
}
