//! crawlfleet against Crawlee's PuppeteerCrawler, side by side on one
//! workload (BENCH_WORKLOAD), in the system Chromium:
//!
//! - `search`: the demo shop's JavaScript-rendered search, paged (keywords x 3
//!   pages, 5 products a page);
//! - `detail`: the same list pages, then each product's own page, read for
//!   its title and price (crawlfleet: the site's `detail` setting; Crawlee:
//!   `enqueueLinks` into a detail handler). After the rounds of a
//!   concurrency, each tool crawls its last round's keywords again with
//!   nothing changed, and the product pages each asks for are counted at the
//!   shop (crawlfleet reads a product's page again only when its list values
//!   changed; a new Crawlee run keeps no memory of the last).
//!
//! For each concurrency,
//! rounds alternate which tool goes first; each batch is measured as pages
//! per second, CPU seconds per page of the tool's whole process tree (the
//! worker and every Chrome process; node and its Chrome) and the tree's
//! peak PSS.
//!
//! Both tools stay up between batches, as in production: crawlfleet's api and
//! scheduler run here, its worker is a process of its own (release build) and
//! every crawl is asked for through the REST API; Crawlee keeps its browser
//! (`keepAlive`). A warm-up batch starts each tool's browsers first.
//!
//!   scripts/bench-peers     (installs the peer, then runs this)
//!
//! Pages are counted at the shop for both tools (list pages and product
//! pages alike).
//!
//! Settings (environment): PEERS_DIR (where scripts/bench-peers installed
//! Crawlee and its scripts; required), BENCH_WORKLOAD (search), BENCH_CONCURRENCY (1,2,4),
//! BENCH_ROUNDS (3), BENCH_KEYWORDS (20), BENCH_DELAY_MS (100: how long the
//! page's script waits before it fetches its results).

#[allow(dead_code, unused_imports)]
#[path = "../../tests/it/support/mod.rs"]
mod support;

mod crawlee;
mod fleet;
mod machine;

use std::{future::Future, path::PathBuf};

use crawlfleet::ops::process_tree as tree;
use support::{Roles, TestApp};

const PAGES_PER_KEYWORD: u64 = 3;
const ITEMS_PER_PAGE: u64 = 5;

fn setting<T: std::str::FromStr>(name: &str, default: T) -> T {
    std::env::var(name)
        .ok()
        .map(|v| {
            v.parse()
                .unwrap_or_else(|_| panic!("{name}={v:?} is not understood"))
        })
        .unwrap_or(default)
}

/// What both tools read.
#[derive(Clone, Copy, PartialEq)]
enum Workload {
    /// List pages only.
    Search,
    /// List pages, then every product's page.
    Detail,
}

impl Workload {
    fn from_setting() -> Workload {
        match setting::<String>("BENCH_WORKLOAD", "search".into()).as_str() {
            "search" => Workload::Search,
            "detail" => Workload::Detail,
            other => panic!("BENCH_WORKLOAD={other:?}: search or detail"),
        }
    }

    fn name(self) -> &'static str {
        match self {
            Workload::Search => "search",
            Workload::Detail => "detail",
        }
    }

    fn peer_script(self) -> &'static str {
        match self {
            Workload::Search => "crawlee_shop.mjs",
            Workload::Detail => "crawlee_detail.mjs",
        }
    }

    /// Product pages a batch of `keywords` reads when every product is new.
    fn details(self, keywords: usize) -> u64 {
        match self {
            Workload::Search => 0,
            Workload::Detail => keywords as u64 * PAGES_PER_KEYWORD * ITEMS_PER_PAGE,
        }
    }
}

#[derive(Clone, Copy, PartialEq)]
enum Tool {
    Crawlee,
    Crawlfleet,
}

impl Tool {
    fn name(self) -> &'static str {
        match self {
            Tool::Crawlee => "crawlee",
            Tool::Crawlfleet => "crawlfleet",
        }
    }
}

/// One batch, measured.
struct Figures {
    tool: Tool,
    concurrency: usize,
    pages: u64,
    secs: f64,
    cpu_secs: f64,
    peak_pss_mib: f64,
    /// crawlfleet's own count (`crawlfleet_browser_commands_per_page`).
    commands_per_page: Option<f64>,
}

impl Figures {
    fn pages_per_sec(&self) -> f64 {
        self.pages as f64 / self.secs
    }

    fn cpu_per_page(&self) -> f64 {
        self.cpu_secs / self.pages as f64
    }
}

/// A batch as the tool itself reports it: pages read and failed, items
/// found, and the seconds from the first page asked for to the last done.
#[derive(serde::Deserialize)]
struct Batch {
    pages: u64,
    failed: u64,
    items: u64,
    secs: f64,
}

/// Runs `batch` while measuring the CPU time and peak PSS of `root`'s tree.
async fn measured(root: i32, batch: impl Future<Output = Batch>) -> (Batch, f64, f64) {
    let cpu_before = tree::cpu_seconds(root);
    let pss = tree::PeakPss::start(root);
    let done = batch.await;
    let peak = pss.stop(root);
    (done, tree::cpu_seconds(root) - cpu_before, peak)
}

