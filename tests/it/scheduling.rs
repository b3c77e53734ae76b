//! Cron queueing, the skip rule, and one leader among schedulers.

use std::time::Duration;

use chrono::{TimeDelta, Utc};
use crawlfleet::{
    domain::{
        page::{PagesRead, PagingEnd},
        run::{RunState, Trigger},
    },
    scheduler::fire_keyword,
    store::{
        self,
        runs::{QueueOutcome, ScheduledFire},
    },
};
use serde_json::json;

use crate::support::{RoleProcess, Roles, TestApp, dispatch_and_claim, eventually};

/// The runs of a fire that queued; panics on any other outcome.
pub fn runs_of(fired: ScheduledFire) -> QueueOutcome {
    match fired {
        ScheduledFire::Queued(outcome) => outcome,
        other => panic!("expected runs, got {other:?}"),
    }
}

pub async fn scheduled_runs(app: &TestApp, keyword: i64) -> i64 {
    sqlx::query_scalar(
        "SELECT count(*) FROM crawl_runs WHERE keyword_id = $1 AND trigger = 'schedule'",
    )
    .bind(keyword)
    .fetch_one(app.pool())
    .await
    .unwrap()
}

#[tokio::test]
async fn a_keyword_is_queued_on_its_cron_until_disabled_and_changes_apply_live() {
    // Schedules a few seconds apart, so the test sees several fire times.
    let app = TestApp::spawn_with(Roles::fleet(), |c| c.api.min_schedule_interval_secs = 1).await;
    let site = app
        .one_page_site("static", "/static?q={keyword}", json!({}))
        .await;
    let keyword = app.create_keyword("chair", &[site], "*/2 * * * * *").await;

    let completed = |app: &TestApp| {
        let pool = app.pool().clone();
        async move {
            let n: i64 = sqlx::query_scalar(
                "SELECT count(*) FROM crawl_runs WHERE keyword_id = $1 AND trigger = 'schedule' AND state = 'completed'",
            )
            .bind(keyword)
            .fetch_one(&pool)
            .await
            .unwrap();
            n
        }
    };
    // Fired every 2 s: three one-page crawls (the first starts Chrome) are
    // done in ~10 s; 40 s is four times that.
    eventually(
        Duration::from_secs(40),
        "three scheduled runs completed",
        || async { (completed(&app).await >= 3).then_some(()) },
    )
    .await;

    let body = json!({"keyword": "chair", "site_ids": [site], "schedule": "*/2 * * * * *", "enabled": false});
    let (status, _) = app.put(&format!("/api/keywords/{keyword}"), body).await;
    assert_eq!(status, 200);
    // A fire that read the keyword just before the change queues within
    // milliseconds; after it, fire_keyword queues nothing, however late the cron
    // job goes. A slow machine only makes the 5 s check weaker, never fail.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let after_disable = scheduled_runs(&app, keyword).await;
    tokio::time::sleep(Duration::from_secs(5)).await;
    assert_eq!(
        scheduled_runs(&app, keyword).await,
        after_disable,
        "a disabled keyword was queued"
    );

    // Re-enabled with another schedule, without a restart.
    let body = json!({"keyword": "chair", "site_ids": [site], "schedule": "*/3 * * * * *", "enabled": true});
    app.put(&format!("/api/keywords/{keyword}"), body).await;
    // The next */3 fire is at most 3 s away, after a 300 ms schedule sync.
    eventually(
        Duration::from_secs(20),
        "queued again after re-enabling",
        || async { (scheduled_runs(&app, keyword).await > after_disable).then_some(()) },
    )
    .await;

    let (status, _) = app.delete(&format!("/api/keywords/{keyword}")).await;
    assert_eq!(status, 204);
    // A fire after the delete finds no keyword: a slow machine only gives a
    // wrongly kept plan less time to show, never a false failure.
    tokio::time::sleep(Duration::from_secs(4)).await;
    assert_eq!(
        scheduled_runs(&app, keyword).await,
        0,
        "runs of a deleted keyword went with it"
    );
    app.stop().await;
}

