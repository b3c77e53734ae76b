//! The house rules of the source tree, checked on every test run: the rooms
//! (api, scheduler, worker) never import one another, the shared modules
//! import only what sits below them, the domain does no I/O, and the modules
//! at the top of `src/` import one another without a cycle.
//!
//! Imports are read from the source: every `crate::x` path, the top-level
//! names of every `crate::{...}` tree, and every `super::` path that climbs
//! to the crate root. Comments are skipped.
//!
//! The tools of the workspace (crates/) use of the `crawlfleet` library only
//! what `TOOLS_MAY_USE` says.
//!
//! docs/architecture.md, the page a newcomer reads first, is held to the same
//! tree: its module map names every file under `src/` (and no file that is
//! gone), its import table is `MAY_IMPORT`, row for row, and its tools table
//! is `TOOLS_MAY_USE`.

use std::{
    collections::{BTreeMap, BTreeSet},
    fs,
    path::{Path, PathBuf},
};

/// What each module at the top of `src/` may import, besides itself.
const MAY_IMPORT: &[(&str, &[&str])] = &[
    ("domain", &[]),
    ("ops", &["domain"]),
    ("store", &["domain", "ops"]),
    ("queue", &["domain", "ops"]),
    ("events", &["domain", "store"]),
    ("net", &["domain", "ops"]),
    ("config", &["net", "ops", "store"]),
    (
        "api",
        &["config", "domain", "events", "net", "ops", "queue", "store"],
    ),
    (
        "scheduler",
        &["config", "domain", "events", "net", "ops", "queue", "store"],
    ),
    (
        "worker",
        &["config", "domain", "events", "net", "ops", "queue", "store"],
    ),
    ("migrate", &["config", "ops", "store"]),
    (
        "smoke",
        &[
            "config", "domain", "migrate", "ops", "queue", "store", "worker",
        ],
    ),
    ("tools", &["ops"]),
    (
        "app",
        &[
            "api",
            "config",
            "domain",
            "events",
            "net",
            "ops",
            "queue",
            "scheduler",
            "store",
            "tools",
            "worker",
        ],
    ),
    ("main", &[]),
    ("lib", &[]),
];

/// What each tool of the workspace (`crates/<name>`) may use of the
/// `crawlfleet` library: the simulator the domain alone (it ships apart and
/// needs no store), the demo shop what its registration and its process need.
/// The fleet itself never links a tool: they are its dev-dependencies only
/// (as a dependency, cargo would refuse the cycle: each tool uses the library).
const TOOLS_MAY_USE: &[(&str, &[&str])] = &[
    ("simulate", &["domain"]),
    ("demo", &["config", "domain", "ops", "store"]),
    ("markup-corpus", &[]),
];

/// Crates (and parts of std) that reach a disk, a network, a process or a
/// runtime: the domain uses none of them.
const IO_CRATES: &[&str] = &[
    "tokio",
    "tokio_util",
    "sqlx",
    "redis",
    "apalis",
    "apalis_redis",
    "axum",
    "hyper",
    "hyper_util",
    "tower",
    "tower_http",
    "reqwest",
    "fantoccini",
    "tungstenite",
    "aws_config",
    "aws_sdk_cloudwatch",
    "prometheus",
    "libc",
    "std::fs",
    "std::process",
    "std::net::TcpStream",
    "std::net::TcpListener",
    "std::net::UdpSocket",
    "std::net::ToSocketAddrs",
];

/// Every `.rs` file under `src/`, with its module path (`api::runs::view`).
fn sources() -> Vec<(Vec<String>, PathBuf)> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    rust_files(&root)
        .into_iter()
        .map(|path| {
            let relative = path.strip_prefix(&root).unwrap().with_extension("");
            let mut module: Vec<String> = relative
                .iter()
                .map(|part| part.to_string_lossy().into_owned())
                .collect();
            if module.len() > 1 && module.last().is_some_and(|last| last == "mod") {
                module.pop();
            }
            (module, path)
        })
        .collect()
}

/// Every `.rs` file under `dir`, sorted.
fn rust_files(dir: &Path) -> Vec<PathBuf> {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        let entries = fs::read_dir(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
        for entry in entries {
            let path = entry.unwrap().path();
            if path.is_dir() {
                walk(&path, out);
            } else if path.extension().is_some_and(|e| e == "rs") {
                out.push(path);
            }
        }
    }
    let mut files = Vec::new();
    walk(dir, &mut files);
    files.sort();
    files
}

