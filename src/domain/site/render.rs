//! How a site's pages are fetched: in a browser, by plain HTTP, or from a JSON API.

use crate::domain::{FieldError, text, text_enum::text_enum};

text_enum! {
    /// How pages of a site are fetched.
    #[derive(Default)]
    pub enum RenderMode as "render mode" {
        /// Headless Chrome: pages that need JavaScript.
        #[default]
        Browser = "browser",
        /// A plain HTTP GET and the same CSS extraction: no browser at all.
        Http = "http",
        /// A JSON API: items and fields by JSON pointers, paged by token or number.
        Json = "json",
    }
}

impl RenderMode {
    pub fn parse(mode: &str) -> Result<Self, FieldError> {
        text::check(mode, "render", 20)?;
        RenderMode::ALL
            .into_iter()
            .find(|m| m.as_str() == mode)
            .ok_or_else(|| {
                FieldError::new(
                    "render",
                    format!(
                        "unknown render mode {mode:?}; supported: \"browser\", \"http\", \"json\""
                    ),
                )
            })
    }
}
