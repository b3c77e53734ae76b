//! The api under a steady load, with a production-sized history (100,000
//! runs with their attempts, 1,000,000 results: `common/history.rs`), from
//! an api process (the release binary under `cargo bench`):
//!
//! - `GET /api/runs`, `GET /api/results?limit=100` and
//!   `POST /api/keywords/{id}/crawl`, each driven by `oha` at a fixed
//!   RATE requests/s (latency corrected for coordinated omission: a request
//!   is timed from when it was due, not from when a connection was free);
//!   p50, p99, max and errors per endpoint, ROUNDS rounds, then the range.
//!   Reads carry a read token, crawls a write token. Each round's crawls go
//!   to keywords of their own (CRAWL_KEYWORDS, each on two sites), picked at
//!   random by oha: about two in three requests queue two runs and publish
//!   their events, the rest find the pair already active, as repeated
//!   clicks on "crawl now" would. No worker runs: the queued runs stay.
//! - `/ws`: WS_CLIENTS clients connected at once (MAX_WS_CLIENTS and
//!   MAX_WS_CLIENTS_PER_TOKEN raised for them, as an operator would), and a
//!   run's state change published every 1/WS_EVENTS_PER_SEC s through the
//!   fleet's own path (`EventPublisher`: a Redis PUBLISH the api relays);
//!   the latency of each delivery, from just before the PUBLISH to the
//!   frame read by each client, p50/p99/max over all of them.
//!
//! The load tool, the WebSocket clients and the api share this machine's
//! cores: the figures include their competition. Needs Postgres, Redis and
//! `oha` (`OHA`, else on PATH: scripts/bench-api installs it).
//!
//!   scripts/bench-api          (BENCH_ROUNDS=3 BENCH_RATE=1000 BENCH_SECONDS=15
//!                               BENCH_WS_CLIENTS=1000 BENCH_WS_EVENTS_PER_SEC=100 ...)
//!
//! Prints figures only: the goal (reads p99 < 20 ms, events p99 < 100 ms)
//! is printed beside them, never asserted.

#[allow(dead_code, unused_imports)]
#[path = "../tests/it/support/mod.rs"]
mod support;

// Its keywords are console_data's business.
#[allow(dead_code)]
#[path = "common/history.rs"]
mod history;

use std::{
    collections::HashMap,
    path::{Path, PathBuf},
    sync::{
        Arc,
        atomic::{AtomicU64, Ordering},
    },
    time::{Duration, Instant},
};

use crawlfleet::{
    domain::run::{CrawlRun, RunState},
    events::{Event, EventPublisher},
    store::{self, runs::RunFilter},
};
use futures::{StreamExt, stream};
use history::{RESULTS, RUNS, a_production_history};
use serde::Deserialize;
use support::{RoleProcess, Roles, TestApp};
use tokio_tungstenite::tungstenite::Message;
use tokio_util::sync::CancellationToken;

const WRITE_TOKEN: &str = "bench-write-token";
const READ_TOKEN: &str = "bench-read-token";
/// oha's connections: enough that a slow answer never holds back the rate.
const CONNECTIONS: u32 = 50;
const READ_GOAL_MS: f64 = 20.0;
const EVENT_GOAL_MS: f64 = 100.0;

/// The knobs, from the environment.
struct Settings {
    rounds: usize,
    rate: u32,
    seconds: u32,
    crawl_keywords: usize,
    ws_clients: usize,
    ws_events_per_sec: u32,
    ws_seconds: u32,
}

fn env_or<T: std::str::FromStr>(name: &str, default: T) -> T {
    std::env::var(name)
        .ok()
        .map(|v| {
            v.parse()
                .unwrap_or_else(|_| panic!("{name}={v:?} is not a number"))
        })
        .unwrap_or(default)
}

