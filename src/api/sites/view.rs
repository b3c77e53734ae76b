//! Sites as the API shows them: the store's domain site mapped to the wire,
//! its secrets masked (`***`) for every token.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use serde::Serialize;
use utoipa::ToSchema;

use crate::{
    api::view::view,
    domain::{
        action::{ActionInput, Step},
        paging::PagingInput,
        site::{
            BrowserResourcesInput, DetailSpec, ExpectationsInput, FieldSpec, JsonInput,
            ProxyPoolInput, ProxyUrl, Site, Streak,
        },
        value::{DateInput, NumberInput, ValueKind},
    },
    store::sites::{RunItems, SiteHealth, Window},
};

view! {
    /// A stored site, as the API shows it: the values of its headers and its
    /// proxy's credentials are masked (`***`) for every token; they are kept
    /// sealed with SESSION_KEY, and sending the masked form back keeps them
    /// while they go where they went: headers to the same origin of
    /// `search_url`, credentials to the same proxy; else the value must be sent again.
    #[derive(Debug, Clone, Serialize, ToSchema)]
    #[schema(as = Site)]
    pub struct SiteView from (site: Site) {
        let spec = site.spec;
        let [item_selector, wait_for, blocked_selector] =
            spec.extraction.selectors().map(|s| s.map(str::to_owned));
        let structured_items = spec.extraction.structured_items().map(|t| t.as_str().to_owned());
        let fields = spec.extraction.fields().iter().map(|(name, field)| (name.clone(), field.into())).collect();
        let json = spec.extraction.json_input();
        let headers = spec.identity.masked_headers();
        let proxy = spec.identity.proxy.as_ref().map(ProxyUrl::masked);
        let proxy_pool = spec.identity.pool.as_ref().map(|p| p.masked());
    } {
        id: i64 = site.id,
        name: String = spec.name,
        search_url: String = spec.search_url.as_str().to_owned(),
        render: String = spec.render.as_str().to_owned(),
        item_selector: Option<String> = item_selector,
        /// The schema.org type whose structured items are the site's items
        /// (instead of `item_selector`).
        structured_items: Option<String> = structured_items,
        fields: BTreeMap<String, FieldView> = fields,
        /// The field whose value identifies an item that has no URL.
        item_key: Option<String> = spec.item_key,
        wait_for: Option<String> = wait_for,
        blocked_selector: Option<String> = blocked_selector,
        json: Option<JsonInput> = json,
        max_pages: i32 = spec.max_pages,
        /// How one page leads to the next.
        paging: PagingInput = spec.paging.input(),
        /// Steps a browser takes on the first page before reading it.
        actions: Vec<ActionInput> = spec.actions.iter().map(Step::input).collect(),
        stuck_timeout_secs: Option<i32> = spec.stuck_timeout_secs,
        max_attempts: Option<i32> = spec.max_attempts,
        max_requests_per_sec: Option<f64> = spec.politeness.max_requests_per_sec,
        max_concurrent_runs: i32 = spec.politeness.max_concurrent_runs,
        stop_on_seen: bool = spec.stop_on_seen,
        expect_items: bool = spec.expect_items,
        expect: ExpectationsInput = spec.expect.into(),
        /// Queued for its keywords; false: disabled.
        enabled: bool = spec.enabled,
        /// Obeys its robots.txt (disallowed pages, Crawl-delay).
        respect_robots: bool = spec.respect_robots,
        keep_session: bool = spec.session.keep,
        exclusive_session: bool = spec.session.exclusive,
        user_agent: Option<String> = spec.identity.user_agent,
        /// Header names, each value shown as `***`.
        headers: BTreeMap<String, String> = headers,
        /// The proxy, its user name and password shown as `***`.
        proxy: Option<String> = proxy,
        /// The proxy pool (instead of `proxy`), each member's user name and
        /// password shown as `***`; `GET /api/sites/{id}/proxies` shows how
        /// each is doing.
        #[serde(skip_serializing_if = "Option::is_none")]
        proxy_pool: Option<ProxyPoolInput> = proxy_pool,
        /// Detail pages read for each item and merged into it.
        #[serde(skip_serializing_if = "Option::is_none")]
        detail: Option<DetailView> = spec.detail.as_ref().map(DetailView::from),
        /// What a repair may do when the site's markup changed: `off`,
        /// `suggest` or `auto`.
        repair: String = spec.repair.as_str().to_owned(),
        /// What its browser pages download besides what reading them needs
        /// (`allow`: images, media, fonts, trackers; none by default).
        browser_resources: BrowserResourcesInput = spec.browser_resources.input(),
        /// When a run last saved the site's session (keep_session).
        session_saved_at: Option<DateTime<Utc>> = site.session_saved_at,
        created_at: DateTime<Utc> = site.created_at,
        updated_at: DateTime<Utc> = site.updated_at,
    }
}

