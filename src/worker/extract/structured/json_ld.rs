//! JSON-LD scripts (`<script type="application/ld+json">`) read as leniently
//! as pages need and as strictly as a crawler must: what real pages get
//! wrong (a raw line break inside a string, an HTML comment around the
//! JSON, entity-encoded quotes, junk after the value) is read as extruct
//! reads it; what cannot be read is skipped. Every value parsed is a step
//! of the page's budget and counts against the values a page may hold, so
//! a 20 MB script or one nested thousands deep ends within the budget (or
//! at serde_json's nesting limit of 128) instead of exhausting the worker.

use std::cell::Cell;

use scraper::{ElementRef, Html, Node, Selector};
use serde::de::{self, DeserializeSeed, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Number, Value};

use crate::worker::extract::budget::ExtractBudget;

/// Most JSON values one page's scripts may hold: a list page of a few
/// hundred products has tens of thousands; each is a few dozen bytes of
/// memory, so this keeps a hostile page's within tens of MiB.
pub const MAX_PAGE_VALUES: usize = 500_000;

/// The values of every JSON-LD script on the page, in page order (a
/// script holding several values gives each), and how many scripts could
/// not be read.
pub fn read(document: &Html, budget: &ExtractBudget) -> (Vec<Value>, usize) {
    // A fixed selector, one look at each element.
    let scripts = Selector::parse("script[type]").expect("a valid selector");
    let left = Cell::new(MAX_PAGE_VALUES);
    let mut values = Vec::new();
    let mut skipped = 0;
    for script in document.select(&scripts) {
        if !budget.step() {
            break;
        }
        let kind = script.value().attr("type").unwrap_or_default();
        if !kind.trim().eq_ignore_ascii_case("application/ld+json") {
            continue;
        }
        match parse_script(&script_text(script), budget, &left) {
            Some(read) => values.extend(read),
            None => skipped += 1,
        }
    }
    (values, skipped)
}

/// A script's text: its text nodes as they are (a script's text is raw:
/// no entity is decoded in it).
fn script_text(script: ElementRef<'_>) -> String {
    let mut text = String::new();
    for node in script.children() {
        if let Node::Text(piece) = node.value() {
            text.push_str(piece);
        }
    }
    text
}

/// The values `text` holds, tried as it is, then cleaned of what pages
/// wrap around JSON or leave in it, then with its entities decoded; `None`
/// when none of these reads, or when the script is more than the budget or
/// the page's values left allow (it is not tried again then).
pub fn parse_script(text: &str, budget: &ExtractBudget, left: &Cell<usize>) -> Option<Vec<Value>> {
    let text = text.trim();
    if text.is_empty() {
        return Some(Vec::new());
    }
    let cleaned = match parse_values(text, budget, left) {
        Ok(values) => return Some(values),
        Err(Failed::Bounds) => return None,
        Err(Failed::Syntax) => cleaned(text),
    };
    match parse_values(&cleaned, budget, left) {
        Ok(values) => Some(values),
        Err(Failed::Bounds) => None,
        // Entity-encoded JSON (`{&quot;@type&quot;: ...}`): only when no
        // quote is left that decoding could confuse.
        Err(Failed::Syntax) if cleaned.contains("&quot;") && !cleaned.contains('"') => {
            parse_values(&unescaped(&cleaned), budget, left).ok()
        }
        Err(Failed::Syntax) => None,
    }
}

/// Why a script's text gave no value.
enum Failed {
    /// It is not JSON (as far as it was read).
    Syntax,
    /// The budget, or the values the page may hold, ran out reading it.
    Bounds,
}

/// The JSON values `text` starts with; junk after at least one is
/// ignored. A failed attempt gives back the values it counted, so a
/// script too large for what is left does not starve the page's others.
fn parse_values(
    text: &str,
    budget: &ExtractBudget,
    left: &Cell<usize>,
) -> Result<Vec<Value>, Failed> {
    let before = left.get();
    let mut reader = serde_json::Deserializer::from_str(text);
    let mut values = Vec::new();
    while let Ok(value) = (Bounded { budget, left }).deserialize(&mut reader) {
        values.push(value);
        if reader.end().is_ok() {
            return Ok(values);
        }
    }
    if !values.is_empty() {
        return Ok(values);
    }
    let failed = match left.get() == 0 || budget.spent().is_some() {
        true => Failed::Bounds,
        false => Failed::Syntax,
    };
    left.set(before);
    Err(failed)
}

/// `text` without the comment or CDATA markers pages wrap scripts in, and
/// with each control character a space: a line break inside a string is
/// the commonest fault (JSON wants `\n`), and outside strings it is space.
fn cleaned(text: &str) -> String {
    let mut text = text;
    loop {
        let before = text.len();
        for prefix in ["<!--", "//<![CDATA[", "<![CDATA["] {
            text = text.strip_prefix(prefix).unwrap_or(text).trim_start();
        }
        for suffix in ["-->", "//]]>", "]]>"] {
            text = text.strip_suffix(suffix).unwrap_or(text).trim_end();
        }
        if text.len() == before {
            break;
        }
    }
    text.chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect()
}

/// The entities that turn up in entity-encoded JSON, decoded (`&amp;` last,
/// so `&amp;quot;` stays the text `&quot;`).
fn unescaped(text: &str) -> String {
    let mut out = text.to_owned();
    for (entity, plain) in [
        ("&quot;", "\""),
        ("&#34;", "\""),
        ("&#x22;", "\""),
        ("&apos;", "'"),
        ("&#39;", "'"),
        ("&#x27;", "'"),
        ("&lt;", "<"),
        ("&gt;", ">"),
        ("&amp;", "&"),
    ] {
        out = out.replace(entity, plain);
    }
    out
}

