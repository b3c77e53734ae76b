// A site's editor: the form, with each error the API names shown beside its
// field; "Test this site" beside it (a worker crawls page 1, or 1 and 2, and
// shows what it found); and, for a stored site, how it is doing.

import { get, post, put, del } from "./api.js";
import { h, show, ago, time, percent, sparkline, failure, healthBadge } from "./dom.js";

/** The form's inputs, each named as the API names the field (error `field`). */
function input(field, label, attributes = {}, hint) {
  const id = `site-${field.replace(/\W/g, "-")}`;
  return h("label", { for: id }, label,
    h("input", { id, name: field, dataset: { field }, ...attributes }),
    hint ? h("span", { class: "muted" }, hint) : null,
    h("span", { class: "field-error", dataset: { errorFor: field }, role: "alert" }));
}

function check(field, label) {
  const id = `site-${field.replace(/\W/g, "-")}`;
  return h("label", { class: "check", for: id }, h("input", { id, type: "checkbox", name: field, dataset: { field } }), label);
}

/** A field's value rules (README "Typed values"), edited as one JSON object. */
const RULE_KEYS = ["whitespace", "regex", "all", "number", "date", "default", "required"];

function rulesOf(spec) {
  const rules = Object.fromEntries(RULE_KEYS.filter((k) => spec[k] !== undefined).map((k) => [k, spec[k]]));
  return Object.keys(rules).length ? JSON.stringify(rules) : "";
}

function fieldRow(name = "", spec = {}) {
  const row = h("fieldset", { class: "field-row", dataset: { fieldRow: "" } },
    h("legend", {}, "Field"),
    h("div", { class: "row" },
      h("label", {}, "name", h("input", { class: "field-name", value: name, required: true, "aria-label": "field name" })),
      h("label", { class: "html-only" }, "CSS selector", h("input", { class: "field-selector", value: spec.selector ?? "" })),
      h("label", { class: "html-only" }, "attribute (else the text)", h("input", { class: "field-attr", value: spec.attr ?? "" })),
      h("label", { class: "html-only" }, "or a structured data path", h("input", { class: "field-structured", value: spec.structured ?? "", placeholder: "offers.price" })),
      h("label", { class: "json-only" }, "JSON pointer", h("input", { class: "field-pointer", value: spec.pointer ?? "" })),
      h("label", { class: "check" }, h("input", { type: "checkbox", class: "field-link", checked: !!spec.link }), "a link")),
    h("label", {}, "value rules (JSON)",
      h("input", { class: "field-rules mono", value: rulesOf(spec), placeholder: '{"number": {"locale": "ko-KR", "currency_field": "currency"}}' })),
    h("span", { class: "field-error", role: "alert" }),
    h("button", { type: "button", class: "quiet write-only", onclick: () => row.remove() }, "Remove field"));
  return row;
}

