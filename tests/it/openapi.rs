//! The OpenAPI document: valid, and listing exactly the routes the router serves
//! and the component schemas clients know.

use std::collections::BTreeSet;

use reqwest::Method;

use crate::support::TestApp;

/// Every route of the router, as (method, path template).
const ROUTES: &[(&str, &str)] = &[
    ("get", "/api/sites"),
    ("post", "/api/sites"),
    ("get", "/api/sites/{id}"),
    ("put", "/api/sites/{id}"),
    ("delete", "/api/sites/{id}"),
    ("delete", "/api/sites/{id}/session"),
    ("get", "/api/sites/{id}/health"),
    ("get", "/api/sites/{id}/proxies"),
    ("get", "/api/sites/{id}/versions"),
    ("get", "/api/sites/{id}/versions/{version}"),
    ("get", "/api/sites/{id}/versions/{version}/diff"),
    ("post", "/api/sites/{id}/versions/{version}/restore"),
    ("post", "/api/sites/{id}/replay"),
    ("get", "/api/sites/{id}/repairs"),
    ("post", "/api/sites/{id}/repairs/{repair_id}/accept"),
    ("post", "/api/sites/{id}/repairs/{repair_id}/reject"),
    ("get", "/api/sites/health"),
    ("post", "/api/sites/preview"),
    ("post", "/api/sites/learn"),
    ("get", "/api/keywords"),
    ("post", "/api/keywords"),
    ("get", "/api/keywords/{id}"),
    ("put", "/api/keywords/{id}"),
    ("delete", "/api/keywords/{id}"),
    ("post", "/api/keywords/{id}/crawl"),
    ("get", "/api/url-lists"),
    ("post", "/api/url-lists"),
    ("get", "/api/url-lists/{id}"),
    ("put", "/api/url-lists/{id}"),
    ("delete", "/api/url-lists/{id}"),
    ("get", "/api/url-lists/{id}/urls"),
    ("put", "/api/url-lists/{id}/urls"),
    ("post", "/api/url-lists/{id}/urls"),
    ("post", "/api/url-lists/{id}/crawl"),
    ("get", "/api/runs"),
    ("get", "/api/runs/{id}"),
    ("post", "/api/runs/{id}/cancel"),
    ("post", "/api/runs/{id}/retry"),
    ("post", "/api/runs/bulk"),
    ("post", "/api/sites/enabled"),
    ("post", "/api/keywords/enabled"),
    ("get", "/api/runs/{id}/attempts/{attempt}/html"),
    ("get", "/api/runs/{id}/attempts/{attempt}/screenshot"),
    ("get", "/api/results"),
    ("get", "/api/results/export"),
    ("get", "/api/items/{id}"),
    ("get", "/api/items/{id}/history"),
    ("get", "/api/jobs/queue"),
    ("get", "/api/jobs/history"),
    ("get", "/api/webhooks"),
    ("post", "/api/webhooks"),
    ("get", "/api/webhooks/{id}"),
    ("put", "/api/webhooks/{id}"),
    ("delete", "/api/webhooks/{id}"),
    ("get", "/api/webhooks/{id}/deliveries"),
    ("post", "/api/webhooks/{id}/deliveries/{delivery_id}/resend"),
    ("post", "/api/webhooks/{id}/test"),
    ("get", "/api/openapi.json"),
    ("get", "/api/access"),
    ("get", "/ws"),
    ("get", "/health"),
    ("get", "/ready"),
];

