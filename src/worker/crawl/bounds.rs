//! The crawl bounds (`domain::bounds`) applied to a page's items as every
//! render mode extracted them, before anything is stored or shown: the items
//! past the page's bound dropped, URL fields that are not http(s) dropped,
//! long values cut; each counted in the attempt's [`BoundsReport`] and in
//! `crawlfleet_bounds_applied_total`.

use std::collections::BTreeMap;

use serde_json::Value;

use crate::{
    config::CrawlBoundsSettings,
    domain::{
        bounds::{Bound, BoundsReport, CrawlBounds, cut_to_chars, is_web_url},
        item::PageItem,
        site::FieldSpec,
        value::MAX_LIST_VALUES,
    },
    ops::metrics::metrics,
    worker::extract::page_item,
};

/// The bounds the worker's settings give; each at least 1 (a bound of 0
/// would store nothing).
pub fn from_settings(settings: &CrawlBoundsSettings) -> CrawlBounds {
    CrawlBounds {
        field_chars: settings.field_max_chars.max(1),
        page_items: settings.page_max_items.max(1),
        run_items: settings.run_max_items.max(1),
        page_bytes: settings.page_max_bytes.max(1),
    }
}

/// One page's items within `bounds`; what was left out goes to `report`.
pub fn bound_page(
    mut items: Vec<PageItem>,
    specs: &BTreeMap<String, FieldSpec>,
    bounds: &CrawlBounds,
    report: &mut BoundsReport,
) -> Vec<PageItem> {
    if items.len() > bounds.page_items {
        items.truncate(bounds.page_items);
        report.pages_cut += 1;
        metrics().count_bound(Bound::PageItems, 1);
    }
    items
        .into_iter()
        .map(|item| bound_item(item, specs, bounds, report))
        .collect()
}

/// The items of a run that fit in its bound, `kept` items being stored
/// already; `true` when some were left out (and paging must stop).
pub fn bound_run(
    items: &mut Vec<PageItem>,
    kept: usize,
    bounds: &CrawlBounds,
    report: &mut BoundsReport,
) -> bool {
    let room = bounds.run_items.saturating_sub(kept);
    if items.len() <= room {
        return false;
    }
    report.run_items_dropped += (items.len() - room) as u64;
    items.truncate(room);
    metrics().count_bound(Bound::RunItems, 1);
    true
}

/// One item with its URL fields http(s) or null and its values within the
/// field bound; rebuilt (item URL, content hash) only when something changed.
fn bound_item(
    item: PageItem,
    specs: &BTreeMap<String, FieldSpec>,
    bounds: &CrawlBounds,
    report: &mut BoundsReport,
) -> PageItem {
    let Value::Object(mut fields) = item.fields else {
        return item;
    };
    let mut changed = false;
    for (name, value) in fields.iter_mut() {
        let spec = specs.get(name);
        if let Value::Array(list) = value
            && spec.is_some_and(|s| s.rules.all)
        {
            let link = spec.is_some_and(FieldSpec::is_link);
            changed |= bound_list(name, list, link, bounds, report);
            continue;
        }
        if spec.is_some_and(FieldSpec::is_link) {
            // A link is kept whole or not at all: a cut URL is another URL.
            let dropped = match value.as_str() {
                _ if value.is_null() => None,
                Some(url) if is_web_url(url) => {
                    cut_to_chars(url, bounds.field_chars).map(|_| Bound::FieldChars)
                }
                _ => Some(Bound::UrlScheme),
            };
            if let Some(bound) = dropped {
                *value = Value::Null;
                *report.urls_dropped.entry(name.clone()).or_default() += 1;
                metrics().count_bound(bound, 1);
                changed = true;
            }
            continue;
        }
        if let Some(cut) = cut_value(value, bounds.field_chars) {
            *value = Value::String(cut);
            *report.fields_cut.entry(name.clone()).or_default() += 1;
            metrics().count_bound(Bound::FieldChars, 1);
            changed = true;
        }
    }
    match changed {
        true => page_item(fields, specs),
        false => PageItem {
            fields: Value::Object(fields),
            ..item
        },
    }
}

