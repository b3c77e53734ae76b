//! Every query in `src/store` names the columns it reads: no `SELECT *`,
//! `alias.*` or `RETURNING *`. `query!` and `query_as!` decode a row by
//! position, fixed when the release was built; a wildcard expands to the
//! columns the table has when the query runs, so the release still running
//! while a later migration adds a column would read its values one place off
//! (an `UnexpectedNull` or a wrong type at some index).
//!
//! The SQL is read from the string literals of `src/store` that hold a
//! statement; `--` comments in them are skipped, and `count(*)` and a product
//! (`a * b`) are not wildcards.

use std::{
    fs,
    path::{Path, PathBuf},
};

/// Every `.rs` file under `dir`, sorted.
fn rust_files(dir: &Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    let mut dirs = vec![dir.to_path_buf()];
    while let Some(dir) = dirs.pop() {
        for entry in fs::read_dir(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
            let path = entry.unwrap().path();
            if path.is_dir() {
                dirs.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                files.push(path);
            }
        }
    }
    files.sort();
    files
}

/// The string literals of a Rust source (raw `r#"…"#` and plain `"…"`), with
/// the line each starts on; comments outside them are skipped.
fn string_literals(source: &str) -> Vec<(usize, String)> {
    let chars: Vec<char> = source.chars().collect();
    let (mut literals, mut i, mut line) = (Vec::new(), 0, 1);
    while i < chars.len() {
        let c = chars[i];
        if c == '\n' {
            line += 1;
            i += 1;
        } else if c == '/' && chars.get(i + 1) == Some(&'/') {
            while i < chars.len() && chars[i] != '\n' {
                i += 1;
            }
        } else if c == '\'' && chars.get(i + 2) == Some(&'\'') {
            // A character literal such as '"'.
            i += 3;
        } else if c == '\'' && chars.get(i + 1) == Some(&'\\') {
            i += 4;
        } else if c == 'r' && matches!(chars.get(i + 1), Some('#' | '"')) {
            let hashes = chars[i + 1..].iter().take_while(|&&c| c == '#').count();
            if chars.get(i + 1 + hashes) != Some(&'"') {
                i += 1;
                continue;
            }
            let start = i + 2 + hashes;
            let closing: Vec<char> = std::iter::once('"')
                .chain(std::iter::repeat_n('#', hashes))
                .collect();
            let mut end = start;
            while end < chars.len() && chars[end..].iter().take(closing.len()).ne(closing.iter()) {
                end += 1;
            }
            let text: String = chars[start..end].iter().collect();
            literals.push((line, text.clone()));
            line += text.matches('\n').count();
            i = end + closing.len();
        } else if c == '"' {
            let mut text = String::new();
            i += 1;
            while i < chars.len() && chars[i] != '"' {
                if chars[i] == '\\' {
                    i += 1;
                }
                text.push(chars[i]);
                i += 1;
            }
            literals.push((line, text.clone()));
            line += text.matches('\n').count();
            i += 1;
        } else {
            i += 1;
        }
    }
    literals
}

/// Whether a literal holds a statement.
fn is_sql(text: &str) -> bool {
    let upper = text.to_uppercase();
    ["SELECT ", "INSERT ", "UPDATE ", "DELETE ", "RETURNING "]
        .iter()
        .any(|word| upper.contains(word))
}

/// The wildcards of a statement, each with its line in the statement (from
/// 0) and the text around it.
fn wildcards(sql: &str) -> Vec<(usize, String)> {
    let code: String = sql
        .lines()
        .map(|line| line.split("--").next().unwrap_or(""))
        .collect::<Vec<_>>()
        .join("\n");
    let mut found = Vec::new();
    for (at, _) in code.match_indices('*') {
        let before = code[..at].trim_end();
        let after = code[at + 1..].trim_start();
        let previous_word = before
            .rsplit(|c: char| !c.is_ascii_alphanumeric() && c != '_')
            .next()
            .unwrap_or("")
            .to_uppercase();
        let next_word = after
            .split(|c: char| !c.is_ascii_alphanumeric() && c != '_')
            .next()
            .unwrap_or("")
            .to_uppercase();
        // `alias.*`, `a, *`, `* FROM`, or `*` right after the word that opens
        // a column list (`SELECT *`, `RETURNING *`, `DISTINCT *`).
        let wildcard = before.ends_with('.')
            || before.ends_with(',')
            || next_word == "FROM"
            || ["SELECT", "RETURNING", "DISTINCT", "ALL"].contains(&previous_word.as_str());
        if wildcard {
            let from = code[..at]
                .char_indices()
                .rev()
                .nth(30)
                .map_or(0, |(i, _)| i);
            let to = code[at..]
                .char_indices()
                .nth(30)
                .map_or(code.len(), |(i, _)| at + i);
            let around = code[from..to].split_whitespace().collect::<Vec<_>>();
            found.push((code[..at].matches('\n').count(), around.join(" ")));
        }
    }
    found
}

#[test]
fn every_query_of_the_store_names_its_columns() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut offending = Vec::new();
    let mut statements = 0;
    for path in rust_files(&root.join("src/store")) {
        let source = fs::read_to_string(&path).unwrap();
        for (line, text) in string_literals(&source) {
            if !is_sql(&text) {
                continue;
            }
            statements += 1;
            for (offset, wildcard) in wildcards(&text) {
                let file = path.strip_prefix(root).unwrap().display();
                let line = line + offset;
                offending.push(format!("{file}:{line}: {wildcard}"));
            }
        }
    }
    assert!(
        statements > 100,
        "only {statements} statements read: the reader lost its way"
    );
    assert!(
        offending.is_empty(),
        "queries reading a wildcard (name the columns):\n{}",
        offending.join("\n")
    );
}

#[test]
fn the_reader_tells_wildcards_from_counts_and_products() {
    for sql in [
        "SELECT * FROM crawl_runs",
        "UPDATE crawl_runs SET state = $1 RETURNING *",
        "SELECT c.*, k.keyword FROM claimed c",
        "SELECT k.keyword, c.* FROM claimed c",
        "SELECT DISTINCT ON (item_key) * FROM listed",
        "SELECT a,* FROM t",
    ] {
        assert_eq!(wildcards(sql).len(), 1, "{sql}");
    }
    for sql in [
        "SELECT count(*) FROM crawl_runs",
        "SELECT a * 2 AS double, (b + 1) * c FROM t",
        "SELECT id FROM t -- not SELECT * FROM t\nWHERE n = 2 * $1",
        "UPDATE t SET n = n * 2 RETURNING id",
    ] {
        assert_eq!(wildcards(sql), Vec::new(), "{sql}");
    }
    assert_eq!(wildcards("SELECT id\nFROM t\nRETURNING *")[0].0, 2);
    let literals =
        string_literals("let q = r#\"SELECT \"x\" FROM t\"#; // \"SELECT *\"\nlet c = '\"';");
    assert_eq!(literals, vec![(1, "SELECT \"x\" FROM t".to_owned())]);
}
