// URL lists: sites read from URLs an operator uploads (products to refresh,
// pages to watch), each on its own schedule; how far each has read its
// current period; an upload's report line by line; the URLs with when each
// was last read.

import { get, post, put, del, send } from "./api.js";
import { h, show, failure, when, percent } from "./dom.js";
import { wallTime, zoneNames, fieldMaker, clearErrors, showError } from "./form.js";

export function renderList(root, _params, ctx) {
  const body = h("tbody", { id: "url-lists" });
  const status = h("p", { class: "muted", role: "status" }, "Loading…");
  show(root,
    h("div", { class: "actions" }, h("h1", {}, "URL lists"),
      h("a", { href: "#/lists/new", class: "button write-only", id: "new-list" }, "New list")),
    h("table", {}, h("thead", {}, h("tr", {},
      h("th", {}, "list"), h("th", {}, "site"), h("th", { class: "num" }, "URLs"), h("th", {}, "read this period"),
      h("th", {}, "schedule"), h("th", {}, "next run (its clock)"), h("th", {}, "enabled"))), body),
    status);

  (async () => {
    try {
      const [lists, catalog] = await Promise.all([get("/api/url-lists"), ctx.catalog.load()]);
      show(body, lists.items.map((l) => h("tr", { dataset: { list: l.id } },
        h("td", {}, h("a", { href: `#/lists/${l.id}` }, l.name)),
        h("td", {}, catalog.siteName(l.site_id)),
        h("td", { class: "num" }, l.urls.toLocaleString()),
        h("td", {}, progress(l)),
        h("td", {}, h("span", { class: "mono" }, l.schedule), h("span", { class: "muted" }, ` ${l.timezone}`)),
        h("td", {}, l.next_fire_times[0] ? wallTime(l.next_fire_times_local[0], l.next_fire_times[0]) : "—"),
        h("td", {}, l.enabled ? "yes" : "no"))));
      status.textContent = lists.items.length ? "" : "No URL list yet.";
    } catch (e) {
      show(status, failure(e));
    }
  })();
}

/** How much of the list its current period has read: a bar, the count, the
 *  URLs that failed, and the run reading it now. */
function progress(list) {
  const share = list.urls ? list.read_in_period / list.urls : 0;
  return h("span", { class: "progress", title: list.period_started_at ? `since ${when(list.period_started_at)}` : "not fired yet" },
    h("meter", { min: 0, max: 1, value: share }),
    ` ${list.read_in_period.toLocaleString()} of ${list.urls.toLocaleString()} (${percent(share)})`,
    list.failed_in_period ? h("span", { class: "bad" }, `, ${list.failed_in_period.toLocaleString()} failed`) : null,
    list.active_run_id ? [" · ", h("a", { href: `#/runs/${list.active_run_id}` }, `reading now: run ${list.active_run_id}`)] : null);
}

/** Queues a run of the list now; a run still going is named, not doubled. */
async function crawlNow(list, ctx, button) {
  button.disabled = true;
  try {
    const run = await post(`/api/url-lists/${list.id}/crawl`, {});
    ctx.toast(`Run ${run.id} queued`);
    ctx.go(`#/runs/${run.id}`);
  } catch (e) {
    ctx.toast(e.message, { bad: true });
    button.disabled = false;
  }
}