impl Settings {
    fn from_env() -> Self {
        let rate = env_or("BENCH_RATE", 1000);
        let seconds = env_or("BENCH_SECONDS", 15);
        Settings {
            rounds: env_or("BENCH_ROUNDS", 3),
            rate,
            seconds,
            // As many keywords as requests: about 63% are asked for once or more.
            crawl_keywords: env_or("BENCH_CRAWL_KEYWORDS", (rate * seconds) as usize),
            ws_clients: env_or("BENCH_WS_CLIENTS", 1000),
            ws_events_per_sec: env_or("BENCH_WS_EVENTS_PER_SEC", 100),
            ws_seconds: env_or("BENCH_WS_SECONDS", 20),
        }
    }
}

/// The load tool.
fn oha() -> PathBuf {
    let path = std::env::var_os("OHA").map_or_else(|| PathBuf::from("oha"), PathBuf::from);
    match std::process::Command::new(&path).arg("--version").output() {
        Ok(out) if out.status.success() => path,
        _ => panic!("oha not found (set OHA or put it on PATH); scripts/bench-api installs it"),
    }
}

/// What oha measured of one endpoint.
#[derive(Debug, Clone, Copy)]
struct Figures {
    p50_ms: f64,
    p99_ms: f64,
    max_ms: f64,
    requests: usize,
    errors: usize,
    rps: f64,
    /// CPU spent on the phase, by party.
    cpu: Cpu,
}

#[derive(Deserialize)]
struct OhaReport {
    metrics: OhaMetrics,
    #[serde(rename = "statusCodeDistribution")]
    status_codes: HashMap<String, usize>,
    #[serde(rename = "errorDistribution")]
    errors: HashMap<String, usize>,
}

#[derive(Deserialize)]
struct OhaMetrics {
    requests_per_sec: f64,
    latency_ms: OhaLatency,
}

#[derive(Deserialize)]
struct OhaLatency {
    p50: f64,
    p99: f64,
    max: f64,
}

/// oha on the api, and who pays for it.
struct Load<'a> {
    oha: &'a Path,
    rate: u32,
    api_pid: i32,
    pool: &'a sqlx::PgPool,
}

impl Load<'_> {
    /// [`drive_oha`] at the load's rate, with the CPU each party spent meanwhile.
    async fn drive(
        &self,
        method: &str,
        target: &str,
        urls_file: bool,
        token: &str,
        requests: u32,
    ) -> Figures {
        let before = cpu_now(self.api_pid, self.pool).await;
        let mut figures = drive_oha(
            self.oha, method, target, urls_file, token, self.rate, requests,
        );
        figures.cpu = cpu_now(self.api_pid, self.pool).await - before;
        figures
    }
}

/// One oha run: `requests` requests at `rate`/s to `target` (a URL, or with
/// `urls_file` a file of URLs it picks from at random).
fn drive_oha(
    oha: &Path,
    method: &str,
    target: &str,
    urls_file: bool,
    token: &str,
    rate: u32,
    requests: u32,
) -> Figures {
    let mut cmd = std::process::Command::new(oha);
    cmd.args([
        "--no-tui",
        "--output-format",
        "json",
        "--latency-correction",
    ])
    .args(["-m", method])
    .args(["-q", &rate.to_string()])
    .args(["-n", &requests.to_string()])
    .args(["-c", &CONNECTIONS.to_string()])
    .args(["-t", "30s"])
    .args(["-H", &format!("Authorization: Bearer {token}")]);
    if urls_file {
        cmd.arg("--urls-from-file");
    }
    let out = cmd.arg(target).output().expect("oha runs");
    assert!(
        out.status.success(),
        "oha failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report: OhaReport = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "oha's JSON unreadable ({e}): {}",
            String::from_utf8_lossy(&out.stdout)
        )
    });
    let answered: usize = report.status_codes.values().sum();
    let failed_status: usize = report
        .status_codes
        .iter()
        .filter(|(code, _)| !code.starts_with('2'))
        .map(|(_, n)| n)
        .sum();
    let transport: usize = report.errors.values().sum();
    if failed_status + transport > 0 {
        eprintln!(
            "  {method} {target}: status {:?}, errors {:?}",
            report.status_codes, report.errors
        );
    }
    Figures {
        p50_ms: report.metrics.latency_ms.p50,
        p99_ms: report.metrics.latency_ms.p99,
        max_ms: report.metrics.latency_ms.max,
        requests: answered + transport,
        errors: failed_status + transport,
        rps: report.metrics.requests_per_sec,
        cpu: Cpu::default(),
    }
}

