// Keywords: what is searched, on which sites, on which schedule (on the
// clocks of the keyword's time zone); enable or disable one, crawl it now,
// and see its next five fire times, on its clocks and in UTC.

import { get, post, put, del } from "./api.js";
import { h, show, failure } from "./dom.js";
import { bulkBar, why } from "./bulk.js";
import { wallTime, zoneNames, fieldMaker, clearErrors, showError } from "./form.js";

/** Enables or disables `target` rows through `path` (the bulk API); what it did, for the bar. */
const switchAll = (path, enabled) => async (target, dryRun) => {
  const outcome = await post(path, { enabled, dry_run: dryRun, ...target });
  return {
    done: outcome.changed,
    skippedWhy: why({ [`already ${enabled ? "enabled" : "disabled"}`]: outcome.unchanged_ids.length, "no longer there": outcome.not_found.length }),
  };
};

export function renderList(root, _params, ctx) {
  const body = h("tbody", { id: "keywords" });
  const status = h("p", { class: "muted", role: "status" }, "Loading…");
  const selection = bulkBar({
    id: "keywords-bulk", noun: "keyword", ctx,
    matching: async () => (await get("/api/keywords")).items.length,
    actions: [
      { key: "disable", label: "Disable", past: "Disabled", css: "danger", perform: switchAll("/api/keywords/enabled", false) },
      { key: "enable", label: "Enable", past: "Enabled", perform: switchAll("/api/keywords/enabled", true) },
    ],
    after: () => load(),
  });
  show(root,
    h("div", { class: "actions" }, h("h1", {}, "Keywords"),
      h("a", { href: "#/keywords/new", class: "button write-only", id: "new-keyword" }, "New keyword")),
    selection.bar,
    h("table", {}, h("thead", {}, h("tr", {}, selection.headCell(),
      h("th", {}, "keyword"), h("th", {}, "sites"), h("th", {}, "schedule"), h("th", {}, "next run (its clock)"),
      h("th", { class: "num" }, "priority"), h("th", {}, "enabled"), h("th", { class: "write-only" }, ""))), body),
    status);

  const load = async () => {
    try {
      const [keywords, catalog] = await Promise.all([get("/api/keywords"), ctx.catalog.load()]);
      show(body, keywords.items.map((k) => h("tr", { dataset: { keyword: k.id } },
        selection.rowCell(k.id, k.keyword),
        h("td", {}, h("a", { href: `#/keywords/${k.id}` }, k.keyword),
          k.enabled ? null : [" ", h("span", { class: "badge state-cancelled paused" }, "paused")]),
        h("td", {}, k.site_ids.map((id) => catalog.siteName(id)).join(", ")),
        h("td", {}, h("span", { class: "mono" }, k.schedule), h("span", { class: "muted" }, ` ${k.timezone}`,
          k.jitter_secs ? ` · jitter ${k.jitter_secs} s` : "")),
        h("td", { class: "next-run" }, !k.enabled ? h("span", { class: "muted" }, "paused: not on its schedule")
          : k.next_fire_times[0] ? wallTime(k.next_fire_times_local[0], k.next_fire_times[0]) : "—"),
        h("td", { class: "num" }, k.priority),
        h("td", {}, h("input", {
          type: "checkbox", checked: k.enabled, disabled: ctx.access === "read", "aria-label": `${k.keyword} enabled`,
          // The row (badge, next run) follows the stored keyword.
          onchange: (e) => setEnabled(k, e.target, ctx).then(load),
        })),
        h("td", { class: "write-only" }, h("button", {
          type: "button", class: "secondary", onclick: (e) => crawlNow(k, e.target, ctx),
        }, "Crawl now")))));
      status.textContent = keywords.items.length ? "" : "No keyword yet.";
    } catch (e) {
      show(status, failure(e));
    }
  };
  load();
}

async function setEnabled(keyword, box, ctx) {
  box.disabled = true;
  try {
    await put(`/api/keywords/${keyword.id}`, bodyOf({ ...keyword, enabled: box.checked }));
    keyword.enabled = box.checked;
    ctx.toast(`${keyword.keyword}: ${box.checked ? "enabled" : "disabled"}`);
  } catch (e) {
    box.checked = !box.checked;
    ctx.toast(e.message, { bad: true });
  } finally {
    box.disabled = false;
  }
}

async function crawlNow(keyword, button, ctx) {
  // A paused keyword crawls only when asked to: make sure that is meant.
  if (!keyword.enabled && !confirm(`${keyword.keyword} is paused. Crawl it once now anyway? Its schedule stays paused.`)) {
    ctx.toast(`${keyword.keyword} is paused: nothing queued`);
    return;
  }
  button.disabled = true;
  try {
    const outcome = await post(`/api/keywords/${keyword.id}/crawl`);
    const parts = [`${outcome.queued.length} queued`];
    if (outcome.already_active.length) parts.push(`${outcome.already_active.length} already running`);
    if (outcome.skipped.length) parts.push(`${outcome.skipped.length} already crawled this period`);
    if (outcome.disabled_sites.length) parts.push(`${outcome.disabled_sites.length} site(s) disabled`);
    if (!keyword.enabled) parts.push("its schedule stays paused");
    ctx.toast(`${keyword.keyword}: ${parts.join(", ")}`);
  } catch (e) {
    ctx.toast(e.message, { bad: true });
  } finally {
    button.disabled = false;
  }
}

