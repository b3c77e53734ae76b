//! Crawling like a good citizen at fleet scale: a site's rate and concurrency
//! limits hold across worker processes, a refusal slows the site for the whole
//! fleet and the page is tried again, and the limiter itself paces and ramps.

use std::time::{Duration, Instant};

use crawlfleet::{queue, worker::limiter::SiteLimiter};
use serde_json::json;

use crate::support::{RoleProcess, Roles, TestApp, clear_queue, redis_url, test_queue_name};

// The slowest runs here wait out 8 s of Retry-After (one in Chrome, or two of
// 4 s), or share 36 pages at 5 a second (7 s and more) after three worker
// processes start: ~10 s; 120 s is over ten times that.
const LIMIT: Duration = Duration::from_secs(120);

/// The most of `times` that fall in any half-open window of `width`.
fn most_in_any_window(times: &[Instant], width: Duration) -> usize {
    let mut times = times.to_vec();
    times.sort();
    (0..times.len())
        .map(|i| {
            times[i..]
                .iter()
                .take_while(|t| **t < times[i] + width)
                .count()
        })
        .max()
        .unwrap_or(0)
}

/// The most of `spans` (start, end) open at the same instant.
fn most_overlapping<T: Ord + Copy>(spans: &[(T, T)]) -> usize {
    spans
        .iter()
        .map(|(start, _)| {
            spans
                .iter()
                .filter(|(s, e)| s <= start && start < e)
                .count()
        })
        .max()
        .unwrap_or(0)
}

/// The requests for `path` of the keywords starting with `prefix`.
fn hits_of(app: &TestApp, path: &str, prefix: &str) -> Vec<crawlfleet_demo::site::Hit> {
    app.site
        .requests(path)
        .into_iter()
        .filter(|h| h.param("q").is_some_and(|q| q.starts_with(prefix)))
        .collect()
}

/// Each crawl's span as the fixture saw it: first to last request for its keyword.
fn crawl_spans_seen(hits: &[crawlfleet_demo::site::Hit]) -> Vec<(Instant, Instant)> {
    let mut spans: std::collections::HashMap<String, (Instant, Instant)> = Default::default();
    for hit in hits {
        let keyword = hit.param("q").unwrap_or_default();
        let span = spans.entry(keyword).or_insert((hit.at, hit.at));
        span.0 = span.0.min(hit.at);
        span.1 = span.1.max(hit.at);
    }
    // A crawl holds its slot a little beyond its last request.
    spans
        .into_values()
        .map(|(start, end)| (start, end + Duration::from_millis(1)))
        .collect()
}

/// Each attempt's span of a site, from Postgres: claim to end, in microseconds.
async fn attempt_spans(app: &TestApp, site: i64) -> Vec<(i64, i64)> {
    sqlx::query_as(
        "SELECT (EXTRACT(EPOCH FROM a.started_at) * 1e6)::int8, (EXTRACT(EPOCH FROM a.ended_at) * 1e6)::int8
         FROM crawl_attempts a JOIN crawl_runs r ON r.id = a.run_id WHERE r.site_id = $1",
    )
    .bind(site)
    .fetch_all(app.pool())
    .await
    .unwrap()
}

