// A stored site's versions: every change to how it is read, newest first,
// with why, by which token and what it changed; a write token may bring an
// earlier one back (it becomes the next version).

import { get, post } from "./api.js";
import { h, show, time, failure } from "./dom.js";

const SHOWN = 20;

/** A value of a change as a person reads it: text as is, anything else as JSON. */
function shown(value) {
  if (value === undefined || value === null) return h("span", { class: "muted" }, "(none)");
  return h("code", {}, typeof value === "string" ? value : JSON.stringify(value));
}

function changeList(changes) {
  if (!changes.length) return h("p", { class: "muted" }, "no change");
  return h("ul", { class: "changes" }, changes.map((c) =>
    h("li", {}, h("strong", {}, c.path), ": ", shown(c.before), " → ", shown(c.after))));
}

function reason(v) {
  return v.reason === "restored" ? `restored version ${v.restored_from}` : v.reason;
}

/**
 * Shows site `id`'s versions in `root`; `onRestored(site)` gets the site a
 * restore made.
 */
export async function showVersions(root, id, ctx, onRestored) {
  show(root, h("h2", {}, "Versions"), h("p", { class: "muted" }, "Loading…"));
  let page;
  try {
    page = await get(`/api/sites/${id}/versions?limit=${SHOWN}`);
  } catch (e) {
    show(root, h("h2", {}, "Versions"), failure(e));
    return;
  }
  const current = page.items[0]?.version;
  const rows = page.items.map((v, i) => {
    const restore = v.version !== current && ctx.access !== "read"
      ? h("button", { type: "button", class: "quiet", dataset: { restore: v.version },
          onclick: async (e) => {
            if (!confirm(`Bring version ${v.version} back? It becomes the next version.`)) return;
            e.target.disabled = true;
            try {
              const site = await post(`/api/sites/${id}/versions/${v.version}/restore`);
              ctx.toast(`Version ${v.version} restored`);
              onRestored(site);
              showVersions(root, id, ctx, onRestored);
            } catch (error) {
              e.target.disabled = false;
              ctx.toast(error.message);
            }
          } }, "Restore")
      : null;
    // The oldest version listed has none before it here: its changes are all of it.
    const changes = i === page.items.length - 1 && !page.next_cursor
      ? h("p", { class: "muted" }, `${v.changes.length} settings`)
      : changeList(v.changes);
    return h("li", { class: "version", dataset: { version: v.version } },
      h("p", {}, h("strong", {}, `Version ${v.version}`), v.version === current ? " (current)" : "",
        " · ", reason(v), " · ", time(v.created_at), v.changed_by ? ` · ${v.changed_by}` : "", " ", restore),
      changes);
  });
  show(root, h("h2", {}, "Versions"),
    rows.length ? h("ol", { class: "versions", id: "site-versions-list" }, rows)
      : h("p", { class: "muted" }, "No version yet: the first change records the site as it is."),
    page.next_cursor ? h("p", { class: "muted" }, `The latest ${SHOWN} are shown.`) : null);
}
