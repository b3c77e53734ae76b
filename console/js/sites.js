// Sites: each with how it is doing (its status, last success, success and blocked rates
// over 24 h, items per run over its last 20 runs), and the way to its editor.

import { get, post } from "./api.js";
import * as live from "./live.js";
import { h, show, ago, percent, sparkline, failure, healthBadge } from "./dom.js";
import { bulkBar, why } from "./bulk.js";

const REFRESH_MS = 30000;

/** Enables or disables `target` rows through `path` (the bulk API); what it did, for the bar. */
const switchAll = (path, enabled) => async (target, dryRun) => {
  const outcome = await post(path, { enabled, dry_run: dryRun, ...target });
  return {
    done: outcome.changed,
    skippedWhy: why({ [`already ${enabled ? "enabled" : "disabled"}`]: outcome.unchanged_ids.length, "no longer there": outcome.not_found.length }),
  };
};

export function render(root, _params, ctx) {
  const body = h("tbody", { id: "sites" });
  const status = h("p", { class: "muted", role: "status" }, "Loading…");
  const selection = bulkBar({
    id: "sites-bulk", noun: "site", ctx,
    matching: async () => (await get("/api/sites")).items.length,
    actions: [
      { key: "disable", label: "Disable", past: "Disabled", css: "danger", perform: switchAll("/api/sites/enabled", false) },
      { key: "enable", label: "Enable", past: "Enabled", perform: switchAll("/api/sites/enabled", true) },
    ],
    after: () => load(),
  });
  show(root,
    h("div", { class: "actions" }, h("h1", {}, "Sites"),
      h("a", { href: "#/sites/new", class: "button write-only", id: "new-site" }, "New site")),
    selection.bar,
    h("table", {}, h("thead", {}, h("tr", {}, selection.headCell(),
      h("th", {}, "site"), h("th", {}, "status"), h("th", {}, "render"), h("th", {}, "search URL"), h("th", {}, "last success"),
      h("th", { class: "num" }, "success, 24 h"), h("th", { class: "num" }, "blocked, 24 h"), h("th", {}, "items per run, last 20"))), body),
    status);

  const load = async () => {
    try {
      const [sites, health] = await Promise.all([get("/api/sites"), get("/api/sites/health")]);
      const of = new Map(health.map((s) => [s.site_id, s]));
      show(body, sites.items.map((site) => {
        const s = of.get(site.id) || { recent_runs: [] };
        return h("tr", { class: "clickable", tabindex: "0", dataset: { site: site.id },
          onclick: () => ctx.go(`#/sites/${site.id}`),
          onkeydown: (e) => { if (e.key === "Enter") ctx.go(`#/sites/${site.id}`); } },
        selection.rowCell(site.id, site.name),
        h("td", {}, h("a", { href: `#/sites/${site.id}` }, site.name),
          site.enabled ? null : [" ", h("span", { class: "badge state-cancelled" }, "disabled")]),
        h("td", { class: "status" }, healthBadge(s.status, s.streak ? `${s.streak.runs} ${s.streak.verdict} run(s) in a row` : "")),
        h("td", {}, site.render),
        h("td", { class: "mono" }, site.search_url),
        h("td", {}, ago(s.last_success_at)),
        h("td", { class: "num" }, percent(s.success_rate_24h)),
        h("td", { class: "num" }, percent(s.blocked_rate_24h)),
        h("td", {}, sparkline(s.recent_runs.map((r) => r.items_found), `items per run of ${site.name}`)));
      }));
      status.textContent = sites.items.length ? "" : "No site yet.";
    } catch (e) {
      show(status, failure(e));
    }
  };
  load();
  const timer = setInterval(load, REFRESH_MS);
  const stop = live.on("live.reconnected", load);
  return () => {
    clearInterval(timer);
    stop();
  };
}
