//! The five layouts, drawn in a style, with the items they must yield.

use crate::{Item, Layout, ORIGIN, style::Rng, style::Style};

const ADJECTIVES: &[&str] = &[
    "Blue", "Red", "Steel", "Compact", "Classic", "Electric", "Glass", "Copper", "Matte", "Travel",
    "Quiet", "Smart",
];
const NOUNS: &[&str] = &[
    "Kettle", "Pan", "Teapot", "Pot", "Grill", "Toaster", "Wok", "Mug", "Press", "Steamer",
];
const SOURCES: &[&str] = &["Reuters", "Yonhap", "AP", "The Herald", "Daily Brief"];

/// What an item is, before it is drawn.
pub(crate) struct Data {
    pub id: u64,
    pub title: String,
    pub won: u64,
    pub rating: u64,
    pub day: u64,
    pub source: &'static str,
}

/// Eight to twelve items drawn from `seed`, titles distinct.
pub(crate) fn data(layout: Layout, seed: u64) -> Vec<Data> {
    let mut rng = Rng::new(
        seed.wrapping_mul(7919)
            .wrapping_add(layout as u64 * 104_729),
    );
    let count = 8 + rng.below(5);
    let start = rng.below(ADJECTIVES.len() as u64) as usize;
    (0..count)
        .map(|i| {
            let adjective = ADJECTIVES[(start + i as usize) % ADJECTIVES.len()];
            let noun = NOUNS[rng.below(NOUNS.len() as u64) as usize];
            Data {
                id: 100 + i * 7 + rng.below(5),
                title: format!("{adjective} {noun} {}", i + 1),
                won: (10 + rng.below(990)) * 100,
                rating: 30 + rng.below(21),
                day: 1 + rng.below(28),
                source: SOURCES[rng.below(SOURCES.len() as u64) as usize],
            }
        })
        .collect()
}

fn item(pairs: &[(&str, String)]) -> Item {
    pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), v.clone()))
        .collect()
}

fn rotated(mut parts: Vec<String>, by: usize) -> String {
    let n = parts.len();
    parts.rotate_left(by % n.max(1));
    parts.concat()
}