#[tokio::test]
async fn a_scheduled_run_is_skipped_when_the_period_already_has_a_result() {
    let app = TestApp::spawn().await;
    let pool = app.pool();
    let a = app.create_site(app.site_body("a", "/search")).await;
    let b = app.create_site(app.site_body("b", "/search")).await;
    let keyword = app.create_keyword("sofa", &[a, b], "0 0 0 * * *").await;

    // Site a completes a run today; site b has none.
    let queued = store::runs::queue_for_keyword(pool, keyword, Trigger::Manual, None, 3)
        .await
        .unwrap()
        .unwrap();
    let on_a = queued.queued.iter().find(|r| r.site_id == a).unwrap().id;
    let on_b = queued.queued.iter().find(|r| r.site_id == b).unwrap().id;
    let fence = dispatch_and_claim(pool, on_a, 1, "w").await.unwrap().fence;
    store::runs::complete(pool, &fence, PagesRead::new(0, PagingEnd::LastPage))
        .await
        .unwrap();
    store::runs::cancel(pool, on_b).await.unwrap();

    // "Today" is the day the run completed, not the clock's: a test that
    // ran across midnight UTC would otherwise fire in the next day's period.
    let now: chrono::DateTime<Utc> =
        sqlx::query_scalar("SELECT finished_at FROM crawl_runs WHERE id = $1")
            .bind(on_a)
            .fetch_one(pool)
            .await
            .unwrap();
    let today = runs_of(fire_keyword(pool, keyword, now, 3).await.unwrap());
    assert_eq!(today.skipped.len(), 1, "{today:?}");
    assert_eq!(today.skipped[0].site_id, a);
    assert_eq!(today.skipped[0].state, RunState::Skipped);
    assert_eq!(today.queued.len(), 1);
    assert_eq!(today.queued[0].site_id, b);
    // The period is fired once: a second fire in it (a new leader catching
    // up) queues nothing, even with the run cancelled in between.
    store::runs::cancel(pool, today.queued[0].id).await.unwrap();
    let again = fire_keyword(pool, keyword, now, 3).await.unwrap();
    assert!(
        matches!(again, ScheduledFire::AlreadyFired { .. }),
        "{again:?}"
    );

    // Tomorrow's period has no result yet: site a is queued again.
    let tomorrow = now + TimeDelta::days(1);
    let next = runs_of(fire_keyword(pool, keyword, tomorrow, 3).await.unwrap());
    assert_eq!(next.skipped.len(), 0, "{next:?}");
    assert_eq!(next.queued.len(), 2);

    // A disabled keyword is not fired.
    let body =
        json!({"keyword": "sofa", "site_ids": [a, b], "schedule": "0 0 0 * * *", "enabled": false});
    app.put(&format!("/api/keywords/{keyword}"), body).await;
    let day_after = tomorrow + TimeDelta::days(1);
    assert!(matches!(
        fire_keyword(pool, keyword, day_after, 3).await.unwrap(),
        ScheduledFire::NotScheduled
    ));
    app.stop().await;
}

/// The application name of the session holding the scheduler lock, if any.
async fn leader(app: &TestApp) -> Option<String> {
    sqlx::query_scalar(
        "SELECT a.application_name FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid
         WHERE l.locktype = 'advisory' AND l.granted AND a.datname = current_database()",
    )
    .fetch_optional(app.pool())
    .await
    .unwrap()
}

#[tokio::test]
async fn one_scheduler_leads_and_a_standby_takes_over_when_it_dies() {
    let app = TestApp::spawn().await;
    let first = RoleProcess::spawn("scheduler", &app.config, &[]);
    let first_name = format!("crawlfleet-scheduler-{}", first.pid());
    // A scheduler process takes the lock within a second or so of starting.
    eventually(Duration::from_secs(20), "first scheduler leads", || async {
        (leader(&app).await.as_deref() == Some(first_name.as_str())).then_some(())
    })
    .await;
    let second = RoleProcess::spawn("scheduler", &app.config, &[]);
    let second_name = format!("crawlfleet-scheduler-{}", second.pid());
    // No wait lets the standby take a held lock: a slow start only weakens this.
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(
        leader(&app).await.as_deref(),
        Some(first_name.as_str()),
        "the lock is exclusive"
    );

    first.kill().await;
    let started = std::time::Instant::now();
    // Postgres frees a killed session's lock at once and the standby asks
    // every second: ~1 s; 15 s is fifteen times that.
    eventually(Duration::from_secs(15), "standby takes over", || async {
        (leader(&app).await.as_deref() == Some(second_name.as_str())).then_some(())
    })
    .await;
    eprintln!("takeover after kill -9: {:?}", started.elapsed());
    assert_eq!(second.terminate(Duration::from_secs(15)).await, 0);
    app.stop().await;
}

#[tokio::test]
async fn a_disabled_site_keeps_its_settings_and_is_queued_by_no_schedule_or_crawl_now() {
    let app = TestApp::spawn().await;
    let (a, b) = (
        app.create_site(app.site_body("a", "/search")).await,
        app.create_site(app.site_body("b", "/search")).await,
    );
    let keyword = app
        .create_keyword("desk", &[a, b], crate::support::ON_DEMAND)
        .await;
    let mut body = app.site_body("b", "/search");
    body["enabled"] = json!(false);
    let (status, site) = app.put(&format!("/api/sites/{b}"), body.clone()).await;
    assert_eq!(status, 200, "{site}");
    assert_eq!(site["enabled"], false);
    let (_, shown) = app.get(&format!("/api/sites/{b}")).await;
    assert_eq!(
        (shown["enabled"].clone(), shown["item_selector"].clone()),
        (json!(false), json!("li.product"))
    );

    let (status, now) = app
        .post(&format!("/api/keywords/{keyword}/crawl"), json!({}))
        .await;
    assert_eq!(status, 202, "{now}");
    assert_eq!(now["queued"].as_array().unwrap().len(), 1, "{now}");
    assert_eq!(now["queued"][0]["site_id"], a);
    assert_eq!(now["disabled_sites"], json!([b]));

    let scheduled = runs_of(
        fire_keyword(app.pool(), keyword, Utc::now(), 3)
            .await
            .unwrap(),
    );
    assert!(
        scheduled.queued.iter().all(|run| run.site_id != b),
        "{scheduled:?}"
    );
    assert_eq!(scheduled.disabled_sites, [b]);

    body["enabled"] = json!(true);
    app.put(&format!("/api/sites/{b}"), body).await;
    let (_, again) = app
        .post(&format!("/api/keywords/{keyword}/crawl"), json!({}))
        .await;
    assert_eq!(
        again["queued"][0]["site_id"], b,
        "enabled again: queued {again}"
    );
    assert_eq!(again["disabled_sites"], json!([]));
    app.stop().await;
}