/// Builds a `serde_json::Value` as its own `Deserialize` does, each value
/// a step of the budget and one of the page's values: once either is
/// spent, the parse stops with an error.
#[derive(Clone, Copy)]
struct Bounded<'b> {
    budget: &'b ExtractBudget,
    left: &'b Cell<usize>,
}

impl Bounded<'_> {
    fn count<E: de::Error>(&self, bytes: usize) -> Result<(), E> {
        let left = self.left.get();
        if left == 0 || !self.budget.charge_bytes(bytes) {
            return Err(E::custom("over the page's budget"));
        }
        self.left.set(left - 1);
        Ok(())
    }
}

impl<'de> DeserializeSeed<'de> for Bounded<'_> {
    type Value = Value;

    fn deserialize<D: de::Deserializer<'de>>(self, reader: D) -> Result<Value, D::Error> {
        reader.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Bounded<'_> {
    type Value = Value;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_bool<E: de::Error>(self, v: bool) -> Result<Value, E> {
        self.count(0)?;
        Ok(Value::Bool(v))
    }

    fn visit_i64<E: de::Error>(self, v: i64) -> Result<Value, E> {
        self.count(0)?;
        Ok(Value::Number(v.into()))
    }

    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Value, E> {
        self.count(0)?;
        Ok(Value::Number(v.into()))
    }

    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Value, E> {
        self.count(0)?;
        Ok(Number::from_f64(v).map_or(Value::Null, Value::Number))
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<Value, E> {
        self.count(v.len())?;
        Ok(Value::String(v.to_owned()))
    }

    fn visit_string<E: de::Error>(self, v: String) -> Result<Value, E> {
        self.count(v.len())?;
        Ok(Value::String(v))
    }

    fn visit_unit<E: de::Error>(self) -> Result<Value, E> {
        self.count(0)?;
        Ok(Value::Null)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        self.count(0)?;
        let mut list = Vec::new();
        while let Some(value) = seq.next_element_seed(self)? {
            list.push(value);
        }
        Ok(Value::Array(list))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        self.count(0)?;
        let mut object = Map::new();
        while let Some(key) = map.next_key::<String>()? {
            self.count(key.len())?;
            let value = map.next_value_seed(self)?;
            object.insert(key, value);
        }
        Ok(Value::Object(object))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn parse(text: &str) -> Option<Vec<Value>> {
        parse_script(
            text,
            &ExtractBudget::unlimited(),
            &Cell::new(MAX_PAGE_VALUES),
        )
    }

    #[test]
    fn what_pages_get_wrong_is_read_as_extruct_reads_it() {
        let product = json!({"@type": "Product", "name": "Lamp"});
        for text in [
            r#"{"@type": "Product", "name": "Lamp"}"#,
            "<!-- {\"@type\": \"Product\", \"name\": \"Lamp\"} -->",
            "//<![CDATA[\n{\"@type\": \"Product\", \"name\": \"Lamp\"}\n//]]>",
            "{&quot;@type&quot;: &quot;Product&quot;, &quot;name&quot;: &quot;Lamp&quot;}",
            r#"{"@type": "Product", "name": "Lamp"};"#,
            r#"{"@type": "Product", "name": "Lamp"}}"#,
        ] {
            assert_eq!(parse(text), Some(vec![product.clone()]), "{text}");
        }
        let broken_line = "{\"@type\": \"Product\", \"name\": \"Desk\nlamp\"}";
        assert_eq!(
            parse(broken_line).unwrap()[0]["name"],
            "Desk lamp",
            "a raw line break in a string is a space"
        );
        assert_eq!(parse("{} {}").unwrap().len(), 2, "two values in one script");
        assert_eq!(parse("  ").unwrap(), Vec::<Value>::new());
    }

    #[test]
    fn what_cannot_be_read_is_skipped() {
        for text in [
            "{\"@type\": ",
            "not json",
            "<p>hello</p>",
            &format!("{}1{}", "[".repeat(200), "]".repeat(200)),
        ] {
            assert_eq!(parse(text), None, "{text}");
        }
    }

    #[test]
    fn the_values_a_page_may_hold_are_bounded_and_a_failed_parse_gives_its_back() {
        let left = Cell::new(10);
        let budget = ExtractBudget::unlimited();
        assert_eq!(parse_script("[1, 2, 3]", &budget, &left).unwrap().len(), 1);
        assert_eq!(left.get(), 6, "the list and its three numbers");
        assert_eq!(parse_script("[1, 2, 3", &budget, &left), None);
        assert_eq!(left.get(), 6, "a failed parse counts nothing");
        assert_eq!(parse_script("[1, 2, 3, 4, 5, 6, 7]", &budget, &left), None);
        assert_eq!(left.get(), 6, "a script over what is left is skipped whole");
        assert_eq!(parse_script("[1]", &budget, &left).unwrap().len(), 1);
        assert_eq!(left.get(), 4, "the page's other scripts are read");
    }

    #[test]
    fn scripts_are_found_by_their_type_in_page_order() {
        let html = r#"<html><head>
            <script type="application/ld+json">{"@type": "Organization"}</script>
            <script type="text/javascript">var x = {"@type": "Nope"};</script>
            <script type=" Application/LD+JSON ">[{"@type": "A"}, {"@type": "B"}]</script>
            <script type="application/ld+json">{broken</script>
            </head></html>"#;
        let (values, skipped) = read(&Html::parse_document(html), &ExtractBudget::unlimited());
        assert_eq!(values.len(), 2);
        assert_eq!(values[0]["@type"], "Organization");
        assert_eq!(values[1][1]["@type"], "B");
        assert_eq!(skipped, 1);
    }
}
