//! The run pipeline's throughput: one-page http crawls of a fast loopback
//! server, dispatch -> claim -> fetch -> store -> complete, with one worker
//! process (the real binary, `HTTP_CONCURRENCY` slots) and the scheduler's
//! dispatcher (in this process, beside the api), on a Postgres cluster and a
//! Redis server of the bench's own so that what they count and spend is the
//! fleet's alone. Prints:
//!
//! - runs/s, over the whole batch (queued at once to the last completed)
//!   and in its steady middle (the 10th to the 90th percentile completion);
//! - Postgres statements per run (`pg_stat_statements`, BEGIN and COMMIT
//!   included), each statement's share, and Postgres' execution time per run;
//! - Redis commands per run (`INFO commandstats`, the commands inside Lua
//!   scripts included) and, from a MONITOR of the warm-up batch, those
//!   clients send against those scripts run;
//! - the CPU split: worker, bench process (api + dispatcher + page server),
//!   the page server's own thread, Postgres (every backend), Redis, and the
//!   machine as a whole (other users included: the machine is shared);
//! - the page server alone at the same concurrency (a new client per
//!   request, as each crawl has its own, and with keep-alive), to show it is
//!   not what bounds the pipeline.
//!
//!   cargo bench --bench run_pipeline           (RUNS=5000 SLOTS=32 SITES=10 by default)
//!
//! Exits non-zero if a run fails or the batch does not drain in 10 minutes.

#[allow(dead_code, unused_imports)]
#[path = "../tests/it/support/mod.rs"]
mod support;

#[path = "run_pipeline/counts.rs"]
mod counts;
#[path = "run_pipeline/cpu.rs"]
mod cpu;
#[path = "run_pipeline/servers.rs"]
mod servers;

use std::time::{Duration, Instant};

use serde_json::json;
use sqlx::PgPool;
use support::{ON_DEMAND, RoleProcess, Roles, TestApp};

/// The worker's log filter in production (`ops::telemetry`'s default).
const PRODUCTION_LOG: &str = "info,tower_http=warn,sqlx=warn,apalis=warn,apalis_redis=warn";
/// Runs of the warm-up batch, whose Redis commands a MONITOR tells apart.
const WARM_UP_RUNS: usize = 1000;

