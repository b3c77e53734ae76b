// Runs: a filtered list that follows the live feed, and one run's attempts
// as a timeline with what the browser saw when an attempt failed.

import { get, post, blob, withQuery, ApiError } from "./api.js";
import * as live from "./live.js";
import { h, show, time, duration, stateBadge, select, failure, healthBadge } from "./dom.js";
import { showRepairs } from "./site_repairs.js";
import { bulkBar, why } from "./bulk.js";

const PAGE = 50;
const ACTIVE = ["queued", "running", "url_call", "call_done"];

/** The names the API gives run states and failure kinds (its OpenAPI document). */
let vocabulary = null;
function names() {
  if (!vocabulary) {
    vocabulary = get("/api/openapi.json").then((doc) => ({
      states: doc.components.schemas.RunState.enum,
      kinds: doc.components.schemas.ErrorKind.enum,
    }));
    vocabulary.catch(() => (vocabulary = null));
  }
  return vocabulary;
}

/** A `datetime-local` value (the viewer's zone) as RFC 3339, or "". */
export function localToIso(value) {
  return value ? new Date(value).toISOString() : "";
}

/** Why an attempt failed, as the API names it (`stuck`, `blocked` …). */
const kindBadge = (kind) => (kind ? h("span", { class: "badge kind", dataset: { kind } }, kindWords(kind)) : null);

/** A failure kind as a person would say it. */
const kindWords = (kind) => KIND_WORDS[kind] ?? kind.replaceAll("_", " ");

/** Why the bulk API left a run as it was, in words. */
const SKIPPED = {
  not_found: "no longer there",
  not_retryable: "not failed or cancelled",
  pair_active: "another run of the same keyword and site is active",
  already_ended: "already ended",
};

/** Failure kinds whose name alone reads badly, in words. */
const KIND_WORDS = {
  page_too_large: "page too large",
  worker_lost: "worker lost",
  browser_crashed: "browser crashed",
  site_error: "site error",
  http_status: "refused (HTTP status)",
  target_refused: "address refused",
  unreadable_page: "unreadable page",
  no_items: "no items found",
  robots_disallowed: "disallowed by robots.txt",
  extraction_over_budget: "reading took too long",
  action_failed: "page action failed",
};

