//! The search URL of a site: a template with `{keyword}` and, for searches
//! paged by number, `{page}` (or `{offset}`, the first item's index).

use serde::{Deserialize, Serialize};
use url::{Origin, Url};

use crate::domain::{FieldError, text};

const KEYWORD: &str = "{keyword}";
/// Longest search URL template: browsers and servers cope with ~2000.
pub const MAX_URL_CHARS: usize = 2048;
const PAGE: &str = "{page}";
const OFFSET: &str = "{offset}";

/// A search URL with a `{keyword}` placeholder and, for paged searches,
/// `{page}` or `{offset}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct SearchUrlTemplate(String);

impl SearchUrlTemplate {
    pub fn parse(template: &str) -> Result<Self, FieldError> {
        let field = "search_url";
        text::check(template, field, MAX_URL_CHARS)?;
        if !template.contains(KEYWORD) {
            return Err(FieldError::new(
                field,
                "must contain the placeholder {keyword}",
            ));
        }
        let sample = template
            .replace(KEYWORD, "sample")
            .replace(PAGE, "1")
            .replace(OFFSET, "0");
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

    /// Whether the template pages through results with `{page}` or `{offset}`.
    pub fn is_paged(&self) -> bool {
        self.is_numbered() || self.is_offset()
    }

    /// Whether the template has `{page}`.
    pub fn is_numbered(&self) -> bool {
        self.0.contains(PAGE)
    }

    /// Whether the template has `{offset}`.
    pub fn is_offset(&self) -> bool {
        self.0.contains(OFFSET)
    }

    /// The URL of the first results page for a keyword.
    pub fn first_url(&self, keyword: &str) -> Result<Url, url::ParseError> {
        self.url_for(keyword, 1, 0)
    }

    /// The URL of one results page for a keyword, whose first item is the
    /// `offset`th of the results; the keyword is percent-encoded.
    pub fn url_for(&self, keyword: &str, page: u32, offset: u64) -> Result<Url, url::ParseError> {
        let encoded: String = url::form_urlencoded::byte_serialize(keyword.as_bytes()).collect();
        Url::parse(
            &self
                .0
                .replace(KEYWORD, &encoded)
                .replace(PAGE, &page.to_string())
                .replace(OFFSET, &offset.to_string()),
        )
    }

    /// A URL of the template's host, for checks made before any keyword is known.
    pub fn sample_url(&self) -> Url {
        self.first_url("sample")
            .expect("checked to parse when the template was accepted")
    }

    /// The origin (scheme, host, port) every URL of the template is on: where
    /// the site's headers go. None when a placeholder sits in the host or
    /// port, so that the origin depends on the keyword or the page.
    pub fn origin(&self) -> Option<Origin> {
        let one = self.url_for("sample", 1, 0).ok()?.origin();
        let other = self.url_for("other-sample", 2, 20).ok()?.origin();
        (one.is_tuple() && one == other).then_some(one)
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// `url` with the query parameter `name` set to `value` (replacing any earlier
/// value): how a paging token goes back to a JSON API.
pub fn with_query_param(url: &Url, name: &str, value: &str) -> Url {
    let kept: Vec<(String, String)> = url
        .query_pairs()
        .filter(|(key, _)| key != name)
        .map(|(key, value)| (key.into_owned(), value.into_owned()))
        .collect();
    let mut next = url.clone();
    next.query_pairs_mut()
        .clear()
        .extend_pairs(kept)
        .append_pair(name, value);
    next
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
        let url = t.url_for("red shoes & co", 3, 40).unwrap();
        assert_eq!(
            url.as_str(),
            "https://s.example/find?q=red+shoes+%26+co&p=3"
        );
        let t = SearchUrlTemplate::parse("https://s.example/find?q={keyword}&start={offset}");
        let t = t.unwrap();
        assert!(t.is_paged() && t.is_offset() && !t.is_numbered());
        let url = t.url_for("a", 3, 40).unwrap();
        assert_eq!(url.as_str(), "https://s.example/find?q=a&start=40");
    }

    #[test]
    fn the_origin_is_scheme_host_and_port_unless_a_placeholder_is_in_them() {
        let origin = |t: &str| {
            SearchUrlTemplate::parse(t)
                .unwrap()
                .origin()
                .map(|o| o.ascii_serialization())
        };
        assert_eq!(
            origin("https://Shop.Example:443/s?q={keyword}&p={page}").as_deref(),
            Some("https://shop.example")
        );
        assert_eq!(
            origin("http://127.0.0.1:8080/{keyword}").as_deref(),
            Some("http://127.0.0.1:8080")
        );
        assert_eq!(origin("https://{keyword}.example/s"), None);
        assert_eq!(origin("http://shop.example:80{page}/?q={keyword}"), None);
    }

    #[test]
    fn a_token_replaces_the_previous_one_and_keeps_the_other_parameters() {
        let first = Url::parse("https://api.example/s?q=a+b&page=1").unwrap();
        let second = with_query_param(&first, "token", "x/1");
        assert_eq!(
            second.as_str(),
            "https://api.example/s?q=a+b&page=1&token=x%2F1"
        );
        let third = with_query_param(&second, "token", "y");
        assert_eq!(third.as_str(), "https://api.example/s?q=a+b&page=1&token=y");
    }
}