export function renderEditor(root, { id }, ctx) {
  const form = h("form", { class: "form panel", id: "list-form", novalidate: true });
  const formError = h("p", { class: "error", role: "alert" });
  const urls = h("section", { class: "panel", id: "list-urls" });
  show(root, h("p", {}, h("a", { href: "#/lists" }, "← URL lists")),
    h("h1", {}, id ? "URL list" : "New URL list"),
    h("div", { class: "split" }, form, urls));

  const field = fieldMaker("list");

  const build = async () => {
    const catalog = await ctx.catalog.load();
    const list = id ? await get(`/api/url-lists/${id}`) : {
      site_id: catalog.sites[0]?.id, name: "", schedule: "0 0 6 * * *", enabled: true, jitter_secs: 0,
      timezone: Intl.DateTimeFormat().resolvedOptions().timeZone || "UTC",
    };
    show(form,
      h("label", { for: "list-site_id" }, "site",
        h("select", { id: "list-site_id", name: "site_id", dataset: { field: "site_id" } },
          catalog.sites.map((s) => h("option", { value: s.id, selected: s.id === list.site_id }, s.name))),
        h("span", { class: "muted" }, "its pace, identity and fields read each URL"),
        h("span", { class: "field-error", dataset: { errorFor: "site_id" }, role: "alert" })),
      field("name", "name", { required: true, value: list.name }),
      field("schedule", "schedule", { required: true, value: list.schedule, class: "mono" },
        "cron with seconds: each URL is read once between two runs"),
      field("timezone", "time zone", { required: true, value: list.timezone, list: "zone-names", autocomplete: "off" }),
      h("datalist", { id: "zone-names" }, zoneNames().map((name) => h("option", { value: name }))),
      field("jitter_secs", "jitter (seconds)", { type: "number", min: 0, max: 3600, value: list.jitter_secs }),
      h("label", { class: "check" }, h("input", { type: "checkbox", name: "enabled", checked: list.enabled }), "enabled"),
      formError,
      h("div", { class: "actions write-only" },
        h("button", { type: "submit", id: "save-list" }, id ? "Save" : "Create"),
        id ? h("button", { type: "button", class: "danger", id: "delete-list", onclick: remove }, "Delete") : null));
    if (ctx.access === "read") for (const el of form.elements) el.disabled = true;
    if (id) showUrls(urls, list, ctx);
    else show(urls, h("h2", {}, "URLs"), h("p", { class: "muted" }, "Uploaded once the list is saved."));
  };

  async function remove() {
    if (!confirm("Delete this list with its URLs?")) return;
    try {
      await del(`/api/url-lists/${id}`);
      ctx.catalog.forget();
      ctx.go("#/lists");
    } catch (e) {
      formError.textContent = e.message;
    }
  }

  form.addEventListener("submit", async (e) => {
    e.preventDefault();
    clearErrors(form, formError);
    const body = {
      site_id: Number(form.elements.site_id.value),
      name: form.elements.name.value.trim(),
      schedule: form.elements.schedule.value.trim(),
      timezone: form.elements.timezone.value.trim(),
      jitter_secs: Number(form.elements.jitter_secs.value || 0),
      enabled: form.elements.enabled.checked,
    };
    try {
      const saved = id ? await put(`/api/url-lists/${id}`, body) : await post("/api/url-lists", body);
      ctx.catalog.forget();
      ctx.toast(`Saved ${saved.name}`);
      if (!id) ctx.go(`#/lists/${saved.id}`);
    } catch (error) {
      showError(form, formError, error);
    }
  });

  build().catch((e) => show(form, failure(e)));
}

/** The list's progress, an upload box, and its first URLs. */
async function showUrls(section, list, ctx) {
  const text = h("textarea", { id: "list-upload", rows: 8, class: "mono", placeholder: "one URL per line" });
  const file = h("input", { type: "file", id: "list-file", accept: ".txt,.csv,text/plain" });
  const report = h("div", { id: "upload-report", role: "status" });
  const crawl = h("button", { type: "button", id: "crawl-list", class: "write-only", onclick: () => crawlNow(list, ctx, crawl) }, "Crawl now");
  const table = h("tbody", { id: "list-entries" });
  const upload = async (method) => {
    const content = file.files[0] ?? text.value;
    try {
      const response = await send(method, `/api/url-lists/${list.id}/urls`, content, {
        timeoutMs: 120000, contentType: "text/plain",
      });
      showReport(report, await response.json());
      loadEntries();
    } catch (e) {
      show(report, failure(e));
    }
  };
  const loadEntries = async () => {
    const page = await get(`/api/url-lists/${list.id}/urls?limit=50`);
    show(table, page.items.map((entry) => h("tr", { class: entry.failed_at ? "failed" : null },
      h("td", { class: "num" }, entry.line), h("td", { class: "mono" }, entry.url), h("td", {}, when(entry.last_read_at)),
      h("td", {}, entry.failed_at ? [when(entry.failed_at), " ", h("span", { class: "bad" }, entry.last_error ?? "")] : "—"))));
  };
  show(section, h("div", { class: "actions" }, h("h2", {}, "URLs"), crawl), h("p", {}, progress(list)),
    h("div", { class: "write-only" },
      h("label", { for: "list-upload" }, "upload URLs (or a file)"), text, file,
      h("div", { class: "actions" },
        h("button", { type: "button", id: "replace-urls", onclick: () => upload("PUT") }, "Replace the list"),
        h("button", { type: "button", class: "secondary", id: "append-urls", onclick: () => upload("POST") }, "Add to the list"))),
    report,
    h("table", {}, h("thead", {}, h("tr", {}, h("th", { class: "num" }, "line"), h("th", {}, "URL"), h("th", {}, "last read"), h("th", {}, "failed"))), table));
  loadEntries().catch((e) => show(report, failure(e)));
  if (ctx.access === "read") for (const el of section.querySelectorAll("textarea, input, button")) el.disabled = true;
}

function showReport(root, r) {
  const notes = (title, kind) => r[kind].count === 0 ? null : h("details", { open: true, dataset: { kind } },
    h("summary", {}, `${r[kind].count} ${title}${r[kind].count > r[kind].lines.length ? ` (first ${r[kind].lines.length} shown)` : ""}`),
    h("ul", {}, r[kind].lines.map((n) => h("li", {}, h("strong", {}, `line ${n.line}: `), h("span", { class: "mono" }, n.text), ` — ${n.reason}`))));
  show(root, h("p", {}, `${r.added} added, ${r.kept} kept, ${r.removed} removed: ${r.total} URLs now.`),
    notes("refused", "refused"), notes("duplicates", "duplicates"));
}
