//! `GET /api/results/export`: every result the filters select, as CSV or
//! NDJSON, streamed. The rows are read a batch at a time (keyset paging on
//! the id, as `/api/results` pages) and handed to the response through a
//! bounded channel, so a million rows cost the api a few batches of memory,
//! hold no database connection between batches, and stop being read as soon
//! as the client goes away.

use std::{borrow::Cow, io};

use axum::{
    body::{Body, Bytes},
    extract::State,
    http::header,
    response::{IntoResponse, Response},
};
use chrono::{DateTime, Utc};
use serde::Deserialize;
use serde_json::Value;
use tokio::sync::mpsc;
use utoipa::{IntoParams, ToSchema};

use super::CrawlResultView;
use crate::{
    api::{ApiError, AppState, error::ErrorBody, extract::ApiQuery},
    store::{
        self,
        results::{CrawlResult, ResultFilter},
    },
};

/// Rows read from Postgres at a time.
const BATCH: i64 = 1000;
/// Batches ready ahead of a slow client, at most.
const BATCHES_AHEAD: usize = 2;

/// The columns of the CSV, in order; `fields` is the item's fields as JSON.
/// An export of one site (`site_id`, or `run_id`) has a column more per
/// field of its items after these: `fields.<name>`.
const CSV_HEADER: &str = "id,run_id,keyword_id,site_id,page,position,page_url,item_url,\
content_hash,fetched_at,first_seen_at,last_seen_at,fields,item_id,change,diff,url_list_id";

/// What separates the values of a list field in its CSV cell: a line break,
/// which a collapsed text never holds, shown as a list by spreadsheets.
const LIST_SEPARATOR: &str = "\n";

/// How the export is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum ExportFormat {
    /// One header row, then one row per result (RFC 4180, CRLF line ends).
    Csv,
    /// One JSON object per line, as `/api/results` lists them.
    Ndjson,
}

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub(super) struct ExportQuery {
    format: ExportFormat,
    keyword_id: Option<i64>,
    /// Results of a URL list's runs.
    url_list_id: Option<i64>,
    site_id: Option<i64>,
    run_id: Option<i64>,
    /// As in `/api/results`.
    q: Option<String>,
    first_seen_after: Option<DateTime<Utc>>,
    first_seen_before: Option<DateTime<Utc>>,
    /// As in `/api/results`.
    change: Option<String>,
}

/// Every result the filters select, oldest first, as CSV or NDJSON, streamed
/// (constant memory on the api, however many rows). A CSV of one site
/// (`site_id` or `run_id`) has a column per field of its items
/// (`fields.<name>`): text as it is, numbers as numbers, a list's values one
/// per line in the cell.
#[utoipa::path(get, path = "/results/export", tag = "results", security(("bearer" = [])), params(ExportQuery),
    responses((status = 200, description = "The results, streamed", content((String = "text/csv"), (String = "application/x-ndjson"))),
              (status = 400, body = ErrorBody), (status = 422, description = "An unknown `change`", body = ErrorBody), (status = 401, description = "No valid token", body = ErrorBody), (status = 403, description = "Read-only token", body = ErrorBody)))]
pub(super) async fn export(
    State(state): State<AppState>,
    ApiQuery(query): ApiQuery<ExportQuery>,
) -> Result<Response, ApiError> {
    let filter = super::filter(
        (
            query.keyword_id,
            query.url_list_id,
            query.site_id,
            query.run_id,
        ),
        (query.q, query.change),
        (query.first_seen_after, query.first_seen_before),
        BATCH,
    )?;
    let (content_type, extension) = match query.format {
        ExportFormat::Csv => ("text/csv; charset=utf-8", "csv"),
        ExportFormat::Ndjson => ("application/x-ndjson", "ndjson"),
    };
    let columns = match query.format {
        ExportFormat::Csv => {
            store::results::item_fields_of(&state.pool, query.site_id, query.run_id)
                .await?
                .unwrap_or_default()
        }
        ExportFormat::Ndjson => Vec::new(),
    };
    let (chunks, body) = mpsc::channel(BATCHES_AHEAD);
    tokio::spawn(write_batches(
        state.pool.clone(),
        filter,
        (query.format, columns),
        chunks,
    ));
    let body = futures::stream::unfold(body, |mut body| async move {
        body.recv().await.map(|chunk| (chunk, body))
    });
    Ok((
        [
            (header::CONTENT_TYPE, content_type.to_owned()),
            (
                header::CONTENT_DISPOSITION,
                format!("attachment; filename=\"results.{extension}\""),
            ),
        ],
        Body::from_stream(body),
    )
        .into_response())
}

