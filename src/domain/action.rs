//! Page actions: what a person does on a site's first page before its
//! results show (accept the cookie banner, type the keyword into the search
//! box and press Enter, pick a sort order), as a declared list of bounded
//! steps a browser runs before the page is read.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::{FieldError, site::locator::CssSelector, text};

/// Steps a site's actions have at most.
pub const MAX_ACTIONS: usize = 20;
/// What a step may take when the site gives no `timeout_ms`.
pub const DEFAULT_STEP_MS: u32 = 5_000;
/// Longest `timeout_ms` of a step, and longest `wait`.
pub const MAX_STEP_MS: u32 = 30_000;
/// Longest text a `type` step types, and a `select` step's value.
pub const MAX_TEXT_CHARS: usize = 500;
/// Where a `type` step's text takes the run's keyword.
pub const KEYWORD: &str = "{keyword}";

/// A key a `press` step presses: its name (also its DevTools `code`), its
/// DOM `key`, virtual key code and the text it types (if any).
pub const KEYS: [(&str, &str, u32, &str); 8] = [
    ("Enter", "Enter", 13, "\r"),
    ("Tab", "Tab", 9, ""),
    ("Escape", "Escape", 27, ""),
    ("Space", " ", 32, " "),
    ("ArrowDown", "ArrowDown", 40, ""),
    ("ArrowUp", "ArrowUp", 38, ""),
    ("PageDown", "PageDown", 34, ""),
    ("End", "End", 35, ""),
];

/// One step a browser takes on the site's first page before reading it, as
/// a client sends it ([`parse_actions`] checks it): `click` (`selector`),
/// `type` (`selector`, `text`: `{keyword}` is the run's keyword), `press`
/// (`key`: Enter, Tab, Escape, Space, ArrowDown, ArrowUp, PageDown, End),
/// `select` (`selector`, `value`: an option's value or text), `scroll`
/// (`selector`, or the page's end), `wait_for` (`selector`), `wait` (`ms`),
/// `dismiss` (`selector`: clicked if it is on the page, else nothing). Each
/// within `timeout_ms` (default 5000, at most 30000); a step that fails fails
/// the attempt as `action_failed`, naming it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(as = Action)]
pub struct ActionInput {
    /// `click`, `type`, `press`, `select`, `scroll`, `wait_for`, `wait` or `dismiss`.
    pub action: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub selector: Option<String>,
    /// What `type` types (`{keyword}` is the run's keyword).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
    /// The key `press` presses.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key: Option<String>,
    /// The option `select` picks (its value or its text).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<String>,
    /// How long `wait` waits.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ms: Option<i64>,
    /// What the step may take (default 5 s, at most 30 s).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_ms: Option<i64>,
}

/// What a step does.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "action", rename_all = "snake_case")]
pub enum Action {
    /// Click the element (waiting for it to appear).
    Click { selector: CssSelector },
    /// Focus the field, clear it and type `text` (`{keyword}` filled in).
    Type { selector: CssSelector, text: String },
    /// Press a key (one of [`KEYS`]) where the focus is.
    Press { key: String },
    /// Pick the option whose value or text is `value`.
    Select {
        selector: CssSelector,
        value: String,
    },
    /// Scroll the element into view, or to the end of the page.
    Scroll { selector: Option<CssSelector> },
    /// Wait until the element is on the page.
    WaitFor { selector: CssSelector },
    /// Wait `ms` milliseconds.
    Wait { ms: u32 },
    /// Click the element if it is on the page; nothing otherwise.
    Dismiss { selector: CssSelector },
}

/// One step of a site's actions, checked.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Step {
    #[serde(flatten)]
    pub action: Action,
    /// What the step may take.
    pub timeout_ms: u32,
}

impl Action {
    /// The step's name, as clients send it.
    pub fn name(&self) -> &'static str {
        match self {
            Action::Click { .. } => "click",
            Action::Type { .. } => "type",
            Action::Press { .. } => "press",
            Action::Select { .. } => "select",
            Action::Scroll { .. } => "scroll",
            Action::WaitFor { .. } => "wait_for",
            Action::Wait { .. } => "wait",
            Action::Dismiss { .. } => "dismiss",
        }
    }
}

