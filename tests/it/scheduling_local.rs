//! Schedules on a keyword's own clocks: its zone and jitter through the API,
//! the scheduler's loop firing at the local time, a new leader catching up a
//! missed fire once, and the period rule on the local day.

use std::time::Duration;

use chrono::{DateTime, TimeDelta, TimeZone, Timelike, Utc};
use crawlfleet::{
    domain::{
        page::{PagesRead, PagingEnd},
        run::{RunState, Trigger},
        schedule::{Jitter, Timezone},
    },
    scheduler::fire_keyword,
    store::{self, runs::ScheduledFire},
};
use serde_json::{Value, json};

use crate::{
    scheduling::{runs_of, scheduled_runs},
    support::{RoleProcess, Roles, TestApp, dispatch_and_claim, eventually},
};

/// A daily cron at the wall time `zone`'s clocks show at `at`.
fn daily_at(zone: Timezone, at: DateTime<Utc>) -> String {
    let wall = zone.wall_time(at);
    format!("{} {} {} * * *", wall.second(), wall.minute(), wall.hour())
}

fn times(keyword: &Value) -> Vec<DateTime<Utc>> {
    serde_json::from_value(keyword["next_fire_times"].clone()).unwrap()
}

#[tokio::test]
async fn a_keyword_keeps_its_zone_and_jitter_and_shows_its_next_fires_on_both_clocks() {
    let app = TestApp::spawn().await;
    let site = app.create_site(app.site_body("shop", "/search")).await;
    let body = json!({"keyword": "lamp", "site_ids": [site], "schedule": "0 0 6 * * *",
                      "timezone": "Asia/Seoul", "jitter_secs": 900});
    let (status, created) = app.post("/api/keywords", body.clone()).await;
    assert_eq!(status, 201, "{created}");
    let id = created["id"].as_i64().unwrap();
    let (_, shown) = app.get(&format!("/api/keywords/{id}")).await;
    assert_eq!(
        (&shown["timezone"], &shown["jitter_secs"]),
        (&json!("Asia/Seoul"), &json!(900))
    );
    // 06:00 in Seoul is 21:00 UTC the day before, plus this keyword's share
    // of the 15 minutes: the same share every day.
    let fires = times(&shown);
    assert_eq!(fires.len(), 5, "{shown}");
    let offset = Jitter::parse(900).unwrap().offset_for(id);
    for (i, fire) in fires.iter().enumerate() {
        let nominal = *fire - offset;
        assert_eq!(
            nominal.format("%H:%M:%S").to_string(),
            "21:00:00",
            "{fires:?}"
        );
        if i > 0 {
            assert_eq!(*fire - fires[i - 1], TimeDelta::days(1));
        }
        let local = shown["next_fire_times_local"][i].as_str().unwrap();
        assert!(local.ends_with("+09:00"), "{local}");
        assert!(local.contains("T06:"), "{local}");
        assert_eq!(DateTime::parse_from_rfc3339(local).unwrap(), *fire);
    }
    eprintln!(
        "Seoul 06:00 -> {} ({}), jitter {} s",
        fires[0],
        shown["next_fire_times_local"][0],
        offset.num_seconds()
    );

    // Moved to New York without jitter: 06:00 EST is 11:00 UTC.
    let mut moved = body.clone();
    moved["timezone"] = json!("America/New_York");
    moved["jitter_secs"] = json!(0);
    let (status, updated) = app.put(&format!("/api/keywords/{id}"), moved).await;
    assert_eq!(status, 200, "{updated}");
    assert!(
        times(&updated)
            .iter()
            .all(|t| t.format("%H:%M:%S").to_string() == "11:00:00")
    );
    assert!(
        updated["next_fire_times_local"]
            .as_array()
            .unwrap()
            .iter()
            .all(|t| t.as_str().unwrap().ends_with("T06:00:00-05:00")),
        "{updated}"
    );

    // Without either, a keyword is in UTC with no jitter.
    let (_, plain) = app
        .post(
            "/api/keywords",
            json!({"keyword": "desk", "site_ids": [site], "schedule": "0 0 6 * * *"}),
        )
        .await;
    assert_eq!(
        (&plain["timezone"], &plain["jitter_secs"]),
        (&json!("UTC"), &json!(0))
    );
    assert!(
        plain["next_fire_times_local"][0]
            .as_str()
            .unwrap()
            .ends_with("T06:00:00+00:00")
    );

    // Bad values are refused naming the field, and change nothing.
    for (change, field) in [
        (json!({"timezone": "Mars/Olympus"}), "timezone"),
        (json!({"timezone": "asia/seoul"}), "timezone"),
        (json!({"jitter_secs": 3601}), "jitter_secs"),
        (json!({"jitter_secs": -1}), "jitter_secs"),
        (
            json!({"schedule": "0 */10 * * * *", "jitter_secs": 600}),
            "jitter_secs",
        ),
    ] {
        let mut bad = body.clone();
        for (key, value) in change.as_object().unwrap() {
            bad[key] = value.clone();
        }
        let (status, error) = app.put(&format!("/api/keywords/{id}"), bad).await;
        assert_eq!(status, 422, "{change}: {error}");
        assert_eq!(error["error"]["field"], field, "{error}");
    }
    let (_, unchanged) = app.get(&format!("/api/keywords/{id}")).await;
    assert_eq!(unchanged["timezone"], "America/New_York");
    app.stop().await;
}