view! {
    /// Detail pages, as a client writes them (`DetailInput`): the list field
    /// holding each item's detail URL, the fields read there, and which
    /// items' detail pages a run reads.
    #[derive(Debug, Clone, Serialize, ToSchema)]
    #[schema(as = Detail)]
    pub struct DetailView from (detail: &DetailSpec) {} {
        url_field: String = detail.url_field.clone(),
        fields: BTreeMap<String, FieldView> = detail.fields.iter().map(|(name, field)| (name.clone(), field.into())).collect(),
        #[serde(skip_serializing_if = "Option::is_none")]
        wait_for: Option<String> = detail.wait_for.as_ref().map(|s| s.as_str().to_owned()),
        render: String = detail.render.as_str().to_owned(),
        /// `"new"`, `"new_or_changed"`, `"all"` or `{"every_hours": N}`.
        #[schema(value_type = Object)]
        read: serde_json::Value = detail.read_input(),
    }
}

view! {
    /// How to read one field of an item. In HTML modes: the text, or the
    /// attribute `attr`, of the element `selector` finds inside the item (the item
    /// itself without a selector); `href`/`src` are made absolute; or the value at
    /// `structured` in the page's structured data. In json mode: the value at
    /// `pointer` inside the item. `link` makes it an absolute URL; `whitespace`,
    /// `regex`, `all`, `number`, `date`, `default` and `required` make it a
    /// typed, clean value (as `FieldInput` describes them).
    #[derive(Debug, Clone, Serialize, ToSchema)]
    #[schema(as = FieldSpec)]
    pub struct FieldView from (field: &FieldSpec) {
        let rules = &field.rules;
        let (number, date) = match &rules.kind {
            ValueKind::Text => (None, None),
            ValueKind::Number(number) => (
                Some(NumberInput {
                    locale: number.locale.as_ref().map(|l| l.as_str().to_owned()),
                    currency_field: number.currency_field.clone(),
                }),
                None,
            ),
            ValueKind::Date(date) => (
                None,
                Some(DateInput {
                    formats: date.formats.clone(),
                    time_zone: Some(date.time_zone.name().to_owned()),
                }),
            ),
        };
    } {
        #[serde(skip_serializing_if = "Option::is_none")]
        selector: Option<String> = field.selector.as_ref().map(|s| s.as_str().to_owned()),
        #[serde(skip_serializing_if = "Option::is_none")]
        attr: Option<String> = field.attr.clone(),
        #[serde(skip_serializing_if = "Option::is_none")]
        pointer: Option<String> = field.pointer.as_ref().map(|p| p.as_str().to_owned()),
        #[serde(skip_serializing_if = "std::ops::Not::not")]
        link: bool = field.link,
        #[serde(skip_serializing_if = "Option::is_none")]
        structured: Option<String> = field.structured.as_ref().map(|p| p.as_str().to_owned()),
        #[serde(skip_serializing_if = "Option::is_none")]
        whitespace: Option<String> = rules.whitespace.map(|w| w.as_str().to_owned()),
        #[serde(skip_serializing_if = "Option::is_none")]
        regex: Option<String> = rules.regex.as_ref().map(|r| r.as_str().to_owned()),
        #[serde(skip_serializing_if = "std::ops::Not::not")]
        all: bool = rules.all,
        #[serde(skip_serializing_if = "Option::is_none")]
        number: Option<NumberInput> = number,
        #[serde(skip_serializing_if = "Option::is_none")]
        date: Option<DateInput> = date,
        #[serde(skip_serializing_if = "Option::is_none")]
        #[schema(value_type = Option<Object>)]
        default: Option<serde_json::Value> = rules.default.clone(),
        #[serde(skip_serializing_if = "std::ops::Not::not")]
        required: bool = rules.required,
    }
}

