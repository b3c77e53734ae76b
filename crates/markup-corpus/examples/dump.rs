//! The corpus as JSON lines, one page a line, for tools that are not Rust
//! (scripts/bench-repair hands it to Scrapling and AutoScraper):
//!
//!   cargo run -p markup-corpus --example dump > corpus.jsonl
//!
//! Each line: the page's `name`, `layout`, change `kinds`, its `html` and
//! `items`, the same items in the layout's original markup (`before_html`,
//! `before_items`: the page as it was before its site changed it), the
//! `spec` that reads the original markup, and the `examples` learning is
//! given (the second and the second-to-last item's values, as the page
//! shows them) with the same items' values before the change
//! (`before_examples`).

use markup_corpus::{before, corpus};
use serde_json::{Value, json};

fn main() {
    for page in corpus() {
        let was = before(page.layout, page.seed);
        let n = page.items.len();
        let which = [1, n - 2];
        let spec = page.layout.spec();
        let fields: Vec<Value> = spec
            .fields
            .iter()
            .map(|f| json!({ "name": f.name, "selector": f.selector, "attr": f.attr }))
            .collect();
        let line = json!({
            "name": page.name(),
            "layout": format!("{:?}", page.layout),
            "kinds": page.changes.iter().map(|c| c.kind()).collect::<Vec<_>>(),
            "html": page.html,
            "items": page.items,
            "before_html": was.html,
            "before_items": was.items,
            "spec": { "item": spec.item, "fields": fields },
            "examples": page.examples(&which),
            "before_examples": was.examples(&which),
        });
        println!("{line}");
    }
}
