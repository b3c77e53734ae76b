//! A list of URLs to crawl on a site (products to refresh, pages to watch):
//! its settings, and the rules each line of an upload must pass.
//!
//! An upload is plain text, one URL per line. Blank lines and lines starting
//! with `#` are skipped; every other line is a URL, or is reported by its
//! number: refused (not an absolute http(s) URL, too long, a control
//! character) or a duplicate of an earlier line. The fragment is dropped (it
//! never reaches the server), so `a#x` and `a#y` are one URL.

use std::collections::HashMap;

use chrono::TimeDelta;
use serde::{Deserialize, Serialize};
use url::Url;
use utoipa::ToSchema;

use super::{FieldError, schedule::KeywordSchedule, schedule::Timezone, text};

/// Longest list name, in characters.
pub const MAX_NAME_CHARS: usize = 200;
/// Longest URL of a list, in bytes.
pub const MAX_URL_BYTES: usize = 2048;
/// Most URLs one list holds.
pub const MAX_LIST_URLS: usize = 100_000;
/// Lines of each kind an upload's report names one by one; past these it
/// counts them only.
pub const REPORTED_LINES: usize = 1000;

/// A URL list as a client sends it; `schedule`, `timezone` and `jitter_secs`
/// are read as a keyword's are.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct UrlListInput {
    /// The site whose settings (pace, identity, fields) read the URLs.
    pub site_id: i64,
    /// Unique on its site.
    pub name: String,
    /// 6-field cron expression, seconds first: each URL is read once per
    /// period between two fires.
    #[schema(example = "0 0 6 * * *")]
    pub schedule: String,
    #[serde(default = "utc")]
    #[schema(example = "Asia/Seoul")]
    pub timezone: String,
    #[serde(default)]
    pub jitter_secs: i64,
    #[serde(default = "enabled_by_default")]
    pub enabled: bool,
}

fn enabled_by_default() -> bool {
    true
}

fn utc() -> String {
    Timezone::UTC.name().to_owned()
}

/// A URL list that passed every rule (the site is checked against the store).
#[derive(Debug, Clone, PartialEq)]
pub struct UrlListSpec {
    pub site_id: i64,
    pub name: String,
    pub schedule: KeywordSchedule,
    pub enabled: bool,
}

impl UrlListInput {
    pub fn parse(self, min_interval: TimeDelta) -> Result<UrlListSpec, FieldError> {
        let name = text::non_empty(&self.name, "name", MAX_NAME_CHARS)?;
        let schedule = KeywordSchedule::checked(
            &self.schedule,
            &self.timezone,
            self.jitter_secs,
            min_interval,
        )?;
        Ok(UrlListSpec {
            site_id: self.site_id,
            name: name.to_owned(),
            schedule,
            enabled: self.enabled,
        })
    }
}

/// One line of an upload that was not taken, by its number (from 1).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, ToSchema)]
pub struct LineNote {
    pub line: u32,
    /// The line as sent, cut to 200 characters.
    pub text: String,
    /// Why it was not taken.
    pub reason: String,
}

/// Lines of one kind: how many, and the first [`REPORTED_LINES`] of them.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, ToSchema)]
pub struct LineNotes {
    pub count: u64,
    pub lines: Vec<LineNote>,
}

impl LineNotes {
    fn note(&mut self, line: u32, text: &str, reason: impl Into<String>) {
        self.count += 1;
        if self.lines.len() < REPORTED_LINES {
            self.lines.push(LineNote {
                line,
                text: text.chars().take(200).collect(),
                reason: reason.into(),
            });
        }
    }
}

/// An upload read line by line: the URLs taken, in order, with their line,
/// and the lines that were not.
#[derive(Debug, Default)]
pub struct Upload {
    urls: Vec<String>,
    lines: Vec<i32>,
    /// Each URL taken, with its line.
    seen: HashMap<String, u32>,
    last_line: u32,
    pub duplicates: LineNotes,
    pub refused: LineNotes,
}

/// Why a line is not a URL of a list.
fn read_url(text: &str) -> Result<String, String> {
    if text.len() > MAX_URL_BYTES {
        return Err(format!("longer than {MAX_URL_BYTES} bytes"));
    }
    if let Some(c) = text.chars().find(|c| c.is_control()) {
        return Err(format!("contains a control character (U+{:04X})", c as u32));
    }
    let mut url = Url::parse(text).map_err(|e| format!("not an absolute URL: {e}"))?;
    if !matches!(url.scheme(), "http" | "https") {
        return Err(format!("scheme {:?}: only http and https", url.scheme()));
    }
    if url.host_str().is_none_or(str::is_empty) {
        return Err("has no host".into());
    }
    url.set_fragment(None);
    Ok(url.into())
}

