//! The OpenAPI schemas of the domain's text enums, written once: each is a
//! string whose values are the enum's names (`ALL`, `as_str`), under the name
//! and description clients know it by. The wire types hold the domain enums
//! themselves (their serde is their names), so no view twin is needed.

use std::borrow::Cow;

use utoipa::{
    PartialSchema, ToSchema,
    openapi::{
        RefOr, Schema,
        schema::{ObjectBuilder, Type},
    },
};

use crate::domain::{
    failure::FailureKind,
    page::PagingEnd,
    page::StopReason,
    repair::RepairState,
    run::RunState,
    site::{Rotation, VersionReason},
    webhook::{DeliveryState, WebhookEventType},
};

/// The schema of a string that is one of `names`.
fn names_schema(names: &[&'static str], description: &str) -> RefOr<Schema> {
    ObjectBuilder::new()
        .schema_type(Type::String)
        .enum_values(Some(names.iter().copied()))
        .description(Some(description))
        .into()
}

macro_rules! text_enum_schemas {
    ($($enum:ty => $name:literal, $description:expr;)+) => {$(
        impl PartialSchema for $enum {
            fn schema() -> RefOr<Schema> {
                names_schema(&<$enum>::ALL.map(<$enum>::as_str), $description)
            }
        }

        impl ToSchema for $enum {
            fn name() -> Cow<'static, str> {
                Cow::Borrowed($name)
            }
        }
    )+};
}

text_enum_schemas! {
    RunState => "RunState",
        "Where a crawl run is in its life (docs/design.md, \"Crawl run state machine\").";
    FailureKind => "ErrorKind",
        "Why an attempt failed: stuck (no answer within the stuck timeout), worker_lost, \
         browser_crashed, network, site_error (5xx, 408), http_status (4xx), blocked (429, \
         503 or a block page on every try), target_refused (SSRF guard), unreadable_page, \
         page_too_large, no_items (a first page without items on a site that expects them), \
         misconfigured, internal, cancelled, robots_disallowed (the site's robots.txt \
         disallows the first page for our user agent; the page was not fetched), \
         extraction_over_budget (reading a page took more than EXTRACT_BUDGET_MS: the \
         site's selectors cost too much there; not retried), action_failed (a step of the \
         site's page actions failed; the message names it, e.g. actions[2]).";
    StopReason => "StopReason",
        "Why a completed run stopped before its last page: robots_disallowed (the site's \
         robots.txt disallows the next page for our user agent; it was not fetched).";
    PagingEnd => "PagingEnd", "Why a completed run's paging ended.";
    WebhookEventType => "WebhookEventType",
        "What an endpoint is told about: run.failed (for good: its last attempt, or a \
         failure no retry mends), run.completed, run.degraded, site.blocked, \
         site.recovered, items.new, items.changed, items.removed, site.repair_proposed (a \
         verified repair of a site's selectors is waiting, or was applied by `repair: auto`).";
    VersionReason => "VersionReason",
        "Why a site's version was made: recorded (the site as it was when versions began \
         to be kept), created, edited, restored (an earlier version brought back), repaired (a repair \
         proposal's selectors applied), rolled_back (an automatic repair undone because \
         the next run was degraded again).";
    Rotation => "ProxyRotation",
        "When a proxy pool's member is chosen again: per_run (once per run), per_page \
         (for every page; in browser mode once per run, as the browser's relay keeps one \
         member for a run), sticky (the same member while the site's kept session lasts).";
    RepairState => "RepairState",
        "Where a repair is: working (a worker is looking for one), proposed (verified, \
         waiting for a person), none_found (nothing passed verification; `verdict` says \
         why), accepted, applied (by the site's `repair: auto` policy), rejected, \
         rolled_back (applied by `auto`, undone: the next run was bad again).";
    DeliveryState => "WebhookDeliveryState",
        "pending (waiting for its first attempt or a retry), delivered (the endpoint \
         answered 2xx), failed (every attempt of the retry schedule failed).";
}
