//! Property tests of everything crawlfleet parses from a client: site,
//! keyword and webhook bodies, URL list uploads, selectors, JSON pointers, structured-data
//! paths and types, fields' value rules (`values`), cron schedules, URL
//! templates and proxies, and the SSRF guard's judgement of addresses in every
//! notation. Any input gives `Ok` or a field error, never a panic (nor a
//! stack overflow, which would abort the whole binary).
//!
//! `scripts/test` runs a bounded number of cases (`FUZZ_CASES`, 256 by
//! default, about a minute in debug). A longer run:
//!
//!     FUZZ_CASES=20000 cargo test --release --test fuzz
//!
//! The seed of a failure is printed; proptest keeps it under
//! `tests/fuzz.proptest-regressions` so it is tried first ever after.

use std::{
    collections::BTreeMap,
    net::{IpAddr, Ipv4Addr, Ipv6Addr},
};

use chrono::TimeDelta;
use crawlfleet::{
    domain::{
        keyword::KeywordInput,
        schedule::CronSchedule,
        site::{
            CssSelector, JsonPointer, MAX_PATH_STEPS, ProxyUrl, SchemaType, SearchUrlTemplate,
            SiteInput, StructuredPath,
        },
        target,
        url_list::Upload,
        webhook::{WebhookEventType, WebhookInput, WebhookSecret},
    },
    net::target_guard::{Refused, TargetGuard},
};
use proptest::prelude::*;
use serde_json::{Value, json};

#[path = "fuzz/values.rs"]
mod values;

fn config() -> ProptestConfig {
    let cases = std::env::var("FUZZ_CASES")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(256);
    ProptestConfig {
        cases,
        failure_persistence: Some(Box::new(
            proptest::test_runner::FileFailurePersistence::WithSource("proptest-regressions"),
        )),
        ..ProptestConfig::default()
    }
}

/// Characters selectors, pointers and crons are made of, a few control
/// characters and non-ASCII letters among them.
const SYNTAX: &str = "abcxyzAZ019_-#.:,*>+~|^$=!@%&/\\'\"()[]{} \t\n\u{0}\u{1b}\u{7f}é노";

/// Text made of [`SYNTAX`]: closer to what parsers choke on than any string.
fn syntax(max: usize) -> impl Strategy<Value = String> {
    let chars: Vec<char> = SYNTAX.chars().collect();
    proptest::collection::vec(proptest::sample::select(chars), 0..max)
        .prop_map(|chars| chars.into_iter().collect())
}

/// Any text: arbitrary Unicode, or syntax-heavy.
fn text(max: usize) -> impl Strategy<Value = String> {
    prop_oneof![
        proptest::string::string_regex(&format!(".{{0,{max}}}")).unwrap(),
        syntax(max),
    ]
}

/// A selector: syntax, a real one, or one nested up to thousands deep.
fn selector() -> impl Strategy<Value = String> {
    prop_oneof![
        syntax(120),
        Just("li.product > a[href]".to_owned()),
        (
            0usize..4000,
            prop_oneof![Just(":is("), Just(":not("), Just("["), Just(":has(")]
        )
            .prop_map(|(depth, open)| {
                let close = if open == "[" { "]" } else { ")" };
                format!("{}a{}", open.repeat(depth), close.repeat(depth))
            }),
    ]
}

fn cron_field() -> impl Strategy<Value = String> {
    prop_oneof![
        Just("*".to_owned()),
        (0u32..70).prop_map(|n| n.to_string()),
        (1u32..70).prop_map(|n| format!("*/{n}")),
        (0u32..70, 0u32..70).prop_map(|(a, b)| format!("{a}-{b}")),
        (0u32..70, 0u32..70).prop_map(|(a, b)| format!("{a},{b}")),
        prop_oneof![
            Just("?"),
            Just("L"),
            Just("W"),
            Just("5#3"),
            Just("MON"),
            Just("JAN")
        ]
        .prop_map(str::to_owned),
        syntax(6),
    ]
}

/// A cron expression, 6 fields of cron syntax most of the time.
fn cron() -> impl Strategy<Value = String> {
    prop_oneof![
        4 => proptest::collection::vec(cron_field(), 6).prop_map(|fields| fields.join(" ")),
        1 => proptest::collection::vec(cron_field(), 0..9).prop_map(|fields| fields.join(" ")),
        1 => text(40),
    ]
}