/// Keywords of their own for one round's crawls, each on two sites; a file
/// of their crawl URLs for oha.
async fn crawl_targets(
    app: &TestApp,
    base: &str,
    sites: &[i64],
    round: &str,
    count: usize,
) -> tempfile_path::TempPath {
    let ids: Vec<i64> = sqlx::query_scalar(
        r#"WITH k AS (
               INSERT INTO keywords (keyword, schedule)
               SELECT 'crawl ' || $1 || ' ' || i, '0 0 0 1 1 *' FROM generate_series(1, $2) AS i
               RETURNING id),
           pairs AS (
               INSERT INTO keyword_sites (keyword_id, site_id)
               SELECT k.id, ($3::bigint[])[1 + ((k.id + d) % cardinality($3::bigint[]))::int]
               FROM k, (VALUES (0), (1)) AS o(d)
               RETURNING keyword_id)
           SELECT DISTINCT keyword_id FROM pairs"#,
    )
    .bind(round)
    .bind(count as i64)
    .bind(sites)
    .fetch_all(app.pool())
    .await
    .unwrap();
    let lines: String = ids
        .iter()
        .map(|id| format!("{base}/api/keywords/{id}/crawl\n"))
        .collect();
    tempfile_path::TempPath::write(&format!("crawl-urls-{round}"), &lines)
}

/// A file removed when dropped.
mod tempfile_path {
    use std::path::PathBuf;

    pub struct TempPath(PathBuf);

    impl TempPath {
        pub fn write(name: &str, contents: &str) -> Self {
            let path = std::env::temp_dir().join(format!(
                "api-load-{}-{name}.txt",
                uuid::Uuid::new_v4().simple()
            ));
            std::fs::write(&path, contents).unwrap();
            TempPath(path)
        }

        pub fn as_str(&self) -> &str {
            self.0.to_str().expect("a UTF-8 temp path")
        }
    }

    impl Drop for TempPath {
        fn drop(&mut self) {
            let _ = std::fs::remove_file(&self.0);
        }
    }
}

/// CPU seconds (user + system) spent so far by each party: the api
/// process, the Postgres backends of the bench's database, this process
/// (the WebSocket clients) and its reaped children (oha). Divided by the
/// requests of a phase, it is a cost per request that the other work on the
/// machine does not change much, unlike the latencies.
#[derive(Debug, Clone, Copy, Default)]
struct Cpu {
    api: f64,
    postgres: f64,
    bench: f64,
    oha: f64,
}

impl std::ops::Sub for Cpu {
    type Output = Cpu;

    fn sub(self, before: Cpu) -> Cpu {
        Cpu {
            api: self.api - before.api,
            postgres: self.postgres - before.postgres,
            bench: self.bench - before.bench,
            oha: self.oha - before.oha,
        }
    }
}

/// CPU seconds of a process so far, from /proc (0 once it is gone).
fn process_cpu(pid: i32) -> f64 {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return 0.0;
    };
    // Fields after the command (which may hold spaces): state is field 3,
    // utime and stime are fields 14 and 15.
    let after_comm = &stat[stat.rfind(')').map_or(0, |i| i + 2)..];
    let fields: Vec<&str> = after_comm.split_whitespace().collect();
    let ticks: f64 = fields[11].parse::<f64>().unwrap() + fields[12].parse::<f64>().unwrap();
    // SAFETY: sysconf has no preconditions.
    ticks / unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64
}