export function renderList(root, { query }, ctx) {
  const filters = h("form", { class: "filters", id: "run-filters" });
  const table = h("tbody", { id: "runs" });
  const more = h("button", { type: "button", class: "secondary more", hidden: true }, "Load more");
  const status = h("p", { class: "muted", role: "status" });
  const current = () => Object.fromEntries(new FormData(filters).entries());
  // The listing's filters as the bulk API reads them: only those set.
  const filterNow = () => {
    const f = current();
    const filter = {};
    for (const name of ["keyword_id", "site_id"]) if (f[name]) filter[name] = Number(f[name]);
    for (const name of ["state", "error_kind"]) if (f[name]) filter[name] = f[name];
    for (const name of ["queued_after", "queued_before"]) if (f[name]) filter[name] = localToIso(f[name]);
    return filter;
  };
  const bulk = (action) => async (target, dryRun) => {
    const body = { action, dry_run: dryRun, ...(target.all ? { filter: filterNow() } : { ids: target.ids }) };
    const outcome = await post("/api/runs/bulk", body);
    const reasons = {};
    for (const s of outcome.skipped) reasons[SKIPPED[s.reason] ?? s.reason] = (reasons[SKIPPED[s.reason] ?? s.reason] ?? 0) + 1;
    return { done: outcome.done, skippedWhy: why(reasons) };
  };
  const selection = bulkBar({
    id: "runs-bulk", noun: "run", ctx,
    matching: async () => {
      const outcome = await post("/api/runs/bulk", { action: "retry", filter: filterNow(), dry_run: true });
      return outcome.more ? `${outcome.matched}+` : outcome.matched;
    },
    actions: [
      { key: "retry", label: "Retry", past: "Retried", perform: bulk("retry") },
      { key: "cancel", label: "Cancel", past: "Cancelled", css: "danger", perform: bulk("cancel") },
    ],
    after: () => load(false),
  });
  show(root, h("h1", {}, "Runs"), filters, selection.bar,
    h("table", {}, h("thead", {}, h("tr", {}, selection.headCell(),
      h("th", { class: "num" }, "run"), h("th", {}, "keyword or list"), h("th", {}, "site"), h("th", {}, "state"),
      h("th", { class: "num" }, "attempt"), h("th", { class: "num" }, "pages"), h("th", { class: "num" }, "items"),
      h("th", {}, "queued"), h("th", {}, "error"))), table),
    status, more);

  let cursor = null;
  let shown = new Map(); // run id -> row
  let catalog = null;
  let loading = 0;

  const matches = (event) => {
    const f = current();
    return (!f.keyword_id || Number(f.keyword_id) === event.keyword_id)
      && (!f.site_id || Number(f.site_id) === event.site_id)
      && (!f.state || f.state === event.state)
      && (!f.error_kind || f.error_kind === event.error_kind)
      && !f.queued_before;
  };

  const row = (run) => {
    const tr = h("tr", {
      class: "clickable", tabindex: "0", dataset: { run: run.id, state: run.state, maxAttempts: run.max_attempts ?? "" },
      onclick: () => ctx.go(`#/runs/${run.id}`),
      onkeydown: (e) => { if (e.key === "Enter") ctx.go(`#/runs/${run.id}`); },
    },
    selection.rowCell(run.id, `run ${run.id}`),
    h("td", { class: "num" }, h("a", { href: `#/runs/${run.id}` }, run.id)),
    h("td", {}, run.keyword ?? catalog.subject(run)),
    h("td", {}, run.site ?? catalog.siteName(run.site_id)),
    h("td", { class: "state" }, stateBadge(run.state)),
    h("td", { class: "num attempt" }, `${run.attempt}${run.max_attempts ? ` / ${run.max_attempts}` : ""}`),
    h("td", { class: "num" }, run.pages_crawled ?? run.pages),
    h("td", { class: "num" }, run.items_found ?? run.items),
    h("td", {}, run.queued_at ? time(run.queued_at) : "just now"),
    h("td", { class: "error" }, kindBadge(run.error_kind), run.error || "",
      run.health === "degraded" ? [healthBadge("degraded", run.health_reason), " ", run.health_reason] : null));
    return tr;
  };

  const load = async (append) => {
    const generation = ++loading;
    const f = current();
    const params = { ...f, queued_after: localToIso(f.queued_after), queued_before: localToIso(f.queued_before), limit: PAGE };
    if (append) params.cursor = cursor;
    root.classList.add("loading");
    try {
      const page = await get(withQuery("/api/runs", params));
      if (generation !== loading) return; // a newer filter was asked for
      if (!append) {
        table.replaceChildren();
        shown = new Map();
      }
      for (const run of page.items) {
        const tr = row(run);
        shown.set(run.id, tr);
        table.append(tr);
      }
      cursor = page.next_cursor ?? null;
      more.hidden = !cursor;
      status.textContent = shown.size === 0 ? "No run matches." : "";
    } catch (e) {
      if (generation === loading) show(status, failure(e));
    } finally {
      if (generation === loading) root.classList.remove("loading");
    }
  };

  const build = async () => {
    [catalog] = await Promise.all([ctx.catalog.load(), names()]);
    const { states, kinds } = await names();
    const initial = Object.fromEntries(query.entries());
    show(filters,
      h("label", {}, "keyword", select("keyword_id", catalog.keywords.map((k) => [k.id, k.keyword]), { value: initial.keyword_id })),
      h("label", {}, "site", select("site_id", catalog.sites.map((s) => [s.id, s.name]), { value: initial.site_id })),
      h("label", {}, "state", select("state", states.map((s) => [s, s.replace("_", " ")]), { value: initial.state })),
      h("label", {}, "failure kind", select("error_kind", kinds.map((k) => [k, kindWords(k)]), { value: initial.error_kind })),
      h("label", {}, "queued after", h("input", { type: "datetime-local", name: "queued_after", step: 1 })),
      h("label", {}, "queued before", h("input", { type: "datetime-local", name: "queued_before", step: 1 })));
    filters.addEventListener("change", () => {
      selection.reset();
      load(false);
    });
    filters.addEventListener("submit", (e) => { e.preventDefault(); load(false); });
    await load(false);
  };
  more.addEventListener("click", () => load(true));
  build().catch((e) => show(status, failure(e)));

  const stop = [
    live.on("run.updated", (event) => {
      if (!catalog) return;
      const existing = shown.get(event.id);
      if (existing) {
        const fresh = row({ ...event, max_attempts: event.max_attempts ?? (Number(existing.dataset.maxAttempts) || null),
          queued_at: existing.querySelector("time")?.getAttribute("datetime") });
        existing.replaceWith(fresh);
        shown.set(event.id, fresh);
      } else if (event.state === "queued" && event.attempt <= 1 && matches(event)) {
        // A new run: newest first, at the top.
        const fresh = row({ ...event, queued_at: new Date().toISOString() });
        shown.set(event.id, fresh);
        table.prepend(fresh);
        status.textContent = "";
      }
    }),
    live.on("live.reconnected", () => load(false)),
  ];
  return () => stop.forEach((unsubscribe) => unsubscribe());
}