#[tokio::test]
async fn three_workers_keep_a_sites_limits_while_another_site_goes_at_its_own_pace() {
    let app =
        TestApp::spawn_without_browsers(Roles::scheduler_only(), |c| c.worker.http_concurrency = 4)
            .await;
    let base = app.site.base_url();
    let limited = app
        .create_site(json!({
            "name": "limited", "render": "http",
            // Fast pages (50 ms): unlimited, two crawls would ask ~40 a second,
            // so the limit of 5 is what keeps them to 5.
            "search_url": format!("{base}/slow?ms=50&q={{keyword}}&page={{page}}"),
            "item_selector": "li.product", "fields": {"title": {"selector": "a.title"}},
            "max_pages": 3, "max_concurrent_runs": 2, "max_requests_per_sec": 5,
        }))
        .await;
    // Pages slow enough (200 ms) that the free site's crawls overlap as they
    // run side by side, however fast the machine.
    let free = app
        .create_site(json!({
            "name": "free", "render": "http",
            "search_url": format!("{base}/slow?ms=200&q={{keyword}}&page={{page}}"),
            "item_selector": "li.product", "fields": {"title": {"selector": "a.title"}},
            "max_pages": 3, "max_concurrent_runs": 8,
        }))
        .await;
    let workers: Vec<RoleProcess> = (0..3).map(|_| RoleProcess::worker(&app.config)).collect();
    let mut runs = app.queue_crawls(limited, "slowly ", 12).await;
    let free_runs = app.queue_crawls(free, "freely ", 12).await;
    runs.extend(&free_runs);
    for run in &runs {
        let run = app.wait_until_completed(*run, LIMIT).await;
        assert_eq!(run["items_found"], 15, "{run}");
    }

    // What the limited site received: 36 pages, never more than 5 in any
    // second beyond the limiter's burst of one, never more than 2 crawls at once.
    let limited_hits: Vec<Instant> = hits_of(&app, "/slow", "slowly")
        .iter()
        .map(|h| h.at)
        .collect();
    assert_eq!(limited_hits.len(), 36);
    // The limiter grants them 200 ms apart by Redis' clock, after a burst of
    // one: 6 in some second there (what this test sees on an idle machine).
    // The fixture logs each a moment later; one more absorbs that moment
    // varying by up to 200 ms between requests (~1 ms normally). Unlimited,
    // the site would see ~40 in a second.
    let per_second = most_in_any_window(&limited_hits, Duration::from_secs(1));
    assert!(
        per_second <= 5 + 1 + 1,
        "{per_second} requests in one second"
    );
    // Causal, not timed: the fixture logs a request before its 50 ms sleep,
    // and a crawl frees its slot only after its last response.
    let seen_at_once = most_overlapping(&crawl_spans_seen(&hits_of(&app, "/slow", "slowly")));
    assert!(
        seen_at_once <= 2,
        "the site saw {seen_at_once} crawls at once"
    );
    // Twelve crawls of three pages, the site's 5 pages a second shared by two
    // at once: over a second each. Load only stretches them, which makes two
    // at once likelier; the dispatcher never allows three.
    let held_at_once = most_overlapping(&attempt_spans(&app, limited).await);
    assert_eq!(
        held_at_once, 2,
        "the fleet held up to 2 crawls of the site at once"
    );
    let workers_used: i64 = sqlx::query_scalar(
        "SELECT count(DISTINCT a.worker_id) FROM crawl_attempts a JOIN crawl_runs r ON r.id = a.run_id",
    )
    .fetch_one(app.pool())
    .await
    .unwrap();
    assert!(
        workers_used >= 2,
        "the crawls spread over {workers_used} worker(s)"
    );

    // The other site was not held behind the limited one.
    // The limited site takes 7 s or more (36 requests 200 ms apart, set by the
    // limiter). The free one's twelve crawls of three 200 ms pages run side by
    // side in the workers' free slots: about a second, a second or two after
    // the limited site's first request: room for a loaded machine.
    let free_hits: Vec<Instant> = hits_of(&app, "/slow", "freely")
        .iter()
        .map(|h| h.at)
        .collect();
    assert_eq!(free_hits.len(), 36);
    assert!(
        free_hits.iter().max() < limited_hits.iter().max(),
        "the unlimited site finished first"
    );
    assert!(
        most_in_any_window(&free_hits, Duration::from_secs(1)) > 6,
        "the unlimited site went faster than the limited one may"
    );
    // Runs queued together are dispatched together and a worker takes 4 at a
    // time; each crawl lasts 600 ms and more, and load only stretches it, and
    // so their overlap.
    let free_at_once = most_overlapping(&attempt_spans(&app, free).await);
    assert!(
        free_at_once > 2,
        "the unlimited site ran {free_at_once} crawls at once"
    );
    let span = |hits: &[Instant]| *hits.iter().max().unwrap() - *hits.iter().min().unwrap();
    eprintln!(
        "limited site: 36 pages in {:?}, at most {per_second} in 1 s, {held_at_once} crawls at once; \
         free site: 36 pages in {:?}, at most {} in 1 s, {free_at_once} crawls at once",
        span(&limited_hits),
        span(&free_hits),
        most_in_any_window(&free_hits, Duration::from_secs(1)),
    );
    for worker in workers {
        assert_eq!(worker.terminate(Duration::from_secs(30)).await, 0);
    }
    app.stop().await;
}

