//! Detail pages: a list field holds each item's detail URL, and more fields
//! are read there and merged into the item. Which detail pages a run reads
//! is the site's `read` setting, judged against what the store knows of the
//! item, so a re-run does not fetch what it already knows.

use std::collections::BTreeMap;

use chrono::{DateTime, TimeDelta, Utc};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use utoipa::ToSchema;

use super::{
    SiteSpec,
    extraction::{
        self, Extraction, FieldInput, FieldSpec, HtmlItems, item_field_names, parse_fields,
        parse_html_field,
    },
    locator::CssSelector,
    render::RenderMode,
};
use crate::domain::paging::Paging;
use crate::domain::{FieldError, text};

/// Longest interval of `every_hours`: a year.
pub const MAX_EVERY_HOURS: u32 = 24 * 366;
/// Detail pages a site preview reads at most.
pub const PREVIEW_DETAIL_PAGES: usize = 3;
/// The element of a detail page its fields are read inside: the whole page.
const DETAIL_ITEM: &str = "html";

/// Detail pages as a client sends them.
#[derive(Debug, Clone, Default, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct DetailInput {
    /// The list field (a URL: `link: true` or `attr: "href"`) holding the
    /// item's detail page.
    pub url_field: String,
    /// The fields read on the detail page, as list fields are written
    /// (`selector`/`attr`, `structured` with the type first, value rules);
    /// their names are not the list's. The element is the whole page.
    pub fields: BTreeMap<String, FieldInput>,
    /// Element to wait for (up to 10 s) before reading a detail page (browser).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wait_for: Option<String>,
    /// `browser` (a browser site only) or `http`; default: the site's mode
    /// (`http` for a JSON API).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub render: Option<String>,
    /// Which items' detail pages a run reads: `"new"` (never read yet),
    /// `"new_or_changed"` (default: never read, or the list values changed),
    /// `"all"`, or `{"every_hours": N}` (not read in the last N hours).
    /// An item not read keeps the detail values it has.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Object>)]
    pub read: Option<Value>,
}

/// Which detail pages a run reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DetailRead {
    /// Items whose detail page was never read.
    New,
    /// Those, and items whose list values changed since.
    NewOrChanged,
    /// Every item, every run.
    All,
    /// Items whose detail page was not read in the last N hours.
    EveryHours(u32),
}

/// Detail pages that passed every rule.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DetailSpec {
    pub url_field: String,
    pub fields: BTreeMap<String, FieldSpec>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wait_for: Option<CssSelector>,
    pub render: RenderMode,
    pub read: DetailRead,
}

/// What the store knows of an item whose detail page may be read.
#[derive(Debug, Clone, PartialEq)]
pub struct KnownDetail {
    /// Its fields as stored: the list's and the detail page's.
    pub fields: Value,
    /// When its detail page was last read (`None`: never).
    pub detail_read_at: Option<DateTime<Utc>>,
}

impl DetailSpec {
    /// The fields its detail pages give an item: its own, and the currency
    /// fields their number rules fill.
    pub fn value_names(&self) -> Vec<String> {
        item_field_names(&self.fields)
    }

    /// How a detail page is read: its fields inside the whole page, and the
    /// site's blocked selector.
    pub fn extraction(&self, blocked_selector: Option<CssSelector>) -> Extraction {
        Extraction::Html {
            items: HtmlItems::Selector(
                CssSelector::parse(DETAIL_ITEM, "detail").expect("the page's root parses"),
            ),
            fields: self.fields.clone(),
            wait_for: self.wait_for.clone(),
            blocked_selector,
        }
    }

    /// The detail URL in an item's list fields, if it has one to follow.
    pub fn url_in(&self, list_fields: &Value) -> Option<url::Url> {
        let url = list_fields.get(&self.url_field)?.as_str()?;
        url::Url::parse(url)
            .ok()
            .filter(|url| matches!(url.scheme(), "http" | "https"))
    }

