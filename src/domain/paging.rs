//! How a site goes from one results page to the next, as sites do it: a
//! page number or an item offset in the search URL, a "next" link on the
//! page, a "load more" button or an endless scroll on one document (a
//! browser), or a JSON API's token. Whatever the form, paging stops at
//! `max_pages` and on a page that only repeats the previous one.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::{
    FieldError,
    item::PageItem,
    site::{locator::CssSelector, render::RenderMode, template::SearchUrlTemplate},
    text,
};

/// Largest page size of `{offset}` paging.
pub const MAX_PAGE_SIZE: i32 = 1000;

/// How one results page leads to the next, as a client sends it and the api
/// shows it ([`PagingInput::parse`] checks it against the site's render mode
/// and search URL). `numbered` (the default): `{page}` in `search_url`, or a
/// JSON API's token. `offset`: `{offset}` in `search_url` is (page - 1) *
/// `page_size`. `next_link`: the href of the first element `selector` finds
/// is the next page (browser, http). `load_more`: click `selector` and read
/// the items it shows, until the button is gone or shows none (browser).
/// `infinite_scroll`: scroll to the end and read the items that appear,
/// until none does (browser). Every form stops at `max_pages`, and at a page
/// that repeats the previous one item for item (`repeated_page`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(as = Paging)]
pub struct PagingInput {
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

/// How a site's pages follow one another, checked.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(tag = "form", rename_all = "snake_case")]
pub enum Paging {
    /// `{page}` in the search URL, or a JSON API's token; no next page otherwise.
    #[default]
    Numbered,
    /// `{offset}` in the search URL: (page - 1) * `page_size`.
    Offset { page_size: i32 },
    /// The href of the first element `selector` finds is the next page.
    NextLink { selector: CssSelector },
    /// One document: clicking `selector` shows more items, until the
    /// button is gone or no new item appears (a browser).
    LoadMore { selector: CssSelector },
    /// One document: scrolling to its end shows more items, until none
    /// appears (a browser).
    InfiniteScroll,
}

impl Paging {
    /// The form's name, as clients send it.
    pub fn form(&self) -> &'static str {
        match self {
            Paging::Numbered => "numbered",
            Paging::Offset { .. } => "offset",
            Paging::NextLink { .. } => "next_link",
            Paging::LoadMore { .. } => "load_more",
            Paging::InfiniteScroll => "infinite_scroll",
        }
    }

    /// Whether later pages are more of the same document, not another URL.
    pub fn in_place(&self) -> bool {
        matches!(self, Paging::LoadMore { .. } | Paging::InfiniteScroll)
    }

    /// Whether the form may go past page 1 without a `{page}` or a token.
    pub fn pages_by_itself(&self) -> bool {
        !matches!(self, Paging::Numbered)
    }

    /// The offset `{offset}` stands for on page `page`.
    pub fn offset(&self, page: u32) -> u64 {
        match self {
            Paging::Offset { page_size } => u64::from(page.saturating_sub(1)) * *page_size as u64,
            _ => 0,
        }
    }

    /// The client's form of the paging, as it was accepted.
    pub fn input(&self) -> PagingInput {
        let (page_size, selector) = match self {
            Paging::Offset { page_size } => (Some(*page_size), None),
            Paging::NextLink { selector } | Paging::LoadMore { selector } => {
                (None, Some(selector.as_str().to_owned()))
            }
            Paging::Numbered | Paging::InfiniteScroll => (None, None),
        };
        PagingInput {
            form: Some(self.form().to_owned()),
            page_size,
            selector,
        }
    }
}