impl Step {
    /// The client's form of the step, as it was accepted.
    pub fn input(&self) -> ActionInput {
        let mut input = ActionInput {
            action: self.action.name().to_owned(),
            timeout_ms: Some(i64::from(self.timeout_ms)),
            ..ActionInput::default()
        };
        match &self.action {
            Action::Click { selector }
            | Action::WaitFor { selector }
            | Action::Dismiss { selector } => input.selector = Some(selector.as_str().to_owned()),
            Action::Type { selector, text } => {
                input.selector = Some(selector.as_str().to_owned());
                input.text = Some(text.clone());
            }
            Action::Select { selector, value } => {
                input.selector = Some(selector.as_str().to_owned());
                input.value = Some(value.clone());
            }
            Action::Scroll { selector } => {
                input.selector = selector.as_ref().map(|s| s.as_str().to_owned());
            }
            Action::Press { key } => input.key = Some(key.clone()),
            Action::Wait { ms } => input.ms = Some(i64::from(*ms)),
        }
        input
    }
}

/// A site's actions, checked: at most [`MAX_ACTIONS`] steps, each with what
/// it needs and nothing else; only a browser runs them (`browser`).
pub fn parse_actions(inputs: Vec<ActionInput>, browser: bool) -> Result<Vec<Step>, FieldError> {
    if inputs.is_empty() {
        return Ok(Vec::new());
    }
    if !browser {
        return Err(FieldError::new(
            "actions",
            "page actions run in a browser: they need render \"browser\"",
        ));
    }
    if inputs.len() > MAX_ACTIONS {
        return Err(FieldError::new(
            "actions",
            format!("at most {MAX_ACTIONS} steps"),
        ));
    }
    inputs
        .into_iter()
        .enumerate()
        .map(|(at, input)| input.parse(&format!("actions[{at}]")))
        .collect()
}

impl ActionInput {
    fn parse(self, at: &str) -> Result<Step, FieldError> {
        let field = |name: &str| format!("{at}.{name}");
        text::check(&self.action, &field("action"), 20)?;
        let selector = || match &self.selector {
            Some(selector) => CssSelector::parse(selector, &field("selector")),
            None => Err(FieldError::new(
                field("selector"),
                format!("a {} step needs the element's selector", self.action),
            )),
        };
        let bounded_text = |value: &Option<String>, name: &str| match value {
            Some(value) => text::check(value, &field(name), MAX_TEXT_CHARS).map(|()| value.clone()),
            None => Err(FieldError::new(
                field(name),
                format!("a {} step needs its {name}", self.action),
            )),
        };
        let action = match self.action.as_str() {
            "click" => Action::Click {
                selector: selector()?,
            },
            "type" => Action::Type {
                selector: selector()?,
                text: bounded_text(&self.text, "text")?,
            },
            "press" => {
                let key = self.key.clone().unwrap_or_default();
                if !KEYS.iter().any(|(name, ..)| *name == key) {
                    let names: Vec<&str> = KEYS.iter().map(|(name, ..)| *name).collect();
                    return Err(FieldError::new(
                        field("key"),
                        format!("must be one of {}", names.join(", ")),
                    ));
                }
                Action::Press { key }
            }
            "select" => Action::Select {
                selector: selector()?,
                value: bounded_text(&self.value, "value")?,
            },
            "scroll" => Action::Scroll {
                selector: match self.selector {
                    Some(_) => Some(selector()?),
                    None => None,
                },
            },
            "wait_for" => Action::WaitFor {
                selector: selector()?,
            },
            "wait" => Action::Wait {
                ms: millis(self.ms, &field("ms"))?.ok_or_else(|| {
                    FieldError::new(field("ms"), "a wait step needs how long it waits")
                })?,
            },
            "dismiss" => Action::Dismiss {
                selector: selector()?,
            },
            other => {
                return Err(FieldError::new(
                    field("action"),
                    format!(
                        "unknown action {other:?}; supported: click, type, press, select, \
                         scroll, wait_for, wait, dismiss"
                    ),
                ));
            }
        };
        // What the step does not use is a mistake, not a silent no-op.
        let unused = [
            (
                "selector",
                self.selector.is_some(),
                action_has_selector(&action),
            ),
            (
                "text",
                self.text.is_some(),
                matches!(action, Action::Type { .. }),
            ),
            (
                "key",
                self.key.is_some(),
                matches!(action, Action::Press { .. }),
            ),
            (
                "value",
                self.value.is_some(),
                matches!(action, Action::Select { .. }),
            ),
            (
                "ms",
                self.ms.is_some(),
                matches!(action, Action::Wait { .. }),
            ),
        ];
        if let Some((name, ..)) = unused.iter().find(|(_, given, used)| *given && !*used) {
            return Err(FieldError::new(
                field(name),
                format!("a {} step has no {name}", action.name()),
            ));
        }
        let timeout_ms = millis(self.timeout_ms, &field("timeout_ms"))?.unwrap_or(DEFAULT_STEP_MS);
        Ok(Step { action, timeout_ms })
    }
}