/// The source without its comments and without the text of its one-line
/// string literals (a URL's `//` is not a comment, and a string naming
/// `crate::x` is not an import). Good enough for import paths: they never
/// sit inside strings or span a multi-line string.
fn code_of(source: &str) -> String {
    let mut code = String::with_capacity(source.len());
    for line in source.lines() {
        let mut in_string = false;
        let mut previous = ' ';
        for c in line.chars() {
            // `'"'` is a character, not the start of a string.
            let quote = c == '"' && previous != '\\' && previous != '\'';
            if quote {
                in_string = !in_string;
            } else if !in_string && c == '/' && previous == '/' {
                code.pop();
                break;
            }
            code.push(if in_string && !quote { ' ' } else { c });
            previous = c;
        }
        code.push('\n');
    }
    code
}

fn is_ident(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_'
}

/// The top-level modules `code` names through `crate::`.
fn crate_imports(code: &str) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    for (at, _) in code.match_indices("crate::") {
        if at > 0 && is_ident(code[..at].chars().next_back().unwrap()) {
            continue; // `crawlfleet::crate::` cannot happen; `mycrate::` can.
        }
        let rest = &code[at + "crate::".len()..];
        if let Some(group) = rest.strip_prefix('{') {
            names.extend(top_of_group(group));
        } else {
            let name: String = rest.chars().take_while(|&c| is_ident(c)).collect();
            names.insert(name);
        }
    }
    names
}

/// The first names of the paths in a use tree `a::b, c::{d, e}, f }`.
fn top_of_group(group: &str) -> Vec<String> {
    let (mut depth, mut expecting, mut names, mut name) = (1, true, Vec::new(), String::new());
    for c in group.chars() {
        match c {
            '{' => depth += 1,
            '}' => depth -= 1,
            _ => {}
        }
        if depth == 0 {
            break;
        }
        if depth == 1 && expecting && is_ident(c) {
            name.push(c);
        } else if !name.is_empty() {
            names.push(std::mem::take(&mut name));
            expecting = false;
        }
        if depth == 1 && c == ',' {
            expecting = true;
        }
    }
    if !name.is_empty() {
        names.push(name);
    }
    names
}

/// The top-level modules reached by `super::` paths that climb to the root
/// from module `module`.
fn super_imports(code: &str, module: &[String]) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    let depth = module.len();
    for (at, _) in code.match_indices("super::") {
        if at > 0 && code[..at].ends_with("::") {
            continue; // counted with the first `super::` of the chain
        }
        let mut rest = &code[at..];
        let mut climbs = 0;
        while let Some(after) = rest.strip_prefix("super::") {
            climbs += 1;
            rest = after;
        }
        if climbs >= depth {
            if let Some(group) = rest.strip_prefix('{') {
                names.extend(top_of_group(group));
            } else {
                names.insert(rest.chars().take_while(|&c| is_ident(c)).collect());
            }
        }
    }
    names
}

/// Each top-level module and the top-level modules it imports.
fn import_graph() -> BTreeMap<String, BTreeMap<String, Vec<PathBuf>>> {
    let mut graph: BTreeMap<String, BTreeMap<String, Vec<PathBuf>>> = BTreeMap::new();
    for (module, path) in sources() {
        let code = code_of(&fs::read_to_string(&path).unwrap());
        let top = module[0].clone();
        let imported = crate_imports(&code)
            .into_iter()
            .chain(super_imports(&code, &module));
        let edges = graph.entry(top.clone()).or_default();
        // `super::*` from a top-level file is its own tests' glob: no name.
        for name in imported.filter(|name| !name.is_empty() && *name != top) {
            edges.entry(name).or_default().push(path.clone());
        }
    }
    graph
}

#[test]
fn every_module_imports_only_what_it_may() {
    let allowed: BTreeMap<&str, &[&str]> = MAY_IMPORT.iter().copied().collect();
    let mut broken = Vec::new();
    for (module, imports) in import_graph() {
        let Some(may) = allowed.get(module.as_str()) else {
            broken.push(format!(
                "src/{module}: a new top-level module; give it a room and a line in MAY_IMPORT"
            ));
            continue;
        };
        for (imported, files) in imports {
            if !may.contains(&imported.as_str()) {
                broken.push(format!("{module} imports {imported} in {files:?}"));
            }
        }
    }
    assert!(broken.is_empty(), "{}", broken.join("\n"));
}

