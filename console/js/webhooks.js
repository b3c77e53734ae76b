// Webhooks: the endpoints crawlfleet POSTs events to (their URL and host,
// events, filters, whether they are on and, when the sender turned one off,
// why), an editor that never shows a secret back, and one endpoint's recent
// deliveries, each with its attempts and a way to send it again, and a test.

import { get, post, put, del, withQuery } from "./api.js";
import { h, show, time, failure } from "./dom.js";
import { fieldMaker, clearErrors, showError } from "./form.js";

/** Deliveries shown at a time. */
const PAGE = 25;
/** How often an endpoint page reads its deliveries again. */
const REFRESH_MS = 3000;
/** How long a sent test or a re-sent delivery is followed for its outcome. */
const FOLLOW_MS = 60000;

/** What each event tells, in words (the names come from the API's document). */
const EVENT_WORDS = {
  "run.completed": "a run completed",
  "run.failed": "a run failed for good",
  "run.degraded": "a run completed below its site's expectations",
  "site.blocked": "a site refuses the fleet",
  "site.recovered": "a blocked site answers again",
  "items.new": "items seen for the first time",
  "items.changed": "items whose fields changed",
  "items.removed": "items no longer found",
  "site.repair_proposed": "a repair of a site's selectors was proposed",
};

/** The event names the API knows (its OpenAPI document), read once. */
let eventNames = null;
function events() {
  if (!eventNames) {
    eventNames = get("/api/openapi.json").then((doc) => doc.components.schemas.WebhookEventType.enum);
    eventNames.catch(() => (eventNames = null));
  }
  return eventNames;
}

/** The host an endpoint's URL leads to (with its port), or the URL itself. */
function hostOf(url) {
  try {
    return new URL(url).host;
  } catch {
    return url;
  }
}

/** The URL with its host in bold: where messages go, at a glance. */
function urlWithHost(url) {
  const host = hostOf(url);
  const at = url.indexOf(host);
  if (at < 0) return h("span", { class: "mono" }, url);
  return h("span", { class: "mono webhook-url" }, url.slice(0, at), h("strong", {}, host), url.slice(at + host.length));
}

/** Which sites and keywords pass the endpoint's filters, in words. */
function filtersText(webhook, catalog) {
  const sites = webhook.site_ids.length ? `sites: ${webhook.site_ids.map(catalog.siteName).join(", ")}` : "every site";
  const keywords = webhook.keyword_ids.length
    ? `keywords: ${webhook.keyword_ids.map(catalog.keywordText).join(", ")}` : "every keyword";
  return `${sites}; ${keywords}`;
}

/** On, or off and why: the sender's reason, or an operator's choice. */
function stateOf(webhook) {
  if (webhook.enabled) return h("span", { class: "badge state-completed", dataset: { enabled: "true" } }, "enabled");
  return h("span", { class: "webhook-off" },
    h("span", { class: "badge state-cancelled", dataset: { enabled: "false" } }, "disabled"), " ",
    h("span", { class: "disabled-reason" }, webhook.disabled_reason
      ? [`by the sender ${webhook.disabled_at ? "on " : ""}`, webhook.disabled_at ? time(webhook.disabled_at) : null,
        `: ${webhook.disabled_reason}`]
      : "by an operator: nothing is sent until it is enabled again"));
}

