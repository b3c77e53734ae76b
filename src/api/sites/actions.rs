//! A site's page actions on the wire: the same shape in a request body and
//! in the site the api shows, handed to the domain's `ActionInput`.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::domain::action::{ActionInput, Step};

/// One step a browser takes on the site's first page before reading it:
/// `click` (`selector`), `type` (`selector`, `text`: `{keyword}` is the
/// run's keyword), `press` (`key`: Enter, Tab, Escape, Space, ArrowDown,
/// ArrowUp, PageDown, End), `select` (`selector`, `value`: an option's
/// value or text), `scroll` (`selector`, or the page's end), `wait_for`
/// (`selector`), `wait` (`ms`), `dismiss` (`selector`: clicked if it is on
/// the page, else nothing). Each within `timeout_ms` (default 5000, at most
/// 30000); a step that fails fails the attempt as `action_failed`, naming it.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(as = Action)]
pub struct ActionBody {
    pub action: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub selector: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ms: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_ms: Option<i64>,
}

impl From<ActionBody> for ActionInput {
    fn from(body: ActionBody) -> Self {
        ActionInput {
            action: body.action,
            selector: body.selector,
            text: body.text,
            key: body.key,
            value: body.value,
            ms: body.ms,
            timeout_ms: body.timeout_ms,
        }
    }
}

impl From<&Step> for ActionBody {
    fn from(step: &Step) -> Self {
        let input = step.input();
        ActionBody {
            action: input.action,
            selector: input.selector,
            text: input.text,
            key: input.key,
            value: input.value,
            ms: input.ms,
            timeout_ms: input.timeout_ms,
        }
    }
}