/// The top-level modules of crawlfleet that `code` names through `crawlfleet::`.
fn crawlfleet_uses(code: &str) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    for (at, _) in code.match_indices("crawlfleet::") {
        if at > 0 && is_ident(code[..at].chars().next_back().unwrap()) {
            continue; // `my_crawlfleet::` is another crate
        }
        let rest = &code[at + "crawlfleet::".len()..];
        if let Some(group) = rest.strip_prefix('{') {
            names.extend(top_of_group(group));
        } else {
            names.insert(rest.chars().take_while(|&c| is_ident(c)).collect());
        }
    }
    names
}

#[test]
fn each_tool_uses_only_what_it_may_of_the_fleet() {
    let crates = Path::new(env!("CARGO_MANIFEST_DIR")).join("crates");
    let allowed: BTreeMap<&str, &[&str]> = TOOLS_MAY_USE.iter().copied().collect();
    let mut broken = Vec::new();
    for entry in fs::read_dir(&crates).expect("crates/ readable") {
        let dir = entry.unwrap().path();
        let name = dir.file_name().unwrap().to_string_lossy().into_owned();
        let Some(may) = allowed.get(name.as_str()) else {
            broken.push(format!(
                "crates/{name}: a new tool; give it a line in TOOLS_MAY_USE"
            ));
            continue;
        };
        for path in rust_files(&dir.join("src")) {
            let code = code_of(&fs::read_to_string(&path).unwrap());
            for used in crawlfleet_uses(&code) {
                if !may.contains(&used.as_str()) {
                    broken.push(format!("crates/{name} uses crawlfleet::{used} in {path:?}"));
                }
            }
        }
    }
    assert!(broken.is_empty(), "{}", broken.join("\n"));
}

#[test]
fn the_rooms_never_import_one_another() {
    let rooms = ["api", "scheduler", "worker"];
    let graph = import_graph();
    for room in rooms {
        for other in rooms.iter().filter(|other| **other != room) {
            assert!(
                !graph[room].contains_key(*other),
                "{room} imports {other}: {:?}",
                graph[room][*other]
            );
        }
    }
}

/// Inside the worker, `fetch/` (one page) sits below `crawl/` (one attempt,
/// which fetches its pages): what both use (`CrawlError`, the site's pace,
/// kept sessions) lives beside them in `worker/`, and fetch never names crawl.
#[test]
fn the_workers_fetch_never_reaches_up_into_its_crawl() {
    for (module, path) in sources()
        .into_iter()
        .filter(|(m, _)| m.len() >= 2 && m[0] == "worker" && m[1] == "fetch")
    {
        let code = code_of(&fs::read_to_string(&path).unwrap());
        let names_crawl = code
            .match_indices("crawl::")
            .any(|(at, _)| at == 0 || !is_ident(code[..at].chars().next_back().unwrap()));
        assert!(
            !names_crawl,
            "{} imports from worker::crawl",
            module.join("::")
        );
    }
}

#[test]
fn the_domain_does_no_io() {
    for (module, path) in sources().into_iter().filter(|(m, _)| m[0] == "domain") {
        let code = code_of(&fs::read_to_string(&path).unwrap());
        for io in IO_CRATES {
            let used = code.match_indices(&format!("{io}::")).any(|(at, _)| {
                at == 0
                    || !is_ident(code[..at].chars().next_back().unwrap())
                        && !code[..at].ends_with("::")
            });
            assert!(!used, "{} uses {io}", module.join("::"));
        }
    }
}

#[test]
fn the_top_level_modules_import_one_another_without_a_cycle() {
    let graph = import_graph();
    // Depth-first search; a module met again while on the path closes a cycle.
    fn visit<'a>(
        module: &'a str,
        graph: &'a BTreeMap<String, BTreeMap<String, Vec<PathBuf>>>,
        path: &mut Vec<&'a str>,
        done: &mut BTreeSet<&'a str>,
    ) {
        if let Some(at) = path.iter().position(|m| *m == module) {
            panic!("import cycle: {} -> {module}", path[at..].join(" -> "));
        }
        if !done.insert(module) {
            return;
        }
        path.push(module);
        for next in graph.get(module).into_iter().flat_map(|edges| edges.keys()) {
            visit(next, graph, path, done);
        }
        path.pop();
    }
    let mut done = BTreeSet::new();
    for module in graph.keys() {
        visit(module, &graph, &mut Vec::new(), &mut done);
    }
}

