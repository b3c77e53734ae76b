//! Prometheus metrics of every role, in one registry per process, rendered in
//! the text format at `/metrics` (api port; scheduler and worker side port).
//! Names follow Prometheus conventions: `crawlfleet_` prefix, `_total`
//! counters, `_seconds` durations.

use std::sync::LazyLock;

use prometheus::{
    Counter, Encoder, Gauge, GaugeVec, Histogram, HistogramOpts, HistogramVec, IntCounter,
    IntCounterVec, IntGauge, IntGaugeVec, Opts, Registry, TextEncoder,
};

use crate::domain::run::RunState;

/// Every metric crawlfleet exports.
pub struct Metrics {
    pub registry: Registry,
    // api
    pub http_requests: IntCounterVec,
    pub http_request_duration: HistogramVec,
    pub queue_runs: IntGaugeVec,
    pub queue_oldest_queued_age: IntGauge,
    pub queue_workers: IntGauge,
    pub site_health: IntGaugeVec,
    pub cloudwatch_publishes: IntCounter,
    pub cloudwatch_failures: IntCounter,
    pub metrics_gauge_refreshes: IntCounter,
    pub websocket_clients: IntGauge,
    pub websocket_refusals: IntCounterVec,
    // every process's HTTP server
    pub http_connections_open: IntGauge,
    pub http_connections_over_cap: IntCounterVec,
    pub http_client_refusals: IntCounterVec,
    pub http_connections_closed: IntCounterVec,
    // worker
    pub runs_finished: IntCounterVec,
    pub page_fetch_duration: HistogramVec,
    pub pages_fetched: IntCounter,
    pub browser_commands_per_page: Histogram,
    pub worker_tree_cpu: Counter,
    pub page_cpu: Gauge,
    pub stuck_detections: IntCounterVec,
    pub retries: IntCounterVec,
    pub browser_sessions_open: IntGauge,
    pub browser_restarts: IntCounterVec,
    pub rate_limit_wait: HistogramVec,
    pub site_refusals: IntCounterVec,
    /// A site's pages and refusals through each proxy, and which are retired
    /// (labelled by site and the proxy's `host:port`: no credentials).
    pub proxy_pages: IntCounterVec,
    pub proxy_refusals: IntCounterVec,
    pub proxy_retired: IntGaugeVec,
    pub refused_targets: IntCounter,
    pub robots_fetches: IntCounterVec,
    pub robots_disallowed: IntCounterVec,
    pub robots_crawl_delay: GaugeVec,
    pub browser_connections: IntCounterVec,
    /// Requests of browser pages not made (`domain::site::ResourceKind`).
    pub browser_requests_blocked: IntCounterVec,
    /// Every bound of what a crawl stores or an answer holds, as it bites
    /// (`domain::bounds::Bound`): on the worker and the api alike.
    pub bounds_applied: IntCounterVec,
    // scheduler
    pub dispatch_window: IntGaugeVec,
    pub dispatched: IntCounter,
    pub watchdog_actions: IntCounterVec,
    pub scheduled_runs: IntCounterVec,
    pub webhook_deliveries: IntCounterVec,
    pub webhook_attempt_duration: HistogramVec,
    pub webhook_endpoints_disabled: IntCounter,
    pub webhook_pending: IntGauge,
    pub webhook_oldest_due_age: IntGauge,
}

fn counter_vec(registry: &Registry, name: &str, help: &str, labels: &[&str]) -> IntCounterVec {
    let metric = IntCounterVec::new(Opts::new(name, help), labels).expect("valid metric");
    registry
        .register(Box::new(metric.clone()))
        .expect("registered once");
    metric
}

fn counter(registry: &Registry, name: &str, help: &str) -> IntCounter {
    let metric = IntCounter::new(name, help).expect("valid metric");
    registry
        .register(Box::new(metric.clone()))
        .expect("registered once");
    metric
}

fn gauge(registry: &Registry, name: &str, help: &str) -> IntGauge {
    let metric = IntGauge::new(name, help).expect("valid metric");
    registry
        .register(Box::new(metric.clone()))
        .expect("registered once");
    metric
}

fn gauge_vec(registry: &Registry, name: &str, help: &str, labels: &[&str]) -> IntGaugeVec {
    let metric = IntGaugeVec::new(Opts::new(name, help), labels).expect("valid metric");
    registry
        .register(Box::new(metric.clone()))
        .expect("registered once");
    metric
}

fn registered<M: prometheus::core::Collector + Clone + 'static>(
    registry: &Registry,
    metric: M,
) -> M {
    registry
        .register(Box::new(metric.clone()))
        .expect("registered once");
    metric
}

