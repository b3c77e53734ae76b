//! What a live client asks for: the filter of its subscription, read from
//! its messages, or the error that tells it what is wrong with one.

use serde::Deserialize;
use serde_json::{Value, json};

use crate::events::Event;

/// What a client subscribed to; empty fields match everything.
#[derive(Debug, Clone, Default, Deserialize, PartialEq, Eq, serde::Serialize)]
#[serde(deny_unknown_fields)]
pub(super) struct Filter {
    #[serde(skip_serializing_if = "Option::is_none")]
    keyword_id: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    site_id: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    run_id: Option<i64>,
}

impl Filter {
    pub(super) fn admits(&self, event: &Event) -> bool {
        match event.subject() {
            None => true,
            Some((run, keyword, site)) => {
                self.run_id.is_none_or(|id| id == run)
                    && self.keyword_id.is_none_or(|id| Some(id) == keyword)
                    && self.site_id.is_none_or(|id| id == site)
            }
        }
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ClientMessage {
    subscribe: Filter,
}

/// A client's message read as a subscription, or the `error` frame that
/// answers it, naming the field at fault when one is.
pub(super) fn read_subscription(text: &str) -> Result<Filter, Value> {
    let mut json = serde_json::Deserializer::from_str(text);
    let read = serde_path_to_error::deserialize::<_, ClientMessage>(&mut json)
        .map_err(|e| (e.path().to_string(), e.into_inner()))
        .and_then(|message| {
            json.end()
                .map(|()| message)
                .map_err(|e| (".".to_owned(), e))
        });
    let (path, error) = match read {
        Ok(ClientMessage { subscribe }) => return Ok(subscribe),
        Err(failed) => failed,
    };
    let expected =
        r#"expected {"subscribe": {"keyword_id"?: int, "site_id"?: int, "run_id"?: int}}"#;
    let mut frame = json!({"type": "error", "message": format!("{error}; {expected}")});
    if !error.is_syntax() && !error.is_eof() {
        // At the top level the fault is with `subscribe` itself (missing, or
        // something else sent in its place).
        frame["field"] = json!(if path == "." { "subscribe" } else { &path });
    }
    Err(frame)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_subscription_is_read_or_answered_with_the_field_at_fault() {
        assert_eq!(
            read_subscription(r#"{"subscribe": {"site_id": 2}}"#),
            Ok(Filter {
                site_id: Some(2),
                ..Filter::default()
            })
        );
        let field = |text: &str| read_subscription(text).unwrap_err()["field"].clone();
        assert_eq!(
            field(r#"{"subscribe": {"site_id": "two"}}"#),
            "subscribe.site_id"
        );
        assert_eq!(field(r#"{"subscribe": {"site": 2}}"#), "subscribe.site");
        assert_eq!(field(r#"{"subscribe": 3}"#), "subscribe");
        assert_eq!(field(r#"{"unsubscribe": {}}"#), "unsubscribe");
        assert_eq!(field(r#"{}"#), "subscribe");
        assert_eq!(field("not json"), Value::Null);
        assert_eq!(field(r#"{"subscribe": {}} trailing"#), Value::Null);
    }
}