export function renderDetail(root, { id }, ctx) {
  const head = h("div", { id: "run-head" });
  const attempts = h("ol", { class: "timeline", id: "attempts" });
  const repair = h("section", { class: "panel", id: "run-repair" });
  show(root, h("p", {}, h("a", { href: "#/runs" }, "← Runs")), head, repair, h("h2", {}, "Attempts"), attempts);
  let shownState = null;
  let refreshTimer = null;

  const load = async () => {
    let run, catalog;
    try {
      [run, catalog] = await Promise.all([get(`/api/runs/${id}`), ctx.catalog.load()]);
    } catch (e) {
      show(head, failure(e));
      return;
    }
    shownState = run.state;
    const act = (label, path, css) => h("button", {
      type: "button", class: `write-only ${css}`, id: `run-${label.toLowerCase()}`,
      onclick: async (e) => {
        e.target.disabled = true;
        try {
          await post(path);
          ctx.toast(`${label}: done`);
          await load();
        } catch (error) {
          ctx.toast(error.message, { bad: true });
          e.target.disabled = false;
        }
      },
    }, label);
    show(head,
      h("h1", {}, `Run ${run.id}: `,
        h("a", { id: "run-subject", href: run.keyword_id ? `#/keywords/${run.keyword_id}` : `#/lists/${run.url_list_id}` }, catalog.subject(run)),
        " on ", h("a", { id: "run-site", href: `#/sites/${run.site_id}` }, catalog.siteName(run.site_id)), " ",
        h("span", { id: "run-state" }, stateBadge(run.state))),
      h("div", { class: "panel" },
        h("dl", { class: "facts timeline" },
          h("div", { class: "facts" },
            h("dt", {}, "trigger"), h("dd", {}, run.trigger),
            h("dt", {}, "attempt"), h("dd", {}, `${run.attempt} of ${run.max_attempts}`),
            h("dt", {}, "pages / items"), h("dd", {}, `${run.pages_crawled} / ${run.items_found}`),
            h("dt", {}, "new / changed / removed"), h("dd", { id: "run-changes" }, changes(run)),
            h("dt", {}, "queued"), h("dd", {}, time(run.queued_at)),
            h("dt", {}, "started"), h("dd", {}, time(run.started_at)),
            h("dt", {}, "finished"), h("dd", {}, time(run.finished_at)),
            h("dt", {}, "worker"), h("dd", { class: "mono" }, run.worker_id || "—"),
            h("dt", {}, "current URL"), h("dd", { class: "mono" }, run.current_url || "—"),
            run.error ? [h("dt", {}, "error"), h("dd", { class: "error", id: "run-error" }, kindBadge(run.error_kind), run.error)] : null,
            run.health ? [h("dt", {}, "health"), h("dd", { id: "run-health" }, healthBadge(run.health), " ", run.health_reason || "")] : null,
            run.refusals ? [h("dt", {}, "refusals"), h("dd", {}, `${run.refusals} page request(s) refused, each tried again`)] : null,
            run.stopped_at_url ? [h("dt", {}, "stopped before"), h("dd", { class: "mono", id: "run-stopped" }, kindBadge(run.stop_reason), run.stopped_at_url)] : null)),
        h("div", { class: "actions" },
          ACTIVE.includes(run.state) ? act("Cancel", `/api/runs/${id}/cancel`, "danger") : null,
          ["failed", "cancelled"].includes(run.state) ? act("Retry", `/api/runs/${id}/retry`, "") : null,
          h("a", { href: `#/results?run_id=${id}` }, "Its results"),
          h("a", { href: `#/results?run_id=${id}&change=changed` }, "What changed"))));
    // Beside a run that went bad: the repair a worker made of its site.
    if (run.health === "degraded" || run.error_kind === "no_items") showRepairs(repair, run.site_id, ctx, { runId: id });
    if (run.attempts.length === 0) {
      show(attempts, h("li", { class: "muted" }, "No attempt yet: the run waits for a worker."));
      return;
    }
    show(attempts, run.attempts.slice().reverse().map((a) => attemptItem(a)));
  };

  load();
  const stop = [
    live.on("run.updated", (event) => {
      if (event.id !== id) return;
      const badge = document.getElementById("run-state");
      if (badge && event.state !== shownState) show(badge, stateBadge(event.state));
      // The attempts' details come from REST, at most twice a second.
      clearTimeout(refreshTimer);
      refreshTimer = setTimeout(load, 500);
    }),
    live.on("repair.proposed", (event) => {
      if (event.run_id === id) load();
    }),
    live.on("live.reconnected", load),
  ];
  return () => {
    stop.forEach((unsubscribe) => unsubscribe());
    clearTimeout(refreshTimer);
  };
}

