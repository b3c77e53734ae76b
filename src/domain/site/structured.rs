//! Reading the structured data a page publishes for search engines (JSON-LD,
//! microdata, OpenGraph) instead of its markup: which schema.org type a
//! site's items are (`structured_items: "Product"`), and where a field's
//! value is inside one (`"structured": "offers.price"`). Both are checked
//! here once; the worker only follows them (see docs/structured-data.md).

use serde::{Deserialize, Serialize};

use crate::domain::{FieldError, text};

/// Longest type name (schema.org's longest is about 50 characters).
const MAX_TYPE_CHARS: usize = 100;
/// Longest path, alternatives included.
pub const MAX_PATH_CHARS: usize = 300;
/// Most steps in one alternative of a path (`offers.priceSpecification.price` has 3).
pub const MAX_PATH_STEPS: usize = 12;
/// Most alternatives in a path (`offers.price|offers.lowPrice` has 2).
pub const MAX_PATH_ALTERNATIVES: usize = 4;
/// Largest list index a step may name.
pub const MAX_INDEX: usize = 9_999;

/// The prefixes of OpenGraph properties: ogp.me's own and the namespaces
/// shops and news sites publish beside it (`product:price:amount`).
pub const OPEN_GRAPH_PREFIXES: [&str; 7] = [
    "og", "product", "article", "book", "profile", "music", "video",
];

/// A schema.org type name, such as `Product` or `NewsArticle`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct SchemaType(String);

