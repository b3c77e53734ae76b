//! The CloudWatch publisher end to end: the real SDK over HTTP to a stand-in
//! for CloudWatch started by the test, speaking the Smithy RPC v2 CBOR
//! protocol (aws-sdk-cloudwatch >= 1.100; moto does not). Values come from the
//! test database; cadence, failures, hangs and leadership are measured.

use std::time::{Duration, Instant};

use clap::Parser;
use crawlfleet::{
    api::cloudwatch::{
        self, CRAWLS_COMPLETED, CRAWLS_FAILED, PublisherSettings, QUEUE_WAITING_JOBS,
        REDIS_MEMORY_USAGE_PERCENT,
    },
    config::Config,
    ops::metrics::metrics,
    queue,
};
use serde_json::json;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::support::{OwnRedis, RoleProcess, Roles, TestApp, eventually, redis_url};
use fake::{FakeCloudWatch, Mode, Put};

mod fake;
mod heartbeat;

/// The publisher's counters are process-wide and tests run in parallel: the
/// tests of this file take turns so each sees only its own counts.
static ONE_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// A publisher running as its own task, as the api runs it.
struct Publisher {
    shutdown: CancellationToken,
    task: JoinHandle<anyhow::Result<()>>,
}

impl Publisher {
    /// A publisher putting every second.
    async fn start(app: &TestApp, cw: &FakeCloudWatch, call_timeout: Duration) -> Publisher {
        Self::start_every(app, cw, Duration::from_secs(1), call_timeout).await
    }

    async fn start_every(
        app: &TestApp,
        cw: &FakeCloudWatch,
        interval: Duration,
        call_timeout: Duration,
    ) -> Publisher {
        Self::start_reading(app, &redis_url(), cw, settings(app, interval, call_timeout)).await
    }

    /// A publisher reading Redis's memory from the server at `redis`.
    async fn start_reading(
        app: &TestApp,
        redis: &str,
        cw: &FakeCloudWatch,
        settings: PublisherSettings,
    ) -> Publisher {
        let shutdown = CancellationToken::new();
        let task = tokio::spawn(cloudwatch::run(
            app.config.common.database_url.clone(),
            app.pool().clone(),
            queue::connect(redis).await.unwrap(),
            cw.client().await,
            settings,
            shutdown.clone(),
        ));
        Publisher { shutdown, task }
    }

    /// Stops it and returns how long that took.
    async fn stop(self) -> Duration {
        let start = Instant::now();
        self.shutdown.cancel();
        // Shutdown cuts a put in flight: it stops in milliseconds.
        tokio::time::timeout(Duration::from_secs(5), self.task)
            .await
            .expect("publisher stops on shutdown")
            .expect("publisher did not panic")
            .expect("publisher ends cleanly");
        start.elapsed()
    }
}

fn settings(app: &TestApp, interval: Duration, call_timeout: Duration) -> PublisherSettings {
    PublisherSettings {
        namespace: app.config.common.cloudwatch_namespace.clone(),
        interval,
        call_timeout,
    }
}

/// `n` queued runs (one keyword each on one site); no worker takes them.
async fn queued_runs(app: &TestApp, n: usize) -> Vec<i64> {
    let site = app.create_site(app.site_body("shop", "/search")).await;
    let runs = app.queue_crawls(site, "kw", n).await;
    assert_eq!(runs.len(), n);
    runs
}

/// An api whose `/api` routes need a token (the test's requests carry it).
fn with_a_token(c: &mut crawlfleet::config::Config) {
    c.api.auth_disabled = false;
    c.api.api_tokens = vec!["cloudwatch-test-token".into()];
}

/// The slowest of `calls` requests, every ~100 ms, taking turns between
/// `/health` and an authenticated `/api` route that reads Postgres (as the
/// publisher does), while the publisher struggles.
async fn slowest_answer(app: &TestApp, calls: usize) -> Duration {
    let mut slowest = Duration::ZERO;
    for call in 0..calls {
        let path = if call % 2 == 0 {
            "/health"
        } else {
            "/api/jobs/queue"
        };
        let start = Instant::now();
        let (status, body) = app.get(path).await;
        slowest = slowest.max(start.elapsed());
        assert_eq!(status, reqwest::StatusCode::OK, "{path}: {body}");
        tokio::time::sleep(Duration::from_millis(97)).await;
    }
    slowest
}