#[tokio::test]
async fn the_scheduler_queues_a_keyword_at_its_local_time_plus_its_jitter() {
    let app = TestApp::spawn_with(Roles::scheduler_only(), |_| {}).await;
    let site = app.create_site(app.site_body("shop", "/search")).await;
    let seoul = Timezone::parse("Asia/Seoul").unwrap();
    // Daily, at the time Seoul's clocks show 4 s from now; read in UTC the
    // same cron would be 9 hours away.
    let nominal = (Utc::now() + TimeDelta::seconds(4))
        .with_nanosecond(0)
        .unwrap();
    let body = json!({"keyword": "lamp", "site_ids": [site], "schedule": daily_at(seoul, nominal),
                      "timezone": "Asia/Seoul", "jitter_secs": 3});
    let (status, created) = app.post("/api/keywords", body).await;
    assert_eq!(status, 201, "{created}");
    let id = created["id"].as_i64().unwrap();
    let first = times(&created)[0];
    assert_eq!(first - nominal, Jitter::parse(3).unwrap().offset_for(id));

    // The loop sleeps until the fire and queues at once: a few ms late; the
    // limit is for a loaded machine.
    let queued_at: DateTime<Utc> = eventually(Duration::from_secs(20), "queued on time", || {
        let pool = app.pool().clone();
        async move {
            sqlx::query_scalar(
                "SELECT queued_at FROM crawl_runs WHERE keyword_id = $1 AND trigger = 'schedule'",
            )
            .bind(id)
            .fetch_optional(&pool)
            .await
            .unwrap()
        }
    })
    .await;
    eprintln!(
        "fire due {first} (cron {nominal} + jitter {} s); queued {queued_at}",
        (first - nominal).num_seconds()
    );
    assert!(
        queued_at >= first,
        "queued before its time: {queued_at} < {first}"
    );
    assert!(
        queued_at - first < TimeDelta::seconds(5),
        "{queued_at} for {first}"
    );

    // Fired once; its next fire is tomorrow's.
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(scheduled_runs(&app, id).await, 1);
    let (_, shown) = app.get(&format!("/api/keywords/{id}")).await;
    assert_eq!(times(&shown)[0], first + TimeDelta::days(1));
    app.stop().await;
}

