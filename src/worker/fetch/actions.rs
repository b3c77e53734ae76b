//! A site's page actions, run in the browser on its first page before it is
//! read: each step within its own time bound, its element looked for in an
//! isolated world (the page's scripts cannot fake it), keys and text sent as
//! the browser's own input events (a form submits on Enter as it would for a
//! person). A step that fails ends the attempt as `action_failed`, naming it.

use std::time::{Duration, Instant};

use serde_json::json;

use crate::{
    domain::{
        action::{Action, KEYS, KEYWORD, Step},
        failure::FailureKind,
    },
    worker::{browser::BrowserSession, error::CrawlError},
};

/// A function of what to do, the selector, its argument and how long to
/// wait (ms) for the element. It waits for the element (a `dismiss` does
/// not: it is there now or not at all), then clicks it, focuses and clears
/// it, picks an option, scrolls to it, or only finds it; it resolves to
/// `"done"`, `"absent"` (dismiss, nothing there) or why it failed.
const STEP_JS: &str = r#"
(op, selector, arg, waitMs) => new Promise((done) => {
const act = (el) => {
  if (op === 'click' || op === 'dismiss') { el.scrollIntoView({block: 'center'}); el.click(); return 'done'; }
  if (op === 'focus') {
    el.scrollIntoView({block: 'center'}); el.focus();
    if ('value' in el) el.value = '';
    return document.activeElement === el ? 'done' : 'the element takes no focus';
  }
  if (op === 'select') {
    const option = Array.from(el.options || []).find((o) => o.value === arg || o.textContent.trim() === arg);
    if (!option) return 'it has no option ' + JSON.stringify(arg);
    el.value = option.value;
    el.dispatchEvent(new Event('input', {bubbles: true}));
    el.dispatchEvent(new Event('change', {bubbles: true}));
    return 'done';
  }
  if (op === 'scroll') { el.scrollIntoView({block: 'end'}); return 'done'; }
  return 'done';
};
if (selector === null) {
  const root = document.scrollingElement || document.documentElement;
  window.scrollTo(0, root.scrollHeight);
  done('done');
  return;
}
const found = document.querySelector(selector);
if (found !== null) { done(act(found)); return; }
if (op === 'dismiss') { done('absent'); return; }
const observer = new MutationObserver(() => {
  const el = document.querySelector(selector);
  if (el !== null) { observer.disconnect(); clearTimeout(timer); done(act(el)); }
});
const timer = setTimeout(() => { observer.disconnect(); done('its element never appeared'); }, waitMs);
observer.observe(document, {childList: true, subtree: true, attributes: true});
})
"#;

/// Runs `steps` in order on the page `session` shows, `{keyword}` in a
/// typed text being `keyword`.
pub async fn run_actions(
    session: &BrowserSession,
    steps: &[Step],
    keyword: &str,
) -> Result<(), CrawlError> {
    for (at, step) in steps.iter().enumerate() {
        let limit = Duration::from_millis(step.timeout_ms.into());
        let outcome = tokio::time::timeout(limit, run_step(session, &step.action, keyword, limit))
            .await
            .unwrap_or_else(|_| Err(format!("it took more than {} ms", step.timeout_ms)));
        if let Err(why) = outcome {
            return Err(CrawlError::failed(
                FailureKind::ActionFailed,
                format!("actions[{at}] ({}) failed: {why}", describe(&step.action)),
            ));
        }
        tracing::debug!(step = at, action = step.action.name(), "page action done");
    }
    Ok(())
}

/// The step as a person reads it in a failure.
fn describe(action: &Action) -> String {
    match action {
        Action::Click { selector }
        | Action::Type { selector, .. }
        | Action::Select { selector, .. }
        | Action::WaitFor { selector }
        | Action::Dismiss { selector } => format!("{} {}", action.name(), selector.as_str()),
        Action::Scroll { selector } => match selector {
            Some(selector) => format!("scroll {}", selector.as_str()),
            None => "scroll to the end".to_owned(),
        },
        Action::Press { key } => format!("press {key}"),
        Action::Wait { ms } => format!("wait {ms} ms"),
    }
}

async fn run_step(
    session: &BrowserSession,
    action: &Action,
    keyword: &str,
    limit: Duration,
) -> Result<(), String> {
    match action {
        Action::Click { selector } => {
            in_page(session, "click", Some(selector.as_str()), "", limit).await
        }
        Action::Dismiss { selector } => {
            in_page(session, "dismiss", Some(selector.as_str()), "", limit).await
        }
        Action::WaitFor { selector } => {
            in_page(session, "find", Some(selector.as_str()), "", limit).await
        }
        Action::Select { selector, value } => {
            in_page(session, "select", Some(selector.as_str()), value, limit).await
        }
        Action::Scroll { selector } => {
            let selector = selector.as_ref().map(|s| s.as_str());
            in_page(session, "scroll", selector, "", limit).await
        }
        Action::Type { selector, text } => {
            in_page(session, "focus", Some(selector.as_str()), "", limit).await?;
            let text = text.replace(KEYWORD, keyword);
            session
                .call("Input.insertText", json!({"text": text}))
                .await
                .map(drop)
                .map_err(|e| format!("typing: {e}"))
        }
        Action::Press { key } => press(session, key).await,
        Action::Wait { ms } => {
            tokio::time::sleep(Duration::from_millis((*ms).into())).await;
            Ok(())
        }
    }
}

/// Runs one step's script. A page that is navigating (a form just
/// submitted) has no document to run it in for a moment: it is asked again
/// until the step's time is up.
async fn in_page(
    session: &BrowserSession,
    op: &str,
    selector: Option<&str>,
    arg: &str,
    limit: Duration,
) -> Result<(), String> {
    let started = Instant::now();
    loop {
        let left = limit.saturating_sub(started.elapsed());
        let args = json!([op, selector, arg, left.as_millis() as u64]);
        let expression = format!("({STEP_JS})(...{args})");
        match session.evaluate_isolated(&expression).await {
            Ok(answer) => {
                return match answer.as_str() {
                    Some("done" | "absent") => Ok(()),
                    Some(why) => Err(why.to_owned()),
                    None => Err(format!("the step's script answered {answer}")),
                };
            }
            Err(e) if started.elapsed() + Duration::from_millis(100) >= limit => {
                return Err(format!("{e:#}"));
            }
            Err(_) => tokio::time::sleep(Duration::from_millis(100)).await,
        }
    }
}

/// Presses `key` where the focus is, as the browser's own key events.
async fn press(session: &BrowserSession, key: &str) -> Result<(), String> {
    let Some((code, key, key_code, text)) = KEYS.iter().find(|(name, ..)| *name == key) else {
        return Err(format!("no key {key}"));
    };
    for kind in ["keyDown", "keyUp"] {
        let mut event = json!({
            "type": kind, "key": key, "code": code,
            "windowsVirtualKeyCode": key_code, "nativeVirtualKeyCode": key_code,
        });
        if kind == "keyDown" && !text.is_empty() {
            event["text"] = json!(text);
        }
        session
            .call("Input.dispatchKeyEvent", event)
            .await
            .map_err(|e| format!("pressing {key}: {e}"))?;
    }
    Ok(())
}
