//! Selectors whose matching costs time exponential in their nesting
//! (`:is(:is(.zz *) *)` walks every ancestor of every ancestor) against one
//! crawlfleet process running api and worker together (`--process=all`):
//! previews and crawls of such a site fail over budget within it, while
//! `/health` and the API keep answering, and the process still stops on
//! SIGTERM.

use std::{
    sync::{
        Arc,
        atomic::{AtomicBool, Ordering},
    },
    thread::JoinHandle,
    time::{Duration, Instant},
};

use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::support::{ON_DEMAND, RoleProcess, Roles, TestApp, browser_slots};

/// `:is(` nested `depth` deep, a descendant combinator at each level, over
/// a class no element has: the matcher tries every path up the tree.
fn worst_case(depth: usize) -> String {
    let mut selector = ".zz *".to_owned();
    for _ in 1..depth {
        selector = format!(":is({selector}) *");
    }
    format!(":is({selector})")
}

/// The deepest nesting the api accepts: the worst a site may be given.
const NESTING: usize = 4;
/// Elements on the fixture's page, each inside the one before: at this
/// depth the selector above takes minutes unbounded (60 elements: 0.1 s in
/// a release build, 2 s in a debug one).
const PAGE_DEPTH: usize = 200;
/// Previews at once: more than the process's runtime has threads (2 cores).
const PREVIEWS: usize = 4;

/// An http site reading the fixture's deep page with the worst selector.
fn costly_site(app: &TestApp, name: &str) -> Value {
    json!({
        "name": name,
        "render": "http",
        "search_url": format!("{}/deep?depth={PAGE_DEPTH}&q={{keyword}}", app.site.base_url()),
        "item_selector": worst_case(NESTING),
        "fields": {"title": {"selector": "a.title"}},
        "max_pages": 1,
    })
}

/// GETs of `urls`, in turn every 50 ms, from a thread and runtime of their
/// own (a stalled process cannot stall them): each answer's latency, or why
/// there was none.
struct Poller {
    stop: Arc<AtomicBool>,
    thread: JoinHandle<Vec<Result<Duration, String>>>,
}

impl Poller {
    fn start(urls: Vec<String>) -> Poller {
        let stop = Arc::new(AtomicBool::new(false));
        let stopping = stop.clone();
        let thread = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            runtime.block_on(async move {
                let client = reqwest::Client::builder()
                    .timeout(Duration::from_secs(2))
                    .build()
                    .unwrap();
                let mut seen = Vec::new();
                for url in urls.iter().cycle() {
                    if stopping.load(Ordering::Relaxed) {
                        break;
                    }
                    let started = Instant::now();
                    let answer = match client.get(url).send().await {
                        Ok(r) if r.status() == StatusCode::OK => Ok(started.elapsed()),
                        Ok(r) => Err(format!("{url}: {}", r.status())),
                        Err(e) => Err(format!("{url}: {e}")),
                    };
                    seen.push(answer);
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
                seen
            })
        });
        Poller { stop, thread }
    }

    /// Stops polling; every answer's latency (panics on a poll unanswered).
    fn finish(self) -> Vec<Duration> {
        self.stop.store(true, Ordering::Relaxed);
        let seen = self.thread.join().expect("the poller ran");
        let failed: Vec<&String> = seen.iter().filter_map(|s| s.as_ref().err()).collect();
        assert!(
            failed.is_empty(),
            "{} of {} polls unanswered, e.g. {:?}",
            failed.len(),
            seen.len(),
            failed.first()
        );
        let mut latencies: Vec<Duration> = seen.into_iter().map(Result::unwrap).collect();
        latencies.sort();
        latencies
    }
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

#[tokio::test]
async fn worst_case_selectors_fail_over_budget_while_health_and_the_api_keep_answering() {
    // The process runs a worker too; no browser is opened (http sites).
    let _slot = browser_slots(1).await;
    let app = TestApp::spawn_without_browsers(Roles::default(), |_| {}).await;
    let fleet = RoleProcess::spawn("all", &app.config, &[]);
    let base = format!("http://{}", fleet.listening_on("api listening").await);
    fleet
        .log_line("worker started", Duration::from_secs(60))
        .await;
    let client = reqwest::Client::builder()
        .timeout(Duration::from_secs(60))
        .build()
        .unwrap();

    let poller = Poller::start(vec![format!("{base}/health"), format!("{base}/api/sites")]);
    let started = Instant::now();
    let previews: Vec<_> = (0..PREVIEWS)
        .map(|i| {
            let body =
                json!({"site": costly_site(&app, &format!("costly-{i}")), "keyword": "lamp"});
            let request = client
                .post(format!("{base}/api/sites/preview"))
                .json(&body)
                .send();
            tokio::spawn(async move {
                let answer = request.await.map_err(|e| e.to_string())?;
                let status = answer.status();
                let body: Value = answer.json().await.map_err(|e| e.to_string())?;
                Ok::<_, String>((status, body, started.elapsed()))
            })
        })
        .collect();
    let mut answers = Vec::new();
    for preview in previews {
        answers.push(preview.await.unwrap());
    }
    let latencies = poller.finish();
    let (median, max) = (
        latencies[latencies.len() / 2],
        latencies[latencies.len() - 1],
    );
    println!(
        "while {PREVIEWS} worst-case previews ran: {} polls of /health and /api/sites, \
         median {:.1} ms, max {:.1} ms",
        latencies.len(),
        ms(median),
        ms(max)
    );
    // Unanswered for the whole run when reading ran on the runtime; the
    // margin is for a loaded machine.
    assert!(max < Duration::from_millis(1500), "max latency {max:?}");
    for answer in answers {
        let (status, body, took) = answer.expect("the preview was answered");
        assert_eq!(status, StatusCode::OK, "{body}");
        assert_eq!(body["refusal"]["kind"], "extraction_over_budget", "{body}");
        let message = body["refusal"]["message"].as_str().unwrap();
        assert!(message.contains("over its budget of 2000 ms"), "{message}");
        println!("preview answered after {:.0} ms", ms(took));
        assert!(took < Duration::from_secs(20), "{took:?}");
    }

    // A saved site like it: its crawl fails over budget at its first
    // attempt (the same selector would fail the same way again).
    let poller = Poller::start(vec![format!("{base}/health")]);
    let site = app.create_site(costly_site(&app, "costly-saved")).await;
    let keyword = app.create_keyword("lamp", &[site], ON_DEMAND).await;
    let run = app.crawl(keyword).await[0];
    let run = app
        .wait_for_run(run, &["failed", "completed"], Duration::from_secs(60))
        .await;
    assert_eq!(run["state"], "failed", "{run}");
    assert_eq!(run["error_kind"], "extraction_over_budget", "{run}");
    assert_eq!(run["attempt"], 1, "not retried: {run}");
    let latencies = poller.finish();
    println!(
        "while the saved site's crawl ran: max /health latency {:.1} ms",
        ms(latencies[latencies.len() - 1])
    );

    assert_eq!(
        fleet.terminate(Duration::from_secs(30)).await,
        0,
        "stops on SIGTERM"
    );
    app.stop().await;
}
