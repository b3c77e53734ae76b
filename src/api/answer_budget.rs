//! A paged listing's answer within a byte budget (`API_ANSWER_MAX_BYTES`):
//! rows are written one by one and the answer stops taking them once it
//! holds the budget, so a page of huge rows costs the api (and the client)
//! the budget, not `limit` times the largest row. It says so
//! (`cut_at_bytes`), and its `next_cursor` goes on from the last row sent:
//! nothing is skipped.

use axum::{
    body::Bytes,
    http::header,
    response::{IntoResponse, Response},
};
use serde::Serialize;

use crate::{domain::bounds::Bound, ops::metrics::metrics};

/// The JSON of a [`super::Page`], written within the budget.
#[derive(Debug)]
pub struct PageAnswer(Bytes);

impl IntoResponse for PageAnswer {
    fn into_response(self) -> Response {
        ([(header::CONTENT_TYPE, "application/json")], self.0).into_response()
    }
}

/// Writes `rows` (a listing read with `limit`) as a page: every row while
/// the answer holds at most `budget` bytes, and always the first (a row
/// larger than the budget alone still moves the cursor on). `cursor` is a
/// row's cursor; `next_cursor` is set when the listing was full or cut.
pub fn page_within<T: Serialize>(
    rows: Vec<T>,
    limit: i64,
    budget: usize,
    cursor: impl Fn(&T) -> i64,
) -> PageAnswer {
    let full = rows.len() as i64 == limit;
    let mut out = Vec::with_capacity(budget.min(64 * 1024));
    out.extend_from_slice(b"{\"items\":[");
    let mut last = None;
    let mut cut = false;
    for (at, row) in rows.iter().enumerate() {
        let start = out.len();
        if at > 0 {
            out.push(b',');
        }
        serde_json::to_writer(&mut out, row).expect("views serialize");
        if at > 0 && out.len() > budget {
            out.truncate(start);
            cut = true;
            break;
        }
        last = Some(cursor(row));
    }
    out.push(b']');
    if (full || cut)
        && let Some(last) = last
    {
        out.extend_from_slice(format!(",\"next_cursor\":\"{last}\"").as_bytes());
    }
    if cut {
        metrics().count_bound(Bound::AnswerBytes, 1);
        out.extend_from_slice(format!(",\"cut_at_bytes\":{budget}").as_bytes());
    }
    out.push(b'}');
    PageAnswer(out.into())
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::*;

    fn answer(rows: Vec<Value>, limit: i64, budget: usize) -> Value {
        let PageAnswer(bytes) = page_within(rows, limit, budget, |row| row["id"].as_i64().unwrap());
        serde_json::from_slice(&bytes).unwrap()
    }

    fn rows(n: i64, text: &str) -> Vec<Value> {
        (1..=n).map(|id| json!({"id": id, "text": text})).collect()
    }

    #[test]
    fn rows_within_the_budget_are_a_page_as_before() {
        assert_eq!(
            answer(rows(2, "a"), 2, 1000),
            json!({"items": rows(2, "a"), "next_cursor": "2"})
        );
        assert_eq!(
            answer(rows(1, "a"), 2, 1000),
            json!({"items": rows(1, "a")})
        );
        assert_eq!(answer(vec![], 2, 1000), json!({"items": []}));
    }

    #[test]
    fn rows_past_the_budget_wait_for_the_next_page_and_the_answer_says_so() {
        let big = "x".repeat(400);
        let page = answer(rows(5, &big), 5, 1000);
        assert_eq!(page["items"].as_array().unwrap().len(), 2);
        assert_eq!(page["next_cursor"], "2");
        assert_eq!(page["cut_at_bytes"], 1000);
        let alone = answer(rows(3, &"y".repeat(5000)), 3, 1000);
        assert_eq!(
            alone["items"].as_array().unwrap().len(),
            1,
            "one row always"
        );
        assert_eq!(alone["next_cursor"], "1");
    }
}