export function render(root, { id }, ctx) {
  const form = h("form", { class: "form panel", id: "site-form", novalidate: true });
  const fields = h("div", { id: "field-rows", class: "form" });
  const formError = h("p", { class: "error", id: "site-form-error", role: "alert" });
  const preview = h("section", { class: "panel preview", id: "preview" });
  const health = h("section", { class: "panel", id: "site-health" });

  // One fieldset around everything: disabled for a read token, which
  // disables the fields added later (a stored site's) too.
  show(form, h("fieldset", { class: "bare", disabled: ctx.access === "read" },
    h("fieldset", {}, h("legend", {}, "Site"),
      input("name", "name", { required: true }),
      input("search_url", "search URL", { required: true, placeholder: "https://example.com/search?q={keyword}&page={page}" },
        "{keyword} is the keyword; {page} the page number, {offset} the first item's index (paging by offset)"),
      h("label", { for: "site-render" }, "render",
        h("select", { id: "site-render", name: "render", dataset: { field: "render" } },
          h("option", { value: "browser" }, "browser (headless Chromium)"),
          h("option", { value: "http" }, "http (plain HTML)"),
          h("option", { value: "json" }, "json (a JSON API)")),
        h("span", { class: "field-error", dataset: { errorFor: "render" } })),
      check("enabled", "enabled: its keywords queue runs for it (disabled, it keeps its settings and history)")),
    h("fieldset", {}, h("legend", {}, "Extraction"),
      h("div", { class: "html-only" }, input("item_selector", "item selector (CSS)", { placeholder: ".result" })),
      h("div", { class: "html-only" }, input("structured_items", "or: the page's structured items of type", { placeholder: "Product" },
        "a schema.org type in the page's JSON-LD or microdata (the preview lists them); each field then reads a path in the item")),
      h("div", { class: "browser-only" }, input("wait_for", "wait for (CSS, browser)")),
      h("div", { class: "browser-only" },
        h("label", { for: "site-actions" }, "page actions before reading the first page (JSON list, browser)",
          h("textarea", { id: "site-actions", name: "actions", rows: 3, dataset: { field: "actions" },
            placeholder: '[{"action": "dismiss", "selector": "#cookies .accept"}]' }),
          h("span", { class: "muted" }, "click, type (text: {keyword} is the keyword), press, select, scroll, wait_for, wait, dismiss; at most 20"),
          h("span", { class: "field-error", dataset: { errorFor: "actions" } }))),
      h("div", { class: "html-only" }, input("blocked_selector", "blocked page shows (CSS)")),
      h("div", { class: "json-only row" },
        input("json.items", "items (JSON pointer)", { placeholder: "/data/items" }),
        input("json.next_token", "next-page token (JSON pointer)"),
        input("json.token_param", "token query parameter")),
      h("h3", {}, "Fields"), h("span", { class: "field-error", dataset: { errorFor: "fields" } }),
      fields,
      h("button", { type: "button", class: "secondary write-only", id: "add-field", onclick: () => { fields.append(fieldRow()); applyRender(); } }, "Add a field"),
      input("item_key", "item key (a field's name)", { placeholder: "sku" },
        "identifies an item without a URL from one crawl to the next (else its content does)")),
    h("fieldset", {}, h("legend", {}, "Detail pages"),
      h("label", { for: "site-detail" }, "each item's own page: the list field with its URL and the fields read there (JSON, empty for none)",
        h("textarea", { id: "site-detail", name: "detail", rows: 4, dataset: { field: "detail" },
          placeholder: '{"url_field": "link", "fields": {"sku": {"selector": ".sku"}}, "read": "new_or_changed"}' }),
        h("span", { class: "muted" }, "fields as above (their own names); wait_for; render: browser or http; read: \"new\", \"new_or_changed\", \"all\" or {\"every_hours\": N}"),
        h("span", { class: "field-error", dataset: { errorFor: "detail" } }))),
    h("fieldset", {}, h("legend", {}, "Paging and pace"),
      h("div", { class: "row" },
        h("label", { for: "site-paging" }, "paging",
          h("select", { id: "site-paging", name: "paging.form", dataset: { field: "paging.form" } },
            h("option", { value: "numbered" }, "by {page} (or the JSON token)"),
            h("option", { value: "offset" }, "by {offset} in the search URL"),
            h("option", { value: "next_link" }, "a next link"),
            h("option", { value: "load_more" }, "a load-more button (browser)"),
            h("option", { value: "infinite_scroll" }, "endless scroll (browser)")),
          h("span", { class: "field-error", dataset: { errorFor: "paging.form" } })),
        input("paging.page_size", "items a page holds (offset)", { type: "number", min: 1 }),
        input("paging.selector", "next link or button (CSS)", { placeholder: "a.next" })),
      h("div", { class: "row" },
        input("max_pages", "pages at most", { type: "number", min: 1 }),
        input("stuck_timeout_secs", "stuck after (s)", { type: "number", min: 1 }),
        input("max_attempts", "attempts", { type: "number", min: 1 }),
        input("max_requests_per_sec", "requests per second (fleet)", { type: "number", min: 0, step: "any" }),
        input("max_concurrent_runs", "runs at once (fleet)", { type: "number", min: 1 })),
      h("div", { class: "row" },
        check("stop_on_seen", "stop where an earlier run stopped (newest-first feeds)"),
        check("expect_items", "the first page must have items"),
        check("respect_robots", "obey its robots.txt: pages it disallows are not fetched, a stricter Crawl-delay paces the site"))),
    h("fieldset", {}, h("legend", {}, "Data health (a completed run below these is degraded)"),
      h("div", { class: "row" },
        input("expect.min_items", "items at least", { type: "number", min: 1 }),
        input("expect.required_fields", "fields every item has", { placeholder: "title, price" }),
        input("expect.max_empty_runs", "empty runs in a row at most", { type: "number", min: 0 }))),
    h("fieldset", {}, h("legend", {}, "Identity"),
      input("user_agent", "user agent"),
      h("label", { for: "site-headers" }, "extra headers, one \"Name: value\" per line (values are kept secret; *** keeps the stored one)",
        h("textarea", { id: "site-headers", name: "headers", rows: 3, dataset: { field: "headers" } }),
        h("span", { class: "field-error", dataset: { errorFor: "headers" } })),
      input("proxy", "proxy (http:// or socks5://)"),
      h("div", { class: "row" },
        check("keep_session", "keep the session between runs"),
        check("exclusive_session", "one run at a time uses it"))),
    formError,
    h("div", { class: "actions write-only" },
      h("button", { type: "submit", id: "save-site" }, id ? "Save" : "Create"),
      id ? h("button", { type: "button", class: "danger", id: "delete-site", onclick: remove }, "Delete") : null)));

  show(root,
    h("p", {}, h("a", { href: "#/sites" }, "← Sites")),
    h("h1", { id: "site-title" }, id ? "Site" : "New site"),
    h("div", { class: "split" }, form, h("div", {}, preview, id ? health : null)));

  const applyRender = () => {
    const mode = form.render.value;
    for (const el of form.querySelectorAll(".html-only")) el.hidden = mode === "json";
    for (const el of form.querySelectorAll(".json-only")) el.hidden = mode !== "json";
    for (const el of form.querySelectorAll(".browser-only")) el.hidden = mode !== "browser";
  };
  form.render.addEventListener("change", applyRender);
  form.addEventListener("input", (e) => clearError(e.target));

  async function remove() {
    if (!confirm("Delete this site, its runs and its results?")) return;
    try {
      await del(`/api/sites/${id}`);
      ctx.catalog.forget();
      ctx.toast("Site deleted");
      ctx.go("#/sites");
    } catch (e) {
      formError.textContent = e.message;
    }
  }

  form.addEventListener("submit", async (e) => {
    e.preventDefault();
    clearErrors(form);
    const button = form.querySelector("#save-site");
    button.disabled = true;
    try {
      const saved = id ? await put(`/api/sites/${id}`, body(form)) : await post("/api/sites", body(form));
      ctx.catalog.forget();
      ctx.toast(id ? "Site saved" : "Site created");
      if (!id) ctx.go(`#/sites/${saved.id}`);
      else fill(form, fields, saved);
    } catch (error) {
      showError(form, formError, error, "");
    } finally {
      button.disabled = false;
    }
  });

  renderPreview(preview, form, formError, id);
  if (id) {
    get(`/api/sites/${id}`)
      .then((site) => {
        document.getElementById("site-title").textContent = site.name;
        fill(form, fields, site);
        applyRender();
      })
      .catch((e) => show(formError, failure(e)));
    showHealth(health, id);
  } else {
    fields.append(fieldRow("title", { selector: "" }));
    form.elements.enabled.checked = true;
    form.elements.respect_robots.checked = true;
    applyRender();
  }
}