fn rusage_cpu(who: i32) -> f64 {
    // SAFETY: getrusage fills the struct it is given.
    let usage = unsafe {
        let mut usage: libc::rusage = std::mem::zeroed();
        libc::getrusage(who, &mut usage);
        usage
    };
    let secs = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    secs(usage.ru_utime) + secs(usage.ru_stime)
}

async fn cpu_now(api_pid: i32, pool: &sqlx::PgPool) -> Cpu {
    let backends: Vec<i32> =
        sqlx::query_scalar("SELECT pid FROM pg_stat_activity WHERE datname = current_database()")
            .fetch_all(pool)
            .await
            .unwrap();
    Cpu {
        api: process_cpu(api_pid),
        postgres: backends.into_iter().map(process_cpu).sum(),
        bench: rusage_cpu(libc::RUSAGE_SELF),
        oha: rusage_cpu(libc::RUSAGE_CHILDREN),
    }
}

fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|l| l.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_default()
}

fn row(name: &str, f: &Figures) -> String {
    let per_request = |secs: f64| secs * 1e3 / f.requests.max(1) as f64;
    format!(
        "{name:<34} p50 {:>6.2} ms  p99 {:>7.2} ms  max {:>8.2} ms  errors {:>3}/{:<6} ({:.0} req/s)\n  \
         {:<34} CPU per request: api {:.3} ms, Postgres {:.3} ms, oha {:.3} ms",
        f.p50_ms,
        f.p99_ms,
        f.max_ms,
        f.errors,
        f.requests,
        f.rps,
        "",
        per_request(f.cpu.api),
        per_request(f.cpu.postgres),
        per_request(f.cpu.oha),
    )
}

fn range(values: impl Iterator<Item = f64>) -> String {
    let values: Vec<f64> = values.collect();
    let lo = values.iter().copied().fold(f64::INFINITY, f64::min);
    let hi = values.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    format!("{lo:.2}-{hi:.2}")
}

/// A frame as a client reads it: only what the measurement needs.
#[derive(Deserialize)]
struct Frame<'a> {
    #[serde(rename = "type", borrow)]
    kind: &'a str,
    id: Option<i64>,
}

/// One client's side of the live phase.
#[derive(Default)]
struct Received {
    /// Latency of each event, in microseconds.
    latencies_us: Vec<u32>,
    lagged: usize,
}

/// When each event was published, in ns since `epoch` (0: not yet).
struct Publications {
    epoch: Instant,
    index: HashMap<i64, usize>,
    at: Vec<AtomicU64>,
}

impl Publications {
    fn since_epoch(&self) -> u64 {
        self.epoch.elapsed().as_nanos() as u64
    }
}

type LiveSocket =
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

/// Reads `ws` until `stop`, timing each event announced in `publications`.
async fn live_client(
    mut ws: LiveSocket,
    publications: Arc<Publications>,
    stop: CancellationToken,
) -> Received {
    let mut received = Received::default();
    loop {
        let message = tokio::select! {
            _ = stop.cancelled() => break,
            message = ws.next() => message,
        };
        let now = publications.since_epoch();
        let text = match message {
            Some(Ok(Message::Text(text))) => text,
            Some(Ok(_)) => continue,
            Some(Err(e)) => panic!("live client failed: {e}"),
            None => panic!("the api closed a live client"),
        };
        let frame: Frame = serde_json::from_str(text.as_str()).expect("a JSON frame");
        match (frame.kind, frame.id) {
            ("run.updated", Some(id)) => {
                let Some(&n) = publications.index.get(&id) else {
                    continue;
                };
                let at = publications.at[n].load(Ordering::Acquire);
                assert!(at > 0, "event {id} received before it was published");
                received
                    .latencies_us
                    .push((now.saturating_sub(at) / 1000) as u32);
            }
            ("lagged", _) => received.lagged += 1,
            _ => {}
        }
    }
    let _ = tokio::time::timeout(Duration::from_secs(5), ws.close(None)).await;
    received
}