#[tokio::test]
async fn a_429_pauses_the_site_for_its_retry_after_and_the_run_completes() {
    // Waits (7 s) longer than the heartbeat timeout (6 s): a waiting crawl
    // must keep heartbeating and must not be taken for a dead or stuck one.
    // A heartbeat every 1 s may be 5 s late on a loaded machine.
    let app = TestApp::spawn_without_browsers(Roles::fleet(), |c| {
        c.worker.heartbeat_interval_secs = 1;
        c.scheduler.heartbeat_timeout_secs = 6;
        c.scheduler.watchdog_interval_secs = 1;
    })
    .await;
    let site = app
        .one_page_site(
            "rate-limited",
            "/limited?key=r&fail=2&retry_after=7&q={keyword}",
            json!({"render": "http"}),
        )
        .await;
    let run = app.crawl_to_completion("patience", site, LIMIT).await;
    assert_eq!(
        run["attempt"], 1,
        "the page was tried again within the attempt"
    );
    assert_eq!(run["items_found"], 5);
    let hits: Vec<Instant> = app.site.requests("/limited").iter().map(|h| h.at).collect();
    assert_eq!(hits.len(), 3, "two refusals, then the page");
    // A lower bound set by the fixture's Retry-After: the pause starts (by
    // Redis' clock) after the refusal was logged here, and the next request
    // goes after it, so load only widens the gap; 100 ms spares the two clocks.
    for pair in hits.windows(2) {
        let gap = pair[1] - pair[0];
        assert!(
            gap >= Duration::from_millis(6900),
            "asked again after {gap:?}"
        );
    }
    let (_, detail) = app.get(&format!("/api/runs/{}", run["id"])).await;
    assert_eq!(detail["attempts"].as_array().unwrap().len(), 1, "{detail}");
    app.stop().await;
}

#[tokio::test]
async fn a_503_in_chrome_pauses_the_site_for_its_retry_after() {
    let app = TestApp::spawn_with(Roles::fleet(), |_| {}).await;
    // Longer than the pause without a Retry-After (5 s): the header was read.
    let site = app
        .one_page_site(
            "busy",
            "/limited?key=b&fail=1&status=503&retry_after=8&q={keyword}",
            json!({"render": "browser"}),
        )
        .await;
    let run = app.crawl_to_completion("later", site, LIMIT).await;
    assert_eq!(run["attempt"], 1);
    assert_eq!(run["items_found"], 5);
    let hits = app.site.requests("/limited");
    assert_eq!(hits.len(), 2, "one refusal, then the page");
    let gap = hits[1].at - hits[0].at;
    // A lower bound set by the Retry-After, as in the 429 test: load only widens it.
    assert!(
        gap >= Duration::from_millis(7900),
        "asked again after {gap:?}"
    );
    app.stop().await;
}

#[tokio::test]
async fn a_block_page_counts_as_a_refusal_and_the_page_is_tried_again() {
    let app = TestApp::spawn_without_browsers(Roles::fleet(), |_| {}).await;
    let site = app
        .one_page_site(
            "captcha",
            "/limited?key=c&fail=1&captcha=true&q={keyword}",
            json!({"render": "http", "blocked_selector": ".captcha"}),
        )
        .await;
    let run = app.crawl_to_completion("human", site, LIMIT).await;
    assert_eq!(
        run["items_found"], 5,
        "the block page's content was not stored"
    );
    let hits = app.site.requests("/limited");
    assert_eq!(hits.len(), 2);
    let gap = hits[1].at - hits[0].at;
    // A lower bound set by the limiter's pause: load only widens it.
    assert!(
        gap >= Duration::from_millis(4900),
        "default pause 5 s: {gap:?}"
    );
    app.stop().await;
}