view! {
    /// How a site is doing: its status in one word, its last success, its
    /// success, degraded and blocked rates over the last 24 hours and 7 days, its
    /// current streak, and the items its last completed runs found.
    #[derive(Debug, Clone, Serialize, ToSchema)]
    #[schema(as = SiteHealth)]
    pub struct SiteHealthView from (health: SiteHealth) {
        let day = health.last_24h;
    } {
        site_id: i64 = health.site_id,
        name: String = health.name,
        /// `healthy`, `degraded` (its last runs completed below its `expect`),
        /// `failing` (its last runs failed), `blocked` (it refuses us), or
        /// `unknown` (no run ended yet).
        status: String = health.status.as_str().to_owned(),
        /// Since when the site refuses us; cleared by the next healthy run.
        blocked_since: Option<DateTime<Utc>> = health.blocked_since,
        /// Set while every proxy of the site (its `proxy`, or every member
        /// of its `proxy_pool`) is retired for drawing refusals: when the
        /// first returns. The site is paused: its runs wait between pages,
        /// neither failed nor sent out another way, and go on then.
        paused_until: Option<DateTime<Utc>> = health.paused_until,
        /// Why the site is paused, as a person reads it (null when it is not).
        pause_reason: Option<String> = health.paused_until.map(|until| format!(
            "every proxy of the site is retired (each drew refusals: 429, 403, a block \
             page or failed connections); its runs wait until the first returns at {}",
            until.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
        )),
        /// When a run of the site last completed healthy.
        last_success_at: Option<DateTime<Utc>> = health.last_success_at,
        /// Runs that ended (completed or failed) in the last 24 hours.
        runs_ended_24h: i64 = day.runs_ended,
        /// Of those, the share that completed (null when none ended).
        success_rate_24h: Option<f64> = share(day.runs_completed, day.runs_ended),
        /// Attempts of the runs that ended in the last 24 hours.
        attempts_ended_24h: i64 = day.attempts_ended,
        /// Of those, the share the site refused on every try (`blocked`; null when none ended).
        blocked_rate_24h: Option<f64> = share(day.attempts_blocked, day.attempts_ended),
        last_24h: HealthWindowView = day.into(),
        last_7d: HealthWindowView = health.last_7d.into(),
        /// The site's last ended runs that went the same way (null before any ended).
        streak: Option<StreakView> = health.streak.map(StreakView::from),
        /// The last 20 completed runs, oldest first: the site's yield over time.
        recent_runs: Vec<RunItemsView> =
            health.recent_runs.into_iter().map(RunItemsView::from).collect(),
    }
}

view! {
    /// How a site's runs ended over a span of time; rates are null when no run ended.
    #[derive(Debug, Clone, Serialize, ToSchema)]
    #[schema(as = HealthWindow)]
    pub struct HealthWindowView from (window: Window) {} {
        runs_ended: i64 = window.runs_ended,
        runs_completed: i64 = window.runs_completed,
        runs_degraded: i64 = window.runs_degraded,
        /// Completed runs (healthy or degraded) among those that ended.
        success_rate: Option<f64> = share(window.runs_completed, window.runs_ended),
        /// Degraded runs among those that ended.
        degraded_rate: Option<f64> = share(window.runs_degraded, window.runs_ended),
        attempts_ended: i64 = window.attempts_ended,
        /// Attempts the site refused on every try (`blocked`) among those that ended.
        blocked_rate: Option<f64> = share(window.attempts_blocked, window.attempts_ended),
    }
}

view! {
    /// The site's last ended runs that went the same way, newest first.
    #[derive(Debug, Clone, Serialize, ToSchema)]
    #[schema(as = Streak)]
    pub struct StreakView from (streak: Streak) {} {
        /// `healthy`, `degraded` or `failed`.
        verdict: String = streak.verdict.as_str().to_owned(),
        /// How many (counted over the last 1000 ended runs).
        runs: i64 = streak.runs,
        /// When the first run of the streak ended.
        since: DateTime<Utc> = streak.since,
    }
}

view! {
    /// The items one completed run found.
    #[derive(Debug, Clone, Serialize, ToSchema)]
    #[schema(as = RunItems)]
    pub struct RunItemsView from (run: RunItems) {} {
        run_id: i64 = run.run_id,
        finished_at: DateTime<Utc> = run.finished_at,
        items_found: i32 = run.items_found,
        /// Completed below the site's expectations.
        degraded: bool = run.degraded,
    }
}

fn share(part: i64, whole: i64) -> Option<f64> {
    (whole > 0).then(|| part as f64 / whole as f64)
}
