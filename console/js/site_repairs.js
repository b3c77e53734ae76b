// A site's repairs: what a worker proposed when the site's markup changed
// under its selectors, with the proof it was checked against (the good
// run's items and the proposal's, each verification's counts), and for a
// write token Accept (the site's next version and a re-crawl) or Reject.
// Shown on the site's page and beside the run that went bad.

import { get, post } from "./api.js";
import { h, show, time, failure } from "./dom.js";

/** Items of each side shown. */
const ITEMS_SHOWN = 5;

const STATES = {
  working: "a worker is looking for one",
  proposed: "verified, waiting for a decision",
  none_found: "no proposal passed verification",
  accepted: "accepted",
  applied: "applied by the site's auto policy",
  rejected: "rejected",
  rolled_back: "applied automatically, then undone: the next run was bad again",
};

function selector(value) {
  return value ? h("code", {}, value) : h("span", { class: "muted" }, "(none)");
}

/** One verification as a sentence with its counts. */
function check(name, c) {
  if (!c) return null;
  const verdict = h("span", { class: `badge ${c.passed ? "state-completed" : "state-failed"}` }, c.passed ? "passed" : "failed");
  const counts = c.note
    ? c.note
    : `${c.reproduced} of the ${c.on_page} good items on the page given back, ${c.extra} other item(s), ${c.items} read`;
  return h("li", {}, h("strong", {}, name), " ", verdict, " ", counts);
}

function replayCheck(r) {
  const verdict = h("span", { class: `badge ${r.passed ? "state-completed" : "state-failed"}` }, r.passed ? "passed" : "failed");
  return h("li", {}, h("strong", {}, "saved pages"), " ", verdict, " ",
    `${r.pages} replayed: ${r.same} read the same, ${r.not_read} older markup (not read), ${r.differing} read differently`,
    r.note ? ` (${r.note})` : "");
}

/** Items side by side: the good run's and the proposal's, each a few fields. */
function itemsTable(before, after) {
  const fields = [...new Set([...before, ...after].flatMap((i) => Object.keys(i || {})))].slice(0, 4);
  const cell = (item, f) => h("td", { class: "mono" }, item?.[f] === undefined ? "" : String(item[f]));
  const rows = Array.from({ length: Math.min(ITEMS_SHOWN, Math.max(before.length, after.length)) }, (_, i) =>
    h("tr", {}, fields.map((f) => cell(before[i], f)), fields.map((f) => cell(after[i], f))));
  return h("table", { class: "repair-items" },
    h("caption", {}, "The last good run's items beside what the proposal reads on the failing page"),
    h("thead", {},
      h("tr", {}, h("th", { colspan: fields.length, scope: "colgroup" }, "before"), h("th", { colspan: fields.length, scope: "colgroup" }, "proposed")),
      h("tr", {}, fields.map((f) => h("th", { scope: "col" }, f)), fields.map((f) => h("th", { scope: "col" }, f)))),
    h("tbody", {}, rows));
}

function repairItem(r, siteId, ctx, refresh) {
  const e = r.evidence;
  const decide = (verb, label) => h("button", {
    type: "button", class: `write-only ${verb === "reject" ? "quiet" : ""}`, dataset: { repair: verb },
    onclick: async (event) => {
      event.target.disabled = true;
      try {
        const done = await post(`/api/sites/${siteId}/repairs/${r.id}/${verb}`);
        ctx.toast(verb === "accept"
          ? `Repaired: version ${done.version}${done.run_id ? `, re-crawl run ${done.run_id} queued` : ""}`
          : "Repair rejected");
        ctx.catalog?.forget?.();
        refresh();
      } catch (error) {
        event.target.disabled = false;
        ctx.toast(error.message, { bad: true });
      }
    },
  }, label);
  return h("li", { class: "repair", dataset: { repairId: r.id, state: r.state } },
    h("p", {}, h("strong", {}, `Repair ${r.id}`), " ", h("span", { class: "badge" }, r.state), " ",
      STATES[r.state] || "", " · version ", r.base_version,
      r.run_id ? [" · after ", h("a", { href: `#/runs/${r.run_id}` }, `run ${r.run_id}`)] : null,
      " · ", time(r.proposed_at || r.started_at),
      r.applied_version ? ` · became version ${r.applied_version}` : ""),
    r.verdict ? h("p", { class: "muted" }, r.verdict) : null,
    e ? [
      h("ul", { class: "changes" },
        h("li", {}, h("strong", {}, "item selector"), ": ", selector(e.item_selector.before), " → ", selector(e.item_selector.after)),
        Object.entries(e.fields).map(([name, c]) => h("li", {}, h("strong", {}, `fields.${name}`), ": ",
          selector(c.before), " → ", selector(c.after), c.attr ? [" (attribute ", h("code", {}, c.attr), ")"] : ""))),
      h("ul", { class: "checks" },
        check(`the failing page (${e.failing_page_source === "live" ? "fetched again" : "as the failed attempt saw it"})`, e.failing_page),
        check("the page fetched again", e.live),
        replayCheck(e.replay)),
      h("p", { class: "muted" }, `confidence ${Math.round(e.confidence * 100)} % · found in ${e.repair_ms} ms`),
      itemsTable(e.before, e.after),
    ] : null,
    r.state === "proposed" && ctx.access !== "read"
      ? h("div", { class: "actions" }, decide("accept", "Accept and re-crawl"), decide("reject", "Reject"))
      : null);
}

/**
 * Shows site `siteId`'s repairs in `root` (only the one made after run
 * `runId`, when given; nothing at all when there is none for it).
 */
export async function showRepairs(root, siteId, ctx, { runId } = {}) {
  const title = h("h2", {}, runId ? "Repair" : "Repairs");
  const refresh = () => showRepairs(root, siteId, ctx, { runId });
  let repairs;
  try {
    repairs = await get(`/api/sites/${siteId}/repairs?limit=20${runId ? `&run_id=${runId}` : ""}`);
  } catch (e) {
    show(root, title, failure(e));
    return;
  }
  if (!repairs.length) {
    if (runId) show(root);
    else show(root, title, h("p", { class: "muted" }, "None yet: when a run of the site turns degraded or finds no items, a worker looks for new selectors and shows them here."));
    return;
  }
  show(root, title, h("ol", { class: "repairs" }, repairs.map((r) => repairItem(r, siteId, ctx, refresh))));
}