/// A list field (`all`) within the bounds, still a list: its links that are
/// not http(s) (or longer than the field bound) dropped one by one, then at
/// most [`MAX_LIST_VALUES`] values whose texts together fit the field bound
/// (the one that crosses it cut). Whether anything changed.
fn bound_list(
    name: &str,
    list: &mut Vec<Value>,
    link: bool,
    bounds: &CrawlBounds,
    report: &mut BoundsReport,
) -> bool {
    let before = list.len();
    if link {
        list.retain(|v| {
            v.as_str().is_some_and(|url| {
                is_web_url(url) && cut_to_chars(url, bounds.field_chars).is_none()
            })
        });
        let dropped = (before - list.len()) as u64;
        if dropped > 0 {
            *report.urls_dropped.entry(name.to_owned()).or_default() += dropped;
            metrics().count_bound(Bound::UrlScheme, dropped);
        }
    }
    let mut room = bounds.field_chars;
    let mut kept = 0;
    let mut cut = list.len() > MAX_LIST_VALUES;
    for value in list.iter_mut().take(MAX_LIST_VALUES) {
        if room == 0 {
            cut = true;
            break;
        }
        if let Value::String(text) = value {
            match cut_to_chars(text, room) {
                Some(part) if !link => {
                    *value = Value::String(part.to_owned());
                    room = 0;
                    cut = true;
                }
                // A cut URL is another URL: one that does not fit is left out.
                Some(_) => {
                    cut = true;
                    break;
                }
                None => room -= text.chars().count(),
            }
        }
        kept += 1;
    }
    list.truncate(kept);
    if cut {
        *report.fields_cut.entry(name.to_owned()).or_default() += 1;
        metrics().count_bound(Bound::FieldChars, 1);
    }
    cut || list.len() != before
}

