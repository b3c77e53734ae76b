// A site's editor: the form, with each error the API names shown beside its
// field; "Test this site" beside it (`site_preview.js`), "Learn from
// examples" (`site_learn.js`: proposals that fill its selectors); and, for a stored
// site, how it is doing and its versions (`site_versions.js`). Its detail
// pages are `site_detail.js`.

import { get, post, put, del } from "./api.js";
import { h, show, ago, time, percent, sparkline, failure, healthBadge } from "./dom.js";
import { input, check, fieldRow, readFields, fieldRowTarget } from "./site_fields.js";
import { detailPart } from "./site_detail.js";
import { renderPreview } from "./site_preview.js";
import { renderLearn } from "./site_learn.js";
import { showVersions } from "./site_versions.js";
import { showRepairs } from "./site_repairs.js";

/** What a browser page may download again (README "What a browser page downloads"). */
const RESOURCE_KINDS = [["image", "images"], ["media", "video and audio"], ["font", "web fonts"],
  ["tracker", "tracker and ad hosts"]];

export function render(root, { id }, ctx) {
  const form = h("form", { class: "form panel", id: "site-form", novalidate: true });
  const fields = h("div", { id: "field-rows", class: "form" });
  const formError = h("p", { class: "error", id: "site-form-error", role: "alert" });
  const preview = h("section", { class: "panel preview", id: "preview" });
  const learn = h("section", { class: "panel preview", id: "learn" });
  const health = h("section", { class: "panel", id: "site-health" });
  const versions = h("section", { class: "panel", id: "site-versions" });
  const repairs = h("section", { class: "panel", id: "site-repairs" });
  const detail = detailPart(fields);

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
      h("div", { class: "browser-only" },
        h("div", { class: "row" },
          ...RESOURCE_KINDS.map(([kind, label]) => check(`browser_resources.${kind}`, label))),
        h("span", { class: "muted" }, "a browser page downloads none of these unless the site's items need them"),
        h("span", { class: "field-error", dataset: { errorFor: "browser_resources" } })),
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
    detail.fieldset,
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
        input("expect.max_empty_runs", "empty runs in a row at most", { type: "number", min: 0 })),
      h("label", { for: "site-repair" }, "when its markup changes",
        h("select", { id: "site-repair", name: "repair", dataset: { field: "repair" } },
          h("option", { value: "suggest" }, "suggest a repair"),
          h("option", { value: "auto" }, "repair by itself"),
          h("option", { value: "off" }, "no repair")),
        h("span", { class: "muted" }, "a repair is verified before it is shown; by itself, it is undone if the next run is bad again"),
        h("span", { class: "field-error", dataset: { errorFor: "repair" } }))),
    h("fieldset", {}, h("legend", {}, "Identity"),
      input("user_agent", "user agent"),
      h("label", { for: "site-headers" }, "extra headers, one \"Name: value\" per line (values are kept secret; *** keeps the stored one)",
        h("textarea", { id: "site-headers", name: "headers", rows: 3, dataset: { field: "headers" } }),
        h("span", { class: "field-error", dataset: { errorFor: "headers" } })),
      input("proxy", "proxy (http:// or socks5://)"),
      h("label", { for: "site-proxy-pool" }, "or: a proxy pool (JSON; credentials shown as *** keep the stored ones)",
        h("textarea", { id: "site-proxy-pool", name: "proxy_pool", rows: 3, dataset: { field: "proxy_pool" },
          placeholder: '{"members": [{"url": "http://proxy-a.example:3128", "weight": 2}], "rotation": "per_page"}' }),
        h("span", { class: "muted" }, "weights 1 to 1000; rotation per_run, per_page (once per run in browser mode) or sticky"),
        h("span", { class: "field-error", dataset: { errorFor: "proxy_pool" } })),
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
    h("div", { class: "split" }, form, h("div", {}, preview, learn, id ? health : null, id ? repairs : null, id ? versions : null)));

  const applyRender = () => {
    const mode = form.render.value;
    for (const el of form.querySelectorAll(".html-only")) el.hidden = mode === "json";
    for (const el of form.querySelectorAll(".json-only")) el.hidden = mode !== "json";
    for (const el of form.querySelectorAll(".browser-only")) el.hidden = mode !== "browser";
  };
  form.render.addEventListener("change", applyRender);
  form.addEventListener("input", (e) => {
    clearError(e.target);
    if (fields.contains(e.target)) detail.refresh();
  });

  function refreshVersions() {
    showVersions(versions, id, ctx, (site) => {
      fill(form, fields, detail, site);
      applyRender();
    });
  }

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
      const site = body(form, fields, detail);
      const saved = id ? await put(`/api/sites/${id}`, site) : await post("/api/sites", site);
      ctx.catalog.forget();
      ctx.toast(id ? "Site saved" : "Site created");
      if (!id) ctx.go(`#/sites/${saved.id}`);
      else {
        fill(form, fields, detail, saved);
        refreshVersions();
      }
    } catch (error) {
      showError(form, formError, error, "", fields, detail);
    } finally {
      button.disabled = false;
    }
  });

  renderPreview(preview, {
    form,
    siteBody: () => body(form, fields, detail),
    clearErrors: () => {
      clearErrors(form);
      formError.textContent = "";
    },
    showError: (error, prefix) => showError(form, formError, error, prefix, fields, detail),
  }, id);
  renderLearn(learn, {
    siteBody: () => body(form, fields, detail),
    fieldNames: () => [...fields.querySelectorAll(".field-name")].map((el) => el.value.trim()).filter(Boolean),
    clearErrors: () => {
      clearErrors(form);
      formError.textContent = "";
    },
    showError: (error, prefix) => showError(form, formError, error, prefix, fields, detail),
    // A proposal's selectors into the form (saved only with the form).
    use: (proposal) => {
      form.elements.item_selector.value = proposal.item_selector;
      form.elements.structured_items.value = "";
      show(fields, Object.entries(proposal.fields).map(([name, spec]) => fieldRow(name, spec)));
      detail.refresh();
      applyRender();
      ctx.toast("Selectors filled in: save the site to keep them");
    },
  }, id);
  if (id) {
    get(`/api/sites/${id}`)
      .then((site) => {
        document.getElementById("site-title").textContent = site.name;
        fill(form, fields, detail, site);
        applyRender();
      })
      .catch((e) => show(formError, failure(e)));
    showHealth(health, id);
    showRepairs(repairs, id, ctx);
    refreshVersions();
  } else {
    fields.append(fieldRow("title", { selector: "" }));
    detail.fill(null);
    form.elements.enabled.checked = true;
    form.elements.respect_robots.checked = true;
    form.elements.repair.value = "suggest";
    applyRender();
  }
}