/// A sum over puts.
fn total(puts: &[Put], name: &str) -> f64 {
    puts.iter().map(|p| p.value(name)).sum()
}

#[tokio::test]
async fn the_publisher_sends_the_backlog_and_the_crawls_finished_each_interval() {
    let _turn = ONE_AT_A_TIME.lock().await;
    let app = TestApp::spawn().await;
    let runs = queued_runs(&app, 4).await;
    let cw = FakeCloudWatch::start(Mode::Accept).await;
    let publishes = metrics().cloudwatch_publishes.get();
    let publisher = Publisher::start(&app, &cw, Duration::from_millis(800)).await;

    let first = cw.put_after(0, Duration::from_secs(5)).await;
    assert_eq!(first.namespace, "CrawlerService");
    // The test's Redis has no maxmemory: no memory percentage.
    let names: Vec<&str> = first.data.iter().map(|d| d.name.as_str()).collect();
    assert_eq!(names, [QUEUE_WAITING_JOBS, CRAWLS_COMPLETED, CRAWLS_FAILED]);
    assert!(first.data.iter().all(|d| d.unit == "Count"), "{first:?}");
    assert!(first.data.iter().all(|d| !d.has_dimensions), "{first:?}");
    // The backlog is high-resolution (the scaling alarms' 10 s periods need
    // it); the counts stay standard, as their 5-minute alarm reads them.
    assert_eq!(
        first.datum(QUEUE_WAITING_JOBS).storage_resolution,
        Some(1),
        "{first:?}"
    );
    for name in [CRAWLS_COMPLETED, CRAWLS_FAILED] {
        assert_eq!(first.datum(name).storage_resolution, None, "{first:?}");
    }
    assert_eq!(first.value(QUEUE_WAITING_JOBS), 4.0);
    assert_eq!(first.value(CRAWLS_COMPLETED), 0.0);
    assert_eq!(first.value(CRAWLS_FAILED), 0.0);

    // Right after a put: one run cancelled through the REST API, one
    // completed and one failed as a worker would leave them.
    let (status, body) = app
        .post(&format!("/api/runs/{}/cancel", runs[0]), json!({}))
        .await;
    assert!(status.is_success(), "{status} {body}");
    for (run, state) in [(runs[1], "completed"), (runs[2], "failed")] {
        sqlx::query("UPDATE crawl_runs SET state = $2, finished_at = now() WHERE id = $1")
            .bind(run)
            .bind(state)
            .execute(app.pool())
            .await
            .unwrap();
    }
    let changed = Instant::now();
    // Normally all in the next put; on a busy machine the changes may
    // straddle a tick. Either way each finished crawl counts in exactly one
    // put, and two puts after the changes everything is in.
    // The next tick is at most a second away.
    let k = eventually(
        Duration::from_secs(10),
        "a put after the changes",
        || async { cw.puts().iter().position(|p| p.at > changed) },
    )
    .await;
    let settled = cw.put_after(k + 1, Duration::from_secs(5)).await;
    assert_eq!(settled.value(QUEUE_WAITING_JOBS), 1.0, "{settled:?}");
    let puts = cw.puts();
    let covering = &puts[1..=k + 1];
    assert_eq!(total(covering, CRAWLS_COMPLETED), 1.0, "{covering:?}");
    assert_eq!(total(covering, CRAWLS_FAILED), 1.0, "{covering:?}");
    // Counts are per interval, not cumulative.
    let after = cw.put_after(k + 2, Duration::from_secs(5)).await;
    assert_eq!(after.value(QUEUE_WAITING_JOBS), 1.0, "{after:?}");
    assert_eq!(after.value(CRAWLS_COMPLETED), 0.0, "{after:?}");
    assert_eq!(after.value(CRAWLS_FAILED), 0.0, "{after:?}");

    // Cadence: a put a second over 6 s from the first, allowing for a
    // stalled tick or two on a busy machine, but no burst.
    let window = Duration::from_secs(6);
    tokio::time::sleep((first.at + window).saturating_duration_since(Instant::now())).await;
    let puts: Vec<Put> = cw
        .puts()
        .into_iter()
        .filter(|p| p.at <= first.at + window)
        .collect();
    assert!(
        (4..=8).contains(&puts.len()),
        "{} puts in {window:?}",
        puts.len()
    );
    for pair in puts.windows(2) {
        let gap = pair[1].at - pair[0].at;
        assert!(
            gap >= Duration::from_millis(250) && gap <= Duration::from_secs(3),
            "puts {gap:?} apart"
        );
    }
    // Every put of the window counted as published. The publisher puts one
    // at a time, so once the put after them has arrived each of them has had
    // its answer; stopping sooner could cancel the last one in flight.
    cw.put_after(puts.len(), Duration::from_secs(5)).await;
    assert!(metrics().cloudwatch_publishes.get() - publishes >= puts.len() as u64);
    publisher.stop().await;
    cw.stop();
    app.stop().await;
}

