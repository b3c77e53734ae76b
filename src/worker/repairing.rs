//! Repairs on the worker that saw a site's run go bad (degraded for what it
//! found, or no items on its first page): the site's version is claimed
//! (one repair per version, fleet-wide), selectors are learned on the
//! failing page from the items of the site's last good run
//! (`extract::learn::repair`), and each proposal is verified three ways
//! before anyone sees it: on the failing page, on the page fetched again as
//! a crawl fetches it, and replayed over the site's saved pages, where it
//! must never read a value other than was stored. What passes is stored
//! with its evidence and announced; under `repair: auto` it is applied at
//! once, and undone by the next bad run of the version it made.
//!
//! Bounds: one repair per site version; learning within LEARN_TIME (3 s of
//! CPU on a blocking thread) for the repair and again for the live check;
//! one page fetched, within REPAIR_PAGE_TIME and the site's pace;
//! REPLAY_PAGES saved pages replayed. It runs in the job's slot, after the
//! attempt's end is written, so a worker never does more of them at once
//! than it has slots.

use std::time::{Duration, Instant};

use serde_json::{Map, Value};
use url::Url;

use super::{
    crawl::CrawlContext,
    learn::{
        LEARN_MAX_RUNS, LEARN_TIME,
        repair::{self, Verified},
    },
    learning::load_page,
    replay::replay_spec,
};
use crate::{
    domain::{
        failure::FailureKind,
        repair::{
            Check, EVIDENCE_ITEMS, FieldChange, RepairEvidence, RepairPolicy, RepairState,
            ReplayCheck, repairable, repaired, replay_passes,
        },
        replay::ReplayOutcome,
        run::{CrawlRun, RunHealth, RunState},
        site::{Site, SiteSpec},
    },
    events::Event,
    store::{
        self,
        repairs::{Applied, Decision, NewProposal},
    },
    worker::extract::HtmlPage,
};

/// Items of the good run learned from, at most.
const GOOD_ITEMS: i64 = 200;
/// Time to fetch the site's page again.
const REPAIR_PAGE_TIME: Duration = Duration::from_secs(30);
/// Saved pages a proposal is replayed over.
const REPLAY_PAGES: usize = 10;
/// Time the replay may take.
const REPLAY_TIME: Duration = Duration::from_secs(30);
/// Proposals that passed the failing page checked further, at most.
const CANDIDATES: usize = 3;

/// Whether `run`'s end calls for a repair: completed degraded for what it
/// found (not for being refused), or an attempt that found no items on its
/// first page. Only a keyword's runs: a list's pages are single items.
pub(super) fn calls_for_repair(run: &CrawlRun) -> bool {
    if run.keyword_id.is_none() {
        return false;
    }
    match run.state {
        RunState::Completed => matches!(
            &run.health,
            Some(RunHealth::Degraded { blocked: false, .. })
        ),
        RunState::Queued | RunState::Failed => run.error_kind == Some(FailureKind::NoItems),
        _ => false,
    }
}

/// After `run` (of `keyword`) ended badly: undoes the automatic repair that
/// made the version it read, or repairs that version if no worker has yet.
/// Never fails the caller: what goes wrong is logged.
pub(super) async fn after_bad_run(ctx: &CrawlContext, run: &CrawlRun, keyword: &str) {
    if let Err(e) = repair_after(ctx, run, keyword).await {
        tracing::warn!(run_id = run.id, site_id = run.site_id, error = %e, "repair not made");
    }
}

async fn repair_after(ctx: &CrawlContext, run: &CrawlRun, keyword: &str) -> anyhow::Result<()> {
    let Some(version) = run.site_version else {
        return Ok(());
    };
    let key = ctx.session_key.as_ref();
    let Some(site) = store::sites::get(&ctx.pool, run.site_id, key).await? else {
        return Ok(());
    };
    // The site changed since the run read it: its next runs tell.
    if site.version != version || site.spec.repair == RepairPolicy::Off {
        return Ok(());
    }
    if !repairable(&site.spec) {
        return Ok(());
    }
    if let Some(applied) = store::repairs::applied_at(&ctx.pool, site.id, version).await? {
        let base = store::sites::versions::get(&ctx.pool, site.id, applied.base_version, key)
            .await?
            .map(|(_, base)| base.spec);
        if let Some(base) = base {
            let why = format!("run {} after the repair was bad again", run.id);
            let back = store::repairs::roll_back(&ctx.pool, key, applied.id, &base, &why).await?;
            tracing::warn!(site_id = site.id, repair_id = applied.id, version = ?back, "automatic repair rolled back: {why}");
        }
        return Ok(());
    }
    let Some(repair_id) =
        store::repairs::claim(&ctx.pool, site.id, version, run.id, &ctx.worker_id).await?
    else {
        return Ok(());
    };
    tracing::info!(
        site_id = site.id,
        run_id = run.id,
        repair_id,
        "repairing the site's selectors"
    );
    let proposal = match propose(ctx, &site, run, keyword).await? {
        Ok(proposal) => proposal,
        Err(verdict) => {
            tracing::info!(site_id = site.id, repair_id, %verdict, "no repair found");
            store::repairs::none_found(&ctx.pool, repair_id, &verdict).await?;
            return Ok(());
        }
    };
    let all_passed = proposal.evidence.all_passed();
    let stored = store::repairs::propose(&ctx.pool, repair_id, &proposal).await?;
    let auto = site.spec.repair == RepairPolicy::Auto
        && all_passed
        && !store::repairs::rolled_back_lately(&ctx.pool, site.id).await?;
    let mut applied = false;
    if auto && let Some(spec) = repaired_spec(&site.spec, &proposal) {
        let decision = Decision {
            decided_by: Some("auto".to_owned()),
            state: RepairState::Applied,
            max_attempts: run.max_attempts,
        };
        match store::repairs::apply(&ctx.pool, key, repair_id, &spec, &decision).await? {
            Applied::Done { version, run_id } => {
                applied = true;
                tracing::info!(site_id = site.id, repair_id, version, recrawl = ?run_id, "repair applied");
            }
            other => {
                tracing::info!(site_id = site.id, repair_id, outcome = ?other, "repair not applied")
            }
        }
    }
    ctx.events
        .publish(&Event::RepairProposed {
            id: stored.id,
            site_id: site.id,
            run_id: run.id,
            keyword_id: run.keyword_id,
            applied,
        })
        .await;
    Ok(())
}