#[test]
fn the_import_reader_sees_every_form_of_import() {
    let code = code_of(
        "use crate::{\n    api::x, // crate::worker in a comment\n    store::{self, y},\n};\n\
         let u = \"http://crate::nothing\";\nfn f() { crate::ops::metrics(); }\n",
    );
    assert_eq!(
        crate_imports(&code),
        ["api", "ops", "store"].map(String::from).into()
    );
    let module = ["worker".to_owned(), "crawl".to_owned()];
    assert_eq!(
        super_imports("use super::super::api::x; use super::pages;", &module),
        ["api".to_owned()].into()
    );
    assert!(super_imports("use super::pages;", &module).is_empty());
}

/// docs/architecture.md, the map a newcomer reads first.
fn architecture_doc() -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/architecture.md");
    fs::read_to_string(&path).unwrap_or_else(|e| panic!("reading {}: {e}", path.display()))
}

/// The module map: the lines of docs/architecture.md's code block that
/// starts with `src/`, that line excluded.
fn module_map(doc: &str) -> Vec<&str> {
    let mut lines = doc.lines();
    while let Some(line) = lines.next() {
        if line.trim_start().starts_with("```") && lines.clone().next() == Some("src/") {
            lines.next();
            return lines
                .take_while(|l| !l.trim_start().starts_with("```"))
                .collect();
        }
    }
    panic!("docs/architecture.md has no module map (a code block starting with `src/`)")
}

/// The files under `src/` the module map names, as paths relative to `src/`.
///
/// The map is a tree by indentation: an entry starts at most two columns
/// right of the entry it sits in, and a line indented further continues the
/// entry above. An entry whose name (its text up to two spaces) is a single
/// `folder/` is a folder: file names on its lines, and the entries under it,
/// are read relative to it (`worker/` then `mod.rs`, or `browser/` then
/// `chrome.rs`, name `worker/mod.rs` and `worker/browser/chrome.rs`); any
/// other entry reads its names relative to the folder it sits in (`runs/mod.rs`
/// under `store/`). A name starting with `src/` is read from `src/`; names of
/// files in `tests/`, `benches/` or `examples/` are not the map's business.
fn named_in_map(map: &[&str]) -> BTreeSet<String> {
    // (indentation, folder) of the entries the current line may sit in.
    let mut open: Vec<(usize, String)> = vec![(0, String::new())];
    let mut folder = String::new();
    let mut named = BTreeSet::new();
    for line in map.iter().filter(|l| !l.trim().is_empty()) {
        let indent = line.len() - line.trim_start().len();
        if indent <= open.last().expect("the root stays").0 + 2 {
            while open.len() > 1 && open.last().expect("checked").0 >= indent {
                open.pop();
            }
            let parent = open.last().expect("the root stays").1.clone();
            let text = line.trim_start();
            let name = text.split("  ").next().unwrap_or_default().trim();
            folder = match name.ends_with('/') && !name.contains([' ', ',']) {
                true => format!("{parent}{name}"),
                false => parent,
            };
            open.push((indent, folder.clone()));
        }
        let tokens = line.split(|c: char| !(c.is_ascii_alphanumeric() || "_./-".contains(c)));
        for token in tokens.filter(|t| t.ends_with(".rs")) {
            if let Some(from_src) = token.strip_prefix("src/") {
                named.insert(from_src.to_owned());
            } else if !["tests/", "benches/", "examples/"]
                .iter()
                .any(|outside| token.starts_with(outside))
            {
                named.insert(format!("{folder}{token}"));
            }
        }
    }
    named
}

/// Every `.rs` file under `src/`, relative to `src/` (`worker/browser/chrome.rs`).
fn source_files() -> BTreeSet<String> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    sources()
        .into_iter()
        .map(|(_, path)| {
            let relative = path.strip_prefix(&root).expect("under src/");
            relative.to_string_lossy().replace('\\', "/")
        })
        .collect()
}

