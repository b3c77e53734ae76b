// The console's frame: sign-in, the page router (#/runs/12 …), the live
// feed's status line, and what every view shares (the token's access, the
// names of sites and keywords, a toast).

import { get, token, ApiError } from "./api.js";
import * as live from "./live.js";
import { h, show, failure } from "./dom.js";
import * as overview from "./overview.js";
import * as runs from "./runs.js";
import * as sites from "./sites.js";
import * as siteEditor from "./site_editor.js";
import * as keywords from "./keywords.js";
import * as urlLists from "./url_lists.js";
import * as results from "./results.js";
import * as webhooks from "./webhooks.js";

/** Routes: a pattern of the hash path and the view that shows it. */
const ROUTES = [
  [/^\/?$/, "overview", overview.render],
  [/^\/runs$/, "runs", runs.renderList],
  [/^\/runs\/(\d+)$/, "runs", runs.renderDetail],
  [/^\/sites$/, "sites", sites.render],
  [/^\/sites\/new$/, "sites", siteEditor.render],
  [/^\/sites\/(\d+)$/, "sites", siteEditor.render],
  [/^\/keywords$/, "keywords", keywords.renderList],
  [/^\/keywords\/new$/, "keywords", keywords.renderEditor],
  [/^\/keywords\/(\d+)$/, "keywords", keywords.renderEditor],
  [/^\/lists$/, "lists", urlLists.renderList],
  [/^\/lists\/new$/, "lists", urlLists.renderEditor],
  [/^\/lists\/(\d+)$/, "lists", urlLists.renderEditor],
  [/^\/results$/, "results", results.render],
  [/^\/webhooks$/, "webhooks", webhooks.renderList],
  [/^\/webhooks\/new$/, "webhooks", webhooks.renderEditor],
  [/^\/webhooks\/(\d+)$/, "webhooks", webhooks.renderDetail],
  [/^\/webhooks\/(\d+)\/edit$/, "webhooks", webhooks.renderEditor],
];

const view = document.getElementById("view");
let leaveView = null;

/** The names of sites, keywords and URL lists, read once and again after a change. */
const catalog = {
  cached: null,
  async load() {
    if (!this.cached) {
      this.cached = Promise.all([get("/api/sites"), get("/api/keywords"), get("/api/url-lists")]).then(([s, k, l]) => {
        const keywordText = (id) => k.items.find((x) => x.id === id)?.keyword ?? `keyword ${id}`;
        const listName = (id) => l.items.find((x) => x.id === id)?.name ?? `#${id}`;
        return {
          sites: s.items,
          keywords: k.items,
          lists: l.items,
          siteName: (id) => s.items.find((x) => x.id === id)?.name ?? `site ${id}`,
          keywordText,
          listName,
          // What a run reads: its keyword's search, or a URL list.
          subject: (run) => run.url_list_id != null ? `list ${listName(run.url_list_id)}` : keywordText(run.keyword_id),
        };
      });
      this.cached.catch(() => (this.cached = null));
    }
    return this.cached;
  },
  forget() {
    this.cached = null;
  },
};

/** At most this many messages shown at once: the oldest goes first. */
const MOST_TOASTS = 4;

/** A short message in the corner; several stack in a column, newest last. */
function toast(message, { bad = false } = {}) {
  let column = document.getElementById("toasts");
  if (!column) {
    column = h("div", { id: "toasts", class: "toasts" });
    document.body.append(column);
  }
  const note = h("div", { class: bad ? "toast bad" : "toast", role: bad ? "alert" : "status" }, message);
  column.append(note);
  while (column.children.length > MOST_TOASTS) column.firstElementChild.remove();
  setTimeout(() => note.remove(), bad ? 7000 : 3500);
}

const ctx = { access: "read", catalog, toast, go: (hash) => (location.hash = hash) };

/**
 * Names each table cell by its column (`data-label`): on a phone a row is
 * a card and the header row is hidden, so each cell says what it is.
 */
function labelCells() {
  for (const table of view.querySelectorAll("table")) {
    const names = [...table.querySelectorAll("thead th")].map((th) => th.textContent.trim());
    if (names.length === 0) continue;
    for (const row of table.querySelectorAll("tbody tr")) {
      [...row.children].forEach((cell, i) => {
        if (names[i] && !cell.dataset.label) cell.dataset.label = names[i];
      });
    }
  }
}
new MutationObserver(labelCells).observe(view, { childList: true, subtree: true });

function route() {
  if (leaveView) leaveView();
  leaveView = null;
  const path = location.hash.replace(/^#/, "").split("?")[0] || "/";
  const query = new URLSearchParams(location.hash.split("?")[1] || "");
  const match = ROUTES.map(([pattern, page, render]) => [path.match(pattern), page, render])
    .find(([found]) => found);
  for (const link of document.querySelectorAll("nav a")) {
    link.classList.toggle("current", match && link.dataset.page === match[1]);
    if (match && link.dataset.page === match[1]) link.setAttribute("aria-current", "page");
    else link.removeAttribute("aria-current");
  }
  if (!match) {
    show(view, h("h1", {}, "Not found"), h("p", {}, h("a", { href: "#/" }, "Back to the overview")));
    return;
  }
  const [found, , render] = match;
  view.replaceChildren();
  try {
    leaveView = render(view, { id: found[1] ? Number(found[1]) : null, query }, ctx) || null;
  } catch (e) {
    show(view, failure(e));
  }
}

/** Asks the API what this tab's token may do; null when it is refused. */
async function access() {
  try {
    return (await get("/api/access")).access;
  } catch (e) {
    if (e instanceof ApiError && e.status === 401) return null;
    throw e;
  }
}

async function signIn() {
  const dialog = document.getElementById("sign-in");
  const form = document.getElementById("sign-in-form");
  const error = document.getElementById("sign-in-error");
  // Esc closes a modal dialog: without a token there is nothing behind it,
  // so the box stays (or comes straight back) until a token is accepted.
  let signedIn = false;
  const keepOpen = () => {
    if (signedIn || dialog.open) return;
    dialog.showModal();
    form.token.focus();
  };
  dialog.addEventListener("cancel", (e) => e.preventDefault());
  dialog.addEventListener("close", () => setTimeout(keepOpen));
  for (;;) {
    let granted = null;
    try {
      granted = await access();
    } catch (e) {
      error.textContent = `${e.message}; trying again…`;
      await new Promise((resume) => setTimeout(resume, 3000));
      continue;
    }
    if (granted) {
      signedIn = true;
      if (dialog.open) dialog.close();
      return granted;
    }
    if (token.get()) error.textContent = "That token is not valid here.";
    token.clear();
    if (!dialog.open) dialog.showModal();
    await new Promise((resume) => form.addEventListener("submit", resume, { once: true }));
    token.set(form.token.value.trim());
    form.token.value = "";
  }
}

async function start() {
  const granted = await signIn();
  ctx.access = granted;
  document.body.dataset.access = granted;
  document.getElementById("access").textContent = granted === "read" ? "read-only" : "";
  document.getElementById("live-status").textContent = "connecting…";
  live.onStatus((status) => {
    document.getElementById("live-status").textContent =
      { live: "live", connecting: "connecting…", reconnecting: "reconnecting…" }[status] || status;
  });
  live.start();
  window.addEventListener("crawlfleet:unauthorized", () => {
    // The token was revoked while the tab was open: ask again.
    token.clear();
    location.reload();
  });
  window.addEventListener("hashchange", route);
  route();
}

document.getElementById("sign-out").addEventListener("click", () => {
  token.clear();
  live.stop();
  location.hash = "#/";
  location.reload();
});

start();