#[tokio::test]
async fn by_default_the_backlog_goes_out_high_resolution_every_ten_seconds() {
    let _turn = ONE_AT_A_TIME.lock().await;
    // The api's own defaults, as production runs it (the compose file and the
    // task definitions leave METRIC_INTERVAL_SECS alone).
    let defaults = Config::try_parse_from([
        "crawlfleet",
        "--database-url=postgres://unused",
        "--redis-url=redis://unused",
    ])
    .unwrap();
    let settings = PublisherSettings::from_config(&defaults.common, &defaults.api);
    // The step policy's alarms use 10 s periods: a put in every one of them.
    assert_eq!(settings.interval, Duration::from_secs(10));
    assert!(settings.call_timeout < settings.interval);
    let app = TestApp::spawn().await;
    queued_runs(&app, 2).await;
    let cw = FakeCloudWatch::start(Mode::Accept).await;
    let publisher = Publisher::start_reading(&app, &redis_url(), &cw, settings).await;

    // Three puts are due 10, 20 and 30 s after the lock is taken; once a
    // minute they would take 3 minutes. 100 s leaves a loaded machine 70 s.
    cw.put_after(2, Duration::from_secs(100)).await;
    let puts = cw.puts();
    for put in &puts[..3] {
        assert_eq!(put.namespace, "CrawlerService");
        let backlog = put.datum(QUEUE_WAITING_JOBS);
        assert_eq!(backlog.value, 2.0, "{put:?}");
        assert_eq!(backlog.storage_resolution, Some(1), "{put:?}");
    }
    // Never in a burst: ticks come no sooner than due (load only delays them),
    // so two intervals take 20 s less the jitter of the puts' way here.
    let span = puts[2].at - puts[0].at;
    assert!(span >= Duration::from_secs(10), "3 puts in {span:?}");
    publisher.stop().await;
    cw.stop();
    app.stop().await;
}

#[tokio::test]
async fn redis_memory_is_published_as_a_percentage_of_its_maxmemory() {
    let _turn = ONE_AT_A_TIME.lock().await;
    let app = TestApp::spawn().await;
    let redis = OwnRedis::start().await;
    let mut conn = queue::connect(&redis.url()).await.unwrap();
    let _: () = redis::cmd("CONFIG")
        .arg(&["SET", "maxmemory", "64mb"])
        .query_async(&mut conn)
        .await
        .unwrap();
    // 8 MiB of data: the percentage moves well away from an empty server's.
    let _: () = redis::cmd("SET")
        .arg("ballast")
        .arg(vec![b'x'; 8 << 20])
        .query_async(&mut conn)
        .await
        .unwrap();
    let cw = FakeCloudWatch::start(Mode::Accept).await;
    let publisher = Publisher::start_reading(
        &app,
        &redis.url(),
        &cw,
        settings(&app, Duration::from_secs(1), Duration::from_millis(800)),
    )
    .await;

    let put = cw.put_after(0, Duration::from_secs(5)).await;
    let memory = put
        .data
        .iter()
        .find(|d| d.name == REDIS_MEMORY_USAGE_PERCENT)
        .unwrap_or_else(|| panic!("no memory datum: {put:?}"));
    assert_eq!(memory.unit, "Percent");
    assert!(!memory.has_dimensions);
    // Standard resolution: its alarm reads whole minutes.
    assert_eq!(memory.storage_resolution, None);
    let used: f64 = {
        let info: String = redis::cmd("INFO")
            .arg("memory")
            .query_async(&mut conn)
            .await
            .unwrap();
        info.lines()
            .find_map(|l| l.strip_prefix("used_memory:"))
            .unwrap()
            .trim()
            .parse()
            .unwrap()
    };
    let expected = used / (64.0 * 1024.0 * 1024.0) * 100.0;
    let published = put.value(REDIS_MEMORY_USAGE_PERCENT);
    assert!(
        published > 12.5 && (published - expected).abs() < 2.0,
        "published {published} %, INFO says {expected} %"
    );

    // Without maxmemory there is nothing to be a percentage of.
    let _: () = redis::cmd("CONFIG")
        .arg(&["SET", "maxmemory", "0"])
        .query_async(&mut conn)
        .await
        .unwrap();
    let before = cw.puts().len();
    // (A put read before the change may still be arriving: the one after it.)
    let later = cw.put_after(before + 1, Duration::from_secs(5)).await;
    assert!(
        later
            .data
            .iter()
            .all(|d| d.name != REDIS_MEMORY_USAGE_PERCENT),
        "{later:?}"
    );
    publisher.stop().await;
    cw.stop();
    redis.stop().await;
    app.stop().await;
}