fn peer_urls(base: &str, names: &[String], delay_ms: u64) -> Vec<String> {
    names
        .iter()
        .flat_map(|name| {
            (1..=PAGES_PER_KEYWORD).map(move |page| {
                format!("{base}/js-search?q={name}&page={page}&delay_ms={delay_ms}")
            })
        })
        .collect()
}

fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    let mid = values.len() / 2;
    if values.len() % 2 == 1 {
        values[mid]
    } else {
        (values[mid - 1] + values[mid]) / 2.0
    }
}

#[tokio::main]
async fn main() {
    let peers_dir = PathBuf::from(
        std::env::var("PEERS_DIR").expect("PEERS_DIR: run this through scripts/bench-peers"),
    );
    let concurrencies: Vec<usize> = setting::<String>("BENCH_CONCURRENCY", "1,2,4".into())
        .split(',')
        .map(|c| c.trim().parse().expect("BENCH_CONCURRENCY: numbers"))
        .collect();
    let rounds: usize = setting("BENCH_ROUNDS", 3);
    let keywords: usize = setting("BENCH_KEYWORDS", 20);
    let delay_ms: u64 = setting("BENCH_DELAY_MS", 100);
    let workload = Workload::from_setting();

    machine::print(&peers_dir);
    println!(
        "workload    {}: {keywords} keywords x {PAGES_PER_KEYWORD} pages of /js-search (delay_ms={delay_ms}){}, \
{rounds} rounds per concurrency, order alternating\n",
        workload.name(),
        match workload {
            Workload::Search => String::new(),
            Workload::Detail => format!(" and their {} product pages", workload.details(keywords)),
        }
    );
    let app = TestApp::spawn_with(Roles::scheduler_only(), |c| {
        // Production's pace of dispatch, not the tests' quicker one.
        c.scheduler.dispatch_interval_ms = 250;
    })
    .await;
    let site = match workload {
        Workload::Search => fleet::demo_shop_site(&app, delay_ms).await,
        Workload::Detail => fleet::demo_catalog_site(&app, delay_ms).await,
    };
    let base = app.site.base_url();

    println!(
        "{:<11} {:>3} {:>5} {:>6} {:>8} {:>8} {:>11} {:>9} {:>12}",
        "tool", "c", "round", "pages", "secs", "pages/s", "cpu-s/page", "peak MiB", "commands/p"
    );
    let mut all: Vec<Figures> = Vec::new();
    let mut reruns: Vec<String> = Vec::new();
    for &concurrency in &concurrencies {
        let worker = fleet::worker(&app, concurrency);
        let metrics = worker.listening_on("health and metrics listening").await;
        let mut peer = crawlee::Crawlee::start(&peers_dir, workload.peer_script(), concurrency);

        let warm: Vec<String> = (0..concurrency.max(2))
            .map(|i| format!("warm-c{concurrency}-{i}"))
            .collect();
        let warm_ids = fleet::keywords(&app, site, &warm).await;
        fleet::crawl(&app, &warm_ids).await;
        peer.crawl(&peer_urls(&base, &warm, delay_ms)).await;

        // Each tool's last batch, crawled again at the end with nothing changed.
        let mut last_names: Vec<String> = Vec::new();
        let mut last_ids: Vec<i64> = Vec::new();
        for round in 0..rounds {
            let order = if round % 2 == 0 {
                [Tool::Crawlee, Tool::Crawlfleet]
            } else {
                [Tool::Crawlfleet, Tool::Crawlee]
            };
            for tool in order {
                let names: Vec<String> = (0..keywords)
                    .map(|i| format!("{}-c{concurrency}-r{round}-{i}", tool.name()))
                    .collect();
                const COMMANDS: &str = "crawlfleet_browser_commands_per_page";
                let commands_before = fleet::histogram(&app, metrics, COMMANDS).await;
                let shop_before = ShopCount::read(&app);
                let (batch, cpu_secs, peak_pss_mib) = match tool {
                    Tool::Crawlee => {
                        let urls = peer_urls(&base, &names, delay_ms);
                        last_names = names;
                        measured(peer.pid(), peer.crawl(&urls)).await
                    }
                    Tool::Crawlfleet => {
                        let ids = fleet::keywords(&app, site, &names).await;
                        let measured = measured(worker.pid(), fleet::crawl(&app, &ids)).await;
                        last_ids = ids;
                        measured
                    }
                };
                let shop = ShopCount::read(&app).since(&shop_before);
                let expected_pages = keywords as u64 * PAGES_PER_KEYWORD;
                assert_eq!(batch.failed, 0, "{}: no page failed", tool.name());
                assert_eq!(
                    (batch.pages, shop.lists),
                    (expected_pages, expected_pages),
                    "{}: every list page read, once",
                    tool.name()
                );
                assert_eq!(
                    batch.items,
                    expected_pages * ITEMS_PER_PAGE,
                    "{}: every item read",
                    tool.name()
                );
                assert_eq!(
                    shop.details,
                    workload.details(keywords),
                    "{}: every product page read, once",
                    tool.name()
                );
                let commands_after = fleet::histogram(&app, metrics, COMMANDS).await;
                let figures = Figures {
                    tool,
                    concurrency,
                    pages: shop.lists + shop.details,
                    secs: batch.secs,
                    cpu_secs,
                    peak_pss_mib,
                    commands_per_page: (tool == Tool::Crawlfleet).then(|| {
                        (commands_after.0 - commands_before.0)
                            / (commands_after.1 - commands_before.1)
                    }),
                };
                println!(
                    "{:<11} {:>3} {:>5} {:>6} {:>8.2} {:>8.2} {:>11.3} {:>9.0} {:>12}",
                    tool.name(),
                    concurrency,
                    round + 1,
                    figures.pages,
                    figures.secs,
                    figures.pages_per_sec(),
                    figures.cpu_per_page(),
                    figures.peak_pss_mib,
                    figures
                        .commands_per_page
                        .map_or_else(|| "-".to_owned(), |c| format!("{c:.1}"))
                );
                all.push(figures);
            }
        }
        if workload == Workload::Detail {
            let before = ShopCount::read(&app);
            let again = peer.crawl(&peer_urls(&base, &last_names, delay_ms)).await;
            let crawlee = ShopCount::read(&app).since(&before);
            let before = ShopCount::read(&app);
            let ours = fleet::crawl(&app, &last_ids).await;
            let crawlfleet = ShopCount::read(&app).since(&before);
            reruns.push(format!(
                "{concurrency:>3} {:>14} {:>14} {:>10.2} {:>10.2}",
                crawlfleet.details, crawlee.details, ours.secs, again.secs
            ));
        }
        let left = tree::members(peer.pid());
        peer.stop().await;
        kill_all(&left);
        assert_eq!(
            worker.terminate(std::time::Duration::from_secs(30)).await,
            0,
            "the worker drains and exits 0"
        );
    }
    println!(
        "\nload        {} (1, 5, 15 min) after the last round",
        machine::load()
    );
    summary(&all, &concurrencies);
    if !reruns.is_empty() {
        println!(
            "\nthe last batch crawled again, nothing changed: product pages asked for, and seconds"
        );
        println!(
            "{:>3} {:>14} {:>14} {:>10} {:>10}",
            "c", "crawlfleet", "crawlee", "secs cf", "crawlee"
        );
        for line in reruns {
            println!("{line}");
        }
    }
    app.stop().await;
}