#[tokio::test]
async fn a_new_leader_fires_what_the_previous_one_missed_once_and_only_lately() {
    let app = TestApp::spawn().await;
    let site = app.create_site(app.site_body("shop", "/search")).await;
    let new_york = Timezone::parse("America/New_York").unwrap();
    let now = Utc::now().with_nanosecond(0).unwrap();
    let keyword = |name: &'static str, due: DateTime<Utc>| {
        let body = json!({"keyword": name, "site_ids": [site], "schedule": daily_at(new_york, due),
                          "timezone": "America/New_York"});
        let app = &app;
        async move {
            let (status, kw) = app.post("/api/keywords", body).await;
            assert_eq!(status, 201, "{kw}");
            kw["id"].as_i64().unwrap()
        }
    };
    // Due 20 s ago, while no scheduler ran; the same, fired by the previous
    // leader before it died (its run since cancelled); due 10 min ago,
    // beyond the 5 min catch-up.
    let missed = keyword("missed", now - TimeDelta::seconds(20)).await;
    let fired = keyword("fired", now - TimeDelta::seconds(20)).await;
    let long_ago = keyword("long ago", now - TimeDelta::minutes(10)).await;
    // Written well before those fires (a fire before its keyword was
    // written is not its own).
    sqlx::query("UPDATE keywords SET updated_at = now() - interval '1 hour'")
        .execute(app.pool())
        .await
        .unwrap();
    let by_previous = runs_of(
        fire_keyword(app.pool(), fired, now - TimeDelta::seconds(20), 3)
            .await
            .unwrap(),
    );
    store::runs::cancel(app.pool(), by_previous.queued[0].id)
        .await
        .unwrap();

    let scheduler = RoleProcess::spawn("scheduler", &app.config, &[]);
    // A scheduler leads within a second or so of starting, and catches up at once.
    eventually(
        Duration::from_secs(30),
        "the missed fire queued",
        || async { (scheduled_runs(&app, missed).await == 1).then_some(()) },
    )
    .await;
    let line = scheduler
        .log_line("period already fired", Duration::from_secs(10))
        .await;
    assert!(line.contains(&format!("keyword_id={fired}")), "{line}");
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(scheduled_runs(&app, fired).await, 1, "fired twice");
    assert_eq!(scheduled_runs(&app, missed).await, 1, "caught up twice");
    assert_eq!(
        scheduled_runs(&app, long_ago).await,
        0,
        "caught up too late a fire"
    );
    assert_eq!(scheduler.terminate(Duration::from_secs(15)).await, 0);
    app.stop().await;
}

#[tokio::test]
async fn the_period_already_crawled_is_the_keyword_local_day() {
    let app = TestApp::spawn().await;
    let pool = app.pool();
    let site = app.create_site(app.site_body("shop", "/search")).await;
    let (_, kw) = app
        .post(
            "/api/keywords",
            json!({"keyword": "sofa", "site_ids": [site], "schedule": "0 0 0 * * *",
                   "timezone": "Asia/Seoul"}),
        )
        .await;
    let keyword = kw["id"].as_i64().unwrap();
    // A run completed at 01:00 on 25 November in Seoul (16:00 UTC on the 24th).
    let run = store::runs::queue_for_keyword(pool, keyword, Trigger::Manual, None, 3)
        .await
        .unwrap()
        .unwrap()
        .queued[0]
        .id;
    let fence = dispatch_and_claim(pool, run, 1, "w").await.unwrap().fence;
    store::runs::complete(pool, &fence, PagesRead::new(0, PagingEnd::LastPage))
        .await
        .unwrap();
    sqlx::query("UPDATE crawl_runs SET finished_at = $2 WHERE id = $1")
        .bind(run)
        .bind(Utc.with_ymd_and_hms(2026, 11, 24, 16, 0, 0).unwrap())
        .execute(pool)
        .await
        .unwrap();

    // At 23:00 on the 25th in Seoul (14:00 UTC) the local day has its
    // result; the UTC day (from 00:00 UTC on the 25th) would have none.
    let late = Utc.with_ymd_and_hms(2026, 11, 25, 14, 0, 0).unwrap();
    let same_day = runs_of(fire_keyword(pool, keyword, late, 3).await.unwrap());
    assert_eq!(same_day.queued.len(), 0, "{same_day:?}");
    assert_eq!(same_day.skipped.len(), 1);
    assert_eq!(same_day.skipped[0].state, RunState::Skipped);

    // At 01:00 on the 26th in Seoul (16:00 UTC on the 25th) a new local day
    // began: queued, though it is still the 25th in UTC.
    let next_day = Utc.with_ymd_and_hms(2026, 11, 25, 16, 0, 0).unwrap();
    let fired = runs_of(fire_keyword(pool, keyword, next_day, 3).await.unwrap());
    assert_eq!(fired.queued.len(), 1, "{fired:?}");
    assert_eq!(fired.skipped.len(), 0);
    let again = fire_keyword(pool, keyword, next_day + TimeDelta::hours(1), 3)
        .await
        .unwrap();
    assert!(
        matches!(again, ScheduledFire::AlreadyFired { .. }),
        "{again:?}"
    );
    app.stop().await;
}