export function renderList(root, _params, ctx) {
  const body = h("tbody", { id: "webhooks" });
  const status = h("div", { class: "muted", role: "status", id: "webhooks-status" }, "Loading…");
  show(root,
    h("div", { class: "actions" }, h("h1", {}, "Webhooks"),
      h("a", { href: "#/webhooks/new", class: "button write-only", id: "new-webhook" }, "New endpoint")),
    h("table", {}, h("thead", {}, h("tr", {},
      h("th", {}, "endpoint"), h("th", {}, "events"), h("th", {}, "filters"), h("th", {}, "state"),
      h("th", {}, "description"))), body),
    status);

  const load = async () => {
    try {
      const [webhooks, catalog] = await Promise.all([get("/api/webhooks"), ctx.catalog.load()]);
      show(body, webhooks.items.map((w) => h("tr", {
        class: "clickable", tabindex: "0", dataset: { webhook: w.id },
        onclick: (e) => { if (!e.target.closest("a")) ctx.go(`#/webhooks/${w.id}`); },
        onkeydown: (e) => { if (e.key === "Enter") ctx.go(`#/webhooks/${w.id}`); },
      },
      h("td", {}, h("a", { href: `#/webhooks/${w.id}`, class: "webhook-host" }, hostOf(w.url)), h("br"), urlWithHost(w.url)),
      h("td", { class: "webhook-events" }, w.events.join(", ")),
      h("td", {}, filtersText(w, catalog)),
      h("td", { class: "webhook-state" }, stateOf(w)),
      h("td", {}, w.description || h("span", { class: "muted" }, "—")))));
      if (webhooks.items.length) status.replaceChildren();
      else {
        show(status, h("p", { id: "webhooks-empty" },
          "No webhook endpoint yet. An endpoint is a URL of yours that crawlfleet POSTs to, signed, when runs end, ",
          "sites are blocked or recover, or items change. ",
          ctx.access === "read"
            ? "Ask someone with a write token to add one."
            : [h("a", { href: "#/webhooks/new" }, "Add an endpoint"), ", then send it a test from its page."]));
      }
    } catch (e) {
      show(status, failure(e));
    }
  };
  load();
}