/// A value longer than `max` characters, cut there: text is cut as it is;
/// a list or an object (a JSON API's field) is kept as its JSON text, cut.
fn cut_value(value: &Value, max: usize) -> Option<String> {
    match value {
        Value::String(text) => cut_to_chars(text, max).map(str::to_owned),
        Value::Array(_) | Value::Object(_) => {
            let text = value.to_string();
            cut_to_chars(&text, max).map(str::to_owned)
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use serde_json::{Map, json};

    use super::*;
    use crate::domain::site::CssSelector;

    fn specs() -> BTreeMap<String, FieldSpec> {
        let field = |attr: Option<&str>| FieldSpec {
            selector: Some(CssSelector::parse("a", "x").unwrap()),
            attr: attr.map(str::to_owned),
            pointer: None,
            link: false,
            structured: None,
            rules: Default::default(),
        };
        BTreeMap::from([
            ("title".to_owned(), field(None)),
            ("link".to_owned(), field(Some("href"))),
            ("image".to_owned(), field(Some("src"))),
        ])
    }

    fn item(fields: Value) -> PageItem {
        let Value::Object(map) = fields else {
            unreachable!()
        };
        page_item(map, &specs())
    }

    fn bounds() -> CrawlBounds {
        CrawlBounds {
            field_chars: 12,
            page_items: 3,
            run_items: 4,
            page_bytes: 1000,
        }
    }

    #[test]
    fn links_that_are_not_http_are_dropped_and_long_values_cut_and_both_counted() {
        let mut report = BoundsReport::new(bounds());
        let items = vec![
            item(
                json!({"title": "a title far too long", "link": "javascript:alert(1)", "image": "data:image/png;base64,AA"}),
            ),
            item(json!({"title": "ok", "link": "https://s.example/p/1", "image": null})),
            item(json!({"title": "ok", "link": "https://s.e", "image": "https://s.example/i.png"})),
        ];
        let kept = bound_page(items, &specs(), &bounds(), &mut report);
        assert_eq!(
            kept[0].fields,
            json!({"title": "a title far ", "link": null, "image": null})
        );
        assert_eq!(kept[0].item_url, None, "the item's URL goes with its link");
        let mut rebuilt = Map::new();
        rebuilt.insert("image".into(), Value::Null);
        rebuilt.insert("link".into(), Value::Null);
        rebuilt.insert("title".into(), json!("a title far "));
        assert_eq!(
            kept[0].content_hash,
            page_item(rebuilt, &specs()).content_hash,
            "hashed as stored"
        );
        assert_eq!(
            kept[1].item_url, None,
            "a link too long is not cut but dropped"
        );
        assert_eq!(kept[2].item_url.as_deref(), Some("https://s.e"));
        assert_eq!(report.fields_cut, BTreeMap::from([("title".to_owned(), 1)]));
        assert_eq!(
            report.urls_dropped,
            BTreeMap::from([("image".to_owned(), 2), ("link".to_owned(), 2)])
        );
        assert_eq!(report.pages_cut, 0);
    }

    #[test]
    fn a_page_keeps_its_first_items_and_a_run_stops_at_its_bound() {
        let mut report = BoundsReport::new(bounds());
        let page: Vec<PageItem> = (0..5)
            .map(|n| item(json!({"title": n.to_string(), "link": null, "image": null})))
            .collect();
        let mut kept = bound_page(page, &specs(), &bounds(), &mut report);
        assert_eq!(kept.len(), 3);
        assert_eq!(kept[2].fields["title"], "2");
        assert_eq!(report.pages_cut, 1);
        assert!(!bound_run(&mut kept, 1, &bounds(), &mut report));
        assert!(bound_run(&mut kept, 2, &bounds(), &mut report));
        assert_eq!(kept.len(), 2);
        assert_eq!(report.run_items_dropped, 1);
    }

    #[test]
    fn the_settings_default_to_the_domain_bounds() {
        assert_eq!(
            from_settings(&CrawlBoundsSettings::default()),
            CrawlBounds::default()
        );
    }

    #[test]
    fn a_list_field_stays_a_list_within_the_bounds() {
        let mut specs = specs();
        for name in ["title", "link"] {
            specs.get_mut(name).unwrap().rules.all = true;
        }
        let mut report = BoundsReport::new(bounds());
        let items = vec![page_item(
            serde_json::from_value(json!({
                "title": ["red", "green", "a blue too long"],
                "link": ["https://s.example/1", "javascript:x", "https://s.example/a-link-too-long"],
                "image": null
            }))
            .unwrap(),
            &specs,
        )];
        let kept = bound_page(items, &specs, &bounds(), &mut report);
        assert_eq!(
            kept[0].fields,
            json!({"title": ["red", "green", "a bl"], "link": [], "image": null}),
            "12 characters of text at most; each link whole or not at all"
        );
        assert_eq!(report.fields_cut["title"], 1);
        assert_eq!(report.urls_dropped["link"], 3);
        let many: Vec<Value> = (0..150).map(|_| json!("x")).collect();
        let mut list = many;
        let mut long = BoundsReport::new(CrawlBounds {
            field_chars: 1000,
            ..bounds()
        });
        assert!(bound_list(
            "tags",
            &mut list,
            false,
            &long.bounds.clone(),
            &mut long
        ));
        assert_eq!(list.len(), MAX_LIST_VALUES);
    }

    #[test]
    fn a_json_list_longer_than_the_bound_is_kept_as_its_text_cut() {
        assert_eq!(cut_value(&json!([1, 2, 3]), 4).as_deref(), Some("[1,2"));
        assert_eq!(cut_value(&json!(123456789), 4), None);
        assert_eq!(cut_value(&json!("abcd"), 4), None);
    }
}
