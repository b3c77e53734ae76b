//! The requests a page does not make (a site's `browser_resources`): its
//! images, media, web fonts and requests to tracker hosts (`trackers`),
//! unless the site allows them. Done in the browser, before a request
//! leaves it: the page's session asks DevTools to pause requests of those
//! resource types and to those hosts (`Fetch.enable` with their patterns),
//! and each paused request is failed (`Fetch.failRequest`, `BlockedByClient`,
//! as an ad blocker fails it) or, when a pattern matched more than it should,
//! let go (`Fetch.continueRequest`), straight from the connection's reader
//! (`devtools`): nobody waits on a page's events for it. Nothing else is
//! paused: documents, stylesheets, scripts, XHR and fetch go their way
//! untouched, unless to a tracker host.
//!
//! The same for every backend: a local Chrome, a remote DevTools browser and
//! a WebDriver session's Chrome are all driven over DevTools.

use serde_json::{Value, json};

use super::trackers;
use crate::{
    domain::site::{BrowserResources, ResourceKind},
    ops::metrics::metrics,
};

/// How a page session answers its paused requests.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Blocking {
    resources: BrowserResources,
    /// The host of the page last navigated to: a tracker domain's own pages
    /// load from it.
    page_host: Option<String>,
}

impl Blocking {
    /// `None` when `resources` allows every kind: nothing to pause.
    pub fn of(resources: BrowserResources) -> Option<Blocking> {
        (resources != BrowserResources::ALL_ALLOWED).then_some(Blocking {
            resources,
            page_host: None,
        })
    }

    pub fn set_page_host(&mut self, host: Option<&str>) {
        self.page_host = host.map(str::to_owned);
    }

    /// `Fetch.enable`'s parameters: a pattern per blocked resource type and,
    /// trackers blocked, per tracker host.
    pub fn fetch_enable(&self) -> Value {
        let mut patterns: Vec<Value> = self
            .resources
            .blocked()
            .into_iter()
            .filter_map(devtools_type)
            .map(|kind| json!({"urlPattern": "*", "resourceType": kind, "requestStage": "Request"}))
            .collect();
        if !self.resources.allows(ResourceKind::Tracker) {
            patterns.extend(
                trackers::url_patterns()
                    .map(|pattern| json!({"urlPattern": pattern, "requestStage": "Request"})),
            );
        }
        json!({"patterns": patterns, "handleAuthRequests": false})
    }

    /// The kind a paused request (`Fetch.requestPaused`'s parameters) is
    /// blocked as, or `None` to let it go.
    pub fn judge(&self, paused: &Value) -> Option<ResourceKind> {
        let resource_type = paused["resourceType"].as_str().unwrap_or_default();
        let by_type = ResourceKind::ALL
            .into_iter()
            .find(|kind| devtools_type(*kind) == Some(resource_type));
        if let Some(kind) = by_type
            && !self.resources.allows(kind)
        {
            return Some(kind);
        }
        if self.resources.allows(ResourceKind::Tracker) || resource_type == "Document" {
            return None;
        }
        let url = url::Url::parse(paused["request"]["url"].as_str().unwrap_or_default()).ok()?;
        trackers::blocks(url.host_str()?, self.page_host.as_deref())
            .then_some(ResourceKind::Tracker)
    }

    /// The command answering a paused request, and its parameters.
    pub fn answer(&self, paused: &Value) -> (&'static str, Value) {
        let request_id = paused["requestId"].clone();
        match self.judge(paused) {
            Some(kind) => {
                metrics()
                    .browser_requests_blocked
                    .with_label_values(&[kind.as_str()])
                    .inc();
                (
                    "Fetch.failRequest",
                    json!({"requestId": request_id, "errorReason": "BlockedByClient"}),
                )
            }
            None => ("Fetch.continueRequest", json!({"requestId": request_id})),
        }
    }
}

/// DevTools' `Network.ResourceType` of a kind blocked by type.
fn devtools_type(kind: ResourceKind) -> Option<&'static str> {
    match kind {
        ResourceKind::Image => Some("Image"),
        ResourceKind::Media => Some("Media"),
        ResourceKind::Font => Some("Font"),
        ResourceKind::Tracker => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn paused(resource_type: &str, url: &str) -> Value {
        json!({"requestId": "r1", "resourceType": resource_type, "request": {"url": url}})
    }

    #[test]
    fn blocked_types_and_tracker_hosts_fail_everything_else_goes() {
        let mut blocking = Blocking::of(BrowserResources::default()).unwrap();
        blocking.set_page_host(Some("shop.example"));
        let judge = |t, u| blocking.judge(&paused(t, u));
        assert_eq!(
            judge("Image", "https://shop.example/a.jpg"),
            Some(ResourceKind::Image)
        );
        assert_eq!(
            judge("Font", "https://fonts.example/f.woff2"),
            Some(ResourceKind::Font)
        );
        assert_eq!(
            judge("Media", "https://shop.example/v.mp4"),
            Some(ResourceKind::Media)
        );
        assert_eq!(
            judge("Script", "https://www.googletagmanager.com/gtag/js?id=G-1"),
            Some(ResourceKind::Tracker)
        );
        assert_eq!(
            judge("Ping", "http://www.google-analytics.com:8080/collect"),
            Some(ResourceKind::Tracker)
        );
        // Never the site's own requests, nor a document, nor a URL merely naming a tracker.
        assert_eq!(judge("Script", "https://shop.example/app.js"), None);
        assert_eq!(judge("XHR", "https://shop.example/items.json"), None);
        assert_eq!(judge("Stylesheet", "https://shop.example/s.css"), None);
        assert_eq!(judge("Document", "https://ad.doubleclick.net/frame"), None);
        assert_eq!(
            judge("Script", "https://shop.example/x.js?u=a.doubleclick.net/"),
            None
        );
        let (method, params) = blocking.answer(&paused("Image", "https://shop.example/a.jpg"));
        assert_eq!(method, "Fetch.failRequest");
        assert_eq!(
            params,
            json!({"requestId": "r1", "errorReason": "BlockedByClient"})
        );
        let (method, _) = blocking.answer(&paused("Script", "https://shop.example/app.js"));
        assert_eq!(method, "Fetch.continueRequest");
    }

    #[test]
    fn allowed_kinds_are_neither_paused_nor_failed() {
        let blocking = Blocking::of(BrowserResources::allowing([
            ResourceKind::Image,
            ResourceKind::Tracker,
        ]))
        .unwrap();
        assert_eq!(
            blocking.judge(&paused("Image", "https://shop.example/a.jpg")),
            None
        );
        assert_eq!(
            blocking.judge(&paused(
                "Script",
                "https://connect.facebook.net/fbevents.js"
            )),
            None
        );
        let patterns = blocking.fetch_enable()["patterns"]
            .as_array()
            .unwrap()
            .clone();
        let types: Vec<&str> = patterns
            .iter()
            .filter_map(|p| p["resourceType"].as_str())
            .collect();
        assert_eq!(types, ["Media", "Font"]);
        assert_eq!(
            patterns.len(),
            2,
            "no tracker patterns when trackers are allowed"
        );
        assert_eq!(Blocking::of(BrowserResources::ALL_ALLOWED), None);
        let all = Blocking::of(BrowserResources::default())
            .unwrap()
            .fetch_enable();
        assert_eq!(
            all["patterns"].as_array().unwrap().len(),
            3 + trackers::TRACKER_HOSTS.len() * 4
        );
    }
}