    /// Whether a run reads the detail page of an item whose list fields are
    /// `list_fields`, at `now`, given what the store knows of it.
    pub fn wants(
        &self,
        known: Option<&KnownDetail>,
        list_fields: &Value,
        now: DateTime<Utc>,
    ) -> bool {
        let Some(known) = known else {
            return true;
        };
        let Some(read_at) = known.detail_read_at else {
            return true;
        };
        match self.read {
            DetailRead::All => true,
            DetailRead::New => false,
            DetailRead::NewOrChanged => self.list_part(&known.fields) != *list_fields,
            DetailRead::EveryHours(hours) => now - read_at >= TimeDelta::hours(i64::from(hours)),
        }
    }

    /// The item's list fields with `detail_values` (what its detail page
    /// gave, or what it kept from the last read) merged in; a detail field
    /// with no value is null.
    pub fn merge(&self, list_fields: &Value, detail_values: Option<&Value>) -> Value {
        let mut merged = list_fields.as_object().cloned().unwrap_or_default();
        for name in self.value_names() {
            let value = detail_values
                .and_then(|values| values.get(&name))
                .cloned()
                .unwrap_or(Value::Null);
            merged.insert(name, value);
        }
        Value::Object(merged)
    }

    /// Stored fields without the detail page's: the list's part.
    fn list_part(&self, stored: &Value) -> Value {
        let names = self.value_names();
        let list: Map<String, Value> = stored
            .as_object()
            .map(|fields| {
                fields
                    .iter()
                    .filter(|(name, _)| !names.contains(name))
                    .map(|(name, value)| (name.clone(), value.clone()))
                    .collect()
            })
            .unwrap_or_default();
        Value::Object(list)
    }
}

impl SiteSpec {
    /// The site as it reads its detail pages, when it has them: their
    /// fields inside the whole page (the site's blocked selector still
    /// meaning a refusal), no paging, no actions, in their render mode.
    pub fn detail_page_spec(&self) -> Option<SiteSpec> {
        let detail = self.detail.as_ref()?;
        let blocked = match &self.extraction {
            Extraction::Html {
                blocked_selector, ..
            } => blocked_selector.clone(),
            Extraction::Json { .. } => None,
        };
        Some(SiteSpec {
            render: detail.render,
            extraction: detail.extraction(blocked),
            paging: Paging::Numbered,
            actions: Vec::new(),
            expect_items: false,
            detail: None,
            ..self.clone()
        })
    }
}

impl DetailInput {
    /// Checks every rule, for a site in `render` mode whose list fields are
    /// `list_fields`; an error names its field under `detail.`.
    pub fn parse(
        self,
        render: RenderMode,
        list_fields: &BTreeMap<String, FieldSpec>,
    ) -> Result<DetailSpec, FieldError> {
        self.parse_inner(render, list_fields).map_err(|e| {
            if e.field.starts_with("detail") {
                e
            } else {
                FieldError::new(format!("detail.{}", e.field), e.message)
            }
        })
    }

    fn parse_inner(
        self,
        site_render: RenderMode,
        list_fields: &BTreeMap<String, FieldSpec>,
    ) -> Result<DetailSpec, FieldError> {
        let url_field = text::non_empty(&self.url_field, "url_field", extraction::MAX_NAME_CHARS)?;
        match list_fields.get(url_field) {
            Some(field) if field.is_item_url() => {}
            Some(_) => {
                return Err(FieldError::new(
                    "url_field",
                    format!(
                        "{url_field:?} is not read as a URL: give it `link: true` or `attr: \"href\"`"
                    ),
                ));
            }
            None => {
                let names: Vec<&str> = list_fields.keys().map(String::as_str).collect();
                return Err(FieldError::new(
                    "url_field",
                    format!(
                        "{url_field:?} is not one of the site's fields ({})",
                        names.join(", ")
                    ),
                ));
            }
        }
        let render = match self.render.as_deref() {
            None if site_render == RenderMode::Json => RenderMode::Http,
            None => site_render,
            Some(mode) => RenderMode::parse(mode)?,
        };
        match (site_render, render) {
            (_, RenderMode::Json) => {
                return Err(FieldError::new(
                    "render",
                    "a detail page is HTML: \"http\" or \"browser\"",
                ));
            }
            (RenderMode::Http | RenderMode::Json, RenderMode::Browser) => {
                return Err(FieldError::new(
                    "render",
                    "\"browser\" detail pages need a browser site; use \"http\"",
                ));
            }
            _ => {}
        }
        for (name, field) in &self.fields {
            if field.required == Some(true) {
                return Err(FieldError::new(
                    format!("fields.{name}.required"),
                    "is for list fields: an item is kept whatever its detail page holds",
                ));
            }
        }
        let fields = parse_fields(self.fields, |name, input| {
            parse_html_field(name, input, None)
        })?;
        let taken = item_field_names(list_fields);
        for (name, field) in &fields {
            if taken.contains(name) {
                return Err(FieldError::new(
                    format!("fields.{name}"),
                    format!("{name:?} is already a list field: a detail field has its own name"),
                ));
            }
            if let Some(currency) = field.currency_field()
                && taken.iter().any(|t| t == currency)
            {
                return Err(FieldError::new(
                    format!("fields.{name}.number.currency_field"),
                    format!("{currency:?} is already a list field"),
                ));
            }
        }
        let wait_for = self
            .wait_for
            .map(|s| CssSelector::parse(&s, "wait_for"))
            .transpose()?;
        Ok(DetailSpec {
            url_field: url_field.to_owned(),
            fields,
            wait_for,
            render,
            read: parse_read(self.read)?,
        })
    }
}