#[test]
fn the_module_map_names_every_source_file_and_only_those() {
    let doc = architecture_doc();
    let named = named_in_map(&module_map(&doc));
    let files = source_files();
    let mut wrong: Vec<String> = files
        .difference(&named)
        .map(|file| {
            format!(
                "src/{file} is not named in docs/architecture.md's module map: give it a line \
                 under its folder, or name it on its folder's line"
            )
        })
        .collect();
    wrong.extend(named.difference(&files).map(|gone| {
        format!(
            "docs/architecture.md's module map names src/{gone}, which does not exist: \
             rename or remove it there"
        )
    }));
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

/// The rows of the docs/architecture.md table under the line `header`: each
/// name of a row's first column and what its second column lets it import
/// (the names in backticks, outside parentheses; `nothing` is none).
fn doc_table(doc: &str, header: &str) -> Vec<(String, BTreeSet<String>)> {
    fn backticked(text: &str) -> BTreeSet<String> {
        text.split('`')
            .skip(1)
            .step_by(2)
            .map(str::to_owned)
            .collect()
    }
    fn outside_parentheses(text: &str) -> String {
        let mut depth = 0usize;
        let mut kept = String::new();
        for c in text.chars() {
            match c {
                '(' => depth += 1,
                ')' => depth = depth.saturating_sub(1),
                _ if depth == 0 => kept.push(c),
                _ => {}
            }
        }
        kept
    }
    let mut lines = doc.lines().skip_while(|l| l.trim() != header);
    lines
        .next()
        .unwrap_or_else(|| panic!("docs/architecture.md has no `{header}` table"));
    let mut rows = Vec::new();
    for line in lines.take_while(|l| l.trim_start().starts_with('|')) {
        let cells: Vec<&str> = line.split('|').collect();
        if cells.len() < 3 || cells[1].trim().starts_with('-') {
            continue;
        }
        let may = backticked(&outside_parentheses(cells[2]));
        for module in backticked(cells[1]) {
            rows.push((module, may.clone()));
        }
    }
    rows
}

/// Where the docs/architecture.md table under `header` and the constant
/// `constant` (`rules`) differ, in words.
fn table_differences(header: &str, constant: &str, rules: &[(&str, &[&str])]) -> Vec<String> {
    let doc = architecture_doc();
    let mut documented: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    let mut wrong = Vec::new();
    for (name, may) in doc_table(&doc, header) {
        if documented.insert(name.clone(), may).is_some() {
            wrong.push(format!(
                "`{name}` has two rows in docs/architecture.md's `{header}` table"
            ));
        }
    }
    let code: BTreeMap<String, BTreeSet<String>> = rules
        .iter()
        .map(|(name, may)| {
            (
                name.to_string(),
                may.iter().map(|m| m.to_string()).collect(),
            )
        })
        .collect();
    for name in code
        .keys()
        .chain(documented.keys())
        .collect::<BTreeSet<_>>()
    {
        match (code.get(name), documented.get(name)) {
            (Some(may), None) => wrong.push(format!(
                "`{name}` may import {may:?} ({constant}), but docs/architecture.md's `{header}` \
                 table has no row for it"
            )),
            (None, Some(_)) => wrong.push(format!(
                "docs/architecture.md's `{header}` table has a row for `{name}`, which {constant} \
                 does not have"
            )),
            (Some(may), Some(said)) if may != said => wrong.push(format!(
                "`{name}`: docs/architecture.md's `{header}` table says {said:?}, {constant} says {may:?}"
            )),
            _ => {}
        }
    }
    wrong
}

#[test]
fn the_import_table_of_the_architecture_doc_is_may_import() {
    let wrong = table_differences("| module | may import |", "MAY_IMPORT", MAY_IMPORT);
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

#[test]
fn the_tools_table_of_the_architecture_doc_is_tools_may_use() {
    let wrong = table_differences(
        "| tool | may use of crawlfleet |",
        "TOOLS_MAY_USE",
        TOOLS_MAY_USE,
    );
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

#[test]
fn the_module_map_reader_follows_folders_and_entries() {
    let map = [
        "  main.rs             parses Config",
        "  store/              all SQL",
        "    runs/mod.rs       queue_for_keyword, list (tests/it/listing.rs)",
        "    sites/, keywords.rs   the other tables",
        "  worker/             mod.rs (lanes), scale_in.rs",
        "                      page_cpu.rs (a continuation of worker/'s line)",
        "    browser/          Chrome: BrowserPool (mod.rs), chrome.rs;",
        "                      `src/ops/tls.rs` by its full path",
        "    preview.rs        a site preview",
    ];
    let named: Vec<String> = named_in_map(&map).into_iter().collect();
    assert_eq!(
        named,
        [
            "main.rs",
            "ops/tls.rs",
            "store/keywords.rs",
            "store/runs/mod.rs",
            "worker/browser/chrome.rs",
            "worker/browser/mod.rs",
            "worker/mod.rs",
            "worker/page_cpu.rs",
            "worker/preview.rs",
            "worker/scale_in.rs",
        ]
    );
}