fn env_or(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// What one batch of runs did.
struct Batch {
    runs: usize,
    wall: f64,
    steady_rate: f64,
    /// Claim to completion of one run: median and p99, ms.
    run_ms: (f64, f64),
}

/// Queues `keywords` new keywords on every site at once (one statement, as
/// the observer) and waits for every run to end; none may fail.
async fn batch(observer: &PgPool, sites: &[i64], name: &str, keywords: usize) -> Batch {
    let ids: Vec<i64> = sqlx::query_scalar(
        "INSERT INTO keywords (keyword, schedule) SELECT $1 || i, $2 FROM generate_series(1, $3) i
         RETURNING id",
    )
    .bind(format!("{name}-"))
    .bind(ON_DEMAND)
    .bind(keywords as i32)
    .fetch_all(observer)
    .await
    .unwrap();
    sqlx::query(
        "INSERT INTO keyword_sites (keyword_id, site_id)
         SELECT k, s FROM unnest($1::bigint[]) k CROSS JOIN unnest($2::bigint[]) s",
    )
    .bind(&ids)
    .bind(sites)
    .execute(observer)
    .await
    .unwrap();
    let runs = ids.len() * sites.len();
    let started = Instant::now();
    let (first, last): (i64, i64) = sqlx::query_as(
        "WITH queued AS (
             INSERT INTO crawl_runs (keyword_id, site_id, state, trigger, priority, max_attempts)
             SELECT keyword_id, site_id, 'queued', 'manual', 0, 3 FROM keyword_sites
             WHERE keyword_id = ANY($1) ORDER BY keyword_id, site_id
             RETURNING id
         )
         SELECT min(id), max(id) FROM queued",
    )
    .bind(&ids)
    .fetch_one(observer)
    .await
    .unwrap();
    // One INSERT with nobody else queueing: the batch's ids are a range, so
    // the polls below read it by the primary key. (Matching 500 keyword ids
    // instead cost Postgres 10-20 ms a poll, counted as the fleet's CPU.)
    assert_eq!((last - first + 1) as usize, runs, "the batch's run ids");
    loop {
        let (ended, failed): (i64, i64) = sqlx::query_as(
            "SELECT count(*) FILTER (WHERE state IN ('completed', 'failed', 'cancelled')),
                    count(*) FILTER (WHERE state IN ('failed', 'cancelled'))
             FROM crawl_runs WHERE id BETWEEN $1 AND $2",
        )
        .bind(first)
        .bind(last)
        .fetch_one(observer)
        .await
        .unwrap();
        assert_eq!(failed, 0, "a run failed");
        if ended as usize == runs {
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(600),
            "{name}: {ended} of {runs} runs ended in 10 minutes"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // From the database's clock: queued (all at once) to each completion.
    let done: Vec<(f64, f64)> = sqlx::query_as(
        "SELECT extract(epoch FROM finished_at - queued_at)::float8,
                extract(epoch FROM finished_at - started_at)::float8 * 1000
         FROM crawl_runs WHERE id BETWEEN $1 AND $2 ORDER BY finished_at",
    )
    .bind(first)
    .bind(last)
    .fetch_all(observer)
    .await
    .unwrap();
    let at = |q: f64| done[((done.len() - 1) as f64 * q) as usize].0;
    let mut run_ms: Vec<f64> = done.iter().map(|d| d.1).collect();
    run_ms.sort_by(f64::total_cmp);
    let pick = |q: f64| run_ms[((run_ms.len() - 1) as f64 * q) as usize];
    Batch {
        runs,
        wall: done.last().unwrap().0,
        steady_rate: 0.8 * runs as f64 / (at(0.9) - at(0.1)),
        run_ms: (pick(0.5), pick(0.99)),
    }
}

/// The page server alone: `concurrency` clients for `secs`, each request on
/// a new client (a new connection, as each crawl makes its own) or on one
/// shared keep-alive client; requests a second.
async fn page_server_alone(url: &str, concurrency: usize, secs: u64, fresh_client: bool) -> f64 {
    let deadline = Instant::now() + Duration::from_secs(secs);
    let shared = reqwest::Client::new();
    let tasks: Vec<_> = (0..concurrency)
        .map(|_| {
            let (url, shared) = (url.to_owned(), shared.clone());
            tokio::spawn(async move {
                let mut n = 0u64;
                while Instant::now() < deadline {
                    let client = match fresh_client {
                        true => reqwest::Client::builder().no_proxy().build().unwrap(),
                        false => shared.clone(),
                    };
                    let body = client
                        .get(&url)
                        .send()
                        .await
                        .unwrap()
                        .bytes()
                        .await
                        .unwrap();
                    assert!(!body.is_empty());
                    n += 1;
                }
                n
            })
        })
        .collect();
    let mut total = 0;
    for task in tasks {
        total += task.await.unwrap();
    }
    total as f64 / secs as f64
}

/// Statements grouped for the table: the query's first line, squeezed.
fn short(query: &str) -> String {
    let squeezed: String = query.split_whitespace().collect::<Vec<_>>().join(" ");
    squeezed.chars().take(110).collect()
}

#[tokio::main]
async fn main() -> std::process::ExitCode {
    let runs_wanted = env_or("RUNS", 5000);
    let slots = env_or("SLOTS", 32);
    let site_count = env_or("SITES", 10);
    let keywords = runs_wanted.div_ceil(site_count);

    let postgres = servers::OwnPostgres::start().await;
    let redis = servers::BenchRedis::start().await;
    // SAFETY: nothing else runs yet that reads the environment; the test
    // support reads both to find its stores.
    unsafe {
        std::env::set_var("DATABASE_URL", postgres.url("postgres"));
        std::env::set_var("REDIS_URL", redis.url());
    }
    let pages = servers::PageServer::start();

    // Production's dispatch settings: a 250 ms tick, the window following
    // the fleet's slots.
    let mut app = TestApp::spawn_without_browsers(Roles::scheduler_only(), |c| {
        c.worker.http_concurrency = slots;
        c.worker.worker_concurrency = 1;
        c.scheduler.dispatch_interval_ms = 250;
        c.scheduler.schedule_sync_interval_ms = 1000;
        c.scheduler.dispatch_claim_timeout_secs = 300;
    })
    .await;
    let mut sites = Vec::new();
    for i in 0..site_count {
        sites.push(
            app.create_site(json!({
                "name": format!("fast-{i}"),
                "search_url": format!("{}/search?q={{keyword}}&page={{page}}&site={i}", pages.base_url()),
                "item_selector": "li.product",
                "fields": {
                    "title": {"selector": "a.title"},
                    "link": {"selector": "a.title", "attr": "href"},
                    "price": {"selector": ".price"},
                },
                "max_pages": 1,
                "render": "http",
                "max_concurrent_runs": 1000,
            }))
            .await,
        );
    }
    // The bench's own queries run as another role, left out of the counts.
    for setup in [
        "CREATE EXTENSION pg_stat_statements",
        "CREATE ROLE observer SUPERUSER LOGIN",
    ] {
        sqlx::query(setup).execute(app.pool()).await.unwrap();
    }
    let observer = {
        let mut url: url::Url = app.db.url.parse().unwrap();
        url.set_username("observer").unwrap();
        crawlfleet::store::connect(url.as_str(), 2).await.unwrap()
    };
    let mut redis_conn = crawlfleet::queue::connect(&redis.url()).await.unwrap();

    let worker = RoleProcess::spawn(
        "worker",
        &app.config,
        &[("RUST_LOG", PRODUCTION_LOG.into())],
    );
    worker.listening_on("health and metrics listening").await;
    // The dispatcher reads the fleet's slots every 5 s: until then its window is the minimum.
    tokio::time::sleep(Duration::from_secs(6)).await;

    // Warm-up (robots.txt read, connections open), its Redis commands told apart.
    let monitor = counts::Monitor::start(redis.port).await;
    let warm = batch(&observer, &sites, "warm", WARM_UP_RUNS.div_ceil(site_count)).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    let monitored = monitor.stop();

    counts::reset_statements(&observer).await;
    counts::reset_redis(&mut redis_conn).await;
    let take = || cpu::Sample::take(worker.pid(), pages.tid, postgres.postmaster, redis.pid);
    let before = take();
    let requests_before = pages.requests.load(std::sync::atomic::Ordering::Relaxed);
    let measured = batch(&observer, &sites, "bench", keywords).await;
    let spent = take().since(&before);
    let requests = pages.requests.load(std::sync::atomic::Ordering::Relaxed) - requests_before;
    let statements = counts::statements(&observer).await;
    let commands = counts::redis_commands(&mut redis_conn).await;

    let alone_fresh = page_server_alone(
        &format!("{}/search?q=alone", pages.base_url()),
        slots,
        3,
        true,
    )
    .await;
    let alone_kept = page_server_alone(
        &format!("{}/search?q=alone", pages.base_url()),
        slots,
        3,
        false,
    )
    .await;

    let _ = worker.terminate(Duration::from_secs(30)).await;
    observer.close().await;
    app.stop_roles().await;
    let runs = measured.runs as f64;

    println!(
        "run_pipeline: {} one-page http runs ({} keywords x {site_count} sites), one worker process with {slots} http slots; \
         warm-up {} runs first",
        measured.runs, keywords, warm.runs
    );
    let (load1, nproc) = (
        std::fs::read_to_string("/proc/loadavg").unwrap_or_default(),
        std::thread::available_parallelism().map_or(0, |n| n.get()),
    );
    println!("  machine: {nproc} cores, loadavg {}", load1.trim());
    println!(
        "  runs/s: {:.0} over the batch ({:.2} s queued to last completed), {:.0} steady (10th-90th percentile); \
         warm-up {:.0} over its batch",
        runs / measured.wall,
        measured.wall,
        measured.steady_rate,
        warm.runs as f64 / warm.wall
    );
    println!(
        "  one run, claimed to completed: median {:.1} ms, p99 {:.1} ms; page requests served: {requests}",
        measured.run_ms.0, measured.run_ms.1
    );

    let calls: i64 = statements.iter().map(|s| s.calls).sum();
    let exec_ms: f64 = statements.iter().map(|s| s.total_ms).sum();
    println!(
        "  Postgres: {:.2} statements per run ({calls} in all, BEGIN/COMMIT included), {:.3} ms executing per run",
        calls as f64 / runs,
        exec_ms / runs
    );
    for s in statements.iter().filter(|s| s.calls as f64 / runs >= 0.01) {
        println!(
            "    {:>6.2}/run {:>7.3} ms/run  {}",
            s.calls as f64 / runs,
            s.total_ms / runs,
            short(&s.query)
        );
    }

    let total_cmds: u64 = commands.values().sum();
    let scripted: u64 = ["evalsha", "eval", "script|load"]
        .iter()
        .filter_map(|c| commands.get(*c))
        .sum();
    println!(
        "  Redis: {:.2} commands per run ({total_cmds} in all, commands inside scripts included; {:.2} script calls per run)",
        total_cmds as f64 / runs,
        scripted as f64 / runs
    );
    for (name, n) in commands.iter().filter(|(_, n)| **n as f64 / runs >= 0.01) {
        println!("    {:>6.2}/run  {name}", *n as f64 / runs);
    }
    let warm_runs = warm.runs as f64;
    let by_client: u64 = monitored
        .iter()
        .filter(|((c, _), _)| *c)
        .map(|(_, n)| n)
        .sum();
    let by_script: u64 = monitored
        .iter()
        .filter(|((c, _), _)| !*c)
        .map(|(_, n)| n)
        .sum();
    println!(
        "  Redis, MONITOR of the warm-up: {:.2} commands per run sent by clients, {:.2} run inside scripts",
        by_client as f64 / warm_runs,
        by_script as f64 / warm_runs
    );
    let mut client_cmds: Vec<_> = monitored.iter().filter(|((c, _), _)| *c).collect();
    client_cmds.sort_by(|a, b| b.1.cmp(a.1));
    for ((_, name), n) in client_cmds
        .iter()
        .filter(|(_, n)| **n as f64 / warm_runs >= 0.01)
    {
        println!("    {:>6.2}/run  {name}", **n as f64 / warm_runs);
    }

    let wall = measured.wall;
    let row = |name: &str, secs: f64| {
        println!(
            "    {name:<44} {:>7.2} s  {:>5.1} % of one core  {:>6.3} ms/run",
            secs,
            100.0 * secs / wall,
            1000.0 * secs / runs
        )
    };
    println!(
        "  CPU over the batch ({wall:.2} s wall, {nproc} cores = {:.1} core-s):",
        wall * nproc as f64
    );
    row("worker process", spent.worker);
    row("bench process (api, dispatcher, page server)", spent.bench);
    row("  of which the page server's thread", spent.page_server);
    row("Postgres (postmaster and backends)", spent.postgres);
    row("Redis", spent.redis);
    let ours = spent.worker + spent.bench + spent.postgres + spent.redis;
    row("all of the above", ours);
    row("machine, every process (anyone's)", spent.machine_busy);
    println!(
        "  the page server alone, {slots} clients: {alone_fresh:.0} req/s with a new connection a request, \
         {alone_kept:.0} req/s keep-alive (clients in this process too)"
    );
    app.finish().await;
    pages.stop();
    drop(redis);
    drop(postgres);
    std::process::ExitCode::SUCCESS
}
