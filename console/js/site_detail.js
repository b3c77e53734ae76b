// The site form's "Detail pages": on or off, the list field holding each
// item's page, the fields read there (rows as the list's), how the page is
// fetched, and which items' pages a run reads. Read back as the API's
// `detail`; a stored site's fills it.

import { h } from "./dom.js";
import { input, fieldRow, readFields, fieldNames, fieldRowTarget } from "./site_fields.js";

/** `read` as the select names it, with what each means. */
const READS = [
  ["new_or_changed", "new items, and those whose list values changed"],
  ["new", "new items only (never read yet)"],
  ["all", "every item, every run"],
  ["every_hours", "items not read in the last N hours"],
];

/**
 * The fieldset and what the editor asks of it. `listRows` holds the list's
 * field rows: the URL field is one of them.
 */
export function detailPart(listRows) {
  const on = h("input", { id: "site-detail-on", type: "checkbox", name: "detail", dataset: { field: "detail" } });
  const urlField = h("select", { id: "site-detail-url_field", name: "detail.url_field", dataset: { field: "detail.url_field" } });
  const rows = h("div", { id: "detail-field-rows", class: "form", dataset: { field: "detail.fields" } });
  const render = h("select", { id: "site-detail-render", name: "detail.render", dataset: { field: "detail.render" } },
    h("option", { value: "browser" }, "browser (scripts run)"),
    h("option", { value: "http" }, "http (plain HTML, faster)"));
  const waitFor = input("detail.wait_for", "wait for (CSS, browser)", { placeholder: ".in-stock" });
  const read = h("select", { id: "site-detail-read", name: "detail.read", dataset: { field: "detail.read" } },
    READS.map(([value, label]) => h("option", { value }, label)));
  const hours = input("detail.read.every_hours", "hours", { type: "number", min: 1, step: 1 });
  const settings = h("div", { id: "detail-settings", class: "form", hidden: true },
    h("label", { for: urlField.id }, "its URL: the list field",
      urlField,
      h("span", { class: "muted" }, "a list field read as a URL (\"a link\", or the attribute href)"),
      h("span", { class: "field-error", dataset: { errorFor: "detail.url_field" }, role: "alert" })),
    h("h3", {}, "Fields read there"),
    h("p", { class: "muted" }, "each read inside the whole page, named apart from the list's fields; merged into the item"),
    h("span", { class: "field-error", dataset: { errorFor: "detail.fields" }, role: "alert" }),
    rows,
    h("button", { type: "button", class: "secondary write-only", id: "add-detail-field", onclick: () => rows.append(fieldRow("", {}, { html: true })) },
      "Add a detail field"),
    h("div", { class: "row browser-only" },
      h("label", { for: render.id }, "fetched by", render,
        h("span", { class: "field-error", dataset: { errorFor: "detail.render" }, role: "alert" })),
      waitFor),
    h("div", { class: "row" },
      h("label", { for: read.id }, "a run reads the pages of", read,
        h("span", { class: "field-error", dataset: { errorFor: "detail.read" }, role: "alert" })),
      hours));
  const fieldset = h("fieldset", { id: "site-detail" }, h("legend", {}, "Detail pages"),
    h("label", { class: "check", for: on.id }, on, "read each item's own page for more fields"),
    h("span", { class: "field-error", dataset: { errorFor: "detail" }, role: "alert" }),
    settings);

  const apply = () => {
    settings.hidden = !on.checked;
    waitFor.hidden = render.value !== "browser";
    hours.hidden = read.value !== "every_hours";
  };

  // The URL field's choices: the list's field names, and the chosen name
  // even when the list no longer has it (saving then says so beside it).
  let offered = null;
  const refresh = () => {
    const names = fieldNames(listRows);
    const chosen = urlField.value || guessUrlField(listRows);
    const choices = chosen && !names.includes(chosen) ? [...names, chosen] : names;
    const key = JSON.stringify([choices, chosen]);
    if (key === offered) return;
    offered = key;
    urlField.replaceChildren(h("option", { value: "" }, "(choose a list field)"),
      ...choices.map((name) => h("option", { value: name }, names.includes(name) ? name : `${name} (not a list field)`)));
    urlField.value = chosen;
  };
  urlField.addEventListener("focus", refresh);
  urlField.addEventListener("mousedown", refresh);
  on.addEventListener("change", () => {
    if (on.checked && !rows.querySelector("[data-field-row]")) rows.append(fieldRow("", {}, { html: true }));
    refresh();
    apply();
  });
  render.addEventListener("change", apply);
  read.addEventListener("change", apply);

  return {
    fieldset,
    /** After the list's field rows changed. */
    refresh,

    /** The API's `detail` for a site in render mode `mode`; undefined when off. */
    body(mode) {
      if (!on.checked) return undefined;
      const browser = mode === "browser";
      const every = hours.querySelector("input").value;
      return {
        url_field: urlField.value,
        fields: readFields(rows, { prefix: "detail." }),
        // A site without a browser reads its detail pages over http.
        render: browser ? render.value : undefined,
        wait_for: browser && render.value === "browser" ? waitFor.querySelector("input").value.trim() || undefined : undefined,
        read: read.value === "every_hours" ? { every_hours: every === "" ? null : Number(every) } : read.value,
      };
    },

    /** A stored site's `detail` (none: off) into the fieldset. */
    fill(detail) {
      on.checked = !!detail;
      rows.replaceChildren(...Object.entries(detail?.fields || {}).map(([name, spec]) => fieldRow(name, spec, { html: true })));
      urlField.value = "";
      offered = null;
      urlField.replaceChildren(h("option", { value: detail?.url_field ?? "" }));
      refresh();
      render.value = detail?.render === "http" ? "http" : "browser";
      waitFor.querySelector("input").value = detail?.wait_for ?? "";
      const every = detail?.read?.every_hours;
      read.value = every !== undefined ? "every_hours" : detail?.read ?? "new_or_changed";
      hours.querySelector("input").value = every ?? "";
      apply();
    },

    /** Where an error the API names under `detail.fields.` is shown: its row's input. */
    target(field) {
      return field.startsWith("detail.") ? fieldRowTarget(rows, field.slice("detail.".length)) : null;
    },
  };
}

/** The list field a new detail setting most likely follows: the first read as a URL. */
function guessUrlField(listRows) {
  for (const row of listRows.querySelectorAll("[data-field-row]")) {
    const reads = row.querySelector(".field-link").checked || row.querySelector(".field-attr")?.value.trim() === "href";
    const name = row.querySelector(".field-name").value.trim();
    if (reads && name) return name;
  }
  return "";
}
