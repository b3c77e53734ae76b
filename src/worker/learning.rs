//! Selectors from examples on a worker: the page loaded as a preview loads
//! it (this lane's slot, the guard on every connection, robots.txt, the
//! fleet-wide pace, the site's identity and render mode), then learned from
//! on a blocking thread within LEARN_BUDGET_MS (`extract::learn`); the
//! proposals, or why there are none, answered. Nothing is stored.

use std::time::{Duration, Instant};

use url::Url;

use super::{
    crawl::CrawlContext,
    error::CrawlError,
    fetch::{BrowserPage, HttpClient, LoadedHtml, PageSource, first_way_out, prepare_for_crawl},
    learn::{self, LEARN_MAX_RUNS, LearnError, Proposal, Spent},
    preview::{cut_raw, pace_for},
    session::SessionCookies,
};
use crate::domain::{
    failure::FailureKind,
    learn::{
        LEARN_ITEMS_SHOWN, LEARN_PAGE_SHOWN_BYTES, LearnFailure, LearnFailureKind, LearnOutcome,
        LearnRequest, LearnedProposal,
    },
    site::{RenderMode, SiteSpec},
};

/// Loads the page of `request` and learns from it.
pub(super) async fn learn(
    ctx: &CrawlContext,
    request: &LearnRequest,
    spec: &SiteSpec,
) -> LearnOutcome {
    let started = Instant::now();
    let loaded = load(ctx, request, spec).await;
    let load_ms = started.elapsed().as_millis() as u64;
    let started = Instant::now();
    let (final_url, learned, page_html) = match loaded {
        Ok((html, url)) => {
            let shown = cut_at_char(&html, LEARN_PAGE_SHOWN_BYTES).to_owned();
            let learned = learn_off_runtime(ctx, request, html, url.clone()).await;
            (Some(url.to_string()), learned, Some(shown))
        }
        Err(failure) => (None, Err(failure), None),
    };
    let (proposals, failure) = match learned {
        Ok(proposals) => (proposals, None),
        Err(failure) => (Vec::new(), Some(failure)),
    };
    LearnOutcome {
        worker_id: ctx.worker_id.clone(),
        final_url,
        proposals,
        failure,
        load_ms,
        learn_ms: started.elapsed().as_millis() as u64,
        page_html,
    }
}

