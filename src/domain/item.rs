//! What identifies an item within its keyword and site: its URL, else the
//! value of the field the site names as its key (`item_key`), else its
//! content. Runs recognise an item by it: the same identity, the same item.
//! An item as a page gives it (`PageItem`) lives here too, so a page's
//! module uses the items' and not the other way round.

use serde_json::Value;

use super::text_enum::text_enum;

/// One item extracted from a page, ready to store.
#[derive(Debug, Clone, PartialEq)]
pub struct PageItem {
    pub fields: serde_json::Value,
    pub item_url: Option<String>,
    pub content_hash: String,
}

impl PageItem {
    /// What identifies the item across runs on a site whose key field is
    /// `item_key` (see [`ItemIdentity::of`]).
    pub fn identity(&self, item_key: Option<&str>) -> ItemIdentity {
        ItemIdentity::of(self, item_key)
    }
}

text_enum! {
    /// How an item was identified.
    pub enum IdentifiedBy as "identity kind" {
        /// Its URL (the first `href` field, or the first json `link`).
        Url = "url",
        /// The value of the site's `item_key` field.
        Key = "key",
        /// The hash of its fields: any change makes it another item.
        Content = "content",
    }
}

/// An item's identity within its keyword and site.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ItemIdentity {
    pub by: IdentifiedBy,
    /// What is stored and compared: the URL, `key:` and the key's value, or
    /// the content hash. The prefix keeps a key's value from ever being
    /// taken for a URL or a hash.
    pub key: String,
}

/// Prefix of an identity by key field.
const KEY_PREFIX: &str = "key:";

impl ItemIdentity {
    /// The identity of `item` on a site whose key field is `item_key`.
    pub fn of(item: &PageItem, item_key: Option<&str>) -> ItemIdentity {
        if let Some(url) = item.item_url.as_deref().filter(|u| !u.is_empty()) {
            return ItemIdentity {
                by: IdentifiedBy::Url,
                key: url.to_owned(),
            };
        }
        if let Some(value) = item_key.and_then(|name| key_value(item.fields.get(name)?)) {
            return ItemIdentity {
                by: IdentifiedBy::Key,
                key: format!("{KEY_PREFIX}{value}"),
            };
        }
        ItemIdentity {
            by: IdentifiedBy::Content,
            key: item.content_hash.clone(),
        }
    }
}

/// A key field's value as text: a string as it is (trimmed), another value
/// as its JSON; `None` when there is nothing to go by (missing, null, blank).
fn key_value(value: &Value) -> Option<String> {
    match value {
        Value::Null => None,
        Value::String(text) => Some(text.trim())
            .filter(|t| !t.is_empty())
            .map(str::to_owned),
        other => Some(other.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn item(fields: Value, url: Option<&str>) -> PageItem {
        PageItem {
            content_hash: format!("hash-of-{fields}"),
            fields,
            item_url: url.map(str::to_owned),
        }
    }

    #[test]
    fn an_item_with_a_url_is_identified_by_it_even_on_a_site_with_a_key() {
        let it = item(json!({"sku": "A1"}), Some("http://shop/p/1"));
        let identity = ItemIdentity::of(&it, Some("sku"));
        assert_eq!(identity.by, IdentifiedBy::Url);
        assert_eq!(identity.key, "http://shop/p/1");
    }

    #[test]
    fn without_a_url_the_key_fields_value_identifies_it_whatever_else_changes() {
        let before = item(json!({"sku": " A1 ", "price": "$5"}), None);
        let after = item(json!({"sku": "A1", "price": "$6"}), None);
        let (a, b) = (
            ItemIdentity::of(&before, Some("sku")),
            ItemIdentity::of(&after, Some("sku")),
        );
        assert_eq!(a, b);
        assert_eq!((a.by, a.key.as_str()), (IdentifiedBy::Key, "key:A1"));
        let numbered = item(json!({"id": 42}), None);
        assert_eq!(ItemIdentity::of(&numbered, Some("id")).key, "key:42");
    }

    #[test]
    fn a_missing_or_blank_key_and_no_url_fall_back_to_the_content() {
        for fields in [
            json!({"sku": ""}),
            json!({"sku": null}),
            json!({"title": "t"}),
        ] {
            let it = item(fields, None);
            let identity = ItemIdentity::of(&it, Some("sku"));
            assert_eq!(identity.by, IdentifiedBy::Content);
            assert_eq!(identity.key, it.content_hash);
        }
        let plain = item(json!({"sku": "A1"}), Some(""));
        assert_eq!(ItemIdentity::of(&plain, None).by, IdentifiedBy::Content);
    }

    #[test]
    fn identity_kinds_read_back_from_their_names() {
        for by in IdentifiedBy::ALL {
            assert_eq!(by.as_str().parse::<IdentifiedBy>().unwrap(), by);
        }
        assert!("sku".parse::<IdentifiedBy>().is_err());
    }
}