/** The form as the API's site body: `fields` holds the list's field rows. */
function body(form, fields, detail) {
  const text = (name) => form.elements[name].value.trim() || undefined;
  const number = (name) => (form.elements[name].value === "" ? undefined : Number(form.elements[name].value));
  const flag = (name) => form.elements[name].checked;
  const mode = form.render.value;
  let actions;
  if (mode === "browser" && form.actions.value.trim()) {
    try {
      actions = JSON.parse(form.actions.value);
    } catch (e) {
      throw Object.assign(new Error(`page actions: not JSON (${e.message})`), { field: "actions" });
    }
  }
  let proxyPool;
  if (form.proxy_pool.value.trim()) {
    try {
      proxyPool = JSON.parse(form.proxy_pool.value);
    } catch (e) {
      throw Object.assign(new Error(`proxy pool: not JSON (${e.message})`), { field: "proxy_pool" });
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
    fields: readFields(fields, { json: mode === "json" }),
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
    proxy_pool: proxyPool,
    detail: detail.body(mode),
    repair: form.elements.repair.value,
    browser_resources: { allow: RESOURCE_KINDS.map(([kind]) => kind).filter((kind) => flag(`browser_resources.${kind}`)) },
  };
}

/** A stored site into the form. */
function fill(form, fields, detail, site) {
  const set = (name, value) => {
    const el = form.elements[name];
    if (el.type === "checkbox") el.checked = !!value;
    else el.value = value ?? "";
  };
  for (const name of ["name", "search_url", "render", "item_selector", "structured_items", "item_key", "wait_for", "blocked_selector", "max_pages",
    "stuck_timeout_secs", "max_attempts", "max_requests_per_sec", "max_concurrent_runs", "enabled", "stop_on_seen",
    "expect_items", "respect_robots", "keep_session", "exclusive_session", "user_agent", "proxy", "repair"]) set(name, site[name]);
  for (const [kind] of RESOURCE_KINDS) set(`browser_resources.${kind}`, site.browser_resources?.allow?.includes(kind));
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
  form.proxy_pool.value = site.proxy_pool ? JSON.stringify(site.proxy_pool, null, 1) : "";
  form.headers.value = Object.entries(site.headers || {}).map(([k, v]) => `${k}: ${v}`).join("\n");
  show(fields, Object.entries(site.fields).map(([name, spec]) => fieldRow(name, spec)));
  detail.fill(site.detail);
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
function showError(form, fallback, error, prefix, fields, detail) {
  let field = error.field && error.field.startsWith(prefix) ? error.field.slice(prefix.length) : null;
  // A field's part (`fields.title.selector`, `detail.fields.sku.number`):
  // beside that input of its row.
  const row = field && (fieldRowTarget(fields, field) || detail.target(field));
  if (row) {
    row.input.setAttribute("aria-invalid", "true");
    row.row.querySelector(".field-error").textContent = error.message;
    row.input.focus();
    return;
  }
  let target = null;
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
    // A step of a list (`actions[2].selector`), or a detail part without
    // an input of its own, is named: the box alone does not say which.
    const named = error.field.slice(prefix.length);
    const whole = named.includes("[") || (named.startsWith("detail.") && named !== field);
    if (message) message.textContent = whole ? `${named}: ${error.message}` : error.message;
    target.focus();
  } else {
    fallback.textContent = error.message;
  }
}

/** How many of a site's failed runs its page lists. */
const RECENT_FAILURES = 5;

async function showHealth(root, id) {
  show(root, h("h2", {}, "How it is doing"), h("p", { class: "muted" }, "Loading…"));
  try {
    const [s, proxies, failed] = await Promise.all([get(`/api/sites/${id}/health`), get(`/api/sites/${id}/proxies`),
      get(`/api/runs?site_id=${id}&state=failed&limit=${RECENT_FAILURES}`)]);
    const last = failed.items[0];
    show(root, h("h2", {}, "How it is doing"),
      h("dl", { class: "facts", id: "site-health-facts" },
        h("dt", {}, "status"), h("dd", { id: "site-status" }, healthBadge(s.status),
          s.blocked_since ? [" since ", time(s.blocked_since)] : ""),
        h("dt", {}, "streak"), h("dd", {}, s.streak ? [`${s.streak.runs} ${s.streak.verdict} run(s) in a row, since `, time(s.streak.since)] : "—"),
        h("dt", {}, "last success"), h("dd", {}, ago(s.last_success_at)),
        ...[["24 h", s.last_24h], ["7 days", s.last_7d]].flatMap(([span, w]) => [
          h("dt", {}, `success, ${span}`), h("dd", {}, `${percent(w.success_rate)} of ${w.runs_ended} runs, ${percent(w.degraded_rate)} degraded`),
          h("dt", {}, `blocked, ${span}`), h("dd", {}, `${percent(w.blocked_rate)} of ${w.attempts_ended} attempts`)]),
        h("dt", {}, "items per run"), h("dd", {}, sparkline(s.recent_runs.map((r) => r.items_found), "items per run, last 20 runs")),
        ...proxies.flatMap((p) => [
          h("dt", {}, `proxy ${p.label}`),
          h("dd", { class: "proxy" }, p.state === "retired" ? ["retired until ", time(p.retired_until)] : "active",
            `, ${p.pages} pages, ${p.refusals} refusals`, p.last_error ? ` (last: ${p.last_error})` : "")])),
      h("h3", {}, "Recent failures"),
      last ? h("p", { id: "site-last-error" }, "Last error: ", h("span", { class: "error" }, last.error || last.error_kind || "unknown"),
        " (", h("a", { href: `#/runs/${last.id}` }, `run ${last.id}`), ", ", time(last.finished_at ?? last.state_changed_at), ")")
        : h("p", { class: "muted", id: "site-last-error" }, "No failed run."),
      failed.items.length ? h("ul", { id: "site-failures" }, failed.items.map((run) => h("li", { dataset: { run: run.id } },
        h("a", { href: `#/runs/${run.id}` }, `Run ${run.id}`), " ", time(run.finished_at ?? run.state_changed_at), ": ",
        run.error_kind ? h("span", { class: "badge kind" }, run.error_kind.replaceAll("_", " ")) : null, " ", run.error || ""))) : null,
      h("p", {}, h("a", { href: `#/runs?site_id=${id}` }, "Its runs"), " · ",
        h("a", { href: `#/runs?site_id=${id}&state=failed`, id: "site-failed-runs" }, "Its failed runs"), " · ",
        h("a", { href: `#/results?site_id=${id}` }, "Its results")));
  } catch (e) {
    show(root, failure(e));
  }
}