#[tokio::test]
async fn a_failing_cloudwatch_is_counted_retried_and_never_slows_the_api() {
    let _turn = ONE_AT_A_TIME.lock().await;
    let app = TestApp::spawn_with(Roles::default(), with_a_token).await;
    queued_runs(&app, 2).await;
    let cw = FakeCloudWatch::start(Mode::Fail).await;
    let failures = metrics().cloudwatch_failures.get();
    let publishes = metrics().cloudwatch_publishes.get();
    let publisher = Publisher::start(&app, &cw, Duration::from_millis(800)).await;

    cw.put_after(0, Duration::from_secs(5)).await;
    let slowest = slowest_answer(&app, 25).await; // ~2.5 s of failing ticks
    // An answer takes milliseconds, a hundred times under this bound, which
    // must stay below the 800 ms a failing tick may last.
    assert!(
        slowest < Duration::from_millis(750),
        "the api took {slowest:?}"
    );
    // The loop above slept 2.4 s after the first put arrived, by when the
    // second tick (1 s after the first) has failed or timed out (800 ms). The
    // publisher runs on this test's thread: a stall of it delays both.
    assert!(
        metrics().cloudwatch_failures.get() - failures >= 2,
        "every failing tick is counted, and the next tick tries again"
    );
    assert_eq!(metrics().cloudwatch_publishes.get(), publishes);

    // CloudWatch recovers: the next tick succeeds, with the current backlog.
    cw.set_mode(Mode::Accept);
    let seen = cw.puts().len();
    // A retry of this tick or the next tick, within a second. Widened from 3 s
    // to the 5 s (five ticks) the other waits for a put allow.
    let put = cw.put_after(seen, Duration::from_secs(5)).await;
    assert_eq!(put.value(QUEUE_WAITING_JOBS), 2.0);
    // Counted as soon as the answer is read: milliseconds.
    eventually(
        Duration::from_secs(3),
        "a successful put is counted",
        || async { (metrics().cloudwatch_publishes.get() > publishes).then_some(()) },
    )
    .await;
    publisher.stop().await;
    cw.stop();
    app.stop().await;
}