/// Reads the results batch by batch and sends each, written, to the
/// response; stops at the last batch, or when the client is gone. A database
/// error ends the body with an error, so the client sees a cut-off transfer,
/// never a file that looks complete.
async fn write_batches(
    pool: sqlx::PgPool,
    mut filter: ResultFilter,
    (format, columns): (ExportFormat, Vec<String>),
    chunks: mpsc::Sender<Result<Bytes, io::Error>>,
) {
    if format == ExportFormat::Csv
        && chunks
            .send(Ok(Bytes::from(csv_header(&columns))))
            .await
            .is_err()
    {
        return;
    }
    loop {
        let batch = match store::results::list(&pool, &filter).await {
            Ok(batch) => batch,
            Err(e) => {
                tracing::error!(error = ?e, "results export stopped: the database failed");
                let _ = chunks.send(Err(io::Error::other("database error"))).await;
                return;
            }
        };
        let Some(last) = batch.last() else { return };
        filter.after = Some(last.id);
        let full = batch.len() as i64 == filter.limit;
        let mut written = Vec::with_capacity(batch.len() * 256);
        for result in batch {
            match format {
                ExportFormat::Csv => csv_row(&mut written, &result, &columns),
                ExportFormat::Ndjson => ndjson_line(&mut written, result),
            }
        }
        if chunks.send(Ok(written.into())).await.is_err() || !full {
            return;
        }
    }
}

fn ndjson_line(out: &mut Vec<u8>, result: CrawlResult) {
    serde_json::to_writer(&mut *out, &CrawlResultView::from(result)).expect("results serialize");
    out.push(b'\n');
}

/// The header row: the fixed columns, then `fields.<name>` per item field.
fn csv_header(columns: &[String]) -> Vec<u8> {
    let mut out = CSV_HEADER.as_bytes().to_vec();
    for name in columns {
        out.push(b',');
        csv_cell(&mut out, &format!("fields.{name}"));
    }
    out.extend_from_slice(b"\r\n");
    out
}

fn csv_row(out: &mut Vec<u8>, r: &CrawlResult, columns: &[String]) {
    let timestamp =
        |t: &chrono::DateTime<chrono::Utc>| t.to_rfc3339_opts(chrono::SecondsFormat::AutoSi, true);
    let cells = [
        r.id.to_string(),
        r.run_id.to_string(),
        r.keyword_id.map(|id| id.to_string()).unwrap_or_default(),
        r.site_id.to_string(),
        r.page.to_string(),
        r.position.to_string(),
        r.page_url.clone(),
        r.item_url.clone().unwrap_or_default(),
        r.content_hash.clone(),
        timestamp(&r.fetched_at),
        timestamp(&r.first_seen_at),
        timestamp(&r.last_seen_at),
        r.fields.to_string(),
        r.item_id.map(|id| id.to_string()).unwrap_or_default(),
        r.change.map(|c| c.as_str().to_owned()).unwrap_or_default(),
        r.diff
            .as_ref()
            .map(|diff| serde_json::to_string(diff).expect("diffs serialize"))
            .unwrap_or_default(),
        r.url_list_id.map(|id| id.to_string()).unwrap_or_default(),
    ];
    for (i, cell) in cells.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        csv_cell(out, cell);
    }
    for name in columns {
        out.push(b',');
        match r.fields.get(name) {
            // A number is written as one: no formula can start with it.
            Some(Value::Number(n)) => out.extend_from_slice(n.to_string().as_bytes()),
            Some(value) => csv_cell(out, &cell_text(value)),
            None => {}
        }
    }
    out.extend_from_slice(b"\r\n");
}