impl Upload {
    /// Reads the next line (its bytes without the line break).
    pub fn push_line(&mut self, bytes: &[u8]) -> Result<(), FieldError> {
        self.last_line += 1;
        let line = self.last_line;
        let Ok(text) = std::str::from_utf8(bytes) else {
            self.refused
                .note(line, &String::from_utf8_lossy(bytes), "not UTF-8 text");
            return Ok(());
        };
        let text = text.strip_suffix('\r').unwrap_or(text).trim();
        if text.is_empty() || text.starts_with('#') {
            return Ok(());
        }
        match read_url(text) {
            Err(reason) => self.refused.note(line, text, reason),
            Ok(url) if let Some(first) = self.seen.get(&url) => {
                let reason = format!("the same URL as line {first}");
                self.duplicates.note(line, text, reason)
            }
            Ok(url) => {
                if self.urls.len() == MAX_LIST_URLS {
                    return Err(FieldError::new(
                        "body",
                        format!(
                            "a list holds at most {MAX_LIST_URLS} URLs (line {line} is one more)"
                        ),
                    ));
                }
                self.seen.insert(url.clone(), line);
                self.urls.push(url);
                self.lines.push(i32::try_from(line).unwrap_or(i32::MAX));
            }
        }
        Ok(())
    }

    /// Drops the URLs `refusal` names a reason for (a target the fleet may
    /// not reach) and reports their lines as refused.
    pub fn drop_refused(&mut self, mut refusal: impl FnMut(&str) -> Option<String>) {
        let (mut urls, mut lines) = (Vec::new(), Vec::new());
        for (url, line) in self.urls.drain(..).zip(self.lines.drain(..)) {
            match refusal(&url) {
                Some(reason) => {
                    self.seen.remove(&url);
                    self.refused.note(line as u32, &url, reason);
                }
                None => {
                    urls.push(url);
                    lines.push(line);
                }
            }
        }
        (self.urls, self.lines) = (urls, lines);
    }

    /// The URLs taken, in order, and the line of each.
    pub fn urls(&self) -> (&[String], &[i32]) {
        (&self.urls, &self.lines)
    }

    /// Lines read so far.
    pub fn lines_read(&self) -> u32 {
        self.last_line
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn upload(text: &str) -> Upload {
        let mut upload = Upload::default();
        for line in text.split('\n') {
            upload.push_line(line.as_bytes()).unwrap();
        }
        upload
    }

    #[test]
    fn urls_are_taken_in_order_and_every_other_line_is_reported_by_number() {
        let upload = upload(
            "# products\r\nhttp://shop.test/a\r\n\nhttps://shop.test/b#reviews\n\
             ftp://shop.test/c\nshop.test/d\nhttp://shop.test/a\nhttps://shop.test/b#specs\n\
             http://shop.test/e\u{7}\n",
        );
        let (urls, lines) = upload.urls();
        assert_eq!(urls, ["http://shop.test/a", "https://shop.test/b"]);
        assert_eq!(lines, [2, 4]);
        let refused: Vec<u32> = upload.refused.lines.iter().map(|n| n.line).collect();
        assert_eq!(refused, [5, 6, 9], "{:?}", upload.refused);
        assert!(
            upload.refused.lines[0]
                .reason
                .contains("only http and https")
        );
        let duplicates: Vec<u32> = upload.duplicates.lines.iter().map(|n| n.line).collect();
        assert_eq!(duplicates, [7, 8]);
        assert_eq!(upload.duplicates.lines[1].reason, "the same URL as line 4");
        assert_eq!(upload.lines_read(), 10);
    }

    #[test]
    fn a_list_past_its_bound_is_refused_naming_the_line() {
        let mut upload = Upload::default();
        for n in 0..MAX_LIST_URLS {
            upload
                .push_line(format!("http://shop.test/{n}").as_bytes())
                .unwrap();
        }
        let error = upload.push_line(b"http://shop.test/over").unwrap_err();
        assert_eq!(error.field, "body");
        assert!(error.message.contains("line 100001"), "{error}");
    }

    #[test]
    fn reports_name_the_first_lines_and_count_the_rest() {
        let text = "nope\n".repeat(REPORTED_LINES + 5);
        let upload = upload(&text);
        assert_eq!(upload.refused.count, (REPORTED_LINES + 5) as u64);
        assert_eq!(upload.refused.lines.len(), REPORTED_LINES);
    }

    #[test]
    fn a_refused_target_leaves_the_upload_and_is_reported() {
        let mut upload = upload("http://a.test/1\nhttp://10.0.0.1/x\nhttp://a.test/2");
        upload.drop_refused(|url| url.contains("10.0.0.1").then(|| "private".to_owned()));
        assert_eq!(upload.urls().0, ["http://a.test/1", "http://a.test/2"]);
        assert_eq!(upload.urls().1, [1, 3]);
        assert_eq!(upload.refused.lines[0].line, 2);
        assert_eq!(upload.refused.lines[0].reason, "private");
    }

    #[test]
    fn a_list_needs_a_name_and_a_schedule_within_the_rules() {
        let input = |name: &str, schedule: &str| UrlListInput {
            site_id: 1,
            name: name.into(),
            schedule: schedule.into(),
            timezone: utc(),
            jitter_secs: 0,
            enabled: true,
        };
        let hour = TimeDelta::hours(1);
        assert_eq!(
            input(" ", "0 0 6 * * *").parse(hour).unwrap_err().field,
            "name"
        );
        assert_eq!(
            input("daily", "* * * * * *").parse(hour).unwrap_err().field,
            "schedule"
        );
        assert_eq!(
            input("daily", "0 0 6 * * *").parse(hour).unwrap().name,
            "daily"
        );
    }
}