#[tokio::test]
async fn crawls_finished_while_cloudwatch_fails_are_counted_by_the_next_put_that_lands() {
    let _turn = ONE_AT_A_TIME.lock().await;
    let app = TestApp::spawn().await;
    let runs = queued_runs(&app, 2).await;
    let cw = FakeCloudWatch::start(Mode::Accept).await;
    let publisher = Publisher::start(&app, &cw, Duration::from_millis(800)).await;
    cw.put_after(0, Duration::from_secs(5)).await;

    // That put landed; from now on CloudWatch fails, and a crawl completes.
    cw.set_mode(Mode::Fail);
    sqlx::query("UPDATE crawl_runs SET state = 'completed', finished_at = now() WHERE id = $1")
        .bind(runs[0])
        .execute(app.pool())
        .await
        .unwrap();
    // A failed tick counts it (the SDK retries each tick's put: all fail)...
    let mut seen = 1;
    let failed_tick = loop {
        let put = cw.put_after(seen, Duration::from_secs(5)).await;
        assert_eq!(put.answered, Mode::Fail);
        seen += 1;
        if put.value(CRAWLS_COMPLETED) == 1.0 {
            break put.stamped;
        }
        // The crawl is in the tick after the update (a second away at most);
        // 20 puts are six ticks or more, each the SDK's few tries.
        assert!(
            seen < 20,
            "no failed put counted the crawl: {:?}",
            cw.puts()
        );
    };
    // ...and is over once a later tick has begun.
    loop {
        let put = cw.put_after(seen, Duration::from_secs(5)).await;
        seen += 1;
        if put.stamped != failed_tick {
            break;
        }
    }
    // CloudWatch recovers: the put that lands next (a retry of this tick,
    // or the next tick's) still counts the crawl: the failed interval was
    // not skipped.
    cw.set_mode(Mode::Accept);
    // A retry of this tick or the next tick: within a second.
    let landed = eventually(Duration::from_secs(5), "a put that lands", || async {
        cw.puts()[seen - 1..]
            .iter()
            .find(|p| p.answered == Mode::Accept)
            .cloned()
    })
    .await;
    assert_ne!(landed.stamped, failed_tick);
    assert_eq!(landed.value(CRAWLS_COMPLETED), 1.0, "{landed:?}");
    assert_eq!(landed.value(QUEUE_WAITING_JOBS), 1.0, "{landed:?}");
    // Once only.
    let puts = cw.puts();
    let landed_at = puts.iter().position(|p| p.at == landed.at).unwrap();
    let next = cw.put_after(landed_at + 1, Duration::from_secs(5)).await;
    assert_eq!(next.value(CRAWLS_COMPLETED), 0.0, "{next:?}");
    publisher.stop().await;
    cw.stop();
    app.stop().await;
}

#[tokio::test]
async fn a_hanging_cloudwatch_times_out_and_never_slows_the_api() {
    let _turn = ONE_AT_A_TIME.lock().await;
    let app = TestApp::spawn_with(Roles::default(), with_a_token).await;
    queued_runs(&app, 1).await;
    let cw = FakeCloudWatch::start(Mode::Hang).await;
    let failures = metrics().cloudwatch_failures.get();
    // A put hangs 1.5 s of every 2: most requests below meet one in flight,
    // and one held up by it would wait up to 1.5 s, twice the bound.
    let call_timeout = Duration::from_millis(1500);
    let publisher = Publisher::start_every(&app, &cw, Duration::from_secs(2), call_timeout).await;

    // The first put comes one 2 s interval after the lock is taken. Widened
    // from 5 s, which left only 3 s for a loaded machine beyond that interval.
    let first = cw.put_after(0, Duration::from_secs(10)).await;
    let slowest = slowest_answer(&app, 50).await; // ~5 s of hanging ticks
    // An answer takes milliseconds: a hundred times under the bound.
    assert!(slowest < call_timeout / 2, "the api took {slowest:?}");
    let puts = cw.puts();
    // The loop above ran ~5 s after the first put: two more ticks (2 s apart)
    // were due, one is required; the publisher runs on this test's thread.
    assert!(puts.len() >= 2, "ticks go on: {} requests", puts.len());
    assert!(puts.iter().all(|p| p.at >= first.at));
    // Each hanging call was given up after the call timeout (from the tick,
    // a little before the request arrived here). Both bounds spare a second
    // for what takes milliseconds: the request's way here, and the drop's.
    for put in &puts[..puts.len() - 1] {
        let held = put.abandoned_at.expect("the client gave up on the call") - put.at;
        assert!(
            held >= call_timeout / 3 && held < call_timeout + Duration::from_secs(1),
            "call held {held:?}: {puts:?}"
        );
    }
    assert!(metrics().cloudwatch_failures.get() - failures >= puts.len() as u64 - 1);
    publisher.stop().await;
    cw.stop();
    app.stop().await;
}

