//! Sites as clients send them: the request bodies with their OpenAPI
//! schemas, handed to the domain's `SiteInput` whose `parse` checks every rule.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::{actions::ActionBody, paging::PagingBody};
use crate::domain::{
    action::ActionInput,
    paging::PagingInput,
    site::{Expectations, ExpectationsInput, FieldInput, JsonInput, SiteInput},
    value::{DateInput, NumberInput},
};

/// A site as a client sends it; [`SiteInput::parse`] checks every rule.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(as = SiteInput)]
pub struct SiteBody {
    pub name: String,
    /// URL template with `{keyword}` and, for paged searches, `{page}` or `{offset}`.
    pub search_url: String,
    /// `browser` (default), `http` or `json`.
    pub render: Option<String>,
    /// CSS selector of one item (browser, http).
    pub item_selector: Option<String>,
    /// Instead of `item_selector` (browser, http): the schema.org type whose
    /// items in a page's structured data (JSON-LD, else microdata) are the
    /// site's items, e.g. `Product` for each product of a list page or the
    /// one of a product page. Each field then reads a path inside the item
    /// (`"structured": "offers.price"`). The preview lists the types a page has.
    pub structured_items: Option<String>,
    pub fields: BTreeMap<String, FieldBody>,
    /// The field (one of `fields`) whose value identifies an item that has no
    /// URL: a SKU, an id. Items are identified by their URL, else by this
    /// field, else by their content (any change makes another item).
    pub item_key: Option<String>,
    /// Element to wait for (up to 10 s) before reading a page (browser).
    pub wait_for: Option<String>,
    /// An element whose presence means the site refused us (browser, http).
    pub blocked_selector: Option<String>,
    /// Where items and the next-page token are (json).
    pub json: Option<JsonBody>,
    /// Pages at most (default 100 for paged searches, else 1).
    pub max_pages: Option<i32>,
    /// How one page leads to the next (default: `{page}` or the JSON token).
    pub paging: Option<PagingBody>,
    /// Steps a browser takes on the first page before reading it (at most 20).
    pub actions: Option<Vec<ActionBody>>,
    pub stuck_timeout_secs: Option<i32>,
    pub max_attempts: Option<i32>,
    /// Page requests per second across the fleet (fractions allowed); none: unlimited.
    pub max_requests_per_sec: Option<f64>,
    /// Runs active at once across the fleet (default 3).
    pub max_concurrent_runs: Option<i32>,
    /// Incremental crawl of a newest-first feed: items an earlier completed run
    /// stored are not stored again, and paging stops where the feed reaches them.
    pub stop_on_seen: Option<bool>,
    /// The first page must have items: none is a failure (`no_items`: the
    /// site changed), not an empty result.
    pub expect_items: Option<bool>,
    /// What a healthy completed run finds; a run below it is completed with
    /// `health: "degraded"` and a reason (and the `run.degraded` event).
    pub expect: Option<ExpectBody>,
    /// Queue runs for the site (default true). A disabled site keeps its
    /// settings and history; neither schedules nor a crawl now queue it.
    pub enabled: Option<bool>,
    /// Obey the site's robots.txt (default true): a page it disallows for our
    /// user agent (the product token of `user_agent`, else `crawlfleet`) is
    /// not fetched (`robots_disallowed`), and its Crawl-delay paces the site
    /// fleet-wide when stricter than `max_requests_per_sec`.
    pub respect_robots: Option<bool>,
    /// Keep cookies and local storage between runs (needs SESSION_KEY).
    pub keep_session: Option<bool>,
    /// Only one run at a time uses the kept session.
    pub exclusive_session: Option<bool>,
    pub user_agent: Option<String>,
    /// Extra request headers. On a replacement (or a preview with
    /// `site_id`), `***` keeps the stored value while `search_url` keeps its
    /// origin (and, over plain http, its proxy); otherwise send the value again.
    pub headers: Option<BTreeMap<String, String>>,
    /// `http://` or `socks5://` proxy, credentials allowed; responses mask the
    /// user name and password, and sending them back masked keeps them for
    /// the same proxy (scheme, host and port) only.
    pub proxy: Option<String>,
}

/// A field as a client sends it (see [`FieldSpec`]).
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(as = FieldInput)]
pub struct FieldBody {
    /// CSS selector inside the item (browser, http).
    pub selector: Option<String>,
    /// Attribute to read instead of the text (browser, http).
    pub attr: Option<String>,
    /// JSON pointer inside the item (json).
    pub pointer: Option<String>,
    /// The value is a URL: made absolute against the page (after `regex`),
    /// and the first such field (or `href`) is the item's URL (structured
    /// fields: a list's first URL, an object's `url`).
    pub link: Option<bool>,
    /// Where the value is in the page's structured data (browser, http),
    /// instead of `selector`/`attr`: a dotted path of properties and list
    /// indexes, inside the item when the site has `structured_items`
    /// (`offers.price`, `brand.name`, `image.0`), else starting with the type
    /// whose first item on the page it reads (`Product.offers.price`). A list
    /// on the way is looked through (the first offer that has a price), and
    /// `a|b` tries `b` when `a` finds nothing (`offers.price|offers.lowPrice`).
    /// `og:title`, `product:price:amount` read the page's OpenGraph.
    pub structured: Option<String>,
    /// `collapse` (every run of whitespace one space, the ends trimmed: an
    /// element's text always is) or `keep`.
    pub whitespace: Option<String>,
    /// A regular expression (at most 500 characters, linear-time matching,
    /// bounded in what it compiles to); the value is its first capture
    /// group, else the whole match. No match: no value.
    pub regex: Option<String>,
    /// Every value as a list (at most 100): each element `selector` finds,
    /// each match of `regex`. In a JSON API, a list's elements.
    pub all: Option<bool>,
    /// The value is a number, read as `locale` writes it.
    pub number: Option<NumberBody>,
    /// The value is a date (`2026-03-29`) or a time (RFC 3339 with the
    /// zone's offset).
    pub date: Option<DateBody>,
    /// The value when the page has none (of the field's type; a list with
    /// `all`). A value that does not parse is null, not the default.
    #[schema(value_type = Option<Object>)]
    pub default: Option<serde_json::Value>,
    /// An item without a value here is left out (counted in the run's data health).
    pub required: Option<bool>,
}