fn action_has_selector(action: &Action) -> bool {
    !matches!(action, Action::Press { .. } | Action::Wait { .. })
}

/// A duration in milliseconds, 1 to [`MAX_STEP_MS`].
fn millis(value: Option<i64>, field: &str) -> Result<Option<u32>, FieldError> {
    match value {
        None => Ok(None),
        Some(ms) if (1..=i64::from(MAX_STEP_MS)).contains(&ms) => Ok(Some(ms as u32)),
        Some(_) => Err(FieldError::new(
            field,
            format!("must be between 1 and {MAX_STEP_MS} (milliseconds)"),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(steps: serde_json::Value, browser: bool) -> Result<Vec<Step>, FieldError> {
        parse_actions(serde_json::from_value(steps).unwrap(), browser)
    }

    #[test]
    fn every_action_parses_and_reads_back_as_its_input() {
        let steps = serde_json::json!([
            {"action": "dismiss", "selector": "#cookies button"},
            {"action": "type", "selector": "input[name=q]", "text": "{keyword}"},
            {"action": "press", "key": "Enter"},
            {"action": "wait_for", "selector": "li.product", "timeout_ms": 10000},
            {"action": "select", "selector": "select.sort", "value": "newest"},
            {"action": "scroll"},
            {"action": "wait", "ms": 200},
            {"action": "click", "selector": "a.all"},
        ]);
        let parsed = parse(steps.clone(), true).unwrap();
        assert_eq!(parsed.len(), 8);
        assert_eq!(parsed[0].timeout_ms, DEFAULT_STEP_MS);
        assert_eq!(parsed[3].timeout_ms, 10_000);
        for step in &parsed {
            let stored = serde_json::to_value(step).unwrap();
            assert_eq!(&serde_json::from_value::<Step>(stored).unwrap(), step);
            assert_eq!(parse_actions(vec![step.input()], true).unwrap()[0], *step);
        }
    }

    #[test]
    fn each_bad_step_names_the_step_and_its_field() {
        let field = |steps: serde_json::Value| parse(steps, true).unwrap_err().field;
        let ok = serde_json::json!({"action": "wait", "ms": 1});
        assert_eq!(
            field(serde_json::json!([ok, ok, {"action": "click", "selector": "a["}])),
            "actions[2].selector"
        );
        assert_eq!(
            field(serde_json::json!([{"action": "click"}])),
            "actions[0].selector"
        );
        assert_eq!(
            field(serde_json::json!([{"action": "hover", "selector": "a"}])),
            "actions[0].action"
        );
        assert_eq!(
            field(serde_json::json!([{"action": "type", "selector": "a"}])),
            "actions[0].text"
        );
        assert_eq!(
            field(serde_json::json!([{"action": "press", "key": "F13"}])),
            "actions[0].key"
        );
        assert_eq!(
            field(serde_json::json!([{"action": "wait", "ms": 60000}])),
            "actions[0].ms"
        );
        assert_eq!(
            field(serde_json::json!([{"action": "wait"}])),
            "actions[0].ms"
        );
        assert_eq!(
            field(serde_json::json!([{"action": "click", "selector": "a", "timeout_ms": 0}])),
            "actions[0].timeout_ms"
        );
        assert_eq!(
            field(serde_json::json!([{"action": "press", "key": "Enter", "selector": "a"}])),
            "actions[0].selector"
        );
        assert_eq!(
            field(serde_json::json!([{"action": "type", "selector": "a", "text": "a\u{0}b"}])),
            "actions[0].text"
        );
        let many = serde_json::Value::Array(vec![ok.clone(); MAX_ACTIONS + 1]);
        assert_eq!(field(many), "actions");
        let err = parse(serde_json::json!([ok]), false).unwrap_err();
        assert_eq!(
            err.field, "actions",
            "an http site has no browser to act in"
        );
        assert!(parse(serde_json::json!([]), false).unwrap().is_empty());
    }
}
