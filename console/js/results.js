// Results: filter by keyword, site, run, when items were first seen and
// what they were to their run (new, changed with the fields' old and new
// values, removed), search the fields' text, page through, and download what
// the filters select as CSV or NDJSON (the API streams it).

import { get, blob, withQuery } from "./api.js";
import { h, show, time, select, failure } from "./dom.js";
import { localToIso } from "./runs.js";

const PAGE = 50;

/** A field's value as text. */
const text = (v) => (typeof v === "string" ? v : JSON.stringify(v));

/** A number, or a price or count written as one ("1,299.00", "$ 12", "4.5 kg"): never broken across lines. */
const numberLike = (v) => typeof v === "number" || (typeof v === "string" && v.length <= 32 && /^\D{0,4}\d[\d.,'\u00a0 ]*\D{0,4}$/.test(v.trim()));

/** Only an http(s) URL is a link: results stored before the worker kept item
 * URLs to http(s) may hold a `javascript:` or `data:` one, shown as text. */
const webUrl = (url) => /^https?:\/\//i.test(url);

export function render(root, { query }, ctx) {
  const filters = h("form", { class: "filters", id: "result-filters" });
  const body = h("tbody", { id: "results" });
  const more = h("button", { type: "button", class: "secondary more", hidden: true }, "Load more");
  const status = h("p", { class: "muted", role: "status" });
  show(root, h("h1", {}, "Results"), filters,
    h("table", {}, h("thead", {}, h("tr", {},
      h("th", { class: "num" }, "result"), h("th", {}, "first seen"), h("th", {}, "keyword or list"), h("th", {}, "site"),
      h("th", { class: "num" }, "run"), h("th", {}, "change"), h("th", {}, "fields"), h("th", {}, "item URL"))), body),
    status, more);

  let cursor = null;
  let loading = 0;
  let catalog = null;

  const params = () => {
    const f = Object.fromEntries(new FormData(filters).entries());
    return { ...f, first_seen_after: localToIso(f.first_seen_after), first_seen_before: localToIso(f.first_seen_before) };
  };

  const load = async (append) => {
    const generation = ++loading;
    const asked = { ...params(), limit: PAGE };
    if (append) asked.cursor = cursor;
    root.classList.add("loading");
    try {
      const page = await get(withQuery("/api/results", asked));
      if (generation !== loading) return;
      if (!append) body.replaceChildren();
      for (const r of page.items) {
        body.append(h("tr", { dataset: { result: r.id } },
          h("td", { class: "num" }, r.id),
          h("td", {}, time(r.first_seen_at)),
          h("td", {}, catalog.subject(r)),
          h("td", {}, catalog.siteName(r.site_id)),
          h("td", { class: "num" }, h("a", { href: `#/runs/${r.run_id}` }, r.run_id)),
          h("td", {}, r.change ? h("span", { class: `badge change-${r.change}` }, r.change) : "—"),
          h("td", {}, h("div", { class: "fields-list" }, Object.entries(r.fields).map(([k, v]) => {
            const was = r.diff?.[k];
            return h("span", { class: was ? "changed-field" : "" }, h("span", { class: "muted" }, `${k}: `),
              was ? [h("del", { class: numberLike(was.old) ? "number" : null }, text(was.old)), " → "] : null,
              h("span", { class: numberLike(v) ? "value number" : "value" }, text(v)));
          }))),
          h("td", { class: "mono" }, !r.item_url ? "—" : webUrl(r.item_url)
            ? h("a", { href: r.item_url, rel: "noopener noreferrer", target: "_blank" }, r.item_url)
            : r.item_url)));
      }
      cursor = page.next_cursor ?? null;
      more.hidden = !cursor;
      status.textContent = body.children.length === 0 ? "No result matches." : "";
    } catch (e) {
      if (generation === loading) show(status, failure(e));
    } finally {
      if (generation === loading) root.classList.remove("loading");
    }
  };

  const download = async (format, button) => {
    button.disabled = true;
    const label = button.textContent;
    button.textContent = "Downloading…";
    try {
      const file = await blob(withQuery("/api/results/export", { ...params(), format }), { timeoutMs: 30 * 60 * 1000 });
      const url = URL.createObjectURL(file);
      const link = h("a", { href: url, download: `results.${format}` });
      document.body.append(link);
      link.click();
      link.remove();
      setTimeout(() => URL.revokeObjectURL(url), 60000);
    } catch (e) {
      ctx.toast(e.message, { bad: true });
    } finally {
      button.disabled = false;
      button.textContent = label;
    }
  };

  const build = async () => {
    catalog = await ctx.catalog.load();
    const initial = Object.fromEntries(query.entries());
    const search = h("input", { type: "search", name: "q", id: "result-search", placeholder: "words in the fields", value: initial.q ?? "" });
    show(filters,
      h("label", {}, "search", search),
      h("label", {}, "keyword", select("keyword_id", catalog.keywords.map((k) => [k.id, k.keyword]), { value: initial.keyword_id })),
      h("label", {}, "site", select("site_id", catalog.sites.map((s) => [s.id, s.name]), { value: initial.site_id })),
      h("label", {}, "run", h("input", { type: "number", name: "run_id", id: "run_id", min: 1, value: initial.run_id ?? "" })),
      h("label", {}, "change", select("change", [["new", "new"], ["changed", "changed"], ["removed", "removed"]], { value: initial.change })),
      h("label", {}, "first seen after", h("input", { type: "datetime-local", name: "first_seen_after", step: 1 })),
      h("label", {}, "first seen before", h("input", { type: "datetime-local", name: "first_seen_before", step: 1 })),
      h("button", { type: "submit" }, "Search"),
      h("button", { type: "button", class: "secondary", id: "download-csv", onclick: (e) => download("csv", e.target) }, "Download CSV"),
      h("button", { type: "button", class: "secondary", id: "download-ndjson", onclick: (e) => download("ndjson", e.target) }, "Download NDJSON"));
    filters.addEventListener("change", (e) => { if (e.target !== search) load(false); });
    filters.addEventListener("submit", (e) => { e.preventDefault(); load(false); });
    await load(false);
  };
  more.addEventListener("click", () => load(true));
  build().catch((e) => show(status, failure(e)));
}