/// The page's HTML and its items.
pub(crate) fn render(layout: Layout, data: &[Data], style: &Style) -> (String, Vec<Item>) {
    let c = |name: &str| style.class(name);
    let tag = style.item_tag;
    let mut body = String::new();
    let mut items = Vec::new();
    let list_tag = if tag == "li" { "ul" } else { "div" };
    let open = match layout {
        Layout::List => format!(r#"<{list_tag} class="{}">"#, c("results")),
        Layout::Cards => format!(r#"<{list_tag} class="{}">"#, c("card-grid")),
        Layout::Table => format!(
            r#"<table class="{}"><thead><tr><th>Product</th><th>Price</th><th>Listed</th></tr></thead><tbody>"#,
            c("results")
        ),
        Layout::Tiles => format!(r#"<div class="{}">"#, c("tile-grid")),
        Layout::News => format!(r#"<section class="{}"><h2>Latest</h2>"#, c("news")),
    };
    body.push_str(&open);
    for (place, d) in data.iter().enumerate() {
        let link = format!("/p/{}", d.id);
        let image = format!("/img/{}.jpg", d.id);
        let price = style.price(d.won);
        let date = format!("2026-03-{:02}", d.day);
        let data_price = match style.price_in_attr {
            true => format!(r#" data-price="{}""#, d.won),
            false => String::new(),
        };
        let shown_price = match style.price_in_attr {
            true => d.won.to_string(),
            false => price.clone(),
        };
        if layout == Layout::Tiles && place % 3 == 0 {
            if place > 0 {
                body.push_str("</div>");
            }
            body.push_str(&format!(r#"<div class="{}">"#, c("tile-row")));
        }
        let price_el = |class: &str, el: &str| match style.price_in_attr {
            true => String::new(),
            false => format!(r#"<{el} class="{}">{price}</{el}>"#, c(class)),
        };
        let (parts, expected) = match layout {
            Layout::List => (
                vec![
                    format!(r#"<a class="{}" href="{link}">{}</a>"#, c("title"), d.title),
                    price_el("price", "span"),
                    format!(
                        r#"<img class="{}" src="{image}" alt="{}">"#,
                        c("thumb"),
                        d.title
                    ),
                ],
                item(&[
                    ("title", d.title.clone()),
                    ("price", shown_price),
                    ("link", format!("{ORIGIN}{link}")),
                    ("image", format!("{ORIGIN}{image}")),
                ]),
            ),
            Layout::Cards => {
                let rating = format!("{}.{} out of 5", d.rating / 10, d.rating % 10);
                (
                    vec![
                        format!(
                            r#"<a class="{}" href="{link}"><img class="{}" src="{image}" alt=""></a>"#,
                            c("card-link"),
                            c("card-img")
                        ),
                        format!(r#"<h3 class="{}">{}</h3>"#, c("card-title"), d.title),
                        format!(
                            r#"<div class="{}">{}<span class="{}" aria-label="{rating}">★★★★☆</span></div>"#,
                            c("meta"),
                            price_el("price", "span"),
                            c("rating")
                        ),
                    ],
                    item(&[
                        ("title", d.title.clone()),
                        ("price", shown_price),
                        ("link", format!("{ORIGIN}{link}")),
                        ("image", format!("{ORIGIN}{image}")),
                        ("rating", rating),
                    ]),
                )
            }
            Layout::Table => (
                vec![
                    format!(
                        r#"<td class="{}"><a href="{link}">{}</a></td>"#,
                        c("name"),
                        d.title
                    ),
                    price_el("price", "td"),
                    format!(r#"<td class="{}">{date}</td>"#, c("listed")),
                ],
                item(&[
                    ("title", d.title.clone()),
                    ("price", shown_price),
                    ("link", format!("{ORIGIN}{link}")),
                    ("date", date.clone()),
                ]),
            ),
            Layout::Tiles => (
                vec![
                    format!(
                        r#"<a class="{}" href="{link}"><img src="{image}" alt="{}"></a>"#,
                        c("tile-link"),
                        d.title
                    ),
                    format!(r#"<span class="{}">{}</span>"#, c("tile-title"), d.title),
                    price_el("tile-price", "span"),
                ],
                item(&[
                    ("title", d.title.clone()),
                    ("price", shown_price),
                    ("link", format!("{ORIGIN}{link}")),
                    ("image", format!("{ORIGIN}{image}")),
                ]),
            ),
            Layout::News => {
                let link = format!("/news/{}", d.id);
                (
                    vec![
                        format!(
                            r#"<h2 class="{}"><a href="{link}">{}</a></h2>"#,
                            c("headline"),
                            d.title
                        ),
                        format!(
                            r#"<p class="{}"><span class="{}">{}</span> · <time datetime="{date}">March {}, 2026</time></p>"#,
                            c("byline"),
                            c("source"),
                            d.source,
                            d.day
                        ),
                        format!(
                            r#"<p class="{}">What changed for the {} this week, and why.</p>"#,
                            c("summary"),
                            d.title.to_lowercase()
                        ),
                    ],
                    item(&[
                        ("title", d.title.clone()),
                        ("link", format!("{ORIGIN}{link}")),
                        ("date", date.clone()),
                        ("source", d.source.to_owned()),
                    ]),
                )
            }
        };
        let inner = rotated(parts, style.rotate);
        let inner = match (style.wrapper, layout) {
            (false, _) => inner,
            (true, Layout::Table) => inner
                .replacen("<a ", &format!(r#"<div class="{}"><a "#, c("cell")), 1)
                .replacen("</a>", "</a></div>", 1),
            (true, Layout::Cards) => format!(r#"<div class="{}">{inner}</div>"#, c("card-body")),
            (true, _) => format!(r#"<div class="{}">{inner}</div>"#, c("inner")),
        };
        let class = match layout {
            Layout::List => "product",
            Layout::Cards => "card",
            Layout::Table => "row",
            Layout::Tiles => "tile",
            Layout::News => "story",
        };
        body.push_str(&format!(
            r#"<{tag} class="{}"{data_price}>{inner}</{tag}>"#,
            c(class)
        ));
        items.push(expected);
        if style.ads_after.contains(&place) {
            body.push_str(&ad(layout, style, place));
        }
    }
    if layout == Layout::Tiles {
        body.push_str("</div>");
    }
    body.push_str(match layout {
        Layout::List | Layout::Cards => {
            if list_tag == "ul" {
                "</ul>"
            } else {
                "</div>"
            }
        }
        Layout::Table => "</tbody></table>",
        Layout::Tiles => "</div>",
        Layout::News => "</section>",
    });
    let html = format!(
        r#"<!doctype html><html><head><meta charset="utf-8"><title>Search: kettle</title><style>.x{{}}</style></head><body><header><nav><ul class="{nav}"><li><a href="/">Home</a></li><li><a href="/deals">Deals</a></li><li><a href="/help">Help</a></li></ul></nav></header><main><h1>Results for kettle</h1>{body}</main><footer><p>Prices include VAT.</p><a href="/terms">Terms</a></footer></body></html>"#,
        nav = c("nav")
    );
    (html, items)
}

/// An ad between items: the item's tag (a table's row), a label and a link,
/// no price and no image.
fn ad(layout: Layout, style: &Style, place: usize) -> String {
    let c = |name: &str| style.class(name);
    let label = format!(r#"<span class="{}">Sponsored</span>"#, c("ad-label"));
    let link = format!(
        r#"<a class="{}" href="/ads/{place}">Kettles at half price</a>"#,
        c("ad-link")
    );
    match layout {
        Layout::Table => format!(
            r#"<tr class="{}"><td colspan="3">{label} {link}</td></tr>"#,
            c("ad")
        ),
        _ => format!(
            r#"<{tag} class="{}">{label}{link}</{tag}>"#,
            c("ad"),
            tag = style.item_tag
        ),
    }
}
