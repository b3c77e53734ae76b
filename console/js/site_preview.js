// "Test this site" beside the site form: a worker crawls page 1, or 1 and
// 2, with the form's settings, and the panel shows what it found: the
// items, fields left empty, each detail page's values, the structured data
// of each page and what the browser showed.

import { post } from "./api.js";
import { h, show } from "./dom.js";

/**
 * "Test this site": a worker crawls the form's site for a keyword. `editor`
 * gives the site's form (`form`) and body (`siteBody()`), clears its errors
 * and shows one the API names under `site.` beside its field. A result is
 * taken down as soon as the form changes: it shows what the form was.
 */
export function renderPreview(root, editor, siteId) {
  const keyword = h("input", { id: "preview-keyword", name: "keyword", required: true, placeholder: "a keyword" });
  const pages = h("select", { id: "preview-pages", name: "pages" }, h("option", { value: "1" }, "page 1"), h("option", { value: "2" }, "pages 1 and 2"));
  const run = h("button", { type: "submit", id: "preview-run" }, "Test this site");
  const out = h("div", { id: "preview-result", "aria-live": "polite" });
  const controls = h("form", { class: "filters write-only" },
    h("label", { for: "preview-keyword" }, "keyword", keyword),
    h("label", { for: "preview-pages" }, "pages", pages), run);
  show(root, h("h2", {}, "Test this site"),
    h("p", { class: "muted" }, "A worker crawls the search as the fleet would, with this form's settings, and stores nothing."),
    controls, out);
  let tested = false;
  const stale = () => {
    if (!tested) return;
    tested = false;
    show(out, h("p", { class: "muted", id: "preview-stale" }, "The form changed since this test: test again to see what it finds now."));
  };
  editor.form.addEventListener("input", stale);
  editor.form.addEventListener("change", stale);
  controls.addEventListener("submit", async (e) => {
    e.preventDefault();
    editor.clearErrors();
    tested = false;
    run.disabled = true;
    show(out, h("p", { class: "muted" }, "A worker is crawling…"));
    try {
      const request = { site: editor.siteBody(), keyword: keyword.value.trim(), pages: Number(pages.value) };
      if (siteId) request.site_id = siteId;
      const answer = await post("/api/sites/preview", request, { timeoutMs: 90000 });
      showPreview(out, answer);
      tested = true;
    } catch (error) {
      if (error.field === "keyword" || error.field === "pages") show(out, h("p", { class: "error" }, error.message));
      else {
        editor.showError(error, "site.");
        show(out, h("p", { class: "error", id: "preview-error" }, error.message));
        tested = true;
      }
    } finally {
      run.disabled = false;
    }
  });
}

/** A value as a cell shows it: a list's values apart, an object as JSON. */
function shown(value) {
  if (value === null || value === undefined) return "";
  if (Array.isArray(value)) return value.map(shown).join(" · ");
  return typeof value === "object" ? JSON.stringify(value) : String(value);
}

/** One field of a previewed item: typed, what the page held when it differs, why it did not parse. */
function previewCell(item, name) {
  const typed = shown(item.fields[name]);
  const raw = item.raw && name in item.raw ? shown(item.raw[name]) : typed;
  const error = item.errors?.[name];
  return h("td", { class: error ? "error" : "", title: error ?? "" }, typed,
    raw !== typed ? h("div", { class: "muted mono raw" }, raw) : null,
    error ? h("div", { class: "field-error" }, error) : null);
}