fn histogram_vec(
    registry: &Registry,
    name: &str,
    help: &str,
    labels: &[&str],
    buckets: Vec<f64>,
) -> HistogramVec {
    let metric = HistogramVec::new(HistogramOpts::new(name, help).buckets(buckets), labels)
        .expect("valid metric");
    registry
        .register(Box::new(metric.clone()))
        .expect("registered once");
    metric
}

impl Metrics {
    fn new() -> Self {
        let r = Registry::new();
        Metrics {
            http_requests: counter_vec(
                &r,
                "crawlfleet_http_requests_total",
                "HTTP requests by route and status.",
                &["method", "route", "status"],
            ),
            http_request_duration: histogram_vec(
                &r,
                "crawlfleet_http_request_duration_seconds",
                "HTTP request latency by route.",
                &["method", "route"],
                vec![
                    0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0,
                ],
            ),
            site_health: gauge_vec(
                &r,
                "crawlfleet_site_health",
                "Each site's status (api, from Postgres): 2 healthy, 1 degraded (runs below \
                 its expectations), 0 failing or blocked; no sample before a run ended.",
                &["site"],
            ),
            queue_runs: gauge_vec(
                &r,
                "crawlfleet_queue_runs",
                "Runs by queue state (api, from Postgres).",
                &["state"],
            ),
            queue_oldest_queued_age: gauge(
                &r,
                "crawlfleet_queue_oldest_queued_age_seconds",
                "Age of the oldest queued run.",
            ),
            queue_workers: gauge(
                &r,
                "crawlfleet_queue_workers",
                "Workers seen in the last minute.",
            ),
            cloudwatch_publishes: counter(
                &r,
                "crawlfleet_cloudwatch_publishes_total",
                "Scaling metric puts that succeeded.",
            ),
            cloudwatch_failures: counter(
                &r,
                "crawlfleet_cloudwatch_publish_failures_total",
                "Scaling metric puts that failed or timed out.",
            ),
            metrics_gauge_refreshes: counter(
                &r,
                "crawlfleet_metrics_gauge_refreshes_total",
                "Times the api read its /metrics gauges (queue, site health) from Postgres: at most once per API_METRICS_REFRESH_SECS, however often it is scraped.",
            ),
            websocket_clients: gauge(
                &r,
                "crawlfleet_websocket_clients",
                "WebSocket clients connected.",
            ),
            websocket_refusals: counter_vec(
                &r,
                "crawlfleet_websocket_refusals_total",
                "WebSocket clients refused with 503, by the cap that was full (all, token).",
                &["cap"],
            ),
            http_connections_open: gauge(
                &r,
                "crawlfleet_http_connections_open",
                "HTTP connections open (upgraded WebSocket connections not included).",
            ),
            http_connections_over_cap: counter_vec(
                &r,
                "crawlfleet_http_connections_over_cap_total",
                "Connections that came past the open slots (MAX_CONNECTIONS less RESERVED_CONNECTIONS): \
                 served for valid tokens and the probes (tokens_only), for the probes only, or closed.",
                &["outcome"],
            ),
            http_client_refusals: counter_vec(
                &r,
                "crawlfleet_http_client_refusals_total",
                "Requests refused with 429 for a per-client limit: connections \
                 (MAX_CONNECTIONS_PER_CLIENT, no token) or requests (MAX_REQUESTS_PER_CLIENT).",
                &["limit"],
            ),
            http_connections_closed: counter_vec(
                &r,
                "crawlfleet_http_connections_closed_total",
                "Connections the server closed while they served nothing: idle past \
                 HTTP_IDLE_TIMEOUT_SECS (idle), or given up by a client at its cap for a new one (replaced).",
                &["reason"],
            ),
            runs_finished: counter_vec(
                &r,
                "crawlfleet_runs_finished_total",
                "Attempts ended, by resulting run state and site.",
                &["state", "site"],
            ),
            page_fetch_duration: histogram_vec(
                &r,
                "crawlfleet_page_fetch_duration_seconds",
                "Time to load and read one results page, by site.",
                &["site"],
                vec![0.1, 0.25, 0.5, 1.0, 2.0, 5.0, 10.0, 30.0, 60.0, 120.0],
            ),
            pages_fetched: counter(
                &r,
                "crawlfleet_pages_fetched_total",
                "Results pages fetched (any outcome), every site and mode.",
            ),
            browser_commands_per_page: registered(
                &r,
                Histogram::with_opts(
                    HistogramOpts::new(
                        "crawlfleet_browser_commands_per_page",
                        "DevTools commands a browser page took, the crawl's own set-up \
                         counted with its first page.",
                    )
                    .buckets(vec![
                        1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 8.0, 10.0, 15.0, 20.0, 30.0,
                    ]),
                )
                .expect("valid metric"),
            ),
            worker_tree_cpu: registered(
                &r,
                Counter::new(
                    "crawlfleet_worker_tree_cpu_seconds_total",
                    "CPU time of the worker and everything it runs (every Chrome \
                     process), sampled every 10 s.",
                )
                .expect("valid metric"),
            ),
            page_cpu: registered(
                &r,
                Gauge::new(
                    "crawlfleet_page_cpu_seconds",
                    "CPU seconds of the worker's whole process tree per page fetched, over \
                     the last 10 s that fetched pages.",
                )
                .expect("valid metric"),
            ),
            stuck_detections: counter_vec(
                &r,
                "crawlfleet_stuck_detections_total",
                "Page requests stopped as stuck, by site.",
                &["site"],
            ),
            retries: counter_vec(
                &r,
                "crawlfleet_retries_total",
                "Failed attempts queued again, by site.",
                &["site"],
            ),
            browser_sessions_open: gauge(
                &r,
                "crawlfleet_browser_sessions_open",
                "Browser contexts open: one per browser crawl in progress.",
            ),
            browser_restarts: counter_vec(
                &r,
                "crawlfleet_browser_restarts_total",
                "Browser contexts of hung or crashed pages ended (session), and Chrome restarts after it died (chrome).",
                &["what"],
            ),
            rate_limit_wait: histogram_vec(
                &r,
                "crawlfleet_rate_limit_wait_seconds",
                "Time a page request waited for its site's fleet-wide rate limit, by site.",
                &["site"],
                vec![
                    0.0, 0.05, 0.1, 0.25, 0.5, 1.0, 2.0, 5.0, 10.0, 30.0, 60.0, 300.0,
                ],
            ),
            site_refusals: counter_vec(
                &r,
                "crawlfleet_site_refusals_total",
                "Pages a site refused (429, 503, blocked selector), slowing it fleet-wide.",
                &["site", "reason"],
            ),
            proxy_pages: counter_vec(
                &r,
                "crawlfleet_proxy_pages_total",
                "Pages read through a site's proxy, by site and proxy host:port.",
                &["site", "proxy"],
            ),
            proxy_refusals: counter_vec(
                &r,
                "crawlfleet_proxy_refusals_total",
                "Refusals (429, 403, 503, blocked page, failed connection) through a site's proxy, which retire it for a back-off.",
                &["site", "proxy"],
            ),
            proxy_retired: gauge_vec(
                &r,
                "crawlfleet_proxy_retired",
                "1 while this worker last saw the site's proxy retired (it drew a refusal), 0 once a page went through it.",
                &["site", "proxy"],
            ),
            refused_targets: counter(
                &r,
                "crawlfleet_refused_targets_total",
                "Requests not made because the target is private or a metadata address.",
            ),
            robots_fetches: counter_vec(
                &r,
                "crawlfleet_robots_fetches_total",
                "robots.txt files fetched (once per origin per ROBOTS_CACHE_SECS), by outcome: \
                 served, missing (4xx: everything allowed), unreadable (5xx, 429, no answer: \
                 everything allowed, asked again soon).",
                &["outcome"],
            ),
            robots_disallowed: counter_vec(
                &r,
                "crawlfleet_robots_disallowed_total",
                "Pages not fetched because the site's robots.txt disallows them, by site.",
                &["site"],
            ),
            robots_crawl_delay: {
                let gauge = GaugeVec::new(
                    Opts::new(
                        "crawlfleet_robots_crawl_delay_seconds",
                        "The robots.txt Crawl-delay pacing a site fleet-wide, stricter than its \
                         own max_requests_per_sec, as of its last crawl on this worker (0: none).",
                    ),
                    &["site"],
                )
                .expect("valid metric");
                r.register(Box::new(gauge.clone())).expect("unique metric");
                gauge
            },
            bounds_applied: counter_vec(
                &r,
                "crawlfleet_bounds_applied_total",
                "Bounds that bit, by bound: field_chars (a field value cut), page_items (a page's \
                 items past the bound dropped), run_items (a run stopped paging at its bound), \
                 page_bytes (a page refused as too large), url_scheme (a URL that is not http(s) \
                 dropped), answer_bytes (an API listing cut at its byte budget).",
                &["bound"],
            ),
            browser_connections: counter_vec(
                &r,
                "crawlfleet_browser_connections_total",
                "Connections Chrome asked the worker's relay for, by outcome: opened, refused \
                 (the SSRF guard), unresolvable, failed; sunk: Chrome's own services, answered \
                 without a lookup; stranger: a connection from a process that is not the \
                 worker's Chrome, closed.",
                &["outcome"],
            ),
            browser_requests_blocked: counter_vec(
                &r,
                "crawlfleet_browser_requests_blocked_total",
                "Requests of browser pages failed before they left Chrome, by kind: image,                  media, font, tracker (a known tracker or ad host); a site's browser_resources                  allows kinds again.",
                &["kind"],
            ),
            dispatch_window: gauge_vec(
                &r,
                "crawlfleet_dispatch_window",
                "Jobs the dispatcher lets into Redis at most, by lane (browser, http).",
                &["lane"],
            ),
            dispatched: counter(
                &r,
                "crawlfleet_dispatched_total",
                "Job messages pushed into Redis.",
            ),
            watchdog_actions: counter_vec(
                &r,
                "crawlfleet_watchdog_actions_total",
                "Runs taken back by the watchdog, by reason.",
                &["reason"],
            ),
            scheduled_runs: counter_vec(
                &r,
                "crawlfleet_scheduled_runs_total",
                "Cron fires by outcome per site.",
                &["outcome"],
            ),
            webhook_deliveries: counter_vec(
                &r,
                "crawlfleet_webhook_deliveries_total",
                "Webhook delivery attempts by endpoint and outcome: delivered (2xx), retried \
                 (to be tried again), failed (the retry schedule is spent).",
                &["webhook", "outcome"],
            ),
            webhook_attempt_duration: histogram_vec(
                &r,
                "crawlfleet_webhook_attempt_duration_seconds",
                "Time from sending a webhook delivery to its answer (or error), by endpoint.",
                &["webhook"],
                vec![0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0],
            ),
            webhook_endpoints_disabled: counter(
                &r,
                "crawlfleet_webhook_endpoints_disabled_total",
                "Webhook endpoints disabled after a whole retry schedule without a success.",
            ),
            webhook_pending: gauge(
                &r,
                "crawlfleet_webhook_deliveries_pending",
                "Webhook deliveries waiting to be sent or retried (enabled endpoints).",
            ),
            webhook_oldest_due_age: gauge(
                &r,
                "crawlfleet_webhook_oldest_due_age_seconds",
                "How long the oldest webhook delivery that is due has waited for a sender.",
            ),
            registry: r,
        }
    }

