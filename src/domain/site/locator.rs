//! Where a value is in a page: a CSS selector over HTML, or a JSON pointer
//! into an API's answer. Both are bounded and checked before they are used.

use cssparser::{ParseError, Parser, ParserInput, Token};
use scraper::selector::Simple;
use selectors::{
    parser::{Combinator, ParseRelative, RelativeSelector, SelectorList},
    visitor::SelectorVisitor,
};
use serde::{Deserialize, Serialize};

use crate::domain::{FieldError, text};

/// Longest selector accepted: real ones are a few dozen characters.
pub const MAX_SELECTOR_CHARS: usize = 1000;
/// Deepest nesting of functions, parentheses and brackets in a selector
/// (`:is(:not(a[href]))` nests 3), counted on the CSS tokenizer's tokens so
/// that neither a comment nor a string hides a level. The selector parser
/// recurses once per level (a few thousand overflow the stack), and
/// matching costs time exponential in it: `:is(` nested 5 deep with
/// descendant combinators takes about a second over a page of 60 nested
/// elements, 4 deep a tenth of that. Real selectors nest 2 or 3.
pub const MAX_SELECTOR_NESTING: usize = 4;
/// Most compound selectors in a selector, those in `:is()`, `:not()`,
/// `:has()` and the like counted (`ul > li.a, td` has 3). Real ones have a
/// handful; each is a test of each element, and more in a nested list
/// multiply its cost.
pub const MAX_SELECTOR_COMPOUNDS: usize = 32;

/// Longest JSON pointer accepted.
pub const MAX_POINTER_CHARS: usize = 500;

/// A selector compiled for matching (scraper's grammar, the `selectors`
/// crate's form).
pub type CompiledSelector = SelectorList<Simple>;

/// A CSS selector that parses (checked with the same grammar browsers use)
/// within the bounds above.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct CssSelector(String);