/** The form as the API's site body. */
function body(form) {
  const text = (name) => form.elements[name].value.trim() || undefined;
  const number = (name) => (form.elements[name].value === "" ? undefined : Number(form.elements[name].value));
  const flag = (name) => form.elements[name].checked;
  const mode = form.render.value;
  const fields = {};
  for (const row of form.querySelectorAll("[data-field-row]")) {
    const name = row.querySelector(".field-name").value.trim();
    const value = (css) => row.querySelector(css).value.trim() || undefined;
    const link = row.querySelector(".field-link").checked || undefined;
    fields[name] = mode === "json"
      ? { pointer: value(".field-pointer"), link }
      : { selector: value(".field-selector"), attr: value(".field-attr"), structured: value(".field-structured"), link };
    const rules = value(".field-rules");
    if (rules) {
      let parsed;
      try {
        parsed = JSON.parse(rules);
      } catch (e) {
        throw Object.assign(new Error(`value rules: not JSON (${e.message})`), { field: `fields.${name}.rules` });
      }
      Object.assign(fields[name], parsed);
    }
  }
  let actions;
  if (mode === "browser" && form.actions.value.trim()) {
    try {
      actions = JSON.parse(form.actions.value);
    } catch (e) {
      throw Object.assign(new Error(`page actions: not JSON (${e.message})`), { field: "actions" });
    }
  }
  let detail;
  if (form.detail.value.trim()) {
    try {
      detail = JSON.parse(form.detail.value);
    } catch (e) {
      throw Object.assign(new Error(`detail pages: not JSON (${e.message})`), { field: "detail" });
    }
  }
  const headers = {};
  for (const line of form.headers.value.split("\n")) {
    if (!line.trim()) continue;
    const at = line.indexOf(":");
    headers[(at < 0 ? line : line.slice(0, at)).trim()] = at < 0 ? "" : line.slice(at + 1).trim();
  }
  return {
    name: form.elements.name.value.trim(),
    search_url: form.search_url.value.trim(),
    render: mode,
    item_selector: mode === "json" ? undefined : text("item_selector"),
    structured_items: mode === "json" ? undefined : text("structured_items"),
    wait_for: mode === "browser" ? text("wait_for") : undefined,
    actions,
    blocked_selector: mode === "json" ? undefined : text("blocked_selector"),
    json: mode === "json"
      ? { items: text("json.items") ?? "", next_token: text("json.next_token"), token_param: text("json.token_param") }
      : undefined,
    fields,
    item_key: text("item_key"),
    max_pages: number("max_pages"),
    paging: {
      form: form.elements["paging.form"].value,
      page_size: number("paging.page_size"),
      selector: text("paging.selector"),
    },
    stuck_timeout_secs: number("stuck_timeout_secs"),
    max_attempts: number("max_attempts"),
    max_requests_per_sec: number("max_requests_per_sec"),
    max_concurrent_runs: number("max_concurrent_runs"),
    enabled: flag("enabled"),
    stop_on_seen: flag("stop_on_seen"),
    expect_items: flag("expect_items"),
    expect: {
      min_items: number("expect.min_items"),
      required_fields: (text("expect.required_fields") || "").split(",").map((f) => f.trim()).filter(Boolean),
      max_empty_runs: number("expect.max_empty_runs"),
    },
    respect_robots: flag("respect_robots"),
    keep_session: flag("keep_session"),
    exclusive_session: flag("exclusive_session"),
    user_agent: text("user_agent"),
    headers,
    proxy: text("proxy"),
    detail,
  };
}