/** A run's items new, changed and removed, and whether it could tell what was removed. */
function changes(run) {
  const counts = `${run.items_new} / ${run.items_changed} / ${run.items_removed}`;
  const why = {
    max_pages: "removals not judged: it stopped at its page limit",
    seen_before: "removals not judged: it stopped where an earlier run had been",
    repeated_page: "removals not judged: a page repeated the one before it",
  }[run.paging_ended];
  return why ? [counts, " ", h("span", { class: "muted" }, `(${why})`)] : counts;
}

function attemptItem(a) {
  const outcome = a.outcome || "running";
  const took = a.ended_at ? duration((new Date(a.ended_at) - new Date(a.started_at)) / 1000) : "running";
  const item = h("li", { class: `outcome-${outcome}`, dataset: { attempt: a.attempt } },
    h("strong", {}, `Attempt ${a.attempt}`), " ", h("span", { class: `badge state-${outcome}` }, outcome),
    h("dl", { class: "facts" },
      h("dt", {}, "worker"), h("dd", { class: "mono" }, a.worker_id),
      h("dt", {}, "start"), h("dd", {}, time(a.started_at)),
      h("dt", {}, "end"), h("dd", {}, a.ended_at ? [time(a.ended_at), ` (${took})`] : "—"),
      h("dt", {}, "reason"), h("dd", { class: a.reason ? "error attempt-reason" : "" }, kindBadge(a.error_kind), a.reason || "—"),
      h("dt", {}, "last URL"), h("dd", { class: "mono" }, a.last_url || "—")));
  if (a.screenshot_url || a.html_url) item.append(evidence(a));
  return item;
}

/** The page an attempt failed on: its screenshot and its HTML, side by side. */
function evidence(a) {
  const picture = h("div", { class: "evidence-screenshot" });
  const page = h("div", { class: "evidence-html" });
  const box = h("div", { class: "evidence" }, picture, page);
  if (a.screenshot_url) {
    show(picture, h("p", { class: "muted" }, "Loading the screenshot…"));
    blob(a.screenshot_url)
      .then((png) => {
        const url = URL.createObjectURL(png);
        const img = h("img", { src: url, alt: `What the browser showed when attempt ${a.attempt} failed` });
        show(picture, h("h3", {}, "Screenshot"), h("a", { href: url, target: "_blank", rel: "noopener" }, img));
      })
      .catch((e) => show(picture, failure(e)));
  } else {
    show(picture, h("p", { class: "muted" }, "No screenshot (not a browser crawl)."));
  }
  if (a.html_url) {
    show(page, h("p", { class: "muted" }, "Loading the page…"));
    blob(a.html_url)
      .then((file) => file.text())
      .then((html) => showHtml(page, html, a.attempt))
      .catch((e) => show(page, failure(e instanceof ApiError ? e : new Error(String(e)))));
  }
  return box;
}

/** A kept page: rendered in a frame without scripts, or as its source. */
function showHtml(root, html, attempt) {
  // Each attempt's frame is named apart: several may be on the page.
  const frame = h("iframe", { sandbox: "", title: `The page attempt ${attempt} failed on, as it was kept`, referrerpolicy: "no-referrer" });
  frame.srcdoc = html;
  const source = h("pre", { class: "html-source", hidden: true }, html.length > 200000 ? `${html.slice(0, 200000)}\n…` : html);
  const toggle = h("button", {
    type: "button", class: "quiet",
    onclick: () => {
      frame.hidden = !frame.hidden;
      source.hidden = !source.hidden;
      toggle.textContent = frame.hidden ? "Show the page" : "Show the HTML";
    },
  }, "Show the HTML");
  show(root, h("h3", {}, "Page HTML ", toggle), frame, source, h("p", { class: "muted" }, `${html.length.toLocaleString()} characters`));
}