/// Valid crons firing around the hours clocks change at (01:00-03:00).
fn near_dst_cron() -> impl Strategy<Value = String> {
    let pick = |options: &'static [&'static str]| proptest::sample::select(options);
    (
        pick(&["0", "30", "*/20", "59"]),
        pick(&["0", "30", "*/15", "*", "59", "0,30"]),
        pick(&["*", "1", "2", "3", "1,2", "2,3", "*/3", "0-4"]),
        pick(&["*", "1", "8", "1-10"]),
        pick(&["*", "3", "10,11", "4"]),
        pick(&["*", "SUN", "1-5"]),
    )
        .prop_map(|(s, m, h, dom, mon, dow)| format!("{s} {m} {h} {dom} {mon} {dow}"))
}

/// Zone names: real ones, near misses and anything.
fn zone() -> impl Strategy<Value = String> {
    prop_oneof![
        Just("UTC".to_owned()),
        Just("Asia/Seoul".to_owned()),
        Just("America/New_York".to_owned()),
        Just("asia/seoul".to_owned()),
        Just("Mars/Olympus".to_owned()),
        text(40),
    ]
}

fn value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        any::<f64>().prop_map(|f| json!(f)),
        text(60).prop_map(Value::from),
        selector().prop_map(Value::from),
    ];
    leaf.prop_recursive(3, 16, 4, |inner| {
        prop_oneof![
            proptest::collection::vec(inner.clone(), 0..4).prop_map(Value::from),
            proptest::collection::btree_map(text(12), inner, 0..4)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

/// A path into a page's structured data: syntax, real ones, dots, bars
/// and indexes in any number, or one step repeated far past the bounds.
fn structured_path() -> impl Strategy<Value = String> {
    let step = prop_oneof![
        Just("offers".to_owned()),
        Just("Product".to_owned()),
        Just("og:title".to_owned()),
        Just("@id".to_owned()),
        Just("0".to_owned()),
        Just("99999999999999999999".to_owned()),
        Just(String::new()),
        syntax(8),
    ];
    prop_oneof![
        syntax(60),
        Just("offers.price|offers.lowPrice".to_owned()),
        Just("Product.offers.0.price".to_owned()),
        proptest::collection::vec(
            prop_oneof![
                Just("offers.price"),
                Just("Product.name"),
                Just("og:title"),
                Just("name")
            ],
            1..8
        )
        .prop_map(|alternatives| alternatives.join("|")),
        proptest::collection::vec(
            (step, prop_oneof![Just("."), Just("|"), Just(" | ")]),
            0..20
        )
        .prop_map(|steps| steps
            .into_iter()
            .map(|(s, sep)| format!("{s}{sep}"))
            .collect()),
        (0usize..2000).prop_map(|n| "a.".repeat(n)),
    ]
}

/// A site body: every known key, each present or not, with well-typed
/// values mostly and anything sometimes.
fn site_body() -> impl Strategy<Value = Value> {
    let string = || prop_oneof![3 => selector(), 2 => text(80), 1 => Just("browser".to_owned())];
    let rules = (
        proptest::option::of(prop_oneof![Just("collapse".to_owned()), text(10)]),
        proptest::option::of(prop_oneof![Just(r"(\d+)".to_owned()), text(30)]),
        proptest::option::of(any::<bool>()),
        proptest::option::of(prop_oneof![
            Just(json!({"locale": "ko-KR", "currency_field": "currency"})),
            value(),
        ]),
        proptest::option::of(prop_oneof![
            Just(json!({"formats": ["%Y"], "time_zone": "UTC"})),
            value()
        ]),
        proptest::option::of(value()),
        proptest::option::of(any::<bool>()),
    );
    let field = (
        proptest::option::of(string()),
        proptest::option::of(string()),
        proptest::option::of(string()),
        proptest::option::of(any::<bool>()),
        rules,
        proptest::option::of(structured_path()),
    )
        .prop_map(
            |(
                selector,
                attr,
                pointer,
                link,
                (whitespace, regex, all, number, date, default, required),
                structured,
            )| {
                json!({"selector": selector, "attr": attr, "pointer": pointer, "link": link,
                   "whitespace": whitespace, "regex": regex, "all": all, "number": number,
                   "date": date, "default": default, "required": required,
                   "structured": structured})
            },
        )
        .boxed();
    let detail = proptest::option::of(
        (
            prop_oneof![Just("url".to_owned()), Just("title".to_owned()), text(12)],
            proptest::collection::btree_map(text(12), field.clone(), 0..3),
            proptest::option::of(selector()),
            proptest::option::of(prop_oneof![
                Just("browser".to_owned()),
                Just("http".to_owned()),
                text(10)
            ]),
            proptest::option::of(prop_oneof![
                Just(json!("new")),
                Just(json!("new_or_changed")),
                Just(json!("all")),
                Just(json!({"every_hours": 6})),
                any::<i64>().prop_map(|n| json!({"every_hours": n})),
                value(),
            ]),
        )
            .prop_map(|(url_field, fields, wait_for, render, read)| {
                json!({"url_field": url_field, "fields": fields, "wait_for": wait_for,
                       "render": render, "read": read})
            }),
    );
    (
        (
            text(40),
            prop_oneof![
                Just("https://shop.example/s?q={keyword}&p={page}".to_owned()),
                Just("https://shop.example/s?q={keyword}&start={offset}".to_owned()),
                text(60).prop_map(|t| format!("https://x.example/{{keyword}}{t}")),
                text(60),
            ],
            proptest::option::of(prop_oneof![
                Just("browser".to_owned()),
                Just("http".to_owned()),
                Just("json".to_owned()),
                text(10)
            ]),
            proptest::option::of(selector()),
            proptest::collection::btree_map(text(12), field, 0..4),
            proptest::option::of(selector()),
        ),
        (
            proptest::option::of(
                (string(), proptest::option::of(string()), proptest::option::of(text(20)))
                    .prop_map(|(items, next, param)| json!({"items": items, "next_token": next, "token_param": param})),
            ),
            proptest::option::of(any::<i32>()),
            proptest::option::of(any::<f64>()),
            proptest::option::of(proptest::collection::btree_map(text(20), text(40), 0..3)),
            proptest::option::of(prop_oneof![
                text(60),
                Just("http://u:p@proxy.example:3128".to_owned()),
                Just("socks5://[::1]:1080".to_owned()),
                text(30).prop_map(|t| format!("http://{t}@proxy.example:1")),
            ]),
            proptest::option::of(value()),
            proptest::option::of(prop_oneof![Just("Product".to_owned()), text(30)]),
            proptest::option::of(
                (
                    proptest::option::of(prop_oneof![
                        Just("numbered".to_owned()),
                        Just("offset".to_owned()),
                        Just("next_link".to_owned()),
                        Just("load_more".to_owned()),
                        Just("infinite_scroll".to_owned()),
                        text(16),
                    ]),
                    proptest::option::of(any::<i32>()),
                    proptest::option::of(string()),
                )
                    .prop_map(|(form, page_size, selector)| {
                        json!({"form": form, "page_size": page_size, "selector": selector})
                    }),
            ),
            proptest::option::of(proptest::collection::vec(
                (
                    prop_oneof![
                        Just("click".to_owned()),
                        Just("type".to_owned()),
                        Just("press".to_owned()),
                        Just("select".to_owned()),
                        Just("scroll".to_owned()),
                        Just("wait_for".to_owned()),
                        Just("wait".to_owned()),
                        Just("dismiss".to_owned()),
                        text(10),
                    ],
                    proptest::option::of(string()),
                    proptest::option::of(prop_oneof![Just("{keyword}".to_owned()), text(20)]),
                    proptest::option::of(prop_oneof![Just("Enter".to_owned()), text(8)]),
                    proptest::option::of(any::<i64>()),
                    proptest::option::of(any::<i64>()),
                )
                    .prop_map(|(action, selector, text, key, ms, timeout_ms)| {
                        json!({"action": action, "selector": selector, "text": text,
                               "key": key, "value": text, "ms": ms, "timeout_ms": timeout_ms})
                    }),
                0..24,
            )),
        ),
        detail,
    )
        .prop_map(
            |(
                (name, url, render, item, fields, wait),
                (json, pages, rate, headers, proxy, extra, structured_items, paging, actions),
                detail,
            )| {
                let mut body = json!({
                    "name": name, "search_url": url, "render": render, "item_selector": item,
                    "fields": fields, "wait_for": wait, "json": json, "max_pages": pages,
                    "max_requests_per_sec": rate, "headers": headers, "proxy": proxy,
                    "structured_items": structured_items, "paging": paging, "actions": actions,
                });
                if let Some(extra) = extra {
                    body["blocked_selector"] = extra;
                }
                if let Some(detail) = detail {
                    body["detail"] = detail;
                }
                body
            },
        )
}

/// Every string in a JSON value, keys included.
fn strings(value: &Value, out: &mut Vec<String>) {
    match value {
        Value::String(s) => out.push(s.clone()),
        Value::Array(items) => items.iter().for_each(|v| strings(v, out)),
        Value::Object(map) => map.iter().for_each(|(k, v)| {
            out.push(k.clone());
            strings(v, out)
        }),
        _ => {}
    }
}

proptest! {
    #![proptest_config(config())]

    /// A site body parses or names the field at fault; one with a control
    /// character anywhere never parses.
    #[test]
    fn site_bodies_parse_or_name_the_field(body in site_body()) {
        let Ok(input) = serde_json::from_value::<SiteInput>(body.clone()) else {
            return Ok(());
        };
        let mut texts = Vec::new();
        strings(&body, &mut texts);
        let has_control = texts.iter().any(|t| t.chars().any(char::is_control));
        match input.parse() {
            Ok(_) => prop_assert!(!has_control, "accepted a control character: {body}"),
            Err(e) => prop_assert!(!e.field.is_empty()),
        }
    }

    #[test]
    fn selectors_parse_or_are_refused_and_compile_when_accepted(s in selector()) {
        if let Ok(selector) = CssSelector::parse(&s, "item_selector") {
            prop_assert!(selector.compile("item_selector").is_ok(), "{s}");
            prop_assert!(!s.chars().any(char::is_control));
        }
    }

    /// A structured path parses or is refused naming its field; an
    /// accepted one has its bounded alternatives and steps, however read.
    #[test]
    fn structured_paths_parse_or_are_refused_and_read_within_their_bounds(
        path in structured_path(),
        item_type in prop_oneof![Just(None), Just(Some("Product")), Just(Some("offers"))],
        within_item in any::<bool>(),
    ) {
        let item_type = item_type.map(|t| SchemaType::parse(t, "structured_items").unwrap());
        match StructuredPath::parse(&path, "fields.x.structured", item_type.as_ref()) {
            Ok(parsed) => {
                prop_assert!(!path.chars().any(char::is_control));
                let alternatives: Vec<_> = parsed.alternatives(within_item).collect();
                prop_assert!((1..=4).contains(&alternatives.len()), "{path}");
                prop_assert!(alternatives.iter().all(|a| a.steps.len() <= MAX_PATH_STEPS), "{path}");
            }
            Err(e) => prop_assert_eq!(e.field, "fields.x.structured"),
        }
        if let Ok(t) = SchemaType::parse(&path, "structured_items") {
            let url = format!("https://schema.org/{}", t.as_str());
            prop_assert!(t.is_named_by(&url), "{}", url);
        }
    }

    #[test]
    fn json_pointers_parse_or_are_refused_and_find_safely(p in text(80)) {
        if let Ok(pointer) = JsonPointer::parse(&p, "json.items") {
            let doc = json!({"a": [{"b": 1}], "~": {"/": 2}});
            let _ = pointer.find(&doc);
        }
    }

    /// A schedule parses or is refused, its interval is found, and the
    /// minimum interval is kept; its jitter is shorter than that interval.
    #[test]
    fn schedules_parse_or_are_refused_and_keep_the_minimum(
        schedule in cron(),
        keyword in text(30),
        timezone in zone(),
        jitter_secs in prop_oneof![0i64..4000, any::<i64>()],
    ) {
        let _ = CronSchedule::parse(&schedule);
        let input = KeywordInput {
            keyword,
            site_ids: vec![1],
            schedule: schedule.clone(),
            timezone,
            jitter_secs,
            enabled: true,
            priority: 0,
        };
        if let Ok(spec) = input.parse(TimeDelta::seconds(60)) {
            let shortest = spec.schedule.shortest_interval(chrono::Utc::now()).unwrap();
            prop_assert!(shortest.is_none_or(|s| s >= TimeDelta::seconds(60)), "{schedule}");
            let jitter = TimeDelta::seconds(spec.schedule.jitter().secs().into());
            prop_assert!(shortest.is_none_or(|s| jitter < s), "{schedule} {jitter}");
        }
    }

    /// Any lines of an upload, valid URLs among bytes of every kind: each is
    /// taken, skipped or reported by its number, never a panic; every URL
    /// taken is an absolute http(s) URL without a fragment, within the bound,
    /// and no URL is taken twice.
    #[test]
    fn url_list_lines_are_taken_or_reported_by_number(
        lines in prop::collection::vec(prop_oneof![
            prop::collection::vec(any::<u8>(), 0..60),
            "(https?|ftp|javascript|file)://[a-z0-9.:@\\[\\]%#?/ -]{0,40}".prop_map(String::into_bytes),
            "https?://shop\\.test/[a-z]{0,3}(#[a-z]{0,3})?".prop_map(String::into_bytes),
        ], 0..40),
    ) {
        let mut upload = Upload::default();
        for line in &lines {
            prop_assert!(upload.push_line(line).is_ok());
        }
        let (urls, numbers) = upload.urls();
        let mut seen = std::collections::HashSet::new();
        for (url, line) in urls.iter().zip(numbers) {
            let parsed = url::Url::parse(url).unwrap();
            prop_assert!(matches!(parsed.scheme(), "http" | "https"), "{url}");
            prop_assert!(parsed.fragment().is_none() && url.len() <= 2048, "{url}");
            prop_assert!(seen.insert(url.clone()), "{url} twice");
            prop_assert!((1..=lines.len() as i32).contains(line));
        }
        for note in upload.refused.lines.iter().chain(&upload.duplicates.lines) {
            prop_assert!(note.line >= 1 && note.line as usize <= lines.len());
        }
    }

    /// Any schedule in a zone with daylight-saving changes, from up to two
    /// days before one of 2026's changes: its fires strictly follow one
    /// another, each is the start of its own period, and the jitter delays
    /// each by the same offset.
    #[test]
    fn fires_in_a_zone_never_repeat_and_start_their_period(
        schedule in prop_oneof![1 => cron(), 3 => near_dst_cron()],
        timezone in prop_oneof![Just("America/New_York"), Just("Europe/Berlin"), Just("Australia/Lord_Howe"), Just("Asia/Seoul")],
        change in proptest::sample::select(&[
            "2026-03-08T07:00:00Z", "2026-11-01T06:00:00Z", // New York
            "2026-03-29T01:00:00Z", "2026-10-25T01:00:00Z", // Berlin
            "2026-04-04T15:00:00Z", "2026-10-03T15:30:00Z", // Lord Howe (30 min)
        ][..]),
        before in 0i64..48 * 3600,
        jitter_secs in 0i64..60,
        id in 1i64..1000,
    ) {
        let Ok(spec) = crawlfleet::domain::schedule::KeywordSchedule::parse(&schedule, timezone, jitter_secs) else {
            return Ok(());
        };
        let from = chrono::DateTime::parse_from_rfc3339(change).unwrap().to_utc()
            - TimeDelta::seconds(before);
        let fires = spec.next_fires(id, from, 12);
        let offset = spec.jitter().offset_for(id);
        for pair in fires.windows(2) {
            prop_assert!(pair[0].at < pair[1].at, "{schedule} {timezone}: {pair:?}");
        }
        for fire in &fires {
            prop_assert!(fire.at > from);
            prop_assert_eq!(fire.at - fire.nominal, offset);
            prop_assert_eq!(spec.period_start(fire.nominal), Some(fire.nominal), "{} {}", schedule, timezone);
        }
    }

    #[test]
    fn url_templates_parse_or_are_refused_and_fill_in_any_keyword(
        template in prop_oneof![
            text(80),
            text(40).prop_map(|t| format!("http://s.example/{{keyword}}{t}{{page}}")),
            text(40).prop_map(|t| format!("http://s.example/{{keyword}}{t}{{offset}}")),
        ],
        keyword in text(40),
        page in any::<u32>(),
        offset in any::<u64>(),
    ) {
        if let Ok(template) = SearchUrlTemplate::parse(&template) {
            let _ = template.url_for(&keyword, page, offset);
            let _ = template.sample_url();
        }
    }

    /// A webhook endpoint parses or names the field at fault; an accepted
    /// secret reads back as itself and signs any body.
    #[test]
    fn webhook_endpoints_parse_or_name_the_field(
        url in prop_oneof![text(80), text(40).prop_map(|t| format!("https://hooks.example/{t}"))],
        events in proptest::collection::vec(
            prop_oneof![
                text(20),
                proptest::sample::select(WebhookEventType::ALL.map(WebhookEventType::as_str).to_vec())
                    .prop_map(str::to_owned),
            ],
            0..4,
        ),
        secret in proptest::option::of(prop_oneof![
            text(60),
            proptest::collection::vec(any::<u8>(), 0..80).prop_map(|key| {
                use base64::Engine as _;
                format!("whsec_{}", base64::engine::general_purpose::STANDARD.encode(key))
            }),
        ]),
        ids in proptest::collection::vec(any::<i64>(), 0..5),
        description in text(40),
        body in text(200),
    ) {
        let input = WebhookInput {
            url,
            events,
            site_ids: ids.clone(),
            keyword_ids: ids,
            secret,
            description,
            enabled: true,
        };
        match input.parse() {
            Ok(spec) => {
                prop_assert!(matches!(spec.url.scheme(), "http" | "https"));
                prop_assert!(!spec.events.is_empty());
                if let Some(secret) = spec.secret {
                    prop_assert_eq!(&WebhookSecret::parse(&secret.expose()).unwrap(), &secret);
                    prop_assert!(secret.sign("msg_1", 1, body.as_bytes()).starts_with("v1,"));
                }
            }
            Err(e) => prop_assert!(!e.field.is_empty()),
        }
    }

    #[test]
    fn proxies_parse_or_are_refused_and_never_show_their_credentials(
        user in text(12), password in text(12), host in text(20), port in any::<u16>(),
    ) {
        let raw = format!("http://{user}:{password}@{host}:{port}");
        if let Ok(proxy) = ProxyUrl::parse(&raw) {
            let shown = url::Url::parse(&proxy.masked()).unwrap();
            if proxy.credentials().is_some() {
                prop_assert_eq!(shown.username(), "***");
                prop_assert_eq!(shown.password(), Some("***"));
            }
            prop_assert_eq!(format!("{proxy:?}"), proxy.masked());
        }
    }

    /// An IPv4 address is judged the same whatever IPv6 form carries it to
    /// the network, and the mapped forms are never reachable.
    #[test]
    fn ipv4_is_judged_alike_in_every_ipv6_form(bits in any::<u32>()) {
        let v4 = Ipv4Addr::from(bits);
        let verdict = target::refusal(IpAddr::V4(v4));
        let [a, b, c, d] = v4.octets();
        let nat64 = Ipv6Addr::new(0x64, 0xff9b, 0, 0, 0, 0, u16::from_be_bytes([a, b]), u16::from_be_bytes([c, d]));
        let six_to_four = Ipv6Addr::new(0x2002, u16::from_be_bytes([a, b]), u16::from_be_bytes([c, d]), 0, 0, 0, 0, 1);
        prop_assert_eq!(target::refusal(IpAddr::V6(nat64)), verdict);
        prop_assert_eq!(target::refusal(IpAddr::V6(six_to_four)), verdict);
        prop_assert!(target::refusal(IpAddr::V6(v4.to_ipv6_mapped())).is_some());
        prop_assert!(target::refusal(IpAddr::V6(v4.to_ipv6_compatible())).is_some());
    }

    /// An address of each class, its other bits random, gets its class's
    /// verdict; and whatever the address, the classes the standard library
    /// knows as never global (loopback, unspecified, multicast, unique-local,
    /// link-local, IPv4-mapped) are refused.
    #[test]
    fn any_ipv6_address_is_judged(class in 0usize..6, bits in any::<u128>()) {
        // `prefix` over the top `len` bits, the random bits under them.
        let within = |prefix: u128, len: u32| Ipv6Addr::from(prefix | (bits >> len));
        let v4 = Ipv4Addr::from(bits as u32);
        let private_v4 = Ipv4Addr::new(10, (bits >> 8) as u8, (bits >> 16) as u8, bits as u8);
        let (address, expected) = match class {
            0 => (Ipv6Addr::LOCALHOST, Some("::1/128")),
            1 => (within(0xfe80 << 112, 10), Some("fe80::/10")),
            2 => {
                let address = within(0xfc00 << 112, 7);
                let metadata = "fd00:ec2::254".parse::<Ipv6Addr>().unwrap();
                (address, Some(if address == metadata { "fd00:ec2::254" } else { "fc00::/7" }))
            }
            // Mapped addresses are refused whatever IPv4 address they carry.
            3 => {
                let carried = if bits >> 127 == 1 { private_v4 } else { v4 };
                (carried.to_ipv6_mapped(), Some("::ffff:0:0/96"))
            }
            4 => (within(0xff00 << 112, 8), Some("ff00::/8")),
            // Global unicast clear of every special-purpose block: 2400::/6
            // (RIR allocations) up to, not into, 3fff::/20 (documentation).
            _ => {
                let first = 0x2400 + (bits >> 112) as u16 % (0x3fff - 0x2400);
                let mut segments = Ipv6Addr::from(bits).segments();
                segments[0] = first;
                (Ipv6Addr::from(segments), None)
            }
        };
        let verdict = target::refusal(IpAddr::V6(address)).map(|rule| rule.range);
        prop_assert_eq!(verdict, expected, "{}", address);

        let never_global = |a: Ipv6Addr| {
            a.is_loopback()
                || a.is_unspecified()
                || a.is_multicast()
                || a.is_unique_local()
                || a.is_unicast_link_local()
                || a.to_ipv4_mapped().is_some()
        };
        // The classes above, as the standard library sees them too.
        prop_assert_eq!(never_global(address), expected.is_some(), "{}", address);
        let any = Ipv6Addr::from(bits);
        if never_global(any) {
            prop_assert!(target::refusal(IpAddr::V6(any)).is_some(), "{} allowed", any);
        }
    }

    /// IP literals in every notation a URL allows are judged as the address
    /// they name, without a lookup (no name is ever resolved here).
    #[test]
    fn ip_literals_in_any_notation_are_judged_as_their_address(bits in any::<u32>(), form in 0usize..5) {
        let v4 = Ipv4Addr::from(bits);
        let [a, b, c, d] = v4.octets();
        let written = match form {
            0 => v4.to_string(),
            1 => bits.to_string(),
            2 => format!("0x{bits:x}"),
            3 => format!("0{a:o}.0{b:o}.0{c:o}.0{d:o}"),
            _ => format!("[{}]", v4.to_ipv6_mapped()),
        };
        let url = url::Url::parse(&format!("http://{written}/")).unwrap();
        let guard = TargetGuard::new(false, &[]);
        let judged = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap()
            .block_on(guard.check(&url));
        let expected = if form == 4 {
            target::refusal(IpAddr::V6(v4.to_ipv6_mapped()))
        } else {
            target::refusal(IpAddr::V4(v4))
        };
        match (judged, expected) {
            (Ok(()), None) => {}
            (Err(Refused::Address { rule, .. }), Some(want)) => prop_assert_eq!(rule, want),
            (got, want) => prop_assert!(false, "{written}: {got:?} where {want:?} was due"),
        }
    }
}

/// Map keys the `fields` and `headers` objects may have: thousands of them
/// are refused by count, not parsed one by one.
#[test]
fn maps_of_thousands_are_refused_by_count() {
    let fields: BTreeMap<String, Value> = (0..5000)
        .map(|i| (format!("f{i}"), json!({"selector": "a"})))
        .collect();
    let body = json!({"name": "n", "search_url": "https://x.example/?q={keyword}",
                      "item_selector": "li", "fields": fields});
    let err = serde_json::from_value::<SiteInput>(body)
        .unwrap()
        .parse()
        .unwrap_err();
    assert_eq!(err.field, "fields");
}