/// The site read with `proposal`'s selectors.
fn repaired_spec(spec: &SiteSpec, proposal: &NewProposal) -> Option<SiteSpec> {
    let item =
        crate::domain::site::CssSelector::parse(&proposal.item_selector, "item_selector").ok()?;
    repaired(spec, &item, &proposal.fields)
}

/// A verified proposal for `site`, whose `run` went bad, or why there is
/// none (`Err` of the outer result: the store or the worker failed).
async fn propose(
    ctx: &CrawlContext,
    site: &Site,
    run: &CrawlRun,
    keyword: &str,
) -> anyhow::Result<Result<NewProposal, String>> {
    let started = Instant::now();
    let spec = &site.spec;
    let Some((good_run, good)) =
        store::repairs::good_run(&ctx.pool, site.id, run.keyword_id, run.id, GOOD_ITEMS).await?
    else {
        return Ok(Err(
            "the site has no healthy run with items to learn from".into()
        ));
    };
    let good = list_fields_of(spec, good);
    if good.is_empty() {
        return Ok(Err("the good run's items have no value to look for".into()));
    }
    let live = match spec.search_url.first_url(keyword) {
        Ok(url) => load_page(ctx, spec, Some(site.id), &url, keyword, REPAIR_PAGE_TIME).await,
        Err(e) => Err(format!("the search URL: {e}")),
    };
    let failing = store::repairs::failing_page(&ctx.pool, run.id).await?;
    let (source, failing_url, failing_html, live) = match (failing, live) {
        (Some((url, html)), live) => ("evidence", url, html, Some(live)),
        (None, Ok((html, url))) => ("live", url.to_string(), html, None),
        (None, Err(why)) => return Ok(Err(format!("the failing page could not be loaded: {why}"))),
    };
    let Ok(failing_url) = Url::parse(&failing_url) else {
        return Ok(Err(format!(
            "the failing page's URL {failing_url:?} does not parse"
        )));
    };
    let checked = {
        let good = good.clone();
        tokio::task::spawn_blocking(move || {
            learn_and_check(&failing_html, &failing_url, &good, live)
        })
        .await?
    };
    let candidates = match checked {
        Ok(candidates) if !candidates.is_empty() => candidates,
        Ok(_) => {
            return Ok(Err(
                "no proposal gave back the good run's items on the failing page".into(),
            ));
        }
        Err(why) => return Ok(Err(why)),
    };
    let mut verdicts = Vec::new();
    for (on_failing, live) in candidates {
        let fields = on_failing.proposal.fields.clone();
        let item_selector = on_failing.proposal.item_selector.as_str().to_owned();
        let Some(repaired) = repaired(spec, &on_failing.proposal.item_selector, &fields) else {
            continue;
        };
        let deadline = chrono::Utc::now() + REPLAY_TIME;
        let replayed = replay_spec(ctx, site.id, &repaired, REPLAY_PAGES, deadline).await;
        let replay = replay_check(&replayed);
        let live_ok = live.as_ref().is_none_or(|l| l.passed || l.note.is_some());
        if !(replay.passed && live_ok) {
            verdicts.push(format!(
                "{item_selector}: live page {}, replay {} of {} saved page(s) read differently",
                live.as_ref().map_or("not checked", |l| if l.passed {
                    "passed"
                } else {
                    "failed"
                }),
                replay.differing,
                replay.pages
            ));
            continue;
        }
        let evidence = RepairEvidence {
            item_selector: FieldChange {
                before: spec.extraction.selectors()[0].map(str::to_owned),
                after: Some(item_selector.clone()),
                attr: None,
            },
            fields: field_changes(spec, &fields),
            good_run_id: good_run,
            before: good
                .iter()
                .take(EVIDENCE_ITEMS)
                .cloned()
                .map(Value::Object)
                .collect(),
            after: (on_failing.proposal.items.iter().take(EVIDENCE_ITEMS))
                .cloned()
                .map(Value::Object)
                .collect(),
            failing_page_source: source.to_owned(),
            failing_page: check_of(&on_failing, None),
            live,
            replay,
            confidence: on_failing.proposal.confidence,
            repair_ms: started.elapsed().as_millis() as u64,
        };
        return Ok(Ok(NewProposal {
            item_selector,
            fields,
            evidence,
        }));
    }
    Ok(Err(format!(
        "no proposal passed every check: {}",
        verdicts.join("; ")
    )))
}