/// `read` as a client writes it.
fn parse_read(read: Option<Value>) -> Result<DetailRead, FieldError> {
    const NAMES: &str = "\"new\", \"new_or_changed\", \"all\" or {\"every_hours\": N}";
    let Some(read) = read else {
        return Ok(DetailRead::NewOrChanged);
    };
    match &read {
        Value::String(name) => match name.as_str() {
            "new" => Ok(DetailRead::New),
            "new_or_changed" => Ok(DetailRead::NewOrChanged),
            "all" => Ok(DetailRead::All),
            _ => Err(FieldError::new("read", format!("must be {NAMES}"))),
        },
        Value::Object(object) if object.len() == 1 && object.contains_key("every_hours") => {
            match object["every_hours"].as_u64() {
                Some(hours) if (1..=u64::from(MAX_EVERY_HOURS)).contains(&hours) => {
                    Ok(DetailRead::EveryHours(hours as u32))
                }
                _ => Err(FieldError::new(
                    "read.every_hours",
                    format!("must be a whole number of hours from 1 to {MAX_EVERY_HOURS}"),
                )),
            }
        }
        _ => Err(FieldError::new("read", format!("must be {NAMES}"))),
    }
}

impl DetailSpec {
    /// The spec as a client writes it.
    pub fn read_input(&self) -> Value {
        serde_json::to_value(self.read).expect("a read setting serializes")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn list_fields() -> BTreeMap<String, FieldSpec> {
        let input: BTreeMap<String, FieldInput> = serde_json::from_value(json!({
            "title": {"selector": "a"},
            "url": {"selector": "a", "attr": "href"},
            "thumb": {"selector": "img", "attr": "src"},
            "price": {"selector": ".p", "number": {"currency_field": "currency"}}
        }))
        .unwrap();
        parse_fields(input, |name, input| parse_html_field(name, input, None)).unwrap()
    }

    fn detail(body: Value) -> Result<DetailSpec, FieldError> {
        let mut base = json!({"url_field": "url", "fields": {"sku": {"selector": ".sku"}}});
        for (k, v) in body.as_object().unwrap() {
            base[k] = v.clone();
        }
        serde_json::from_value::<DetailInput>(base)
            .unwrap()
            .parse(RenderMode::Http, &list_fields())
    }

    #[test]
    fn bad_detail_settings_name_their_field_under_detail() {
        for (body, at) in [
            (json!({"url_field": "nope"}), "detail.url_field"),
            (json!({"url_field": "thumb"}), "detail.url_field"),
            (json!({"url_field": "title"}), "detail.url_field"),
            (json!({"fields": {}}), "detail.fields"),
            (
                json!({"fields": {"sku": {"selector": "a["}}}),
                "detail.fields.sku.selector",
            ),
            (
                json!({"fields": {"title": {"selector": "h1"}}}),
                "detail.fields.title",
            ),
            (
                json!({"fields": {"currency": {"selector": "h1"}}}),
                "detail.fields.currency",
            ),
            (
                json!({"fields": {"w": {"selector": "h1", "number": {"currency_field": "title"}}}}),
                "detail.fields.w.number.currency_field",
            ),
            (
                json!({"fields": {"sku": {"selector": ".sku", "required": true}}}),
                "detail.fields.sku.required",
            ),
            (
                json!({"fields": {"sku": {"pointer": "/sku"}}}),
                "detail.fields.sku.pointer",
            ),
            (json!({"read": "sometimes"}), "detail.read"),
            (
                json!({"read": {"every_hours": 0}}),
                "detail.read.every_hours",
            ),
            (
                json!({"read": {"every_hours": "6"}}),
                "detail.read.every_hours",
            ),
            (json!({"read": {"every_hours": 6, "x": 1}}), "detail.read"),
            (json!({"read": 6}), "detail.read"),
            (json!({"render": "browser"}), "detail.render"),
            (json!({"render": "json"}), "detail.render"),
            (json!({"wait_for": "div["}), "detail.wait_for"),
        ] {
            assert_eq!(detail(body.clone()).unwrap_err().field, at, "{body}");
        }
    }

    #[test]
    fn detail_settings_default_to_new_or_changed_in_the_sites_mode() {
        let spec = detail(json!({})).unwrap();
        assert_eq!(spec.read, DetailRead::NewOrChanged);
        assert_eq!(spec.render, RenderMode::Http);
        let spec = detail(json!({"read": {"every_hours": 6}})).unwrap();
        assert_eq!(spec.read, DetailRead::EveryHours(6));
        assert_eq!(spec.read_input(), json!({"every_hours": 6}));
        assert_eq!(
            detail(json!({"read": "all"})).unwrap().read,
            DetailRead::All
        );
        let input: DetailInput =
            serde_json::from_value(json!({"url_field": "url", "fields": {"sku": {}}})).unwrap();
        let on_json = input.parse(RenderMode::Json, &list_fields()).unwrap();
        assert_eq!(on_json.render, RenderMode::Http);
    }

    #[test]
    fn which_detail_pages_are_read_follows_the_setting() {
        let now = Utc::now();
        let list = json!({"title": "A", "url": "http://shop/p/1"});
        let stored = json!({"title": "A", "url": "http://shop/p/1", "sku": "S1"});
        let known = |fields: &Value, hours_ago: Option<i64>| KnownDetail {
            fields: fields.clone(),
            detail_read_at: hours_ago.map(|h| now - TimeDelta::hours(h)),
        };
        let changed = json!({"title": "A", "url": "http://shop/p/1", "sku": "S1", "x": 1});
        let with = |read| DetailSpec {
            read,
            ..detail(json!({})).unwrap()
        };
        for (read, unknown, never, same, list_changed, old) in [
            (DetailRead::New, true, true, false, false, false),
            (DetailRead::NewOrChanged, true, true, false, true, false),
            (DetailRead::All, true, true, true, true, true),
            (DetailRead::EveryHours(6), true, true, false, false, true),
        ] {
            let spec = with(read);
            assert_eq!(spec.wants(None, &list, now), unknown, "{read:?}");
            assert_eq!(spec.wants(Some(&known(&stored, None)), &list, now), never);
            assert_eq!(spec.wants(Some(&known(&stored, Some(1))), &list, now), same);
            assert_eq!(
                spec.wants(Some(&known(&changed, Some(1))), &list, now),
                list_changed,
                "{read:?}"
            );
            assert_eq!(spec.wants(Some(&known(&stored, Some(7))), &list, now), old);
        }
    }

    #[test]
    fn detail_values_merge_into_the_list_fields_and_missing_ones_are_null() {
        let spec = detail(json!({"fields": {"sku": {}, "weight": {"number": {}}}})).unwrap();
        let list = json!({"title": "A", "url": "http://shop/p/1"});
        let merged = spec.merge(&list, Some(&json!({"sku": "S1", "other": 1})));
        assert_eq!(
            merged,
            json!({"title": "A", "url": "http://shop/p/1", "sku": "S1", "weight": null})
        );
        assert_eq!(spec.url_in(&list).unwrap().as_str(), "http://shop/p/1");
        assert_eq!(spec.url_in(&json!({"url": "javascript:alert(1)"})), None);
        assert_eq!(spec.url_in(&json!({"url": null})), None);
    }
}
