//! What a site's browser pages download besides what reading them needs.
//! By default a page is loaded without its images, media (video, audio),
//! web fonts and anything from a known tracker or ad host: none of them
//! changes what the page's DOM says, and together they are most of a heavy
//! page's bytes (BENCHMARKS.md). A site whose items need one of them (an
//! image a script measures, a font a canvas draws with, an analytics script
//! that the site's own script waits for) allows it again:
//! `browser_resources: {"allow": ["image"]}`.
//!
//! Never blocked, whatever a site says: documents, stylesheets, XHR and
//! fetch requests and scripts, except a request to a tracker host
//! (`worker/browser/trackers.rs` keeps the list); an image's `src` is still
//! in the DOM, so a field reading it reads the same URL.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::domain::{FieldError, text, text_enum::text_enum};

text_enum! {
    /// A kind of request a browser page does not make unless its site allows it.
    pub enum ResourceKind as "resource type" {
        /// Images (`<img>`, CSS backgrounds, favicons of the page).
        Image = "image",
        /// Video and audio.
        Media = "media",
        /// Web fonts.
        Font = "font",
        /// Any request to a known tracker or ad host (analytics, tag
        /// managers, ad servers, social pixels), documents aside.
        Tracker = "tracker",
    }
}

/// At most this many entries in `allow` (each kind once; repeats are refused
/// past it).
const MAX_ALLOW: usize = 16;

/// The kinds a site's browser pages download, as a client sends them.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(as = BrowserResources)]
pub struct BrowserResourcesInput {
    /// Kinds downloaded again: `image`, `media`, `font`, `tracker`
    /// (default: none of them).
    #[serde(default)]
    pub allow: Vec<String>,
}

/// The kinds a site's browser pages download; the default blocks all of
/// [`ResourceKind::ALL`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct BrowserResources {
    /// One bit per kind, by its place in [`ResourceKind::ALL`].
    allowed: u8,
}

impl BrowserResources {
    /// Every kind downloaded: a browser page as Chrome loads it by itself.
    pub const ALL_ALLOWED: BrowserResources = BrowserResources {
        allowed: (1 << ResourceKind::ALL.len()) - 1,
    };

    fn bit(kind: ResourceKind) -> u8 {
        let at = ResourceKind::ALL
            .iter()
            .position(|k| *k == kind)
            .expect("a kind of ALL");
        1 << at
    }

    /// These kinds, and only them, downloaded.
    pub fn allowing(kinds: impl IntoIterator<Item = ResourceKind>) -> Self {
        BrowserResources {
            allowed: kinds.into_iter().fold(0, |bits, k| bits | Self::bit(k)),
        }
    }

    pub fn allows(self, kind: ResourceKind) -> bool {
        self.allowed & Self::bit(kind) != 0
    }

    /// The kinds downloaded, in [`ResourceKind::ALL`]'s order.
    pub fn allowed(self) -> Vec<ResourceKind> {
        ResourceKind::ALL
            .into_iter()
            .filter(|k| self.allows(*k))
            .collect()
    }

    /// The kinds not downloaded.
    pub fn blocked(self) -> Vec<ResourceKind> {
        ResourceKind::ALL
            .into_iter()
            .filter(|k| !self.allows(*k))
            .collect()
    }

    /// As a client would send it again.
    pub fn input(self) -> BrowserResourcesInput {
        BrowserResourcesInput {
            allow: self
                .allowed()
                .into_iter()
                .map(|k| k.as_str().to_owned())
                .collect(),
        }
    }
}

impl BrowserResourcesInput {
    /// Each entry a known kind; an unknown one is named with its place
    /// (`browser_resources.allow[1]`).
    pub fn parse(self) -> Result<BrowserResources, FieldError> {
        if self.allow.len() > MAX_ALLOW {
            return Err(FieldError::new(
                "browser_resources.allow",
                format!("at most {MAX_ALLOW} entries"),
            ));
        }
        let mut kinds = Vec::with_capacity(self.allow.len());
        for (at, name) in self.allow.iter().enumerate() {
            let field = format!("browser_resources.allow[{at}]");
            text::check(name, &field, 20)?;
            let kind = name.parse::<ResourceKind>().map_err(|_| {
                let known: Vec<String> = ResourceKind::ALL
                    .iter()
                    .map(|k| format!("{:?}", k.as_str()))
                    .collect();
                FieldError::new(
                    &field,
                    format!(
                        "unknown resource type {name:?}; known: {}",
                        known.join(", ")
                    ),
                )
            })?;
            kinds.push(kind);
        }
        Ok(BrowserResources::allowing(kinds))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(allow: &[&str]) -> Result<BrowserResources, FieldError> {
        BrowserResourcesInput {
            allow: allow.iter().map(|s| (*s).to_owned()).collect(),
        }
        .parse()
    }

    #[test]
    fn the_default_blocks_every_kind() {
        let default = BrowserResources::default();
        assert_eq!(default.blocked(), ResourceKind::ALL.to_vec());
        assert!(default.allowed().is_empty());
        assert_eq!(parse(&[]).unwrap(), default);
        assert!(BrowserResources::ALL_ALLOWED.blocked().is_empty());
    }

    #[test]
    fn allowed_kinds_round_trip_through_the_input() {
        let resources = parse(&["font", "image", "image"]).unwrap();
        assert!(resources.allows(ResourceKind::Image) && resources.allows(ResourceKind::Font));
        assert_eq!(
            resources.blocked(),
            [ResourceKind::Media, ResourceKind::Tracker]
        );
        assert_eq!(resources.input().allow, ["image", "font"]);
        assert_eq!(resources.input().parse().unwrap(), resources);
    }

    #[test]
    fn an_unknown_kind_is_named_by_its_place() {
        let err = parse(&["image", "script"]).unwrap_err();
        assert_eq!(err.field, "browser_resources.allow[1]");
        assert!(err.message.contains("\"tracker\""), "{}", err.message);
        let err = parse(&["Image"]).unwrap_err();
        assert_eq!(err.field, "browser_resources.allow[0]");
    }
}
