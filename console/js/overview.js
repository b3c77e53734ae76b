// The overview: the fleet at a glance, live. The counts and the workers come
// with every `queue.stats` event (5 s); the per-minute chart and the sites in
// trouble are read again when the feed says runs ended, at most every 15 s.

import { get, withQuery } from "./api.js";
import * as live from "./live.js";
import { h, show, duration, ago, percent, minuteChart, failure, healthBadge } from "./dom.js";
import { verdictOf, showVerdict } from "./verdict.js";

const SLOW_REFRESH_MS = 15000;

/** Sites worth a look now: blocked, or under this success rate over 24 h. */
const TROUBLE_SUCCESS_RATE = 0.8;

export function render(root) {
  const cards = h("div", { class: "cards", id: "overview-counts" });
  const workers = h("div", { id: "overview-workers" }, h("p", { class: "muted" }, "Waiting for the fleet…"));
  const chart = h("div", { class: "panel", id: "overview-chart" });
  const trouble = h("div", { id: "overview-trouble" });
  const verdict = h("section", { id: "verdict", class: "verdict", "aria-live": "polite" },
    h("p", { class: "muted" }, "Looking at the fleet…"));
  show(root,
    h("h1", {}, "Overview"),
    verdict,
    cards,
    h("h2", {}, "Completed and failed per minute, last hour"),
    chart,
    h("div", { class: "split" },
      h("section", {}, h("h2", {}, "Workers"), workers),
      h("section", {}, h("h2", {}, "Sites failing or blocked now"), trouble)));

  // What the verdict is made of: the feed's counts, and the slower reads.
  let lastStats = null;
  let lastSlow = { health: [], failedRuns: new Map(), webhooks: [] };
  const judge = () => {
    if (lastStats) showVerdict(verdict, verdictOf(lastStats, lastSlow));
  };

  const showStats = (stats) => {
    // A count's colour says whether it is a worry: "bad" and "warn" only when it is not zero.
    const card = (label, value, id, tone) =>
      h("div", { class: `card${tone ? ` tone-${tone}` : ""}`, id }, h("div", { class: "value" }, value), h("div", { class: "label" }, label));
    const waitingLong = (stats.oldest_queued_age_secs ?? 0) > 60;
    show(cards,
      card("backlog", stats.backlog, "count-backlog", stats.backlog > 0 && waitingLong ? "warn" : null),
      card("queued", stats.queued, "count-queued", stats.queued > 0 ? "queued" : null),
      card("running", stats.running + stats.call_done, "count-running", stats.running + stats.call_done > 0 ? "run" : null),
      card("in a page call", stats.url_call, "count-url-call", stats.url_call > 0 ? "run" : null),
      card("oldest queued", stats.oldest_queued_age_secs ? duration(stats.oldest_queued_age_secs) : "—", "count-oldest",
        waitingLong ? "warn" : null),
      card("completed, last hour", stats.completed_last_hour, "count-completed", stats.completed_last_hour > 0 ? "ok" : null),
      card("failed, last hour", stats.failed_last_hour, "count-failed", stats.failed_last_hour > 0 ? "bad" : null));
    showWorkers(workers, stats.workers);
    lastStats = stats;
    judge();
  };

  let slowAt = 0;
  let slowTimer = null;
  const refreshSlow = async () => {
    slowAt = Date.now();
    try {
      const [minutes, health, webhooks] = await Promise.all([
        get("/api/jobs/history"), get("/api/sites/health"),
        // Endpoints are an operator's business; a token that may not list them sees no verdict on them.
        get("/api/webhooks").catch(() => ({ items: [] }))]);
      show(chart, minuteChart(minutes));
      showTrouble(trouble, health);
      lastSlow = { health, failedRuns: await lastFailedRuns(health), webhooks: webhooks.items ?? webhooks };
      judge();
    } catch (e) {
      show(trouble, failure(e));
    }
  };
  const maybeRefreshSlow = () => {
    const wait = slowAt + SLOW_REFRESH_MS - Date.now();
    clearTimeout(slowTimer);
    if (wait <= 0) refreshSlow();
    else slowTimer = setTimeout(refreshSlow, wait);
  };

  // The first picture comes from REST: the feed's next tick may be 5 s away.
  get("/api/jobs/queue")
    // The report has the counts beside the backlog and workers, as the feed's event does.
    .then((report) => showStats(report))
    .catch((e) => show(cards, failure(e)));
  refreshSlow();

  const stop = [
    live.on("queue.stats", (stats) => {
      showStats(stats);
      // Runs ended since the chart was drawn: draw it again (throttled).
      maybeRefreshSlow();
    }),
    live.on("live.reconnected", refreshSlow),
  ];
  return () => {
    stop.forEach((unsubscribe) => unsubscribe());
    clearTimeout(slowTimer);
  };
}

/** The last failed run of each failing or blocked site (a few sites: one small read each). */
async function lastFailedRuns(health) {
  const troubled = health.filter((s) => s.status === "failing" || s.status === "blocked");
  const runs = await Promise.all(troubled.map((s) =>
    get(withQuery("/api/runs", { site_id: s.site_id, state: "failed", limit: 1 })).then((page) => page.items[0]).catch(() => null)));
  return new Map(troubled.map((s, i) => [s.site_id, runs[i]]));
}

function showWorkers(root, workers) {
  if (!workers || workers.length === 0) {
    show(root, h("p", { class: "muted" }, "No worker seen in the last minute."));
    return;
  }
  show(root, h("table", {},
    h("thead", {}, h("tr", {}, h("th", {}, "worker"), h("th", {}, "host"), h("th", { class: "num" }, "crawls held"),
      h("th", {}, "slots"), h("th", {}, "started"), h("th", {}, "last seen"))),
    h("tbody", {}, workers.map((w) => h("tr", { dataset: { worker: w.id } },
      h("td", { class: "mono" }, w.id),
      h("td", {}, w.host),
      h("td", { class: "num" }, w.in_flight),
      h("td", {}, `${w.concurrency} browser, ${w.http_concurrency} http`),
      h("td", {}, ago(w.started_at)),
      h("td", {}, ago(w.last_seen_at)))))));
}

function showTrouble(root, health) {
  const troubled = health
    .filter((s) => ["degraded", "failing", "blocked"].includes(s.status) || (s.blocked_rate_24h ?? 0) > 0
      || (s.success_rate_24h !== null && s.success_rate_24h < TROUBLE_SUCCESS_RATE))
    .sort((a, b) => (a.success_rate_24h ?? 1) - (b.success_rate_24h ?? 1));
  if (troubled.length === 0) {
    show(root, h("p", { class: "muted" }, "Every site is doing well over the last 24 hours."));
    return;
  }
  show(root, h("table", {},
    h("thead", {}, h("tr", {}, h("th", {}, "site"), h("th", {}, "status"), h("th", { class: "num" }, "success, 24 h"),
      h("th", { class: "num" }, "blocked, 24 h"), h("th", {}, "last success"))),
    h("tbody", {}, troubled.map((s) => h("tr", { dataset: { site: s.site_id } },
      h("td", {}, h("a", { href: `#/sites/${s.site_id}` }, s.name)),
      h("td", { class: "status" }, healthBadge(s.status)),
      h("td", { class: "num" }, percent(s.success_rate_24h)),
      h("td", { class: "num" }, percent(s.blocked_rate_24h)),
      h("td", {}, ago(s.last_success_at)))))));
}
