//! What a worker saw when an attempt failed, kept beside the attempt: the
//! page's HTML and, in browser mode, a screenshot.

use sqlx::PgPool;

use crate::{
    domain::run::RunState,
    store::fence::{Fence, FenceError},
};

/// Longest HTML kept (bytes); a longer page is cut at a character boundary.
pub const MAX_EVIDENCE_HTML: usize = 2 * 1024 * 1024;
/// Largest screenshot kept (bytes); a larger one is not kept.
pub const MAX_EVIDENCE_SCREENSHOT: usize = 2 * 1024 * 1024;

/// A failed attempt's page, as the worker saw it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Evidence {
    pub page_url: Option<String>,
    pub html: Option<String>,
    /// PNG.
    pub screenshot: Option<Vec<u8>>,
}

impl Evidence {
    /// Within the caps: the HTML cut, a screenshot over its cap dropped.
    pub fn capped(mut self) -> Self {
        if let Some(html) = &mut self.html
            && html.len() > MAX_EVIDENCE_HTML
        {
            let mut end = MAX_EVIDENCE_HTML;
            while !html.is_char_boundary(end) {
                end -= 1;
            }
            html.truncate(end);
        }
        if self
            .screenshot
            .as_ref()
            .is_some_and(|png| png.len() > MAX_EVIDENCE_SCREENSHOT)
        {
            self.screenshot = None;
        }
        self
    }
}

/// Keeps the evidence of the attempt `fence` holds (replacing what it kept
/// before); a superseded worker keeps nothing.
pub async fn keep_evidence(
    pool: &PgPool,
    fence: &Fence,
    evidence: &Evidence,
) -> Result<(), FenceError> {
    let kept = sqlx::query!(
        r#"INSERT INTO attempt_evidence (run_id, attempt, page_url, html, screenshot)
           SELECT id, attempt, $4, $5, $6 FROM crawl_runs
           WHERE id = $1 AND attempt = $2 AND worker_id = $3 AND state = ANY($7)
           ON CONFLICT (run_id, attempt) DO UPDATE
           SET page_url = EXCLUDED.page_url, html = EXCLUDED.html,
               screenshot = EXCLUDED.screenshot, captured_at = now()"#,
        fence.run_id,
        fence.attempt,
        fence.worker_id,
        evidence.page_url,
        evidence.html,
        evidence.screenshot.as_deref(),
        &RunState::HELD as &[RunState],
    )
    .execute(pool)
    .await?;
    if kept.rows_affected() == 0 {
        return Err(fence.superseded());
    }
    Ok(())
}

/// The HTML kept for attempt `attempt` of run `run_id`.
pub async fn evidence_html(
    pool: &PgPool,
    run_id: i64,
    attempt: i32,
) -> sqlx::Result<Option<String>> {
    Ok(sqlx::query_scalar!(
        "SELECT html FROM attempt_evidence WHERE run_id = $1 AND attempt = $2",
        run_id,
        attempt
    )
    .fetch_optional(pool)
    .await?
    .flatten())
}

/// The screenshot (PNG) kept for attempt `attempt` of run `run_id`.
pub async fn evidence_screenshot(
    pool: &PgPool,
    run_id: i64,
    attempt: i32,
) -> sqlx::Result<Option<Vec<u8>>> {
    Ok(sqlx::query_scalar!(
        "SELECT screenshot FROM attempt_evidence WHERE run_id = $1 AND attempt = $2",
        run_id,
        attempt
    )
    .fetch_optional(pool)
    .await?
    .flatten())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn evidence_is_cut_to_its_caps() {
        let big = "é".repeat(MAX_EVIDENCE_HTML); // two bytes each
        let capped = Evidence {
            page_url: None,
            html: Some(big),
            screenshot: Some(vec![0; MAX_EVIDENCE_SCREENSHOT + 1]),
        }
        .capped();
        let html = capped.html.unwrap();
        assert!(html.len() <= MAX_EVIDENCE_HTML && html.chars().all(|c| c == 'é'));
        assert_eq!(capped.screenshot, None);
    }
}