/// Learns on the failing page and checks the proposals that pass there on
/// the live page (when one was fetched apart from it); on a blocking thread.
fn learn_and_check(
    failing_html: &str,
    failing_url: &Url,
    good: &[Map<String, Value>],
    live: Option<Result<(String, Url), String>>,
) -> Result<Vec<(Verified, Option<Check>)>, String> {
    let page = HtmlPage::parse(failing_html, failing_url);
    let verified = repair::repair(&page, good, LEARN_TIME, LEARN_MAX_RUNS)
        .map_err(|e| format!("learning on the failing page: {e}"))?;
    let passing = verified
        .into_iter()
        .filter(Verified::passes)
        .take(CANDIDATES);
    let live_page = match &live {
        Some(Ok((html, url))) => Some((HtmlPage::parse(html, url), url.to_string())),
        _ => None,
    };
    Ok(passing
        .map(|candidate| {
            let live_check = match (&live, &live_page) {
                (None, _) => None,
                (Some(Err(why)), _) => {
                    Some(unmade(format!("the page could not be loaded again: {why}")))
                }
                (Some(Ok(_)), Some((page, url))) => Some(
                    match repair::verify_on(&candidate.proposal, page, good, LEARN_TIME) {
                        Ok(there) => check_of(&there, Some(url.clone())),
                        Err(e) => unmade(format!("checking the live page: {e}")),
                    },
                ),
                (Some(Ok(_)), None) => None,
            };
            (candidate, live_check)
        })
        .collect())
}

fn check_of(verified: &Verified, url: Option<String>) -> Check {
    Check {
        passed: verified.passes(),
        on_page: verified.on_page,
        reproduced: verified.reproduced,
        extra: verified.extra,
        items: verified.proposal.items.len(),
        url,
        note: None,
    }
}

/// A check that could not be made, and why.
fn unmade(note: String) -> Check {
    Check {
        passed: false,
        on_page: 0,
        reproduced: 0,
        extra: 0,
        items: 0,
        url: None,
        note: Some(note),
    }
}

/// The replay's verdict: each saved page read the same, not at all (older
/// markup), or differently (a wrong value: the proposal fails).
fn replay_check(outcome: &ReplayOutcome) -> ReplayCheck {
    let mut check = ReplayCheck {
        pages: outcome.pages,
        note: outcome.error.clone(),
        ..ReplayCheck::default()
    };
    for page in outcome.runs.iter().flat_map(|run| &run.pages) {
        if page.error.is_some() || page.items.is_empty() {
            check.not_read += 1;
        } else if page.changed.is_empty() && page.added.is_empty() && page.removed.is_empty() {
            check.same += 1;
        } else {
            check.differing += 1;
        }
    }
    check.passed = outcome.error.is_none() && replay_passes(&check);
    check
}

/// Each good item with only the fields the list page shows (a detail
/// page's fields are not on it), those without any dropped.
fn list_fields_of(spec: &SiteSpec, good: Vec<Map<String, Value>>) -> Vec<Map<String, Value>> {
    let detail: Vec<&String> = spec
        .detail
        .as_ref()
        .map(|d| d.fields.keys().collect())
        .unwrap_or_default();
    let listed =
        |name: &String| spec.extraction.fields().contains_key(name) && !detail.contains(&name);
    good.into_iter()
        .map(|item| {
            item.into_iter()
                .filter(|(name, _)| listed(name))
                .collect::<Map<_, _>>()
        })
        .filter(|item| !item.is_empty())
        .collect()
}

/// Each field whose selector or attribute the proposal changes.
fn field_changes(
    spec: &SiteSpec,
    proposed: &std::collections::BTreeMap<String, crate::domain::site::FieldSpec>,
) -> std::collections::BTreeMap<String, FieldChange> {
    let fields = spec.extraction.fields();
    proposed
        .iter()
        .filter_map(|(name, new)| {
            let old = fields.get(name)?;
            let changed = old.selector != new.selector || old.attr != new.attr;
            changed.then(|| {
                let selector = |f: &crate::domain::site::FieldSpec| {
                    f.selector.as_ref().map(|s| s.as_str().to_owned())
                };
                let change = FieldChange {
                    before: selector(old),
                    after: selector(new),
                    attr: (old.attr != new.attr).then(|| new.attr.clone()).flatten(),
                };
                (name.clone(), change)
            })
        })
        .collect()
}