#[tokio::test]
async fn shutdown_stops_the_publisher_at_once_even_during_a_put() {
    let _turn = ONE_AT_A_TIME.lock().await;
    let app = TestApp::spawn().await;
    let cw = FakeCloudWatch::start(Mode::Hang).await;
    // A put that would hang for 10 s.
    let publisher = Publisher::start(&app, &cw, Duration::from_secs(10)).await;
    cw.put_after(0, Duration::from_secs(5)).await;
    let took = publisher.stop().await;
    // Shutdown cuts the put in flight: milliseconds, where waiting for the put
    // would take 10 s.
    assert!(took < Duration::from_secs(2), "stopping took {took:?}");
    // The server learns of the dropped connection a moment later (milliseconds).
    eventually(
        Duration::from_secs(2),
        "the put in flight was dropped",
        || async { cw.puts()[0].abandoned_at.map(|_| ()) },
    )
    .await;
    // Its lock session is closed too, so another api process can lead: its
    // backend ends as the connection closes, milliseconds.
    eventually(
        Duration::from_secs(2),
        "the lock session closes",
        || async {
            let sessions: i64 = sqlx::query_scalar(
                "SELECT count(*) FROM pg_stat_activity
             WHERE application_name LIKE 'crawlfleet-publisher-%' AND datname = current_database()",
            )
            .fetch_one(app.pool())
            .await
            .unwrap();
            (sessions == 0).then_some(())
        },
    )
    .await;
    cw.stop();
    app.stop().await;
}

/// Two publishers of one database, each with its own stand-in: `a` leads
/// (it has put once), `b` was started after it.
struct Pair {
    cw_a: FakeCloudWatch,
    cw_b: FakeCloudWatch,
    a: Publisher,
    b: Publisher,
}

async fn leader_then_standby(app: &TestApp) -> Pair {
    let (cw_a, cw_b) = (
        FakeCloudWatch::start(Mode::Accept).await,
        FakeCloudWatch::start(Mode::Accept).await,
    );
    let a = Publisher::start(app, &cw_a, Duration::from_millis(800)).await;
    cw_a.put_after(0, Duration::from_secs(5)).await;
    let b = Publisher::start(app, &cw_b, Duration::from_millis(800)).await;
    Pair { cw_a, cw_b, a, b }
}

#[tokio::test]
async fn only_the_leader_publishes_and_a_standby_takes_over_when_it_stops() {
    let _turn = ONE_AT_A_TIME.lock().await;
    let app = TestApp::spawn().await;
    let Pair { cw_a, cw_b, a, b } = leader_then_standby(&app).await;

    // The standby cannot take a held lock however long it waits; the leader's
    // next put is due within a second of its first.
    tokio::time::sleep(Duration::from_millis(2500)).await;
    assert!(
        cw_b.puts().is_empty(),
        "the standby put while the leader leads"
    );
    assert!(cw_a.puts().len() >= 2, "the leader goes on");

    a.stop().await;
    let stopped = Instant::now();
    let a_puts = cw_a.puts().len();
    // It polls every second and puts one interval after taking over: ~2 s,
    // where waiting for the lock to time out would take minutes. Widened from
    // 5 s (8 s to wait), which left a loaded machine only 3 s beyond those 2.
    let first_b = cw_b.put_after(0, Duration::from_secs(15)).await;
    assert!(
        first_b.at - stopped < Duration::from_secs(10),
        "took over after {:?}",
        first_b.at - stopped
    );
    cw_b.put_after(1, Duration::from_secs(5)).await;
    assert_eq!(cw_a.puts().len(), a_puts, "the stopped publisher put again");
    b.stop().await;
    cw_a.stop();
    cw_b.stop();
    app.stop().await;
}

/// The puts of `a` and of `b` that arrived after `since`, in order, each
/// marked with its publisher.
fn puts_since(
    cw_a: &FakeCloudWatch,
    cw_b: &FakeCloudWatch,
    since: Instant,
) -> Vec<(Instant, char)> {
    let mut puts: Vec<(Instant, char)> = [(cw_a, 'a'), (cw_b, 'b')]
        .into_iter()
        .flat_map(|(cw, who)| cw.puts().into_iter().map(move |p| (p.at, who)))
        .filter(|(at, _)| *at > since)
        .collect();
    puts.sort();
    puts
}

/// Who put, in turns: "aab" is a twice, then b.
fn turns(puts: &[(Instant, char)]) -> String {
    puts.iter().map(|(_, who)| *who).collect()
}