/** A stored site into the form. */
function fill(form, fields, site) {
  const set = (name, value) => {
    const el = form.elements[name];
    if (el.type === "checkbox") el.checked = !!value;
    else el.value = value ?? "";
  };
  for (const name of ["name", "search_url", "render", "item_selector", "structured_items", "item_key", "wait_for", "blocked_selector", "max_pages",
    "stuck_timeout_secs", "max_attempts", "max_requests_per_sec", "max_concurrent_runs", "enabled", "stop_on_seen",
    "expect_items", "respect_robots", "keep_session", "exclusive_session", "user_agent", "proxy"]) set(name, site[name]);
  set("expect.min_items", site.expect?.min_items);
  set("expect.required_fields", (site.expect?.required_fields || []).join(", "));
  set("expect.max_empty_runs", site.expect?.max_empty_runs);
  set("paging.form", site.paging?.form ?? "numbered");
  set("paging.page_size", site.paging?.page_size);
  set("paging.selector", site.paging?.selector);
  set("json.items", site.json?.items);
  set("json.next_token", site.json?.next_token);
  set("json.token_param", site.json?.token_param);
  form.actions.value = site.actions?.length ? JSON.stringify(site.actions, null, 1) : "";
  form.detail.value = site.detail ? JSON.stringify(site.detail, null, 1) : "";
  form.headers.value = Object.entries(site.headers || {}).map(([k, v]) => `${k}: ${v}`).join("\n");
  show(fields, Object.entries(site.fields).map(([name, spec]) => fieldRow(name, spec)));
}

function clearError(el) {
  el.removeAttribute("aria-invalid");
  const label = el.closest("label, fieldset");
  const message = label?.querySelector(".field-error");
  if (message) message.textContent = "";
}

function clearErrors(form) {
  for (const el of form.querySelectorAll("[aria-invalid]")) el.removeAttribute("aria-invalid");
  for (const el of form.querySelectorAll(".field-error")) el.textContent = "";
}

/**
 * Shows an API error beside the field it names (`fields.title.selector`,
 * `headers.X-Token` …: the nearest input that exists), else above the buttons.
 * `prefix` is what the API puts before the site's fields (`site.` for a preview).
 */