/// Every component schema of the document, by name: clients generate types
/// from them, so one renamed or dropped breaks their code even when every
/// route stays.
const SCHEMAS: &[&str] = &[
    "Access",
    "AccessView",
    "Action",
    "Attempt",
    "BrowserResources",
    "Change",
    "CrawlResult",
    "CrawlRun",
    "DateRule",
    "Detail",
    "DetailInput",
    "ErrorBody",
    "ErrorDetail",
    "ErrorKind",
    "Expectations",
    "FieldInput",
    "FieldSpec",
    "HealthWindow",
    "IdentifiedBy",
    "Item",
    "ItemValue",
    "JsonInput",
    "Keyword",
    "KeywordInput",
    "LearnBody",
    "LearnTimings",
    "LearnView",
    "LineNote",
    "LineNotes",
    "MinuteCounts",
    "NumberRule",
    "Page_CrawlResult",
    "Page_CrawlRun",
    "Page_ItemValue",
    "Page_Keyword",
    "Page_Site",
    "Page_UrlEntry",
    "Page_UrlList",
    "Page_Webhook",
    "Page_WebhookDelivery",
    "Paging",
    "PagingEnd",
    "PreviewBody",
    "PreviewDetailView",
    "PreviewItemView",
    "PreviewPageView",
    "PreviewRefusalView",
    "PreviewTimings",
    "PreviewView",
    "ProposalView",
    "ProxyMember",
    "ProxyPool",
    "ProxyPoolMember",
    "ProxyRotation",
    "QueueCounts",
    "Repair",
    "RepairAccepted",
    "RepairCheck",
    "RepairEvidence",
    "RepairFieldChange",
    "RepairReplayCheck",
    "RepairState",
    "ReplayBody",
    "ReplayOutcome",
    "ReplayedPage",
    "ReplayedRun",
    "ChangedItem",
    "BeforeAfter",
    "BulkEnableOutcome",
    "BulkEnableRequest",
    "BulkRunAction",
    "BulkRunFilter",
    "BulkRunOutcome",
    "BulkRunRequest",
    "SkippedRun",
    "QueueOutcome",
    "QueueReport",
    "RunDetail",
    "RunItems",
    "RunState",
    "Site",
    "SiteHealth",
    "SiteInput",
    "StopReason",
    "Streak",
    "StructuredItemView",
    "StructuredView",
    "UploadReport",
    "UrlEntry",
    "UrlList",
    "UrlListInput",
    "VersionChange",
    "ListedVersion",
    "Page_ListedVersion",
    "VersionDetail",
    "VersionDiff",
    "VersionReason",
    "VersionView",
    "Webhook",
    "WebhookDelivery",
    "WebhookDeliveryAttempt",
    "WebhookDeliveryState",
    "WebhookEventType",
    "WebhookInput",
    "WebhookTest",
    "WorkerSeen",
];

#[tokio::test]
async fn the_openapi_document_is_valid_and_lists_every_route_the_router_serves() {
    let app = TestApp::spawn().await;
    let (status, doc) = app.get("/api/openapi.json").await;
    assert_eq!(status, 200);
    let parsed = oas3::from_json(doc.to_string()).expect("a valid OpenAPI 3 document");
    assert!(parsed.openapi.starts_with("3."), "{}", parsed.openapi);

    let mut documented = BTreeSet::new();
    for (path, item) in parsed.paths.iter().flatten() {
        for (method, _) in item.methods() {
            documented.insert((method.as_str().to_lowercase(), path.to_owned()));
        }
    }
    let expected: BTreeSet<(String, String)> = ROUTES
        .iter()
        .map(|(m, p)| (m.to_string(), p.to_string()))
        .collect();
    assert_eq!(documented, expected);

    // Each documented route is served (the router answers, not "no such route").
    for (method, path) in ROUTES {
        let url = format!(
            "{}{}",
            app.base,
            path.replace("{id}", "1")
                .replace("{attempt}", "1")
                .replace("{delivery_id}", "1")
                .replace("{version}", "1")
        );
        let method: Method = method.to_uppercase().parse().unwrap();
        let mut req = app.http.request(method.clone(), &url);
        if method == Method::POST || method == Method::PUT {
            req = req.json(&serde_json::json!({}));
        }
        let resp = req.send().await.unwrap();
        let status = resp.status().as_u16();
        let body = resp.text().await.unwrap_or_default();
        assert!(
            !body.contains("no such route") && status != 405,
            "{method} {path}: {status} {body}"
        );
    }

    let components = parsed.components.expect("components");
    assert!(components.security_schemes.contains_key("bearer"));
    let schemas: BTreeSet<&str> = components.schemas.keys().map(String::as_str).collect();
    assert_eq!(schemas, SCHEMAS.iter().copied().collect::<BTreeSet<_>>());
    let crawl = doc["paths"]["/api/keywords/{id}/crawl"]["post"].clone();
    assert_eq!(crawl["security"][0]["bearer"], serde_json::json!([]));
    assert!(crawl["responses"]["401"].is_object());
    app.stop().await;
}