impl SchemaType {
    pub fn parse(value: &str, field: &str) -> Result<Self, FieldError> {
        let name = text::non_empty(value, field, MAX_TYPE_CHARS)?;
        if !is_type_name(name) {
            return Err(FieldError::new(
                field,
                "must be a schema.org type name such as \"Product\" or \"NewsArticle\" \
                 (letters, digits and _, starting with a letter)",
            ));
        }
        Ok(Self(name.to_owned()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// Whether a page's `@type` (or `itemtype`) names this type: as a name,
    /// a compact IRI (`schema:Product`) or a URL (`https://schema.org/Product`),
    /// its case ignored, as pages write it every way.
    pub fn is_named_by(&self, declared: &str) -> bool {
        short_type_name(declared).eq_ignore_ascii_case(&self.0)
    }
}

/// The name a type is declared with, without its vocabulary: the part
/// after the last `/`, `#` or `:` (`http://schema.org/Product` -> `Product`).
pub fn short_type_name(declared: &str) -> &str {
    let trimmed = declared.trim().trim_end_matches('/');
    trimmed.rsplit(['/', '#', ':']).next().unwrap_or(trimmed)
}

fn is_type_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars.next().is_some_and(|c| c.is_ascii_alphabetic())
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// Where a value is in a page's structured data: one or more alternatives
/// separated by `|`, the first that finds a value wins. Each is a dotted
/// path of property names and list indexes. What it starts from depends on
/// the site (see [`PathStart`]): inside the item when the site's items are
/// structured data, else at the page's first item of the type it names
/// first (`Product.offers.price`); an OpenGraph property (`og:title`,
/// `product:price:amount`) is the page's wherever it is used.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct StructuredPath(String);

/// What one alternative of a path starts from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PathStart<'a> {
    /// The structured item the site's item is (sites with `structured_items`).
    Item,
    /// The page's first item of this type (sites with an `item_selector`).
    FirstOfType(&'a str),
    /// The page's OpenGraph property of this name.
    OpenGraph(&'a str),
}

/// One step of a path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step<'a> {
    /// A property (`offers`, `@id`).
    Key(&'a str),
    /// A list's element (`image.0`).
    Index(usize),
}

/// One alternative of a path: where it starts and its steps from there.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PathAlternative<'a> {
    pub start: PathStart<'a>,
    pub steps: Vec<Step<'a>>,
}

impl StructuredPath {
    /// Parses the client's `field`; `items` is the site's item type when its
    /// items are structured data (paths start inside the item), `None` when
    /// they are found by a selector (paths start with a type).
    pub fn parse(path: &str, field: &str, items: Option<&SchemaType>) -> Result<Self, FieldError> {
        let path = text::non_empty(path, field, MAX_PATH_CHARS)?;
        let alternatives: Vec<&str> = path.split('|').map(str::trim).collect();
        if alternatives.len() > MAX_PATH_ALTERNATIVES {
            return Err(FieldError::new(
                field,
                format!("has more than {MAX_PATH_ALTERNATIVES} alternatives separated by |"),
            ));
        }
        for alternative in alternatives {
            check_alternative(alternative, field, items)?;
        }
        Ok(Self(path.to_owned()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The alternatives in order, read as a site whose items are structured
    /// data reads them (`within_item`) or as a site with an item selector.
    /// A stored path is not checked again: a step that does not parse as
    /// the rules want simply finds nothing.
    pub fn alternatives(&self, within_item: bool) -> impl Iterator<Item = PathAlternative<'_>> {
        self.0
            .split('|')
            .map(str::trim)
            .map(move |alternative| read_alternative(alternative, within_item))
    }
}

fn check_alternative(
    alternative: &str,
    field: &str,
    items: Option<&SchemaType>,
) -> Result<(), FieldError> {
    if alternative.is_empty() {
        return Err(FieldError::new(field, "has an empty alternative"));
    }
    let steps: Vec<&str> = alternative.split('.').collect();
    if steps.len() > MAX_PATH_STEPS {
        return Err(FieldError::new(
            field,
            format!("has more than {MAX_PATH_STEPS} steps in {alternative:?}"),
        ));
    }
    if let Some(step) = steps
        .iter()
        .find(|s| s.is_empty() || s.contains(char::is_whitespace))
    {
        return Err(FieldError::new(
            field,
            format!(
                "has an empty step or one with a space ({step:?} in {alternative:?}); \
                 steps are property names or list indexes separated by dots, e.g. offers.price"
            ),
        ));
    }
    if let Some(step) = steps.iter().find(|s| {
        s.bytes().all(|b| b.is_ascii_digit()) && s.parse().map_or(true, |n: usize| n > MAX_INDEX)
    }) {
        return Err(FieldError::new(
            field,
            format!("has the list index {step}, more than {MAX_INDEX}"),
        ));
    }
    if is_open_graph(steps[0]) {
        if steps.len() > 1 {
            return Err(FieldError::new(
                field,
                format!(
                    "reads the OpenGraph property {:?}, which is one value: nothing follows it",
                    steps[0]
                ),
            ));
        }
        return Ok(());
    }
    match items {
        Some(item_type) if item_type.is_named_by(steps[0]) => Err(FieldError::new(
            field,
            format!(
                "starts with the item's type {:?}: paths start inside the item (e.g. {:?})",
                steps[0],
                steps[1..].join(".")
            ),
        )),
        Some(_) => Ok(()),
        // schema.org's types are capitalized, its properties not: a path
        // starting with a property (`offers.price`) is a mistake here.
        None if steps.len() < 2
            || !is_type_name(steps[0])
            || !steps[0].starts_with(|c: char| c.is_ascii_uppercase()) =>
        {
            Err(FieldError::new(
                field,
                format!(
                    "{alternative:?} must start with the schema.org type whose first item on the page \
                 it reads, then the property (e.g. \"Product.offers.price\"), or name an \
                 OpenGraph property (e.g. \"og:title\")"
                ),
            ))
        }
        None => Ok(()),
    }
}

fn read_alternative(alternative: &str, within_item: bool) -> PathAlternative<'_> {
    let mut steps = alternative.split('.');
    let first = steps.next().unwrap_or_default();
    let start = if is_open_graph(first) {
        PathStart::OpenGraph(first)
    } else if within_item {
        PathStart::Item
    } else {
        PathStart::FirstOfType(first)
    };
    let rest = match start {
        PathStart::Item => Some(first).into_iter().chain(steps),
        _ => None.into_iter().chain(steps),
    };
    PathAlternative {
        start,
        steps: rest.map(step).collect(),
    }
}

fn step(text: &str) -> Step<'_> {
    match text.parse::<usize>() {
        Ok(index) if text.bytes().all(|b| b.is_ascii_digit()) => Step::Index(index),
        _ => Step::Key(text),
    }
}

/// Whether a path's first step names an OpenGraph property (`og:title`).
fn is_open_graph(step: &str) -> bool {
    step.split_once(':')
        .is_some_and(|(prefix, name)| !name.is_empty() && OPEN_GRAPH_PREFIXES.contains(&prefix))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn product() -> SchemaType {
        SchemaType::parse("Product", "structured_items").unwrap()
    }

    #[test]
    fn a_type_is_a_name_and_matches_pages_that_write_it_as_a_url_or_compact_iri() {
        let t = product();
        for declared in [
            "Product",
            "product",
            "http://schema.org/Product",
            "https://schema.org/Product/",
            "schema:Product",
        ] {
            assert!(t.is_named_by(declared), "{declared}");
        }
        assert!(!t.is_named_by("ProductGroup"));
        for bad in [
            "",
            "  ",
            "https://schema.org/Product",
            "Pro duct",
            "1Product",
        ] {
            let err = SchemaType::parse(bad, "structured_items").unwrap_err();
            assert_eq!(err.field, "structured_items", "{bad:?}");
        }
    }

    #[test]
    fn inside_an_item_a_path_starts_at_the_item_and_og_properties_at_the_page() {
        let t = product();
        let path =
            StructuredPath::parse("offers.0.price | offers.lowPrice|og:price", "f", Some(&t))
                .unwrap();
        let read: Vec<_> = path.alternatives(true).collect();
        assert_eq!(read[0].start, PathStart::Item);
        assert_eq!(
            read[0].steps,
            [Step::Key("offers"), Step::Index(0), Step::Key("price")]
        );
        assert_eq!(read[1].steps, [Step::Key("offers"), Step::Key("lowPrice")]);
        assert_eq!(read[2].start, PathStart::OpenGraph("og:price"));
        assert!(read[2].steps.is_empty());
        let err = StructuredPath::parse("Product.offers.price", "f", Some(&t)).unwrap_err();
        assert!(err.message.contains("\"offers.price\""), "{}", err.message);
    }

    #[test]
    fn beside_a_selector_a_path_names_the_type_it_reads_first() {
        let path = StructuredPath::parse("Product.offers.price", "f", None).unwrap();
        let read: Vec<_> = path.alternatives(false).collect();
        assert_eq!(read[0].start, PathStart::FirstOfType("Product"));
        assert_eq!(read[0].steps, [Step::Key("offers"), Step::Key("price")]);
        assert!(StructuredPath::parse("product:price:amount", "f", None).is_ok());
        for bad in ["price", "offers.price", "Product.name|name", "@graph.0"] {
            let err = StructuredPath::parse(bad, "fields.price.structured", None).unwrap_err();
            assert_eq!(err.field, "fields.price.structured", "{bad}");
            assert!(
                err.message.contains("Product.offers.price"),
                "{}",
                err.message
            );
        }
    }

    #[test]
    fn bad_paths_are_refused_naming_the_field() {
        let t = product();
        let long = vec!["a"; MAX_PATH_STEPS + 1].join(".");
        for bad in [
            "",
            "offers..price",
            "offers. price",
            "a|b|c|d|e",
            "a||b",
            "image.10000",
            "image.99999999999999999999999",
            "og:title.x",
            "name\u{0}",
            long.as_str(),
        ] {
            let err = StructuredPath::parse(bad, "fields.x.structured", Some(&t)).unwrap_err();
            assert_eq!(err.field, "fields.x.structured", "{bad:?}");
        }
        let huge = "a.".repeat(MAX_PATH_CHARS);
        assert!(StructuredPath::parse(&huge, "f", Some(&t)).is_err());
    }
}