const bodyOf = (k) => ({
  keyword: k.keyword, site_ids: k.site_ids, schedule: k.schedule, timezone: k.timezone,
  jitter_secs: k.jitter_secs, enabled: k.enabled, priority: k.priority,
});

export function renderEditor(root, { id }, ctx) {
  const form = h("form", { class: "form panel", id: "keyword-form", novalidate: true });
  const fires = h("section", { class: "panel", id: "fire-times" });
  const formError = h("p", { class: "error", role: "alert" });
  show(root, h("p", {}, h("a", { href: "#/keywords" }, "← Keywords")),
    h("h1", {}, id ? "Keyword" : "New keyword"),
    h("div", { class: "split" }, form, fires));

  const field = fieldMaker("keyword");

  const build = async () => {
    const catalog = await ctx.catalog.load();
    const keyword = id ? await get(`/api/keywords/${id}`) : {
      keyword: "", site_ids: [], schedule: "0 0 8 * * *", enabled: true, priority: 0, next_fire_times: [],
      // A new keyword's clock is the viewer's: the mornings they mean are theirs.
      timezone: Intl.DateTimeFormat().resolvedOptions().timeZone || "UTC", jitter_secs: 0,
    };
    show(form,
      field("keyword", "keyword", { required: true, value: keyword.keyword }),
      h("fieldset", { dataset: { field: "site_ids" } }, h("legend", {}, "sites"),
        catalog.sites.length === 0 ? h("p", { class: "muted" }, "No site yet: create one first.") : null,
        catalog.sites.map((s) => h("label", { class: "check" },
          h("input", { type: "checkbox", name: "site_ids", value: s.id, checked: keyword.site_ids.includes(s.id) }), s.name)),
        h("span", { class: "field-error", dataset: { errorFor: "site_ids" }, role: "alert" })),
      field("schedule", "schedule", { required: true, value: keyword.schedule, class: "mono" },
        "cron with seconds, on the clocks of the time zone below: \"0 0 8 * * *\" is every day at 08:00"),
      field("timezone", "time zone", { required: true, value: keyword.timezone, list: "zone-names", autocomplete: "off" },
        "IANA name (Asia/Seoul, America/New_York, UTC); a time the clocks skip runs as they jump, one they show twice runs once"),
      h("datalist", { id: "zone-names" }, zoneNames().map((name) => h("option", { value: name }))),
      field("jitter_secs", "jitter (seconds)", { type: "number", min: 0, max: 3600, value: keyword.jitter_secs },
        "each run starts up to this late, the same delay every time, so keywords on one schedule do not all start at once"),
      field("priority", "priority (higher first)", { type: "number", value: keyword.priority }),
      h("label", { class: "check" }, h("input", { type: "checkbox", name: "enabled", checked: keyword.enabled }), "enabled"),
      formError,
      h("div", { class: "actions write-only" },
        h("button", { type: "submit", id: "save-keyword" }, id ? "Save" : "Create"),
        id ? h("button", { type: "button", class: "danger", id: "delete-keyword", onclick: remove }, "Delete") : null));
    showFires(keyword);
    if (ctx.access === "read") for (const el of form.elements) el.disabled = true;
  };

  const showFires = (keyword) => show(fires, h("h2", {}, "Next runs"),
    !id ? h("p", { class: "muted" }, "Shown once the keyword is saved.") :
      !keyword.enabled ? h("p", { class: "muted", id: "keyword-paused" }, h("span", { class: "badge state-cancelled" }, "paused"), " it does not run on its schedule.") :
      keyword.next_fire_times.length === 0 ? h("p", { class: "muted" }, "The schedule does not fire again.") :
        h("ol", { id: "next-fire-times" }, keyword.next_fire_times.map((t, i) => h("li", {},
          wallTime(keyword.next_fire_times_local[i], t),
          h("span", { class: "muted" }, ` (${new Date(t).toISOString().slice(0, 19).replace("T", " ")} UTC)`)))));

  async function remove() {
    if (!confirm("Delete this keyword with its runs and results?")) return;
    try {
      await del(`/api/keywords/${id}`);
      ctx.catalog.forget();
      ctx.go("#/keywords");
    } catch (e) {
      formError.textContent = e.message;
    }
  }

  form.addEventListener("submit", async (e) => {
    e.preventDefault();
    clearErrors(form, formError);
    const body = {
      keyword: form.elements.keyword.value.trim(),
      site_ids: [...form.querySelectorAll("input[name=site_ids]:checked")].map((b) => Number(b.value)),
      schedule: form.elements.schedule.value.trim(),
      timezone: form.elements.timezone.value.trim(),
      jitter_secs: Number(form.elements.jitter_secs.value || 0),
      enabled: form.elements.enabled.checked,
      priority: Number(form.elements.priority.value || 0),
    };
    try {
      const saved = id ? await put(`/api/keywords/${id}`, body) : await post("/api/keywords", body);
      ctx.catalog.forget();
      ctx.toast(`Saved; next run ${saved.next_fire_times[0] ? wallTime(saved.next_fire_times_local[0], saved.next_fire_times[0]).textContent : "never"}`);
      if (!id) ctx.go(`#/keywords/${saved.id}`);
      else showFires(saved);
    } catch (error) {
      showError(form, formError, error);
    }
  });

  build().catch((e) => show(form, failure(e)));
}