impl PagingInput {
    /// The paging, checked against the site's render mode, its search URL
    /// (`{offset}` there and `offset` paging go together) and whether its
    /// items are read with an item selector (in-place paging counts them).
    pub fn parse(
        self,
        render: RenderMode,
        search_url: &SearchUrlTemplate,
        item_selector: bool,
    ) -> Result<Paging, FieldError> {
        let form = match &self.form {
            Some(form) => {
                text::check(form, "paging.form", 40)?;
                form.as_str()
            }
            None => "numbered",
        };
        let paging = match form {
            "numbered" => Paging::Numbered,
            "offset" => Paging::Offset {
                page_size: match self.page_size {
                    Some(size) if (1..=MAX_PAGE_SIZE).contains(&size) => size,
                    Some(_) => {
                        return Err(FieldError::new(
                            "paging.page_size",
                            format!("must be between 1 and {MAX_PAGE_SIZE}"),
                        ));
                    }
                    None => {
                        return Err(FieldError::new(
                            "paging.page_size",
                            "offset paging needs the items a page holds",
                        ));
                    }
                },
            },
            "next_link" => Paging::NextLink {
                selector: self.selector()?,
            },
            "load_more" => Paging::LoadMore {
                selector: self.selector()?,
            },
            "infinite_scroll" => Paging::InfiniteScroll,
            other => {
                return Err(FieldError::new(
                    "paging.form",
                    format!(
                        "unknown paging form {other:?}; supported: \"numbered\", \"offset\", \
                         \"next_link\", \"load_more\", \"infinite_scroll\""
                    ),
                ));
            }
        };
        if self.page_size.is_some() && !matches!(paging, Paging::Offset { .. }) {
            return Err(FieldError::new(
                "paging.page_size",
                "only offset paging has a page size",
            ));
        }
        if self.selector.is_some()
            && !matches!(paging, Paging::NextLink { .. } | Paging::LoadMore { .. })
        {
            return Err(FieldError::new(
                "paging.selector",
                "only next_link and load_more paging have a selector",
            ));
        }
        match (&paging, render) {
            (Paging::Numbered, _) => {}
            (_, RenderMode::Json) => {
                return Err(FieldError::new(
                    "paging.form",
                    "a JSON API is paged by {page} or by its token (json.next_token)",
                ));
            }
            (Paging::LoadMore { .. } | Paging::InfiniteScroll, RenderMode::Http) => {
                return Err(FieldError::new(
                    "paging.form",
                    format!(
                        "{} paging needs the browser (render \"browser\")",
                        paging.form()
                    ),
                ));
            }
            _ => {}
        }
        if paging.in_place() && !item_selector {
            return Err(FieldError::new(
                "paging.form",
                format!(
                    "{} paging counts the items shown: it needs item_selector",
                    paging.form()
                ),
            ));
        }
        if search_url.is_offset() != matches!(paging, Paging::Offset { .. }) {
            return Err(FieldError::new(
                "search_url",
                "{offset} in the search URL and paging form \"offset\" go together",
            ));
        }
        if search_url.is_numbered() && paging.pages_by_itself() {
            return Err(FieldError::new(
                "search_url",
                format!(
                    "{{page}} pages by number; {} paging has no use for it",
                    paging.form()
                ),
            ));
        }
        Ok(paging)
    }

    fn selector(&self) -> Result<CssSelector, FieldError> {
        match &self.selector {
            Some(selector) => CssSelector::parse(selector, "paging.selector"),
            None => Err(FieldError::new(
                "paging.selector",
                "this paging form needs the selector of its link or button",
            )),
        }
    }
}

