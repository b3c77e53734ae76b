// "Learn from examples" beside the site form: per field, a few values as the
// page shows them; a worker loads the form's search page for a keyword (its
// render mode, wait_for and identity) and proposes selectors that give them
// back. "Use this" fills the form's item selector and fields; it does not save.
// The page it loaded is shown in a frame that runs no script: clicking a value
// there adds it to the examples of the field last chosen ("pick from the page").

import { post } from "./api.js";
import { h, show } from "./dom.js";

/**
 * The panel. `editor` gives the site's body (`siteBody()`), its field names
 * (`fieldNames()`), clears and shows the form's errors, and takes a proposal
 * (`use(proposal)`).
 */
export function renderLearn(root, editor, siteId) {
  const keyword = h("input", { id: "learn-keyword", name: "keyword", required: true, placeholder: "a keyword" });
  const rows = h("div", { id: "learn-examples", class: "form" });
  const run = h("button", { type: "submit", id: "learn-run" }, "Learn selectors");
  const out = h("div", { id: "learn-result", "aria-live": "polite" });
  const picker = h("div", { id: "learn-page" });
  const addRow = (name = "") => rows.append(exampleRow(name));
  const controls = h("form", { class: "form write-only", id: "learn-form" },
    h("label", { for: "learn-keyword" }, "keyword", keyword),
    rows,
    h("div", { class: "actions" },
      h("button", { type: "button", class: "secondary", id: "learn-add-field", onclick: () => addRow() }, "Add a field"),
      run));
  show(root, h("h2", {}, "Learn from examples"),
    h("p", { class: "muted" },
      "Per field, 1 to 3 values as the page shows them, one a line (the first of each field from one item, the second from another); none: the page's repeated structure."),
    controls, out, picker);
  // The field a value picked from the page goes to: the one last focused.
  rows.addEventListener("focusin", (e) => {
    const row = e.target.closest("[data-learn-row]");
    if (!row) return;
    for (const other of rows.querySelectorAll(".picking")) other.classList.remove("picking");
    row.classList.add("picking");
  });
  for (const name of editor.fieldNames()) addRow(name);
  if (!rows.children.length) addRow("title");

  controls.addEventListener("submit", async (e) => {
    e.preventDefault();
    editor.clearErrors();
    run.disabled = true;
    show(out, h("p", { class: "muted" }, "A worker is loading the page…"));
    try {
      const site = editor.siteBody();
      const request = {
        search_url: site.search_url,
        keyword: keyword.value.trim(),
        render: site.render === "http" ? "http" : "browser",
        wait_for: site.wait_for,
        user_agent: site.user_agent,
        headers: Object.keys(site.headers || {}).length ? site.headers : undefined,
        proxy: site.proxy,
        examples: examples(rows),
      };
      if (siteId) request.site_id = siteId;
      const answer = await post("/api/sites/learn", request, { timeoutMs: 90000 });
      showProposals(out, answer, editor);
      if (answer.page_html) showPage(picker, answer.page_html, rows);
    } catch (error) {
      if (error.field === "search_url") editor.showError(error, "");
      show(out, h("p", { class: "error", id: "learn-error" }, error.field ? `${error.field}: ${error.message}` : error.message));
    } finally {
      run.disabled = false;
    }
  });
}

function exampleRow(name) {
  return h("div", { class: "row learn-row", dataset: { learnRow: "" } },
    h("label", {}, "field", h("input", { class: "learn-name", value: name, "aria-label": "field name" })),
    h("label", {}, "values, one a line",
      h("textarea", { class: "learn-values", rows: 2, "aria-label": `examples of ${name || "the field"}` })));
}

/** The row whose values a picked value goes to: the one last focused, else the first. */
function activeRow(rows) {
  return rows.querySelector("[data-learn-row].picking") || rows.querySelector("[data-learn-row]");
}

/**
 * The page the worker loaded, in a frame that runs no script (sandboxed; the
 * console's policy keeps it from loading anything): a click on an element
 * adds its text to the examples of the field last chosen.
 */
function showPage(root, html, rows) {
  const frame = h("iframe", { id: "learn-page-frame", sandbox: "allow-same-origin", title: "The page learned from: click a value to add it as an example", referrerpolicy: "no-referrer" });
  frame.addEventListener("load", () => {
    const doc = frame.contentDocument;
    if (!doc) return;
    doc.addEventListener("click", (e) => {
      e.preventDefault();
      const text = (e.target.textContent || "").replace(/\s+/g, " ").trim().slice(0, 200);
      const row = activeRow(rows);
      if (!text || !row) return;
      const values = row.querySelector(".learn-values");
      const lines = values.value.split("\n").map((v) => v.trim()).filter(Boolean);
      if (lines.length >= 3 || lines.includes(text)) return;
      values.value = [...lines, text].join("\n");
      values.dispatchEvent(new Event("input", { bubbles: true }));
    }, true);
  });
  frame.srcdoc = html;
  show(root, h("h3", {}, "Pick from the page"),
    h("p", { class: "muted" }, "Choose a field's values above, then click a value in the page to add it (up to 3 a field); learn again to see the proposal."),
    frame);
}

/** The rows as the API's `examples`: rows without a name or a value left out. */
function examples(rows) {
  const out = {};
  for (const row of rows.querySelectorAll("[data-learn-row]")) {
    const name = row.querySelector(".learn-name").value.trim();
    const values = row.querySelector(".learn-values").value.split("\n").map((v) => v.trim()).filter(Boolean);
    if (name && values.length) out[name] = values;
  }
  return out;
}

function showProposals(root, answer, editor) {
  if (!answer.proposals.length) {
    show(root, h("p", { class: "muted" }, "No proposal."));
    return;
  }
  show(root,
    h("p", { id: "learn-summary" }, `${answer.proposals.length} proposal(s), best first, on worker `,
      h("span", { class: "mono" }, answer.worker_id),
      h("span", { class: "muted" }, ` (page ${answer.timings.load_ms} ms, learning ${answer.timings.learn_ms} ms)`)),
    answer.proposals.map((proposal, at) => {
      const names = Object.keys(proposal.fields);
      return h("section", { class: "learn-proposal", dataset: { proposal: at } },
        h("h3", {}, `${at + 1}. `, h("span", { class: "mono" }, proposal.item_selector),
          ` — confidence ${Math.round(proposal.confidence * 100)} %`),
        h("p", { class: "muted" },
          `${proposal.items_found} items (${proposal.items_complete} with every field), ${proposal.examples_reproduced} of ${proposal.examples_given} examples given back`),
        h("ul", {}, names.map((n) => h("li", {}, h("strong", {}, n), ": ",
          h("span", { class: "mono" }, proposal.fields[n].selector ?? "(the item)"),
          proposal.fields[n].attr ? h("span", { class: "mono" }, ` @${proposal.fields[n].attr}`) : null))),
        h("table", { class: "learn-items" },
          h("thead", {}, h("tr", {}, names.map((n) => h("th", {}, n)))),
          h("tbody", {}, proposal.items.slice(0, 10).map((item) =>
            h("tr", {}, names.map((n) => h("td", {}, item[n] == null ? "" : String(item[n]))))))),
        h("button", { type: "button", class: "secondary write-only learn-use", onclick: () => editor.use(proposal) }, "Use this"));
    }));
}