function showError(form, fallback, error, prefix) {
  let field = error.field && error.field.startsWith(prefix) ? error.field.slice(prefix.length) : null;
  let target = null;
  const fieldMatch = field && (field.match(/^fields\.(.+)\.(selector|attr|pointer|link|structured)$/)
    || field.match(new RegExp(`^fields\\.(.+?)\\.(rules|${RULE_KEYS.join("|")})([.[].*)?$`)));
  if (fieldMatch) {
    const row = [...form.querySelectorAll("[data-field-row]")]
      .find((r) => r.querySelector(".field-name").value.trim() === fieldMatch[1]);
    const input = ["selector", "attr", "pointer", "link", "structured"].includes(fieldMatch[2]) ? fieldMatch[2] : "rules";
    target = row?.querySelector(`.field-${input}`);
    if (target) {
      target.setAttribute("aria-invalid", "true");
      row.querySelector(".field-error").textContent = error.message;
      target.focus();
      return;
    }
  }
  while (field && !target) {
    target = form.querySelector(`[data-field="${CSS.escape(field)}"]`);
    if (!target) {
      field = field.includes(".") ? field.slice(0, field.lastIndexOf("."))
        : field.endsWith("]") ? field.slice(0, field.lastIndexOf("[")) : null;
    }
  }
  if (target) {
    target.setAttribute("aria-invalid", "true");
    const message = form.querySelector(`[data-error-for="${CSS.escape(field)}"]`);
    // A step of a list (`actions[2].selector`) or a part of the detail
    // pages (`detail.fields.sku.selector`) is named: each is one box.
    const named = error.field.slice(prefix.length);
    const whole = named.includes("[") || named.startsWith("detail.");
    if (message) message.textContent = whole ? `${named}: ${error.message}` : error.message;
    target.focus();
  } else {
    fallback.textContent = error.message;
  }
}

/** "Test this site": a worker crawls the form's site for a keyword. */
function renderPreview(root, form, formError, siteId) {
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
  controls.addEventListener("submit", async (e) => {
    e.preventDefault();
    clearErrors(form);
    formError.textContent = "";
    run.disabled = true;
    show(out, h("p", { class: "muted" }, "A worker is crawling…"));
    try {
      const request = { site: body(form), keyword: keyword.value.trim(), pages: Number(pages.value) };
      if (siteId) request.site_id = siteId;
      const answer = await post("/api/sites/preview", request, { timeoutMs: 90000 });
      showPreview(out, answer);
    } catch (error) {
      if (error.field === "keyword" || error.field === "pages") show(out, h("p", { class: "error" }, error.message));
      else {
        showError(form, formError, error, "site.");
        show(out, h("p", { class: "error", id: "preview-error" }, error.message));
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
    answer.pages.filter((page) => page.structured).map((page) => showStructured(page)),
    answer.screenshot_png ? [h("h3", {}, "What the browser showed"),
      h("img", { id: "preview-screenshot", src: `data:image/png;base64,${answer.screenshot_png}`, alt: "The last page as the browser showed it" })] : null);
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

async function showHealth(root, id) {
  show(root, h("h2", {}, "How it is doing"), h("p", { class: "muted" }, "Loading…"));
  try {
    const s = await get(`/api/sites/${id}/health`);
    show(root, h("h2", {}, "How it is doing"),
      h("dl", { class: "facts", id: "site-health" },
        h("dt", {}, "status"), h("dd", { id: "site-status" }, healthBadge(s.status),
          s.blocked_since ? ` since ${time(s.blocked_since)}` : ""),
        h("dt", {}, "streak"), h("dd", {}, s.streak ? `${s.streak.runs} ${s.streak.verdict} run(s) in a row, since ${time(s.streak.since)}` : "—"),
        h("dt", {}, "last success"), h("dd", {}, ago(s.last_success_at)),
        ...[["24 h", s.last_24h], ["7 days", s.last_7d]].flatMap(([span, w]) => [
          h("dt", {}, `success, ${span}`), h("dd", {}, `${percent(w.success_rate)} of ${w.runs_ended} runs, ${percent(w.degraded_rate)} degraded`),
          h("dt", {}, `blocked, ${span}`), h("dd", {}, `${percent(w.blocked_rate)} of ${w.attempts_ended} attempts`)]),
        h("dt", {}, "items per run"), h("dd", {}, sparkline(s.recent_runs.map((r) => r.items_found), "items per run, last 20 runs"))),
      h("p", {}, h("a", { href: `#/runs?site_id=${id}` }, "Its runs"), " · ", h("a", { href: `#/results?site_id=${id}` }, "Its results")));
  } catch (e) {
    show(root, failure(e));
  }
}