/// Whether `page` only repeats `previous`: the same items in the same
/// order. A site that serves its last page again for any page past the end
/// (or ignores the page number) is done, not endless.
pub fn repeats(previous: &[String], page: &[PageItem]) -> bool {
    !page.is_empty()
        && previous.len() == page.len()
        && previous
            .iter()
            .zip(page)
            .all(|(hash, item)| *hash == item.content_hash)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(
        paging: serde_json::Value,
        render: RenderMode,
        url: &str,
    ) -> Result<Paging, FieldError> {
        let input: PagingInput = serde_json::from_value(paging).unwrap();
        input.parse(render, &SearchUrlTemplate::parse(url).unwrap(), true)
    }

    const PLAIN: &str = "http://s.example/?q={keyword}";

    #[test]
    fn every_form_parses_and_reads_back_as_its_input() {
        for paging in [
            serde_json::json!({"form": "next_link", "selector": "a.next"}),
            serde_json::json!({"form": "load_more", "selector": "button.more"}),
            serde_json::json!({"form": "infinite_scroll"}),
        ] {
            let parsed = parse(paging.clone(), RenderMode::Browser, PLAIN).unwrap();
            assert_eq!(
                serde_json::to_value(parsed.input()).unwrap()["form"],
                paging["form"]
            );
            let stored = serde_json::to_value(&parsed).unwrap();
            assert_eq!(serde_json::from_value::<Paging>(stored).unwrap(), parsed);
        }
        let offset = parse(
            serde_json::json!({"form": "offset", "page_size": 20}),
            RenderMode::Http,
            "http://s.example/?q={keyword}&start={offset}",
        )
        .unwrap();
        assert_eq!(offset, Paging::Offset { page_size: 20 });
        assert_eq!(offset.offset(1), 0);
        assert_eq!(offset.offset(3), 40);
        assert_eq!(
            parse(serde_json::json!({}), RenderMode::Json, PLAIN).unwrap(),
            Paging::Numbered
        );
    }

    #[test]
    fn each_bad_setting_names_its_field() {
        let field = |paging, render, url| parse(paging, render, url).unwrap_err().field;
        let offset_url = "http://s.example/?q={keyword}&start={offset}";
        let b = RenderMode::Browser;
        assert_eq!(
            field(serde_json::json!({"form": "pages"}), b, PLAIN),
            "paging.form"
        );
        assert_eq!(
            field(serde_json::json!({"form": "offset"}), b, offset_url),
            "paging.page_size"
        );
        assert_eq!(
            field(
                serde_json::json!({"form": "offset", "page_size": 0}),
                b,
                offset_url
            ),
            "paging.page_size"
        );
        assert_eq!(
            field(
                serde_json::json!({"form": "offset", "page_size": 10}),
                b,
                PLAIN
            ),
            "search_url"
        );
        assert_eq!(field(serde_json::json!({}), b, offset_url), "search_url");
        assert_eq!(
            field(serde_json::json!({"form": "next_link"}), b, PLAIN),
            "paging.selector"
        );
        assert_eq!(
            field(
                serde_json::json!({"form": "next_link", "selector": "a["}),
                b,
                PLAIN
            ),
            "paging.selector"
        );
        assert_eq!(
            field(
                serde_json::json!({"form": "infinite_scroll", "selector": "a"}),
                b,
                PLAIN
            ),
            "paging.selector"
        );
        assert_eq!(
            field(
                serde_json::json!({"form": "load_more", "selector": "b"}),
                RenderMode::Http,
                PLAIN
            ),
            "paging.form"
        );
        assert_eq!(
            field(
                serde_json::json!({"form": "next_link", "selector": "a"}),
                RenderMode::Json,
                PLAIN
            ),
            "paging.form"
        );
        assert_eq!(
            field(
                serde_json::json!({"form": "next_link", "selector": "a"}),
                b,
                "http://s.example/?q={keyword}&p={page}"
            ),
            "search_url"
        );
    }

    #[test]
    fn a_page_repeats_the_previous_one_only_with_the_same_items_in_order() {
        let item = |hash: &str| PageItem {
            fields: serde_json::json!({}),
            item_url: None,
            content_hash: hash.to_owned(),
        };
        let page = [item("a"), item("b")];
        assert!(repeats(&["a".into(), "b".into()], &page));
        assert!(!repeats(&["b".into(), "a".into()], &page));
        assert!(!repeats(&["a".into()], &page));
        assert!(
            !repeats(&[], &[]),
            "an empty page is the last page, not a repeat"
        );
    }
}
