// The overview's verdict: one line saying whether the fleet is healthy and,
// if not, what is wrong, most urgent first, each problem in words with a
// link to where it shows. Made only of what the overview already reads.

import { h, show, duration } from "./dom.js";

/** Runs queued longer than this with nothing running: no one is taking them. */
const STALLED_AFTER_SECS = 120;

/**
 * The problems of the fleet, most urgent first: [{tone: "bad"|"warn", text, link?}].
 * `stats`: the queue's counts and workers; `slow`: site health, each failing
 * site's last failed run, the webhook endpoints.
 */
export function verdictOf(stats, slow) {
  const problems = [];
  const waiting = stats.queued ?? 0;
  const busy = (stats.running ?? 0) + (stats.call_done ?? 0) + (stats.url_call ?? 0);
  const oldest = stats.oldest_queued_age_secs ?? 0;
  if (!stats.workers || stats.workers.length === 0) {
    problems.push({
      tone: "bad", kind: "no-worker",
      text: `No worker alive: nothing is crawled${waiting ? `, ${waiting} run(s) waiting` : ""}.`,
    });
  } else if (waiting > 0 && busy === 0 && oldest > STALLED_AFTER_SECS) {
    problems.push({
      tone: "bad", kind: "stalled",
      text: `${waiting} run(s) waiting ${duration(oldest)} and none running: no worker is taking them.`,
      link: "#/runs?state=queued",
    });
  }
  const bySeverity = { blocked: 0, failing: 1 };
  const troubled = slow.health
    .filter((s) => s.status in bySeverity)
    .sort((a, b) => bySeverity[a.status] - bySeverity[b.status] || a.name.localeCompare(b.name));
  for (const site of troubled) {
    const run = slow.failedRuns.get(site.site_id);
    const why = run?.error ? `: ${run.error}` : "";
    problems.push({
      tone: "bad", kind: `site-${site.status}`,
      text: `${site.name} ${site.status === "blocked" ? "is blocked" : "is failing"}${why}`,
      link: run ? `#/runs/${run.id}` : `#/sites/${site.site_id}`,
      linkText: run ? `run ${run.id}` : "the site",
    });
  }
  for (const hook of slow.webhooks.filter((w) => !w.enabled && w.disabled_reason)) {
    problems.push({
      tone: "warn", kind: "webhook-disabled",
      text: `Webhook ${hook.description || hook.url} disabled: ${hook.disabled_reason}`,
    });
  }
  for (const site of slow.health.filter((s) => s.status === "degraded")) {
    problems.push({
      tone: "warn", kind: "site-degraded",
      text: `${site.name} is degraded: its last runs found less than expected`,
      link: `#/sites/${site.site_id}`, linkText: "the site",
    });
  }
  return problems;
}

/** The verdict into `root`: a headline in colour and words, then the problems. */
export function showVerdict(root, problems) {
  const worst = problems.some((p) => p.tone === "bad") ? "bad" : problems.length ? "warn" : "ok";
  root.className = `verdict verdict-${worst}`;
  root.dataset.verdict = worst;
  const headline = worst === "ok" ? "Healthy: workers are alive, nothing waits long, every site is doing well."
    : `${worst === "bad" ? "Needs attention" : "Mostly fine"}: ${problems[0].text}`;
  show(root,
    h("p", { id: "verdict-line", class: "verdict-line" },
      h("strong", {}, worst === "ok" ? "✓ " : worst === "bad" ? "✕ " : "! "), headline),
    problems.length > 1 || problems[0]?.link ? h("ul", { id: "verdict-problems" }, problems.map((p) =>
      h("li", { class: `tone-${p.tone}`, dataset: { problem: p.kind } }, p.text,
        p.link ? [" — ", h("a", { href: p.link }, p.linkText ?? "look")] : null))) : null);
}