function showPreview(root, answer) {
  const names = Object.keys(answer.empty_fields || {});
  // The site's fields, and those its rules add (a number's currency).
  const columns = [...new Set([...names, ...answer.items.flatMap((i) => Object.keys(i.fields || {}))])];
  show(root,
    answer.refusal ? h("p", { class: "refusal", id: "preview-refusal" }, h("strong", {}, answer.refusal.kind), ": ", answer.refusal.message) : null,
    h("p", { id: "preview-summary" },
      h("strong", {}, `${answer.items.length} items`), ` from ${answer.pages.length} page(s) on worker `,
      h("span", { class: "mono" }, answer.worker_id), ` in ${answer.timings.total_ms} ms `,
      h("span", { class: "muted" }, `(waited ${answer.timings.waited_ms} ms, crawled ${answer.timings.crawl_ms} ms)`)),
    h("p", {}, "final URL: ", h("span", { class: "mono", id: "preview-final-url" }, answer.final_url || "—")),
    names.length ? h("table", { id: "preview-empty" }, h("thead", {}, h("tr", {}, h("th", {}, "field"), h("th", { class: "num" }, "items without it"))),
      h("tbody", {}, names.map((n) => h("tr", { class: answer.empty_fields[n] ? "error" : "" }, h("td", {}, n), h("td", { class: "num" }, answer.empty_fields[n]))))) : null,
    h("h3", {}, "Items"),
    answer.items.length === 0 ? h("p", { class: "muted" }, "No item on the page.") :
      h("table", { id: "preview-items" },
        h("thead", {}, h("tr", {}, h("th", { class: "num" }, "page"), columns.map((n) => h("th", {}, n)), h("th", {}, "item URL"))),
        h("tbody", {}, answer.items.map((item) => h("tr", { class: item.left_out_by ? "left-out muted" : "" },
          h("td", { class: "num" }, item.page),
          columns.map((n) => previewCell(item, n)),
          h("td", { class: "mono" }, item.left_out_by ? `left out: no ${item.left_out_by}` : item.item_url || "—"))))),
    answer.details?.length ? showDetails(answer) : null,
    answer.pages.filter((page) => page.structured).map((page) => showStructured(page)),
    answer.screenshot_png ? screenshot(answer.screenshot_png) : null);
}

/** The browser's screenshot, fitted to the panel, and a button showing it
 * at its own size (the panel then scrolls). */
function screenshot(png) {
  const img = h("img", { id: "preview-screenshot", src: `data:image/png;base64,${png}`, alt: "The last page as the browser showed it" });
  const size = h("button", { type: "button", id: "preview-screenshot-size", "aria-pressed": "false" }, "Full size");
  size.addEventListener("click", () => {
    const full = img.classList.toggle("full");
    size.setAttribute("aria-pressed", String(full));
    size.textContent = full ? "Fit to the panel" : "Full size";
  });
  return [h("h3", {}, "What the browser showed"), h("p", {}, size), h("div", { class: "screenshot" }, img)];
}

/** What each detail page read gave its item: the detail fields alone, as
 * `previewCell` shows an item's (typed, raw, why not parsed). */
function showDetails(answer) {
  const names = [...new Set(answer.details.flatMap((d) => Object.keys(d.fields || {})))];
  const label = (detail) => {
    const fields = answer.items[detail.item]?.fields || {};
    return fields.title ?? fields.name ?? `item ${detail.item + 1}`;
  };
  return h("section", { id: "preview-details" },
    h("h3", {}, `Detail pages (${answer.details.length} read)`),
    h("table", {},
      h("thead", {}, h("tr", {}, h("th", {}, "item"), names.map((n) => h("th", {}, n)), h("th", {}, "detail URL"), h("th", { class: "num" }, "ms"))),
      h("tbody", {}, answer.details.map((detail) => h("tr", { dataset: { item: detail.item } },
        h("td", {}, shown(label(detail))),
        names.map((n) => previewCell(detail, n)),
        h("td", { class: "mono" }, detail.url),
        h("td", { class: "num" }, detail.took_ms))))));
}

/** What a page publishes as structured data: each type with the items it
 * would give as `structured_items`, and each top-level item's properties. */
function showStructured(page) {
  const found = page.structured;
  const types = Object.entries(found.types);
  return h("section", { class: "preview-structured", dataset: { page: page.page } },
    h("h3", {}, `Structured data on page ${page.page}`),
    types.length === 0 ? h("p", { class: "muted" }, "None (no JSON-LD or microdata item).") :
      h("table", { class: "structured-types" },
        h("thead", {}, h("tr", {}, h("th", {}, "type"), h("th", { class: "num" }, "items as structured_items"))),
        h("tbody", {}, types.map(([type, count]) => h("tr", {}, h("td", { class: "mono" }, type), h("td", { class: "num" }, count))))),
    found.skipped_scripts ? h("p", { class: "error" }, `${found.skipped_scripts} JSON-LD script(s) not JSON: skipped`) : null,
    found.items.map((item) => h("details", { class: "structured-item" },
      h("summary", {}, `${item.source}: ${item.types.join(", ") || "(no type)"}`),
      h("pre", { class: "mono" }, JSON.stringify(item.properties, null, 2)))));
}