/// How a field's number is read: `"₩1,299,000"` (ko-KR) is 1299000,
/// `"1.299,00 €"` (de-DE) 1299, with `currency_field` its currency (`KRW`,
/// `EUR`) into a field of its own.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(as = NumberRule)]
pub struct NumberBody {
    /// The page's locale (`ko-KR`, `de-DE`, `en-US`, `fr-FR`, `pl-PL`): its
    /// decimal and thousands separators. None: guessed (the last of `.`
    /// and `,` is the decimal separator; one followed by three digits groups).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub locale: Option<String>,
    /// An item field (not one of `fields`) that gets the currency as an ISO
    /// 4217 code, or null when the text names none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub currency_field: Option<String>,
}

/// How a field's dates are read: the `formats` in order, then ISO 8601 /
/// RFC 3339 and RFC 2822, then relative forms (`3 hours ago`, `yesterday`,
/// `vor 2 Tagen`, `3시간 전`), in `time_zone`.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(as = DateRule)]
pub struct DateBody {
    /// chrono `strftime` formats (`%d.%m.%Y %H:%M`), at most 10.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub formats: Vec<String>,
    /// The IANA zone the site's dates are in (default `UTC`): a wall time is
    /// read there, and "yesterday" is its yesterday.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub time_zone: Option<String>,
}

/// What a healthy completed run of a site finds. Every part is optional.
#[derive(Debug, Clone, Default, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(as = Expectations)]
pub struct ExpectBody {
    /// A completed run with fewer items is degraded.
    pub min_items: Option<i32>,
    /// Fields every item must have (non-empty); one of the site's `fields`.
    #[serde(default)]
    pub required_fields: Vec<String>,
    /// Empty runs of a keyword in a row that are still fine; the next is degraded.
    pub max_empty_runs: Option<i32>,
}

impl From<ExpectBody> for ExpectationsInput {
    fn from(body: ExpectBody) -> Self {
        ExpectationsInput {
            min_items: body.min_items,
            required_fields: body.required_fields,
            max_empty_runs: body.max_empty_runs,
        }
    }
}

impl From<Expectations> for ExpectBody {
    fn from(expect: Expectations) -> Self {
        ExpectBody {
            min_items: expect.min_items,
            required_fields: expect.required_fields,
            max_empty_runs: expect.max_empty_runs,
        }
    }
}

/// Where a JSON API keeps its items and its next-page token.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(as = JsonInput)]
pub struct JsonBody {
    /// JSON pointer to the array of items, e.g. `/data/items`.
    pub items: String,
    /// JSON pointer to the next page's token; none or null: the last page.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_token: Option<String>,
    /// Query parameter the token is sent back in.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token_param: Option<String>,
}

impl From<SiteBody> for SiteInput {
    fn from(body: SiteBody) -> Self {
        SiteInput {
            name: body.name,
            search_url: body.search_url,
            render: body.render,
            item_selector: body.item_selector,
            structured_items: body.structured_items,
            fields: body
                .fields
                .into_iter()
                .map(|(name, field)| (name, field.into()))
                .collect(),
            item_key: body.item_key,
            wait_for: body.wait_for,
            blocked_selector: body.blocked_selector,
            json: body.json.map(JsonInput::from),
            max_pages: body.max_pages,
            paging: body.paging.map(PagingInput::from),
            actions: body
                .actions
                .map(|steps| steps.into_iter().map(ActionInput::from).collect()),
            stuck_timeout_secs: body.stuck_timeout_secs,
            max_attempts: body.max_attempts,
            max_requests_per_sec: body.max_requests_per_sec,
            max_concurrent_runs: body.max_concurrent_runs,
            stop_on_seen: body.stop_on_seen,
            expect_items: body.expect_items,
            expect: body.expect.map(ExpectationsInput::from),
            enabled: body.enabled,
            respect_robots: body.respect_robots,
            keep_session: body.keep_session,
            exclusive_session: body.exclusive_session,
            user_agent: body.user_agent,
            headers: body.headers,
            proxy: body.proxy,
        }
    }
}

impl From<FieldBody> for FieldInput {
    fn from(body: FieldBody) -> Self {
        FieldInput {
            selector: body.selector,
            attr: body.attr,
            pointer: body.pointer,
            link: body.link,
            structured: body.structured,
            whitespace: body.whitespace,
            regex: body.regex,
            all: body.all,
            number: body.number.map(|n| NumberInput {
                locale: n.locale,
                currency_field: n.currency_field,
            }),
            date: body.date.map(|d| DateInput {
                formats: d.formats,
                time_zone: d.time_zone,
            }),
            default: body.default,
            required: body.required,
        }
    }
}

impl From<JsonBody> for JsonInput {
    fn from(body: JsonBody) -> Self {
        JsonInput {
            items: body.items,
            next_token: body.next_token,
            token_param: body.token_param,
        }
    }
}

impl From<JsonInput> for JsonBody {
    fn from(json: JsonInput) -> Self {
        JsonBody {
            items: json.items,
            next_token: json.next_token,
            token_param: json.token_param,
        }
    }
}