    /// The registry in the Prometheus text format.
    pub fn render(&self) -> String {
        let mut out = Vec::new();
        TextEncoder::new()
            .encode(&self.registry.gather(), &mut out)
            .expect("text encoding cannot fail");
        String::from_utf8(out).expect("the text format is UTF-8")
    }
}

impl Metrics {
    /// Counts how an attempt ended, by the run's state after it and its site,
    /// the same wherever it ends (the worker, or the watchdog taking it back):
    /// a failed attempt queued again is a retry; a completed or failed run is
    /// finished.
    pub fn count_attempt_end(&self, state_after: RunState, site_id: i64, attempt_failed: bool) {
        let site = site_id.to_string();
        match state_after {
            RunState::Queued if attempt_failed => self.retries.with_label_values(&[&site]).inc(),
            RunState::Completed | RunState::Failed => self
                .runs_finished
                .with_label_values(&[state_after.as_str(), &site])
                .inc(),
            _ => {}
        }
    }

    /// Counts `times` bites of `bound` (`crawlfleet_bounds_applied_total`).
    pub fn count_bound(&self, bound: crate::domain::bounds::Bound, times: u64) {
        if times > 0 {
            self.bounds_applied
                .with_label_values(&[bound.as_str()])
                .inc_by(times);
        }
    }
}

/// `/metrics`: the Prometheus text exposition of this process's metrics, on
/// a side port of the process (the api's API_METRICS_PORT, a scheduler's
/// SCHEDULER_PORT, a worker's METRICS_PORT), never the API's. Open, like
/// `/health`: expose the port only to the scraper (private port or security group).
pub async fn render_metrics() -> impl axum::response::IntoResponse {
    (
        [(
            axum::http::header::CONTENT_TYPE,
            "text/plain; version=0.0.4",
        )],
        metrics().render(),
    )
}

/// This process's metrics.
pub fn metrics() -> &'static Metrics {
    static METRICS: LazyLock<Metrics> = LazyLock::new(Metrics::new);
    &METRICS
}
