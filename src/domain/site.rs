//! A crawl target: where to search and how to read the results.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use url::Url;

use super::FieldError;

const KEYWORD: &str = "{keyword}";
const PAGE: &str = "{page}";

/// A search URL with a `{keyword}` placeholder and, for paged searches, `{page}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct SearchUrlTemplate(String);

impl SearchUrlTemplate {
    pub fn parse(template: &str) -> Result<Self, FieldError> {
        let field = "search_url";
        if !template.contains(KEYWORD) {
            return Err(FieldError::new(
                field,
                "must contain the placeholder {keyword}",
            ));
        }
        let sample = template.replace(KEYWORD, "sample").replace(PAGE, "1");
        let url = Url::parse(&sample)
            .map_err(|e| FieldError::new(field, format!("is not a valid URL: {e}")))?;
        if !matches!(url.scheme(), "http" | "https") {
            return Err(FieldError::new(field, "must be an http or https URL"));
        }
        if url.host_str().is_none() {
            return Err(FieldError::new(field, "must name a host"));
        }
        Ok(Self(template.to_owned()))
    }

    /// Whether the template pages through results with `{page}`.
    pub fn is_paged(&self) -> bool {
        self.0.contains(PAGE)
    }

    /// The URL of one results page for a keyword; the keyword is percent-encoded.
    pub fn url_for(&self, keyword: &str, page: u32) -> Result<Url, url::ParseError> {
        let encoded: String = url::form_urlencoded::byte_serialize(keyword.as_bytes()).collect();
        Url::parse(
            &self
                .0
                .replace(KEYWORD, &encoded)
                .replace(PAGE, &page.to_string()),
        )
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// A CSS selector that parses (checked with the same grammar browsers use).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct CssSelector(String);

impl CssSelector {
    pub fn parse(selector: &str, field: &str) -> Result<Self, FieldError> {
        let trimmed = selector.trim();
        if trimmed.is_empty() {
            return Err(FieldError::new(field, "must not be empty"));
        }
        scraper::Selector::parse(trimmed)
            .map_err(|e| FieldError::new(field, format!("is not a valid CSS selector: {e}")))?;
        Ok(Self(trimmed.to_owned()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// How to read one field of an item: the text, or an attribute, of an element
/// inside the item (or of the item itself when no selector is given).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct FieldSpec {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<String>)]
    pub selector: Option<CssSelector>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attr: Option<String>,
}

/// How pages of a site are fetched.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum RenderMode {
    /// Headless Chrome: pages that need JavaScript.
    #[default]
    Browser,
}

impl RenderMode {
    pub fn as_str(self) -> &'static str {
        match self {
            RenderMode::Browser => "browser",
        }
    }

    pub fn parse(mode: &str) -> Result<Self, FieldError> {
        match mode {
            "browser" => Ok(RenderMode::Browser),
            other => Err(FieldError::new(
                "render",
                format!("unknown render mode {other:?}; supported: \"browser\""),
            )),
        }
    }
}

/// A field as a client sends it: CSS `selector` inside the item (none: the
/// item itself) and `attr` to read (none: the text).
#[derive(Debug, Clone, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct FieldInput {
    pub selector: Option<String>,
    pub attr: Option<String>,
}

/// A site as a client sends it; [`SiteInput::parse`] checks every rule.
#[derive(Debug, Clone, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct SiteInput {
    pub name: String,
    /// URL template with `{keyword}` and, for paged searches, `{page}`.
    pub search_url: String,
    pub item_selector: String,
    pub fields: BTreeMap<String, FieldInput>,
    pub wait_for: Option<String>,
    pub max_pages: Option<i32>,
    /// `browser` (default).
    pub render: Option<String>,
    pub stuck_timeout_secs: Option<i32>,
    pub max_attempts: Option<i32>,
}

/// A site that passed every rule, ready to store.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SiteSpec {
    pub name: String,
    pub search_url: SearchUrlTemplate,
    pub item_selector: CssSelector,
    pub fields: BTreeMap<String, FieldSpec>,
    pub wait_for: Option<CssSelector>,
    pub max_pages: i32,
    pub render: RenderMode,
    pub stuck_timeout_secs: Option<i32>,
    pub max_attempts: Option<i32>,
}

