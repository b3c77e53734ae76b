// The parts of the site form that the list and its detail pages share:
// labelled inputs named as the API names them, a field's row (where it is,
// its value rules), the rows read back as the API's `fields`, and an API
// error about one field found on its row.

import { h } from "./dom.js";

/** A labelled input, named as the API names the field (error `field`). */
export function input(field, label, attributes = {}, hint) {
  const id = `site-${field.replace(/\W/g, "-")}`;
  return h("label", { for: id }, label,
    h("input", { id, name: field, dataset: { field }, ...attributes }),
    hint ? h("span", { class: "muted" }, hint) : null,
    h("span", { class: "field-error", dataset: { errorFor: field }, role: "alert" }));
}

export function check(field, label) {
  const id = `site-${field.replace(/\W/g, "-")}`;
  return h("label", { class: "check", for: id }, h("input", { id, type: "checkbox", name: field, dataset: { field } }), label);
}

/** A field's value rules (README "Typed values"), edited as one JSON object. */
export const RULE_KEYS = ["whitespace", "regex", "all", "number", "date", "default", "required"];

/** The inputs of a row that name where a field is read. */
const PLACES = ["selector", "attr", "pointer", "link", "structured"];

function rulesOf(spec) {
  const rules = Object.fromEntries(RULE_KEYS.filter((k) => spec[k] !== undefined).map((k) => [k, spec[k]]));
  return Object.keys(rules).length ? JSON.stringify(rules) : "";
}

/**
 * One field's row. A detail page's fields are always read from HTML
 * (`html`): no JSON pointer, and the site's render mode hides nothing.
 */
export function fieldRow(name = "", spec = {}, { html = false } = {}) {
  const htmlOnly = html ? undefined : "html-only";
  const row = h("fieldset", { class: "field-row", dataset: { fieldRow: "" } },
    h("legend", {}, "Field"),
    h("div", { class: "row" },
      h("label", {}, "name", h("input", { class: "field-name", value: name, required: true, "aria-label": "field name" })),
      h("label", { class: htmlOnly }, "CSS selector", h("input", { class: "field-selector", value: spec.selector ?? "" })),
      h("label", { class: htmlOnly }, "attribute (else the text)", h("input", { class: "field-attr", value: spec.attr ?? "" })),
      h("label", { class: htmlOnly }, "or a structured data path", h("input", { class: "field-structured", value: spec.structured ?? "", placeholder: "offers.price" })),
      html ? null : h("label", { class: "json-only" }, "JSON pointer", h("input", { class: "field-pointer", value: spec.pointer ?? "" })),
      h("label", { class: "check" }, h("input", { type: "checkbox", class: "field-link", checked: !!spec.link }), "a link")),
    h("label", {}, "value rules (JSON)",
      h("input", { class: "field-rules mono", value: rulesOf(spec), placeholder: '{"number": {"locale": "ko-KR", "currency_field": "currency"}}' })),
    h("span", { class: "field-error", role: "alert" }),
    h("button", { type: "button", class: "quiet write-only", onclick: () => row.remove() }, "Remove field"));
  return row;
}

/** The rows in `container`, as the API's `fields`; `json`: read by pointer. */
export function readFields(container, { json = false, prefix = "" } = {}) {
  const fields = {};
  for (const row of container.querySelectorAll("[data-field-row]")) {
    const name = row.querySelector(".field-name").value.trim();
    const value = (css) => row.querySelector(css).value.trim() || undefined;
    const link = row.querySelector(".field-link").checked || undefined;
    fields[name] = json
      ? { pointer: value(".field-pointer"), link }
      : { selector: value(".field-selector"), attr: value(".field-attr"), structured: value(".field-structured"), link };
    const rules = value(".field-rules");
    if (rules) {
      let parsed;
      try {
        parsed = JSON.parse(rules);
      } catch (e) {
        throw Object.assign(new Error(`value rules: not JSON (${e.message})`), { field: `${prefix}fields.${name}.rules` });
      }
      Object.assign(fields[name], parsed);
    }
  }
  return fields;
}

/** The names the rows in `container` give their fields. */
export function fieldNames(container) {
  return [...container.querySelectorAll("[data-field-row] .field-name")].map((el) => el.value.trim()).filter(Boolean);
}

/**
 * Where an error about `field` (`fields.sku.selector`, `fields.price.number`,
 * `fields.sku`), as the rows in `container` name it, is shown: its input and
 * its row; null when it is not about a row there.
 */
export function fieldRowTarget(container, field) {
  const match = field.match(new RegExp(`^fields\\.(.+)\\.(${PLACES.join("|")})$`))
    || field.match(new RegExp(`^fields\\.(.+?)\\.(rules|${RULE_KEYS.join("|")})([.[].*)?$`))
    || field.match(/^fields\.(.+)()$/);
  if (!match) return null;
  const row = [...container.querySelectorAll("[data-field-row]")]
    .find((r) => r.querySelector(".field-name").value.trim() === match[1]);
  const part = PLACES.includes(match[2]) ? match[2] : match[2] ? "rules" : "name";
  const input = row?.querySelector(`.field-${part}`);
  return input ? { row, input } : null;
}