export function renderEditor(root, { id }, ctx) {
  const form = h("form", { class: "form panel", id: "webhook-form", novalidate: true });
  const formError = h("p", { class: "error", role: "alert", id: "webhook-form-error" });
  show(root, h("p", {}, h("a", { href: id ? `#/webhooks/${id}` : "#/webhooks" }, id ? "← Endpoint" : "← Webhooks")),
    h("h1", {}, id ? "Edit webhook endpoint" : "New webhook endpoint"), form);
  const field = fieldMaker("webhook");

  const checks = (name, legend, hint, options, chosen) =>
    h("fieldset", { dataset: { field: name }, id: `webhook-${name}` }, h("legend", {}, legend),
      hint ? h("span", { class: "muted" }, hint) : null,
      options.map(([value, label, words]) => h("label", { class: "check" },
        h("input", { type: "checkbox", name, value, checked: chosen.includes(value) }), label,
        words ? h("span", { class: "muted" }, ` — ${words}`) : null)),
      h("span", { class: "field-error", dataset: { errorFor: name }, role: "alert" }));

  const build = async () => {
    const [catalog, names] = await Promise.all([ctx.catalog.load(), events()]);
    const webhook = id ? await get(`/api/webhooks/${id}`) : {
      url: "", events: ["run.completed", "run.failed"], site_ids: [], keyword_ids: [], description: "", enabled: true,
    };
    show(form,
      field("url", "URL", { required: true, value: webhook.url, type: "url", class: "mono", autocomplete: "off",
        placeholder: "https://hooks.example.com/crawlfleet" },
      "crawlfleet POSTs each event here as a Standard Webhooks message, signed with the endpoint's secret"),
      checks("events", "events", "at least one", names.map((n) => [n, n, EVENT_WORDS[n]]), webhook.events),
      checks("site_ids", "only about these sites", "none ticked: every site",
        catalog.sites.map((s) => [s.id, s.name]), webhook.site_ids),
      checks("keyword_ids", "only about these keywords", "none ticked: every keyword (events about no keyword pass)",
        catalog.keywords.map((k) => [k.id, k.keyword]), webhook.keyword_ids),
      field("description", "description", { value: webhook.description, maxlength: 500 }),
      h("p", { id: "webhook-secret-state" }, id
        ? "A signing secret is set. It is never shown again; type a new one below to rotate it."
        : "Left empty, a signing secret is generated and shown once, right after the endpoint is created."),
      field("secret", id ? "new secret (leave empty to keep the one set)" : "secret (optional)",
        { type: "password", autocomplete: "new-password", spellcheck: "false", class: "mono" },
        "whsec_ and 24 to 64 bytes in base64"),
      h("label", { class: "check" }, h("input", { type: "checkbox", name: "enabled", checked: webhook.enabled }),
        "enabled", webhook.enabled || !webhook.disabled_reason ? null
          : h("span", { class: "muted" }, " — the sender turned it off; tick to send again, with what waited")),
      formError,
      h("div", { class: "actions write-only" },
        h("button", { type: "submit", id: "save-webhook" }, id ? "Save" : "Create"),
        id ? h("button", { type: "button", class: "danger", id: "delete-webhook", onclick: remove }, "Delete") : null));
    if (ctx.access === "read") for (const el of form.elements) el.disabled = true;
  };

  async function remove() {
    if (!confirm("Delete this endpoint with its deliveries?")) return;
    try {
      await del(`/api/webhooks/${id}`);
      ctx.toast("Endpoint deleted");
      ctx.go("#/webhooks");
    } catch (e) {
      formError.textContent = e.message;
    }
  }

  form.addEventListener("submit", async (e) => {
    e.preventDefault();
    clearErrors(form, formError);
    const ticked = (name) => [...form.querySelectorAll(`input[name=${name}]:checked`)].map((b) => b.value);
    const secret = form.elements.secret.value.trim();
    const body = {
      url: form.elements.url.value.trim(),
      events: ticked("events"),
      site_ids: ticked("site_ids").map(Number),
      keyword_ids: ticked("keyword_ids").map(Number),
      description: form.elements.description.value.trim(),
      enabled: form.elements.enabled.checked,
      ...(secret ? { secret } : {}),
    };
    const button = form.querySelector("#save-webhook");
    button.disabled = true;
    try {
      const saved = id ? await put(`/api/webhooks/${id}`, body) : await post("/api/webhooks", body);
      form.elements.secret.value = "";
      ctx.toast(id ? (secret ? "Saved; the secret is rotated" : "Saved") : `Endpoint created for ${hostOf(saved.url)}`);
      // Only a secret crawlfleet made is shown, once: the receiver needs it to check signatures.
      if (!id && !secret) generated.set(saved.id, saved.secret);
      ctx.go(`#/webhooks/${saved.id}`);
    } catch (error) {
      showError(form, formError, error);
    } finally {
      button.disabled = false;
    }
  });

  build().catch((e) => show(form, failure(e)));
}

/** A generated secret, kept only until the endpoint's page has shown it once. */
const generated = new Map();

/** The last attempt of a delivery, in words: the status, or why there was no answer. */
function lastAnswer(delivery) {
  const last = delivery.attempt_log[delivery.attempt_log.length - 1];
  if (!last) return h("span", { class: "muted" }, "not tried yet");
  return h("span", {}, last.status != null ? `HTTP ${last.status}` : last.error || "no answer",
    h("span", { class: "muted" }, ` · ${last.latency_ms} ms`));
}

/** A delivery's state as a badge, and when it is tried next while pending. */
function deliveryState(d) {
  const tone = { delivered: "completed", failed: "failed", pending: "queued" }[d.state] || "queued";
  return [h("span", { class: `badge state-${tone}`, dataset: { state: d.state } }, d.state),
    d.state === "pending" && d.next_attempt_at ? h("span", { class: "muted" }, " next ", time(d.next_attempt_at)) : null];
}

/** The start of what the endpoint answered last, or why it is not shown. */
function excerpt(d, ctx) {
  const last = d.attempt_log[d.attempt_log.length - 1];
  if (!last) return "—";
  if (last.response_excerpt == null) {
    return h("span", { class: "muted" }, ctx.access === "read" ? "hidden from a read token" : "—");
  }
  return last.response_excerpt === "" ? h("span", { class: "muted" }, "empty")
    : h("code", { class: "excerpt" }, last.response_excerpt.slice(0, 200));
}