/// Live-phase figures over every delivery.
struct LiveFigures {
    p50_ms: f64,
    p99_ms: f64,
    max_ms: f64,
    delivered: usize,
    expected: usize,
    lagged: usize,
    /// CPU spent on the publishing and the deliveries, by party.
    cpu: Cpu,
}

/// `runs` each publishing one state change, at `per_sec`, to `clients`
/// live clients of `base` (whose /metrics is at `metrics_base`).
#[allow(clippy::too_many_arguments)]
async fn live_round(
    api_pid: i32,
    pool: &sqlx::PgPool,
    base: &str,
    metrics_base: &str,
    publisher: &EventPublisher,
    runs: &[CrawlRun],
    clients: usize,
    per_sec: u32,
) -> LiveFigures {
    let publications = Arc::new(Publications {
        epoch: Instant::now(),
        index: runs.iter().enumerate().map(|(n, r)| (r.id, n)).collect(),
        at: runs.iter().map(|_| AtomicU64::new(0)).collect(),
    });
    let stop = CancellationToken::new();
    let url = format!(
        "ws://{}/ws?token={READ_TOKEN}",
        base.trim_start_matches("http://")
    );
    let connecting = Instant::now();
    // Connected 50 at a time, as browsers reconnecting after a deploy would.
    let clients: Vec<_> = stream::iter(0..clients)
        .map(|_| {
            let (url, publications, stop) = (url.clone(), publications.clone(), stop.clone());
            // The client's task, awaited once the events are sent.
            #[allow(clippy::async_yields_async)]
            async move {
                let (ws, _) = tokio_tungstenite::connect_async(&url)
                    .await
                    .expect("a live client connects");
                tokio::spawn(live_client(ws, publications, stop))
            }
        })
        .buffer_unordered(50)
        .collect()
        .await;
    // Every client's upgrade answered: the api counts them.
    support::eventually(
        Duration::from_secs(60),
        "every live client connected",
        || {
            let metrics_base = metrics_base.to_owned();
            let want = clients.len();
            async move {
                let text = reqwest::get(format!("{metrics_base}/metrics"))
                    .await
                    .ok()?
                    .text()
                    .await
                    .ok()?;
                let connected = text
                    .lines()
                    .find_map(|l| l.strip_prefix("crawlfleet_websocket_clients "))?
                    .trim()
                    .parse::<f64>()
                    .ok()? as usize;
                (connected >= want).then_some(())
            }
        },
    )
    .await;
    println!(
        "  {} live clients connected in {:.1} s",
        clients.len(),
        connecting.elapsed().as_secs_f64()
    );
    tokio::time::sleep(Duration::from_secs(1)).await;
    let cpu_before = cpu_now(api_pid, pool).await;
    let mut tick = tokio::time::interval(Duration::from_secs(1) / per_sec);
    for (n, run) in runs.iter().enumerate() {
        tick.tick().await;
        let mut run = run.clone();
        run.state = RunState::Running;
        publications.at[n].store(publications.since_epoch(), Ordering::Release);
        publisher.publish(&Event::run_updated(&run)).await;
    }
    // Stragglers: a delivery later than this is counted as missing.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let cpu = cpu_now(api_pid, pool).await - cpu_before;
    stop.cancel();
    let mut latencies: Vec<u32> = Vec::with_capacity(runs.len() * clients.len());
    let mut lagged = 0;
    let expected = runs.len() * clients.len();
    for client in clients {
        let got = client.await.expect("live client did not panic");
        latencies.extend(got.latencies_us);
        lagged += got.lagged;
    }
    latencies.sort_unstable();
    let at = |q: f64| {
        latencies
            .get(((latencies.len() as f64 * q) as usize).min(latencies.len().saturating_sub(1)))
            .map_or(f64::NAN, |us| *us as f64 / 1000.0)
    };
    LiveFigures {
        p50_ms: at(0.50),
        p99_ms: at(0.99),
        max_ms: latencies.last().map_or(f64::NAN, |us| *us as f64 / 1000.0),
        delivered: latencies.len(),
        expected,
        lagged,
        cpu,
    }
}