impl SiteInput {
    pub fn parse(self) -> Result<SiteSpec, FieldError> {
        let name = self.name.trim();
        if name.is_empty() || name.len() > 200 {
            return Err(FieldError::new("name", "must be 1 to 200 characters"));
        }
        if self.fields.is_empty() {
            return Err(FieldError::new("fields", "must name at least one field"));
        }
        let mut fields = BTreeMap::new();
        for (key, input) in self.fields {
            let field = format!("fields.{key}");
            if key.trim().is_empty() {
                return Err(FieldError::new("fields", "field names must not be empty"));
            }
            let selector = input
                .selector
                .map(|s| CssSelector::parse(&s, &format!("{field}.selector")))
                .transpose()?;
            let attr = match input.attr {
                Some(a) if a.trim().is_empty() => {
                    return Err(FieldError::new(
                        format!("{field}.attr"),
                        "must not be empty",
                    ));
                }
                a => a.map(|a| a.trim().to_owned()),
            };
            fields.insert(key, FieldSpec { selector, attr });
        }
        let max_pages = self.max_pages.unwrap_or(1);
        if !(1..=1000).contains(&max_pages) {
            return Err(FieldError::new("max_pages", "must be between 1 and 1000"));
        }
        if let Some(secs) = self.stuck_timeout_secs
            && !(1..=3600).contains(&secs)
        {
            return Err(FieldError::new(
                "stuck_timeout_secs",
                "must be between 1 and 3600",
            ));
        }
        if let Some(n) = self.max_attempts
            && !(1..=100).contains(&n)
        {
            return Err(FieldError::new("max_attempts", "must be between 1 and 100"));
        }
        Ok(SiteSpec {
            name: name.to_owned(),
            search_url: SearchUrlTemplate::parse(&self.search_url)?,
            item_selector: CssSelector::parse(&self.item_selector, "item_selector")?,
            fields,
            wait_for: self
                .wait_for
                .map(|s| CssSelector::parse(&s, "wait_for"))
                .transpose()?,
            max_pages,
            render: self
                .render
                .as_deref()
                .map(RenderMode::parse)
                .transpose()?
                .unwrap_or_default(),
            stuck_timeout_secs: self.stuck_timeout_secs,
            max_attempts: self.max_attempts,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_search_url_without_keyword_is_refused() {
        let err = SearchUrlTemplate::parse("https://shop.example/search?q=x").unwrap_err();
        assert_eq!(err.field, "search_url");
    }

    #[test]
    fn a_search_url_that_is_not_http_is_refused() {
        assert!(SearchUrlTemplate::parse("ftp://x/{keyword}").is_err());
        assert!(SearchUrlTemplate::parse("not a url {keyword}").is_err());
    }

    #[test]
    fn keywords_are_percent_encoded_and_pages_filled_in() {
        let t = SearchUrlTemplate::parse("https://s.example/find?q={keyword}&p={page}").unwrap();
        assert!(t.is_paged());
        let url = t.url_for("red shoes & co", 3).unwrap();
        assert_eq!(
            url.as_str(),
            "https://s.example/find?q=red+shoes+%26+co&p=3"
        );
    }

    #[test]
    fn a_selector_that_does_not_parse_names_its_field() {
        let err = CssSelector::parse("li[", "item_selector").unwrap_err();
        assert_eq!(err.field, "item_selector");
        assert!(CssSelector::parse("ul > li.product a[href]", "x").is_ok());
    }

    #[test]
    fn a_field_selector_error_names_the_field_path() {
        let input: SiteInput = serde_json::from_value(serde_json::json!({
            "name": "s", "search_url": "https://x/?q={keyword}", "item_selector": "li",
            "fields": {"title": {"selector": "a["}}
        }))
        .unwrap();
        assert_eq!(input.parse().unwrap_err().field, "fields.title.selector");
    }
}