/** How a delivery ended, said in a toast. */
function outcomeWords(d) {
  const last = d.attempt_log[d.attempt_log.length - 1];
  const answer = last ? (last.status != null ? `HTTP ${last.status}` : last.error || "no answer") : "no attempt";
  if (d.state === "delivered") return [`Delivery ${d.id} (${d.event_type}) delivered: ${answer}`, false];
  if (d.state === "failed") return [`Delivery ${d.id} (${d.event_type}) failed: ${answer}`, true];
  return [`Delivery ${d.id} (${d.event_type}) not delivered yet: ${answer}; it is tried again`, true];
}

export function renderDetail(root, { id }, ctx) {
  const facts = h("section", { class: "panel", id: "webhook" }, h("p", { class: "muted" }, "Loading…"));
  const body = h("tbody", { id: "deliveries" });
  const status = h("div", { class: "muted", role: "status", id: "deliveries-status" });
  const more = h("button", { type: "button", class: "secondary more", id: "older-deliveries", hidden: true }, "Older deliveries");
  const testButton = h("button", { type: "button", class: "write-only", id: "send-test" }, "Send a test");
  show(root, h("p", {}, h("a", { href: "#/webhooks" }, "← Webhooks")),
    h("div", { class: "actions" }, h("h1", { id: "webhook-title" }, `Webhook endpoint ${id}`),
      h("a", { href: `#/webhooks/${id}/edit`, class: "button write-only", id: "edit-webhook" }, "Edit"), testButton),
    facts,
    h("h2", {}, "Recent deliveries"),
    h("table", {}, h("thead", {}, h("tr", {},
      h("th", { class: "num" }, "delivery"), h("th", {}, "event"), h("th", {}, "state"), h("th", { class: "num" }, "attempts"),
      h("th", {}, "created"), h("th", {}, "last answer"), h("th", {}, "response"),
      h("th", { class: "write-only" }, ""))), body),
    status, more);

  let webhook = null;
  let shownPages = 1;
  let lastSeen = "";
  const following = new Map();

  const row = (d) => h("tr", { dataset: { delivery: d.id, state: d.state } },
    h("td", { class: "num" }, d.id),
    h("td", { class: "mono" }, d.event_type, d.payload?.data?.test ? h("span", { class: "muted" }, " (test)") : null),
    h("td", { class: "delivery-state" }, deliveryState(d)),
    h("td", { class: "num" }, d.attempts),
    h("td", {}, time(d.created_at)),
    h("td", { class: "last-answer" }, lastAnswer(d)),
    h("td", { class: "response" }, excerpt(d, ctx)),
    h("td", { class: "write-only" }, h("button", {
      type: "button", class: "secondary resend", "aria-label": `Re-send delivery ${d.id}`,
      onclick: (e) => resend(d, e.target),
    }, "Re-send")));

  const loadEndpoint = async () => {
    const [w, catalog] = await Promise.all([get(`/api/webhooks/${id}`), ctx.catalog.load()]);
    webhook = w;
    document.getElementById("webhook-title").textContent = `Webhook endpoint: ${hostOf(w.url)}`;
    const secret = generated.get(id);
    generated.delete(id);
    show(facts,
      secret ? h("div", { class: "secret-once", id: "generated-secret", role: "status" },
        h("p", {}, h("strong", {}, "The signing secret crawlfleet generated, shown this once: "),
          "give it to the receiver, which checks every message's signature with it. It is not shown again."),
        h("code", { class: "mono" }, secret)) : null,
      h("dl", { class: "facts" },
        h("dt", {}, "URL"), h("dd", { id: "endpoint-url" }, urlWithHost(w.url)),
        h("dt", {}, "state"), h("dd", { id: "endpoint-state" }, stateOf(w)),
        h("dt", {}, "events"), h("dd", { id: "endpoint-events" }, w.events.map((e) => h("span", { class: "event" },
          h("span", { class: "mono" }, e), EVENT_WORDS[e] ? h("span", { class: "muted" }, ` ${EVENT_WORDS[e]}`) : null, h("br")))),
        h("dt", {}, "filters"), h("dd", {}, filtersText(w, catalog)),
        h("dt", {}, "description"), h("dd", {}, w.description || "—"),
        h("dt", {}, "secret"), h("dd", { id: "endpoint-secret" }, "set (shown only when it is created or rotated)")),
      w.enabled ? null : h("p", { class: "write-only" },
        "Nothing is sent to a disabled endpoint: fix it, then ", h("a", { href: `#/webhooks/${id}/edit` }, "edit it"),
        " and tick enabled; what waited goes out then."));
  };

  const loadDeliveries = async () => {
    const items = [];
    let cursor = null;
    for (let i = 0; i < shownPages; i++) {
      const page = await get(withQuery(`/api/webhooks/${id}/deliveries`, { limit: PAGE, cursor }));
      items.push(...page.items);
      cursor = page.next_cursor;
      if (!cursor) break;
    }
    more.hidden = !cursor;
    // Rows are rebuilt only when something changed: a focused button keeps its focus.
    const seen = JSON.stringify(items);
    if (seen !== lastSeen) {
      lastSeen = seen;
      show(body, items.map(row));
    }
    if (items.length) status.replaceChildren();
    else {
      show(status, h("p", { id: "deliveries-empty" }, "No delivery yet. Deliveries appear here when an event it listens to happens",
        ctx.access === "read" ? "." : [", or press ", h("strong", {}, "Send a test"), " to see how the endpoint answers."]));
    }
    for (const [deliveryId, { baseline, until }] of following) {
      const d = items.find((x) => x.id === deliveryId);
      if (d && (d.attempt_log.length > baseline || d.state !== "pending")) {
        following.delete(deliveryId);
        const [words, bad] = outcomeWords(d);
        ctx.toast(words, { bad });
      } else if (Date.now() > until) {
        following.delete(deliveryId);
        ctx.toast(`Delivery ${deliveryId}: no attempt yet; is the scheduler running?`, { bad: true });
      }
    }
  };

  /** Says how `delivery` ends once its next attempt is recorded. */
  const follow = (delivery) =>
    following.set(delivery.id, { baseline: delivery.attempt_log.length, until: Date.now() + FOLLOW_MS });

  async function resend(delivery, button) {
    button.disabled = true;
    try {
      const queued = await post(`/api/webhooks/${id}/deliveries/${delivery.id}/resend`);
      ctx.toast(`Delivery ${delivery.id} queued to be sent again`);
      follow(queued);
      await loadDeliveries();
    } catch (e) {
      ctx.toast(e.message, { bad: true });
    } finally {
      button.disabled = false;
    }
  }

  testButton.addEventListener("click", async () => {
    testButton.disabled = true;
    try {
      const queued = await post(`/api/webhooks/${id}/test`, {});
      ctx.toast(`Test ${queued.event_type} queued as delivery ${queued.id}`);
      follow(queued);
      await loadDeliveries();
    } catch (e) {
      ctx.toast(e.message, { bad: true });
    } finally {
      testButton.disabled = false;
    }
  });

  more.addEventListener("click", () => {
    shownPages += 1;
    loadDeliveries().catch((e) => show(status, failure(e)));
  });

  loadEndpoint().then(loadDeliveries).catch((e) => show(facts, failure(e)));
  const timer = setInterval(() => {
    if (webhook) loadDeliveries().catch((e) => show(status, failure(e)));
  }, REFRESH_MS);
  return () => clearInterval(timer);
}