/// `text` cut to at most `max` bytes, at a character boundary.
fn cut_at_char(text: &str, max: usize) -> &str {
    let mut end = text.len().min(max);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

/// The page's HTML and where it ended, or why it was not loaded.
async fn load(
    ctx: &CrawlContext,
    request: &LearnRequest,
    spec: &SiteSpec,
) -> Result<(String, Url), LearnFailure> {
    let url = match &request.url {
        Some(url) => Url::parse(url).map_err(|e| page_failure(format!("{url}: {e}")))?,
        None => spec
            .search_url
            .first_url(&request.keyword)
            .map_err(|e| page_failure(format!("the search URL: {e}")))?,
    };
    // The page within what the api still waits, less the learning's budget.
    let time_left = (request.deadline - chrono::Utc::now())
        .to_std()
        .unwrap_or_default()
        .saturating_sub(ctx.learn_budget);
    load_page(
        ctx,
        spec,
        request.site_id,
        &url,
        &request.keyword,
        time_left,
    )
    .await
    .map_err(page_failure)
}

/// Loads page `url` of site `site_id` (none: a site not stored yet) as a crawl of `keyword` would (the
/// guard, robots.txt, the fleet-wide pace, the site's identity and render
/// mode; a refusal slows the fleet down for the site), within `time_left`:
/// its HTML and where it ended, or why it was not loaded.
pub(super) async fn load_page(
    ctx: &CrawlContext,
    spec: &SiteSpec,
    site_id: Option<i64>,
    url: &Url,
    keyword: &str,
    time_left: Duration,
) -> Result<(String, Url), String> {
    let url = url.clone();
    let stuck_timeout = spec
        .stuck_timeout_secs
        .map(|s| Duration::from_secs(s as u64))
        .unwrap_or(ctx.default_stuck_timeout)
        .min(time_left.max(Duration::from_secs(1)));
    let pace = pace_for(ctx, spec, site_id, Some(&url)).await;
    let loaded = async {
        ctx.guard.check(&url).await?;
        if let Some(why) = ctx.robots.disallows(spec, &url, &ctx.guard).await {
            return Err(CrawlError::failed(FailureKind::RobotsDisallowed, why));
        }
        pace.wait().await?;
        match spec.render {
            RenderMode::Browser => {
                let mut lease = ctx
                    .browsers
                    .lease(first_way_out(&spec.identity).as_ref())
                    .await
                    .map_err(|e| CrawlError::browser(format!("no browser: {e:#}")))?;
                let session = lease.session();
                let loaded = match prepare_for_crawl(session, spec, None).await {
                    Ok(()) => {
                        let page = BrowserPage::new(&mut *session, ctx.bounds, keyword);
                        PageSource::Browser(page)
                            .page_html(spec, &url, stuck_timeout, &ctx.guard)
                            .await
                    }
                    Err(e) => Err(CrawlError::browser(format!("preparing the browser: {e:#}"))),
                };
                let healthy = !matches!(
                    &loaded,
                    Err(CrawlError::Attempt { failure, .. })
                        if failure.kind == FailureKind::BrowserCrashed
                );
                ctx.browsers.give_back(lease, healthy).await;
                loaded
            }
            RenderMode::Http | RenderMode::Json => {
                let client = HttpClient::new(
                    &spec.identity,
                    ctx.guard.clone(),
                    stuck_timeout,
                    SessionCookies::empty(),
                    pace.clone(),
                )
                .await?
                .with_max_page_bytes(ctx.bounds.page_bytes);
                PageSource::Http(client)
                    .page_html(spec, &url, stuck_timeout, &ctx.guard)
                    .await
            }
        }
    };
    match loaded.await {
        Ok(LoadedHtml::Page { html, url }) => Ok((html, url)),
        Ok(LoadedHtml::Refused {
            reason,
            retry_after,
        }) => {
            // Not waited out, but the fleet slows down for the site as it
            // would after a crawl's refusal.
            if let Err(e) = ctx.limiter.refuse(pace.key.clone(), retry_after).await {
                tracing::warn!(error = %e, "a learning's refusal did not pause the site");
            }
            Err(format!("blocked: {reason}"))
        }
        Err(CrawlError::Attempt { failure, .. }) => {
            Err(format!("{}: {}", failure.kind.as_str(), failure.message))
        }
        Err(other) => Err(format!("internal: {other}")),
    }
}

/// Learns from `html` on a blocking thread, within the learning budget.
async fn learn_off_runtime(
    ctx: &CrawlContext,
    request: &LearnRequest,
    html: String,
    url: Url,
) -> Result<Vec<LearnedProposal>, LearnFailure> {
    let (examples, budget) = (request.examples.clone(), ctx.learn_budget);
    let learning = tokio::task::spawn_blocking(move || {
        learn::learn_within(&html, &url, &examples, budget, LEARN_MAX_RUNS)
    });
    let field_chars = ctx.bounds.field_chars;
    match learning.await {
        Ok(Ok(proposals)) => {
            let mut shown_once: Vec<LearnedProposal> = Vec::new();
            for proposal in proposals {
                let proposal = shown(proposal, field_chars);
                // Two ways to the same selectors are one proposal.
                if !shown_once.iter().any(|p| {
                    p.item_selector == proposal.item_selector && p.fields == proposal.fields
                }) {
                    shown_once.push(proposal);
                }
            }
            Ok(shown_once)
        }
        Ok(Err(e)) => Err(failure_of(e, budget)),
        Err(e) => Err(LearnFailure {
            kind: LearnFailureKind::Budget,
            field: None,
            message: format!("learning stopped: {e}"),
        }),
    }
}

/// A proposal as the answer carries it: its first items, each value cut.
fn shown(proposal: Proposal, field_chars: usize) -> LearnedProposal {
    let reasons = proposal.reasons;
    LearnedProposal {
        item_selector: proposal.item_selector.as_str().to_owned(),
        fields: serde_json::to_value(&proposal.fields).expect("field specs serialize"),
        items: proposal
            .items
            .into_iter()
            .take(LEARN_ITEMS_SHOWN)
            .map(|item| cut_raw(item, field_chars))
            .collect(),
        items_found: reasons.items_found,
        items_complete: reasons.items_complete,
        examples_given: reasons.examples_given,
        examples_reproduced: reasons.examples_reproduced,
        confidence: proposal.confidence,
    }
}

/// Why learning gave nothing, naming the request's field at fault.
fn failure_of(e: LearnError, budget: Duration) -> LearnFailure {
    let examples = |field: Option<&str>, message: String| LearnFailure {
        kind: LearnFailureKind::Examples,
        field: Some(match field {
            Some(field) => format!("examples.{field}"),
            None => "examples".to_owned(),
        }),
        message,
    };
    match e {
        LearnError::BadExamples { field, message } => examples(Some(&field), message),
        LearnError::NotOnPage { field, example } => examples(
            Some(&field),
            format!("{example:?} is not on the page: give values as the page shows them"),
        ),
        LearnError::NoSelector { field } => examples(
            Some(&field),
            "no selector gives back every example of the field".to_owned(),
        ),
        LearnError::NoItems | LearnError::NoRepeatedStructure => examples(None, e.to_string()),
        LearnError::OverBudget(spent) => LearnFailure {
            kind: LearnFailureKind::Budget,
            field: Some("examples".to_owned()),
            message: match spent {
                Spent::Time => format!(
                    "learning went over its budget of {} ms (LEARN_BUDGET_MS): give fewer \
                     examples, or a smaller page",
                    budget.as_millis()
                ),
                other => other.to_string(),
            },
        },
    }
}

fn page_failure(message: String) -> LearnFailure {
    LearnFailure {
        kind: LearnFailureKind::Page,
        field: None,
        message,
    }
}