#[tokio::test]
async fn a_leader_whose_lock_connection_is_cut_stands_down_and_one_publisher_goes_on() {
    let _turn = ONE_AT_A_TIME.lock().await;
    let app = TestApp::spawn().await;
    // A leader notices a lost lock within its 1 s probe; a new leader puts
    // one interval after taking the lock. Puts 3 s apart leave 2 s between
    // the stale leader's last put and its successor's first.
    let interval = Duration::from_secs(3);
    let (cw_a, cw_b) = (
        FakeCloudWatch::start(Mode::Accept).await,
        FakeCloudWatch::start(Mode::Accept).await,
    );
    let a = Publisher::start_every(&app, &cw_a, interval, Duration::from_millis(800)).await;
    cw_a.put_after(0, Duration::from_secs(15)).await;
    // b asks for the lock as it starts, and is refused.
    let b = Publisher::start_every(&app, &cw_b, interval, Duration::from_millis(800)).await;
    cw_a.put_after(1, Duration::from_secs(15)).await;
    assert!(cw_b.puts().is_empty(), "the standby put while a leads");

    // Postgres ends the session holding the lock (as a failover or a network
    // cut would), which frees the lock.
    let cut: Vec<i32> = sqlx::query_scalar(
        "SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND granted
         AND database = (SELECT oid FROM pg_database WHERE datname = current_database())",
    )
    .fetch_all(app.pool())
    .await
    .unwrap();
    assert_eq!(cut.len(), 1, "one lock holder: {cut:?}");
    let cut_at = Instant::now();
    sqlx::query("SELECT pg_terminate_backend($1)")
        .bind(cut[0])
        .execute(app.pool())
        .await
        .unwrap();

    // Whichever takes the lock (a re-contends within a second, b asks every
    // 3 s) puts one interval later, then every interval: two puts within
    // ~9 s of the cut.
    eventually(
        Duration::from_secs(30),
        "a publisher puts twice after the cut",
        || async {
            let puts = turns(&puts_since(&cw_a, &cw_b, cut_at));
            (puts.matches('a').count() >= 2 || puts.matches('b').count() >= 2).then_some(())
        },
    )
    .await;
    // One interval more, in which a second publisher would put too.
    tokio::time::sleep(interval).await;
    let puts = puts_since(&cw_a, &cw_b, cut_at);
    let shown: Vec<String> = puts
        .iter()
        .map(|(at, who)| format!("{who} at +{:.1} s", (*at - cut_at).as_secs_f64()))
        .collect();
    eprintln!("puts after the cut: {shown:?}");
    let puts = turns(&puts);
    // One publisher at a time: either a went on (its puts only), or a put at
    // most once more before it noticed the cut (within a second, its puts
    // are 3 s apart) and b took over and went on alone.
    let b_took_over = puts.trim_start_matches('a');
    let stale = puts.len() - b_took_over.len();
    let one_at_a_time = b_took_over.is_empty()
        || (stale <= 1 && b_took_over.len() >= 2 && b_took_over.chars().all(|who| who == 'b'));
    assert!(one_at_a_time, "puts after the cut: {shown:?}");
    a.stop().await;
    b.stop().await;
    cw_a.stop();
    cw_b.stop();
    app.stop().await;
}

#[tokio::test]
async fn the_publisher_leads_while_a_scheduler_leads_the_same_database() {
    let _turn = ONE_AT_A_TIME.lock().await;
    // `--process=all`, or an api beside a scheduler: each has a lock of its own.
    let app = TestApp::spawn_with(Roles::scheduler_only(), |_| {}).await;
    let cw = FakeCloudWatch::start(Mode::Accept).await;
    // The sessions holding an advisory lock on this database, by name.
    let holders = || async {
        let mut names: Vec<String> = sqlx::query_scalar(
            "SELECT a.application_name FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid
             WHERE l.locktype = 'advisory' AND l.granted
               AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())",
        )
        .fetch_all(app.pool())
        .await
        .unwrap();
        for name in &mut names {
            // crawlfleet-<role>-<pid>: the role is what matters.
            name.truncate(name.rfind('-').unwrap_or(name.len()));
        }
        names.sort();
        names
    };
    // The scheduler leads first, as in a fleet already running: it takes its
    // lock as it starts.
    eventually(Duration::from_secs(10), "the scheduler leads", || async {
        (holders().await == ["crawlfleet-scheduler"]).then_some(())
    })
    .await;
    let publisher = Publisher::start(&app, &cw, Duration::from_millis(800)).await;
    cw.put_after(0, Duration::from_secs(5)).await;
    assert_eq!(
        holders().await,
        ["crawlfleet-publisher", "crawlfleet-scheduler"],
        "both lead at once, each on a lock of its own"
    );
    publisher.stop().await;
    cw.stop();
    app.stop().await;
}