impl CssSelector {
    pub fn parse(selector: &str, field: &str) -> Result<Self, FieldError> {
        let trimmed = text::non_empty(selector, field, MAX_SELECTOR_CHARS)?;
        compile(trimmed, field)?;
        Ok(Self(trimmed.to_owned()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The compiled selector, checked again by today's rules: a stored
    /// selector they refuse (stored under older ones) is an error naming
    /// `field`, never matched.
    pub fn compile(&self, field: &str) -> Result<CompiledSelector, FieldError> {
        compile(&self.0, field)
    }
}

/// Checks `selector`'s nesting on its tokens, then parses it and counts its
/// compound selectors.
fn compile(selector: &str, field: &str) -> Result<CompiledSelector, FieldError> {
    let mut input = ParserInput::new(selector);
    if within_nesting(&mut Parser::new(&mut input), 0).is_err() {
        return Err(FieldError::new(
            field,
            format!(
                "nests functions, parentheses or brackets more than {MAX_SELECTOR_NESTING} \
                 levels deep (e.g. :is(:not(a[href])) nests 3)"
            ),
        ));
    }
    let mut input = ParserInput::new(selector);
    let compiled = SelectorList::parse(
        &scraper::selector::Parser,
        &mut Parser::new(&mut input),
        ParseRelative::No,
    )
    .map_err(|e| {
        FieldError::new(
            field,
            format!(
                "is not a valid CSS selector: {}",
                scraper::error::SelectorErrorKind::from(e)
            ),
        )
    })?;
    let mut count = Compounds(0);
    for one in compiled.slice() {
        one.visit(&mut count);
    }
    if count.0 > MAX_SELECTOR_COMPOUNDS {
        return Err(FieldError::new(
            field,
            format!(
                "has {} compound selectors, more than {MAX_SELECTOR_COMPOUNDS} \
                 (`ul > li.a, td` has 3)",
                count.0
            ),
        ));
    }
    Ok(compiled)
}

/// Walks the tokens of `input`, entering each block (a function, parentheses,
/// brackets, braces) until one would be deeper than [`MAX_SELECTOR_NESTING`]:
/// the walk recurses no deeper than that, and comments are no tokens.
fn within_nesting(input: &mut Parser<'_, '_>, depth: usize) -> Result<(), ()> {
    loop {
        let opens_a_block = match input.next_including_whitespace() {
            Err(_) => return Ok(()),
            Ok(token) => matches!(
                token,
                Token::Function(_)
                    | Token::ParenthesisBlock
                    | Token::SquareBracketBlock
                    | Token::CurlyBracketBlock
            ),
        };
        if opens_a_block {
            if depth >= MAX_SELECTOR_NESTING {
                return Err(());
            }
            input
                .parse_nested_block(|nested| {
                    within_nesting(nested, depth + 1).map_err(|()| nested.new_custom_error(()))
                })
                .map_err(|_: ParseError<'_, ()>| ())?;
        }
    }
}

/// Counts the compound selectors of a selector, nested lists included.
struct Compounds(usize);

impl SelectorVisitor for Compounds {
    type Impl = Simple;

    fn visit_complex_selector(&mut self, _combinator_to_right: Option<Combinator>) -> bool {
        self.0 += 1;
        true
    }

    fn visit_relative_selector_list(&mut self, list: &[RelativeSelector<Simple>]) -> bool {
        list.iter().all(|relative| relative.selector.visit(self))
    }
}

/// A JSON pointer (RFC 6901): empty for the whole document, else `/a/0/b`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct JsonPointer(String);

impl JsonPointer {
    pub fn parse(pointer: &str, field: &str) -> Result<Self, FieldError> {
        text::check(pointer, field, MAX_POINTER_CHARS)?;
        if !(pointer.is_empty() || pointer.starts_with('/')) {
            return Err(FieldError::new(
                field,
                "must be a JSON pointer: empty, or starting with / (e.g. /data/items)",
            ));
        }
        // RFC 6901: `~` only escapes, as `~0` (~) or `~1` (/).
        let mut rest = pointer;
        while let Some(at) = rest.find('~') {
            if !matches!(rest.as_bytes().get(at + 1), Some(b'0' | b'1')) {
                return Err(FieldError::new(
                    field,
                    "has a ~ that is not ~0 (for ~) or ~1 (for /)",
                ));
            }
            rest = &rest[at + 2..];
        }
        Ok(Self(pointer.to_owned()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    pub fn find<'a>(&self, value: &'a serde_json::Value) -> Option<&'a serde_json::Value> {
        value.pointer(&self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_selector_that_does_not_parse_names_its_field() {
        let err = CssSelector::parse("li[", "item_selector").unwrap_err();
        assert_eq!(err.field, "item_selector");
        assert!(CssSelector::parse("ul > li.product a[href]", "x").is_ok());
    }

    fn nested(depth: usize) -> String {
        format!("{}a{}", ":is(".repeat(depth), ")".repeat(depth))
    }

    #[test]
    fn nesting_is_counted_on_tokens_so_comments_and_strings_hide_nothing() {
        let refused = |s: &str| {
            let err = CssSelector::parse(s, "item_selector").unwrap_err();
            assert_eq!(err.field, "item_selector");
            err.message
        };
        // A quote inside a comment once made a character count skip the rest.
        let hidden = format!("/*'*/{}", nested(198));
        assert!(refused(&hidden).contains("levels deep"), "{hidden}");
        assert!(refused(&format!("/*\"*/ li {}", nested(11))).contains("levels deep"));
        for depth in [MAX_SELECTOR_NESTING + 1, 11, 150] {
            assert!(refused(&nested(depth)).contains("levels deep"), "{depth}");
        }
        assert!(refused("li:not([a]:is(:has(b:is(c[d]))))").contains("levels deep"));
        // Brackets and parentheses in strings, comments and escapes are no levels.
        for fine in [
            nested(MAX_SELECTOR_NESTING),
            "a[title='((((((((((((']".to_owned(),
            "/* :is(:is(:is(:is(:is( */ li.product".to_owned(),
            r"#a\(\(\(\(\(\(".to_owned(),
            "li:is(.a, :not(.b)):has(> a[href])".to_owned(),
            ":not(:has(a[href^='/p/']))".to_owned(),
            "ul > li.product:nth-child(2n+1) a.title[href]".to_owned(),
        ] {
            let selector = CssSelector::parse(&fine, "x").unwrap();
            assert!(selector.compile("x").is_ok(), "{fine}");
        }
    }

    #[test]
    fn compound_selectors_are_bounded() {
        let many = vec!["li a"; MAX_SELECTOR_COMPOUNDS / 2].join(", ");
        assert!(CssSelector::parse(&many, "x").is_ok());
        let more = format!("{many}, :is(b, i)");
        let err = CssSelector::parse(&more, "blocked_selector").unwrap_err();
        assert_eq!(err.field, "blocked_selector");
        assert!(
            err.message.contains("compound selectors"),
            "{}",
            err.message
        );
        let in_has = format!(":has({many}), b");
        assert!(CssSelector::parse(&in_has, "x").is_err());
    }

    #[test]
    fn a_stored_selector_is_compiled_by_todays_rules() {
        // Accepted by the character count this replaced, stored as such.
        let stored: CssSelector =
            serde_json::from_value(serde_json::json!(format!("/*'*/{}", nested(40)))).unwrap();
        let err = stored.compile("item_selector").unwrap_err();
        assert_eq!(err.field, "item_selector");
    }

    #[test]
    fn a_pointer_escapes_only_with_tilde_zero_and_one() {
        assert!(JsonPointer::parse("/a~0b/c~1d", "x").is_ok());
        for bad in ["/a~2b", "/~", "/a~"] {
            assert_eq!(
                JsonPointer::parse(bad, "json.items").unwrap_err().field,
                "json.items"
            );
        }
    }

    #[test]
    fn a_pointer_must_start_with_a_slash() {
        assert_eq!(
            JsonPointer::parse("items", "json.items").unwrap_err().field,
            "json.items"
        );
        let doc = serde_json::json!({"a": [{"b": 1}]});
        assert_eq!(
            JsonPointer::parse("/a/0/b", "x").unwrap().find(&doc),
            Some(&serde_json::json!(1))
        );
    }
}
