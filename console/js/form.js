// What the editors of scheduled things share: fire times on their own clocks,
// the zone names the browser knows, labelled inputs, and the API's field
// errors shown beside the field they name.

import { h } from "./dom.js";

/** A fire time as its schedule's clocks show it ("2026-11-26 06:00:00 +09:00"), UTC on hover. */
export function wallTime(local, utc) {
  return h("time", { datetime: utc, title: `${utc.slice(0, 19).replace("T", " ")} UTC` },
    `${local.slice(0, 10)} ${local.slice(11, 19)} ${local.slice(19)}`);
}

/** Zone names the browser knows, for the time zone field's suggestions. */
export function zoneNames() {
  const names = typeof Intl.supportedValuesOf === "function" ? Intl.supportedValuesOf("timeZone") : [];
  return ["UTC", ...names.filter((n) => n !== "UTC")];
}

/**
 * A maker of labelled inputs whose ids start with `prefix` (`keyword-name`),
 * each with its hint and the place its API error is shown.
 */
export const fieldMaker = (prefix) => (name, label, attributes, hint) => h("label", { for: `${prefix}-${name}` }, label,
  h("input", { id: `${prefix}-${name}`, name, dataset: { field: name }, ...attributes }),
  hint ? h("span", { class: "muted" }, hint) : null,
  h("span", { class: "field-error", dataset: { errorFor: name }, role: "alert" }));

/** Empties every field's error and the form's own. */
export function clearErrors(form, formError) {
  for (const el of form.querySelectorAll(".field-error")) el.textContent = "";
  for (const el of form.querySelectorAll("[aria-invalid]")) el.removeAttribute("aria-invalid");
  formError.textContent = "";
}

/** Shows an API error beside the field it names (`site_ids[2]` is `site_ids`), else on the form. */
export function showError(form, formError, error) {
  const name = error.field?.split(".")[0].replace(/\[\d+\]$/, "");
  const message = name && form.querySelector(`[data-error-for="${CSS.escape(name)}"]`);
  if (message) {
    message.textContent = error.message;
    form.querySelector(`[data-field="${CSS.escape(name)}"]`)?.setAttribute("aria-invalid", "true");
  } else formError.textContent = error.message;
}
