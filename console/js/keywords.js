// Keywords: what is searched, on which sites, on which schedule; enable or
// disable one, crawl it now, and see its next five fire times.

import { get, post, put, del } from "./api.js";
import { h, show, time, when, failure } from "./dom.js";

export function renderList(root, _params, ctx) {
  const body = h("tbody", { id: "keywords" });
  const status = h("p", { class: "muted", role: "status" }, "Loading…");
  show(root,
    h("div", { class: "actions" }, h("h1", {}, "Keywords"),
      h("a", { href: "#/keywords/new", class: "button write-only", id: "new-keyword" }, "New keyword")),
    h("table", {}, h("thead", {}, h("tr", {},
      h("th", {}, "keyword"), h("th", {}, "sites"), h("th", {}, "schedule (UTC)"), h("th", {}, "next run"),
      h("th", { class: "num" }, "priority"), h("th", {}, "enabled"), h("th", { class: "write-only" }, ""))), body),
    status);

  const load = async () => {
    try {
      const [keywords, catalog] = await Promise.all([get("/api/keywords"), ctx.catalog.load()]);
      show(body, keywords.items.map((k) => h("tr", { dataset: { keyword: k.id } },
        h("td", {}, h("a", { href: `#/keywords/${k.id}` }, k.keyword)),
        h("td", {}, k.site_ids.map((id) => catalog.siteName(id)).join(", ")),
        h("td", { class: "mono" }, k.schedule),
        h("td", {}, k.next_fire_times[0] ? time(k.next_fire_times[0]) : "—"),
        h("td", { class: "num" }, k.priority),
        h("td", {}, h("input", {
          type: "checkbox", checked: k.enabled, disabled: ctx.access === "read", "aria-label": `${k.keyword} enabled`,
          onchange: (e) => setEnabled(k, e.target, ctx),
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
  button.disabled = true;
  try {
    const outcome = await post(`/api/keywords/${keyword.id}/crawl`);
    const parts = [`${outcome.queued.length} queued`];
    if (outcome.already_active.length) parts.push(`${outcome.already_active.length} already running`);
    if (outcome.skipped.length) parts.push(`${outcome.skipped.length} already crawled this period`);
    if (outcome.disabled_sites.length) parts.push(`${outcome.disabled_sites.length} site(s) disabled`);
    ctx.toast(`${keyword.keyword}: ${parts.join(", ")}`);
  } catch (e) {
    ctx.toast(e.message, { bad: true });
  } finally {
    button.disabled = false;
  }
}

const bodyOf = (k) => ({ keyword: k.keyword, site_ids: k.site_ids, schedule: k.schedule, enabled: k.enabled, priority: k.priority });

export function renderEditor(root, { id }, ctx) {
  const form = h("form", { class: "form panel", id: "keyword-form", novalidate: true });
  const fires = h("section", { class: "panel", id: "fire-times" });
  const formError = h("p", { class: "error", role: "alert" });
  show(root, h("p", {}, h("a", { href: "#/keywords" }, "← Keywords")),
    h("h1", {}, id ? "Keyword" : "New keyword"),
    h("div", { class: "split" }, form, fires));

  const field = (name, label, attributes, hint) => h("label", { for: `keyword-${name}` }, label,
    h("input", { id: `keyword-${name}`, name, dataset: { field: name }, ...attributes }),
    hint ? h("span", { class: "muted" }, hint) : null,
    h("span", { class: "field-error", dataset: { errorFor: name }, role: "alert" }));

  const build = async () => {
    const catalog = await ctx.catalog.load();
    const keyword = id ? await get(`/api/keywords/${id}`) : { keyword: "", site_ids: [], schedule: "0 0 8 * * *", enabled: true, priority: 0, next_fire_times: [] };
    show(form,
      field("keyword", "keyword", { required: true, value: keyword.keyword }),
      h("fieldset", { dataset: { field: "site_ids" } }, h("legend", {}, "sites"),
        catalog.sites.length === 0 ? h("p", { class: "muted" }, "No site yet: create one first.") : null,
        catalog.sites.map((s) => h("label", { class: "check" },
          h("input", { type: "checkbox", name: "site_ids", value: s.id, checked: keyword.site_ids.includes(s.id) }), s.name)),
        h("span", { class: "field-error", dataset: { errorFor: "site_ids" }, role: "alert" })),
      field("schedule", "schedule", { required: true, value: keyword.schedule, class: "mono" },
        "cron with seconds, in UTC: \"0 0 8 * * *\" is every day at 08:00 UTC"),
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
      keyword.next_fire_times.length === 0 ? h("p", { class: "muted" }, keyword.enabled ? "The schedule does not fire again." : "Disabled: it does not run on its schedule.") :
        h("ol", { id: "next-fire-times" }, keyword.next_fire_times.map((t) => h("li", {}, time(t), h("span", { class: "muted" }, ` (${new Date(t).toISOString().slice(0, 19).replace("T", " ")} UTC)`)))));

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
    for (const el of form.querySelectorAll(".field-error")) el.textContent = "";
    for (const el of form.querySelectorAll("[aria-invalid]")) el.removeAttribute("aria-invalid");
    formError.textContent = "";
    const body = {
      keyword: form.elements.keyword.value.trim(),
      site_ids: [...form.querySelectorAll("input[name=site_ids]:checked")].map((b) => Number(b.value)),
      schedule: form.elements.schedule.value.trim(),
      enabled: form.elements.enabled.checked,
      priority: Number(form.elements.priority.value || 0),
    };
    try {
      const saved = id ? await put(`/api/keywords/${id}`, body) : await post("/api/keywords", body);
      ctx.catalog.forget();
      ctx.toast(`Saved; next run ${saved.next_fire_times[0] ? when(saved.next_fire_times[0]) : "never"}`);
      if (!id) ctx.go(`#/keywords/${saved.id}`);
      else showFires(saved);
    } catch (error) {
      const name = error.field?.split(".")[0].replace(/\[\d+\]$/, "");
      const message = name && form.querySelector(`[data-error-for="${CSS.escape(name)}"]`);
      if (message) {
        message.textContent = error.message;
        form.querySelector(`[data-field="${CSS.escape(name)}"]`)?.setAttribute("aria-invalid", "true");
      } else formError.textContent = error.message;
    }
  });

  build().catch((e) => show(form, failure(e)));
}