/// A field's value as a cell reads it: text as it is, a list's values one
/// per line, anything else as JSON; null is empty.
fn cell_text(value: &Value) -> String {
    match value {
        Value::Null => String::new(),
        Value::String(text) => text.clone(),
        Value::Array(list) => list
            .iter()
            .map(|v| match v {
                Value::String(text) => text.clone(),
                other => other.to_string(),
            })
            .collect::<Vec<_>>()
            .join(LIST_SEPARATOR),
        other => other.to_string(),
    }
}

/// What a spreadsheet reads as the start of a formula (OWASP's CSV
/// injection list): a cell starting with one is written with a `'` before it.
const FORMULA_LEADS: [char; 6] = ['=', '+', '-', '@', '\t', '\r'];

/// One CSV cell (RFC 4180): quoted when it holds a comma, a quote or a line
/// break, its quotes doubled; a cell a spreadsheet would run as a formula
/// (an item URL or a page URL a site chose: `=HYPERLINK(...)`) starts with a
/// `'`, which makes it text.
fn csv_cell(out: &mut Vec<u8>, cell: &str) {
    let defused = match cell.starts_with(FORMULA_LEADS) {
        true => Cow::Owned(format!("'{cell}")),
        false => Cow::Borrowed(cell),
    };
    if defused.contains([',', '"', '\n', '\r']) {
        out.push(b'"');
        out.extend_from_slice(defused.replace('"', "\"\"").as_bytes());
        out.push(b'"');
    } else {
        out.extend_from_slice(defused.as_bytes());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cell_is_quoted_only_when_it_must_be() {
        let mut out = Vec::new();
        csv_cell(&mut out, "plain");
        out.push(b'|');
        csv_cell(&mut out, "a,b");
        out.push(b'|');
        csv_cell(&mut out, "say \"hi\"\r\nbye");
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "plain|\"a,b\"|\"say \"\"hi\"\"\r\nbye\""
        );
    }

    #[test]
    fn a_fields_cell_is_its_text_a_number_or_its_list_one_value_a_line() {
        use serde_json::json;

        assert_eq!(cell_text(&json!("a, b")), "a, b");
        assert_eq!(
            cell_text(&json!(["red", "big lamp", 3])),
            "red\nbig lamp\n3"
        );
        assert_eq!(cell_text(&json!(null)), "");
        assert_eq!(cell_text(&json!({"a": 1})), "{\"a\":1}");
        assert_eq!(
            String::from_utf8(csv_header(&["price".into(), "a,b".into()])).unwrap(),
            format!("{CSV_HEADER},fields.price,\"fields.a,b\"\r\n")
        );
    }

    #[test]
    fn a_cell_a_spreadsheet_would_run_starts_with_a_quote() {
        let written = |cell: &str| {
            let mut out = Vec::new();
            csv_cell(&mut out, cell);
            String::from_utf8(out).unwrap()
        };
        assert_eq!(written("=HYPERLINK(\"x\")"), "\"'=HYPERLINK(\"\"x\"\")\"");
        assert_eq!(written("+1"), "'+1");
        assert_eq!(written("-2+3"), "'-2+3");
        assert_eq!(written("@SUM(A1)"), "'@SUM(A1)");
        assert_eq!(written("\tx"), "'\tx");
        assert_eq!(written("\rx"), "\"'\rx\"");
        assert_eq!(written("a=b"), "a=b", "only a leading one");
        assert_eq!(written("http://s/p?a=-1"), "http://s/p?a=-1");
    }
}