#[tokio::test]
async fn the_limiter_spaces_requests_pauses_on_refusal_and_ramps_back_up() {
    // What a wait or pause must still have left holds while consecutive calls,
    // Redis round trips of ~1 ms, are under 100 ms apart. Elapsed times are the
    // limiter's own (Redis' clock), which load only lengthens, and the 1.1 s
    // sleeps only overshoot the 1 s ramp step further.
    let redis = queue::connect(&redis_url()).await.unwrap();
    let queue_name = test_queue_name();
    let limiter = SiteLimiter::with_ramp_step(redis, &queue_name, Duration::from_secs(1));
    let (site, rate) = (1, Some(10.0));

    // 10/s: one request now, the next after 100 ms.
    assert_eq!(
        limiter.try_acquire(site, rate).await.unwrap(),
        Duration::ZERO
    );
    let wait = limiter.try_acquire(site, rate).await.unwrap();
    assert!(
        wait > Duration::ZERO && wait <= Duration::from_millis(100),
        "{wait:?}"
    );
    // Another site is not held by this one; an unlimited site never waits.
    assert_eq!(limiter.try_acquire(2, rate).await.unwrap(), Duration::ZERO);
    assert_eq!(limiter.try_acquire(3, None).await.unwrap(), Duration::ZERO);

    // A refusal with Retry-After pauses the site for exactly that long...
    let refused_at = Instant::now();
    let pause = limiter
        .refuse(site, Some(Duration::from_millis(600)))
        .await
        .unwrap();
    assert!(
        pause >= Duration::from_millis(590) && pause <= Duration::from_millis(600),
        "{pause:?}"
    );
    let wait = limiter.try_acquire(site, rate).await.unwrap();
    assert!(wait > Duration::from_millis(500), "{wait:?}");
    // ...a second refusal in the same pause (a request already in flight)
    // neither stacks the penalty nor shortens the pause...
    let again = limiter
        .refuse(site, Some(Duration::from_millis(100)))
        .await
        .unwrap();
    assert!(again > Duration::from_millis(300), "{again:?}");
    // ...then the pace is halved (200 ms apart) until the ramp step passes.
    limiter.acquire(site, rate).await.unwrap();
    let paused = refused_at.elapsed();
    assert!(paused >= Duration::from_millis(600), "{paused:?}");
    let wait = limiter.try_acquire(site, rate).await.unwrap();
    assert!(
        wait > Duration::from_millis(100) && wait <= Duration::from_millis(200),
        "{wait:?}"
    );
    tokio::time::sleep(Duration::from_millis(1100)).await;
    assert_eq!(
        limiter.try_acquire(site, rate).await.unwrap(),
        Duration::ZERO
    );
    let wait = limiter.try_acquire(site, rate).await.unwrap();
    assert!(
        wait <= Duration::from_millis(100),
        "back to full pace: {wait:?}"
    );

    // An unlimited site that refused is paced while it ramps up, then free again.
    limiter
        .refuse(3, Some(Duration::from_millis(100)))
        .await
        .unwrap();
    limiter.acquire(3, None).await.unwrap();
    let wait = limiter.try_acquire(3, None).await.unwrap();
    assert!(wait > Duration::ZERO, "paced while ramping up");
    tokio::time::sleep(Duration::from_millis(1100)).await;
    assert_eq!(limiter.try_acquire(3, None).await.unwrap(), Duration::ZERO);
    assert_eq!(limiter.try_acquire(3, None).await.unwrap(), Duration::ZERO);
    clear_queue(&queue_name).await;
}