/// Ended runs of the history, newest first, one per event.
async fn runs_to_announce(pool: &sqlx::PgPool, count: usize) -> Vec<CrawlRun> {
    let mut runs: Vec<CrawlRun> = Vec::with_capacity(count);
    while runs.len() < count {
        let page = store::runs::list(
            pool,
            &RunFilter {
                state: Some(RunState::Completed),
                before: runs.last().map(|r| r.id),
                limit: (count - runs.len()).min(1000) as i64,
                ..RunFilter::default()
            },
        )
        .await
        .unwrap();
        assert!(!page.is_empty(), "the history has {count} completed runs");
        runs.extend(page);
    }
    runs
}

#[tokio::main]
async fn main() {
    let settings = Settings::from_env();
    let oha = oha();
    let open_files = crawlfleet::net::http_server::raise_open_files_limit();
    assert!(
        open_files as usize > settings.ws_clients * 2 + 256,
        "the open-file limit ({open_files}) is too low for {} live clients; raise ulimit -n",
        settings.ws_clients
    );
    let app = TestApp::spawn_with(Roles::default(), |config| {
        config.api.auth_disabled = false;
        config.api.api_tokens = vec![WRITE_TOKEN.into()];
        config.api.api_read_tokens = vec![READ_TOKEN.into()];
    })
    .await;
    let writing = Instant::now();
    let history = a_production_history(&app).await;
    println!(
        "{RUNS} runs with their attempts and {RESULTS} results written in {:.1} s",
        writing.elapsed().as_secs_f64()
    );
    // An operator expecting this many dashboards raises both caps.
    let ws_cap = (settings.ws_clients + settings.ws_clients / 10 + 16).to_string();
    let api = RoleProcess::spawn(
        "api",
        &app.config,
        &[
            ("MAX_WS_CLIENTS", ws_cap.clone()),
            ("MAX_WS_CLIENTS_PER_TOKEN", ws_cap),
        ],
    );
    let base = format!("http://{}", api.listening_on("api listening").await);
    let metrics_base = format!("http://{}", api.listening_on("api metrics listening").await);
    let requests = settings.rate * settings.seconds;
    println!(
        "api pid {}; oha {} req/s, {requests} requests per endpoint and round, {CONNECTIONS} connections; \
         load tool, clients and api share {} cores; load average {}",
        api.pid_at_start,
        settings.rate,
        std::thread::available_parallelism().map_or(0, |n| n.get()),
        load_average()
    );

    let load = Load {
        oha: &oha,
        rate: settings.rate,
        api_pid: api.pid_at_start,
        pool: app.pool(),
    };
    let runs_url = format!("{base}/api/runs");
    let results_url = format!("{base}/api/results?limit=100");
    // Warm-up, not counted: connections, caches, the first name lookups.
    let warm = settings.rate * 2;
    load.drive("GET", &runs_url, false, READ_TOKEN, warm).await;
    load.drive("GET", &results_url, false, READ_TOKEN, warm)
        .await;
    let warm_crawls = crawl_targets(&app, &base, &history.sites, "warm-up", warm as usize).await;
    load.drive("POST", warm_crawls.as_str(), true, WRITE_TOKEN, warm)
        .await;

    let mut figures: Vec<[Figures; 3]> = Vec::new();
    for round in 1..=settings.rounds {
        let crawls = crawl_targets(
            &app,
            &base,
            &history.sites,
            &format!("round-{round}"),
            settings.crawl_keywords,
        )
        .await;
        let queued_before = count_manual_runs(app.pool()).await;
        println!("round {round} (load average {})", load_average());
        let runs = load
            .drive("GET", &runs_url, false, READ_TOKEN, requests)
            .await;
        println!("  {}", row("GET /api/runs", &runs));
        let results = load
            .drive("GET", &results_url, false, READ_TOKEN, requests)
            .await;
        println!("  {}", row("GET /api/results?limit=100", &results));
        let crawl = load
            .drive("POST", crawls.as_str(), true, WRITE_TOKEN, requests)
            .await;
        println!("  {}", row("POST /api/keywords/{id}/crawl", &crawl));
        let queued = count_manual_runs(app.pool()).await - queued_before;
        println!(
            "  the crawls queued {queued} runs ({} keywords asked for at least once, two sites each)",
            queued / 2
        );
        figures.push([runs, results, crawl]);
    }
    println!(
        "over {} rounds (ranges; goal for reads: p99 < {READ_GOAL_MS} ms):",
        settings.rounds
    );
    for (n, name) in [
        "GET /api/runs",
        "GET /api/results?limit=100",
        "POST /api/keywords/{id}/crawl",
    ]
    .iter()
    .enumerate()
    {
        println!(
            "  {name:<34} p50 {} ms  p99 {} ms  max {} ms  errors {}",
            range(figures.iter().map(|f| f[n].p50_ms)),
            range(figures.iter().map(|f| f[n].p99_ms)),
            range(figures.iter().map(|f| f[n].max_ms)),
            figures.iter().map(|f| f[n].errors).sum::<usize>()
        );
    }

    let publisher = EventPublisher::new(
        crawlfleet::queue::connect(&app.config.common.redis_url)
            .await
            .unwrap(),
        &app.config.common.queue_name,
    );
    let events = (settings.ws_events_per_sec * settings.ws_seconds) as usize;
    let announced = runs_to_announce(app.pool(), events * settings.rounds).await;
    let mut live = Vec::new();
    for (round, runs) in announced.chunks(events).enumerate() {
        println!(
            "live round {} ({events} events at {}/s to {} clients; load average {})",
            round + 1,
            settings.ws_events_per_sec,
            settings.ws_clients,
            load_average()
        );
        let got = live_round(
            api.pid_at_start,
            app.pool(),
            &base,
            &metrics_base,
            &publisher,
            runs,
            settings.ws_clients,
            settings.ws_events_per_sec,
        )
        .await;
        let per_delivery = |secs: f64| secs * 1e6 / got.delivered.max(1) as f64;
        println!(
            "  event latency p50 {:.2} ms  p99 {:.2} ms  max {:.2} ms; {} of {} delivered, {} lagged notices\n  \
             CPU per delivery: api {:.1} µs, the clients (this process) {:.1} µs",
            got.p50_ms,
            got.p99_ms,
            got.max_ms,
            got.delivered,
            got.expected,
            got.lagged,
            per_delivery(got.cpu.api),
            per_delivery(got.cpu.bench),
        );
        live.push(got);
    }
    println!(
        "live over {} rounds (ranges; goal p99 < {EVENT_GOAL_MS} ms): p50 {} ms  p99 {} ms  max {} ms",
        settings.rounds,
        range(live.iter().map(|f| f.p50_ms)),
        range(live.iter().map(|f| f.p99_ms)),
        range(live.iter().map(|f| f.max_ms)),
    );

    assert_eq!(api.terminate(Duration::from_secs(30)).await, 0);
    app.stop().await;
}

async fn count_manual_runs(pool: &sqlx::PgPool) -> i64 {
    sqlx::query_scalar("SELECT count(*) FROM crawl_runs WHERE trigger = 'manual'")
        .fetch_one(pool)
        .await
        .unwrap()
}