/// Pages the shop served: search pages and product pages.
struct ShopCount {
    lists: u64,
    details: u64,
}

impl ShopCount {
    fn read(app: &TestApp) -> ShopCount {
        ShopCount {
            lists: app.site.hits("/js-search"),
            details: app.site.hits("/product/"),
        }
    }

    fn since(self, before: &ShopCount) -> ShopCount {
        ShopCount {
            lists: self.lists - before.lists,
            details: self.details - before.details,
        }
    }
}

/// Whatever of the peer's tree outlived it (a Chrome its node left behind).
fn kill_all(pids: &[i32]) {
    for &pid in pids {
        // SAFETY: kill(2); a pid already gone only makes it fail.
        unsafe { libc::kill(pid, libc::SIGKILL) };
    }
}

/// Medians per concurrency, and crawlfleet's figures over Crawlee's.
fn summary(all: &[Figures], concurrencies: &[usize]) {
    println!("\nmedians over the rounds; ratio = crawlfleet / crawlee");
    println!(
        "{:>3} {:>10} {:>10} {:>7}   {:>10} {:>10} {:>7}   {:>9} {:>9} {:>7}",
        "c",
        "pages/s cf",
        "crawlee",
        "ratio",
        "cpu-s/p cf",
        "crawlee",
        "ratio",
        "PSS cf",
        "crawlee",
        "ratio"
    );
    for &c in concurrencies {
        let of = |tool: Tool, figure: fn(&Figures) -> f64| {
            median(
                all.iter()
                    .filter(|f| f.tool == tool && f.concurrency == c)
                    .map(figure)
                    .collect(),
            )
        };
        let speed = (
            of(Tool::Crawlfleet, Figures::pages_per_sec),
            of(Tool::Crawlee, Figures::pages_per_sec),
        );
        let cpu = (
            of(Tool::Crawlfleet, Figures::cpu_per_page),
            of(Tool::Crawlee, Figures::cpu_per_page),
        );
        let pss = (
            of(Tool::Crawlfleet, |f| f.peak_pss_mib),
            of(Tool::Crawlee, |f| f.peak_pss_mib),
        );
        println!(
            "{c:>3} {:>10.2} {:>10.2} {:>6.2}x   {:>10.3} {:>10.3} {:>6.2}x   {:>9.0} {:>9.0} {:>6.2}x",
            speed.0,
            speed.1,
            speed.0 / speed.1,
            cpu.0,
            cpu.1,
            cpu.0 / cpu.1,
            pss.0,
            pss.1,
            pss.0 / pss.1
        );
    }
}