#[tokio::test]
async fn an_api_process_publishes_when_enabled_and_says_so_when_not() {
    let app = TestApp::spawn().await;
    queued_runs(&app, 3).await;
    let cw = FakeCloudWatch::start(Mode::Accept).await;
    // The SDK configured from the environment alone, as on ECS/EC2.
    let aws_env = |enabled: &str| {
        vec![
            ("CLOUDWATCH_ENABLED", enabled.to_owned()),
            ("METRIC_INTERVAL_SECS", "1".to_owned()),
            ("AWS_ENDPOINT_URL", cw.endpoint.clone()),
            ("AWS_REGION", "us-east-1".to_owned()),
            ("AWS_ACCESS_KEY_ID", "test".to_owned()),
            ("AWS_SECRET_ACCESS_KEY", "test".to_owned()),
            ("AWS_EC2_METADATA_DISABLED", "true".to_owned()),
        ]
    };
    let on = RoleProcess::spawn("api", &app.config, &aws_env("true"));
    // The process starts, takes the lock and puts a second later: ~2 s.
    let put = cw.put_after(0, Duration::from_secs(20)).await;
    assert_eq!(put.namespace, "CrawlerService");
    assert_eq!(put.value(QUEUE_WAITING_JOBS), 3.0);
    assert_eq!(on.terminate(Duration::from_secs(10)).await, 0);

    let seen = cw.puts().len();
    let off = RoleProcess::spawn("api", &app.config, &aws_env("false"));
    let log = off.log.clone();
    // Logged as the process starts: within a second or so.
    eventually(
        Duration::from_secs(20),
        "the api says publishing is off",
        || {
            let log = log.clone();
            async move {
                std::fs::read_to_string(&log)
                    .unwrap_or_default()
                    .contains("CloudWatch publishing is off")
                    .then_some(())
            }
        },
    )
    .await;
    // An enabled one would have put within about a second; a slow machine
    // only makes this check weaker, never fail.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert_eq!(cw.puts().len(), seen, "a disabled publisher put");
    assert_eq!(off.terminate(Duration::from_secs(10)).await, 0);
    cw.stop();
    app.stop().await;
}

/// On the host the instance role is out of the containers' reach; the api
/// reads credentials the host refreshes, through the profile the host writes
/// (infra/templates/user_data.sh.tftpl): `credential_process = /bin/cat FILE`.
#[tokio::test]
async fn the_api_reads_the_credentials_the_host_refreshes_through_credential_process() {
    use aws_config::profile::ProfileFileCredentialsProvider;
    use aws_runtime::env_config::file::{EnvConfigFileKind, EnvConfigFiles};
    use aws_sdk_cloudwatch::config::ProvideCredentials;

    let dir = std::env::temp_dir().join(format!("cf-aws-{}", uuid::Uuid::new_v4().simple()));
    std::fs::create_dir_all(&dir).unwrap();
    let credentials = dir.join("api-credentials.json");
    // As the host's script writes it.
    std::fs::write(
        &credentials,
        r#"{"Version": 1, "AccessKeyId": "ASIAHOSTREFRESHED", "SecretAccessKey": "s3cr3t", "SessionToken": "t0k3n", "Expiration": "2099-01-01T00:00:00Z"}"#,
    )
    .unwrap();
    let config = dir.join("config");
    std::fs::write(
        &config,
        format!(
            "[default]\nregion = ap-northeast-2\ncredential_process = /bin/cat {}\n",
            credentials.display()
        ),
    )
    .unwrap();
    let provider = ProfileFileCredentialsProvider::builder()
        .profile_files(
            EnvConfigFiles::builder()
                .with_file(EnvConfigFileKind::Config, &config)
                .build(),
        )
        .build();
    let read = provider.provide_credentials().await.unwrap();
    assert_eq!(read.access_key_id(), "ASIAHOSTREFRESHED");
    assert_eq!(read.session_token(), Some("t0k3n"));
    assert!(
        read.expiry().is_some(),
        "the SDK knows when to run it again"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}
