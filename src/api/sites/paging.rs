//! A site's paging on the wire: the same shape in a request body and in the
//! site the api shows, handed to the domain's `PagingInput` for its rules.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::domain::paging::{Paging, PagingInput};

/// How one results page leads to the next. `numbered` (the default):
/// `{page}` in `search_url`, or a JSON API's token. `offset`: `{offset}` in
/// `search_url` is (page - 1) * `page_size`. `next_link`: the href of the
/// first element `selector` finds is the next page (browser, http).
/// `load_more`: click `selector` and read the items it shows, until the
/// button is gone or shows none (browser). `infinite_scroll`: scroll to
/// the end and read the items that appear, until none does (browser).
/// Every form stops at `max_pages`, and at a page that repeats the
/// previous one item for item (`repeated_page`).
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(as = Paging)]
pub struct PagingBody {
    /// `numbered`, `offset`, `next_link`, `load_more` or `infinite_scroll`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub form: Option<String>,
    /// Items a page holds (`offset`), 1 to 1000.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub page_size: Option<i32>,
    /// The next link (`next_link`) or the button that loads more (`load_more`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub selector: Option<String>,
}

impl From<PagingBody> for PagingInput {
    fn from(body: PagingBody) -> Self {
        PagingInput {
            form: body.form,
            page_size: body.page_size,
            selector: body.selector,
        }
    }
}

impl From<&Paging> for PagingBody {
    fn from(paging: &Paging) -> Self {
        let input = paging.input();
        PagingBody {
            form: input.form,
            page_size: input.page_size,
            selector: input.selector,
        }
    }
}
