//! WCAG 2.1 AA checks that need no browser: colour contrast computed from the stylesheet's own
//! colour pairs (text ≥ 4.5:1, form control borders and the focus ring ≥ 3:1), heading order
//! on the main pages, and distinct accessible names for repeated links.

use std::collections::HashMap;

use crate::common::shop::*;
use crate::common::*;
use scraper::{ElementRef, Node, Selector};

// ---------------------------------------------------------------------------------------------
// A small reader for `static/css/site.css`: rules with their selectors and declarations
// (inside media queries too), custom properties from `:root`, and colours as sRGB.

#[derive(Debug, Clone)]
struct Rule {
    selectors: Vec<String>,
    declarations: Vec<(String, String)>,
}

impl Rule {
    fn get(&self, property: &str) -> Option<&str> {
        self.declarations
            .iter()
            .rev()
            .find(|(p, _)| p == property)
            .map(|(_, v)| v.as_str())
    }
}

fn strip_comments(css: &str) -> String {
    let mut out = String::with_capacity(css.len());
    let mut rest = css;
    while let Some(start) = rest.find("/*") {
        out.push_str(&rest[..start]);
        match rest[start + 2..].find("*/") {
            Some(end) => rest = &rest[start + 2 + end + 2..],
            None => return out,
        }
    }
    out.push_str(rest);
    out
}

/// Every style rule, with the rules inside `@media` blocks flattened in.
fn parse_rules(css: &str) -> Vec<Rule> {
    let css = strip_comments(css);
    let mut rules = Vec::new();
    parse_block(&css, &mut rules);
    rules
}

fn parse_block(css: &str, rules: &mut Vec<Rule>) {
    let mut rest = css;
    while let Some(open) = rest.find('{') {
        let prelude = rest[..open].trim();
        // Find the matching close brace.
        let mut depth = 0;
        let mut close = None;
        for (i, c) in rest[open..].char_indices() {
            match c {
                '{' => depth += 1,
                '}' => {
                    depth -= 1;
                    if depth == 0 {
                        close = Some(open + i);
                        break;
                    }
                }
                _ => {}
            }
        }
        let close = close.expect("balanced braces in site.css");
        let inner = &rest[open + 1..close];
        if prelude.starts_with('@') {
            parse_block(inner, rules);
        } else {
            rules.push(Rule {
                selectors: prelude.split(',').map(|s| s.trim().to_string()).collect(),
                declarations: inner
                    .split(';')
                    .filter_map(|d| d.split_once(':'))
                    .map(|(p, v)| (p.trim().to_string(), v.trim().to_string()))
                    .collect(),
            });
        }
        rest = &rest[close + 1..];
    }
}

/// `var(--name[, fallback])` replaced by the custom property's value (recursively).
fn resolve(value: &str, vars: &HashMap<String, String>) -> String {
    let mut value = value.to_string();
    for _ in 0..10 {
        let Some(start) = value.find("var(") else {
            break;
        };
        let end = start + value[start..].find(')').expect("closed var()");
        let inner = &value[start + 4..end];
        let (name, fallback) = match inner.split_once(',') {
            Some((n, f)) => (n.trim(), Some(f.trim())),
            None => (inner.trim(), None),
        };
        let replacement = vars
            .get(name)
            .cloned()
            .or_else(|| fallback.map(str::to_string))
            .unwrap_or_else(|| panic!("{name} is not defined in :root"));
        value.replace_range(start..=end, &replacement);
    }
    value
}

/// An opaque sRGB colour from `#rgb`, `#rrggbb`, `rgb()` or `white`/`black`; `None` for
/// anything else (transparent, `inherit`, `currentColor`, translucent `rgba()`).
fn colour(value: &str) -> Option<[u8; 3]> {
    let v = value.trim().to_ascii_lowercase();
    match v.as_str() {
        "white" => return Some([255, 255, 255]),
        "black" => return Some([0, 0, 0]),
        _ => {}
    }
    if let Some(hex) = v.strip_prefix('#') {
        let hex: String = match hex.len() {
            3 => hex.chars().flat_map(|c| [c, c]).collect(),
            6 => hex.to_string(),
            _ => return None,
        };
        let byte = |i: usize| u8::from_str_radix(&hex[i..i + 2], 16).ok();
        return Some([byte(0)?, byte(2)?, byte(4)?]);
    }
    let inner = v
        .strip_prefix("rgb(")
        .or_else(|| v.strip_prefix("rgba("))?
        .strip_suffix(')')?;
    let parts: Vec<&str> = inner.split(',').map(str::trim).collect();
    if parts.len() == 4 && parts[3].parse::<f64>().ok()? < 1.0 {
        return None;
    }
    Some([
        parts.first()?.parse().ok()?,
        parts.get(1)?.parse().ok()?,
        parts.get(2)?.parse().ok()?,
    ])
}

/// The colour in a `background` shorthand or `border`/`outline` shorthand, if one of its words
/// is an opaque colour.
fn colour_in(value: &str) -> Option<[u8; 3]> {
    colour(value).or_else(|| value.split_whitespace().find_map(colour))
}

fn luminance([r, g, b]: [u8; 3]) -> f64 {
    let channel = |c: u8| {
        let c = f64::from(c) / 255.0;
        if c <= 0.03928 {
            c / 12.92
        } else {
            ((c + 0.055) / 1.055).powf(2.4)
        }
    };
    0.2126 * channel(r) + 0.7152 * channel(g) + 0.0722 * channel(b)
}

/// The WCAG contrast ratio of two colours (1 to 21).
fn contrast(a: [u8; 3], b: [u8; 3]) -> f64 {
    let (la, lb) = (luminance(a), luminance(b));
    (la.max(lb) + 0.05) / (la.min(lb) + 0.05)
}

struct Stylesheet {
    rules: Vec<Rule>,
    vars: HashMap<String, String>,
}

impl Stylesheet {
    fn load() -> Stylesheet {
        let css = std::fs::read_to_string(repo_root().join("static/css/site.css"))
            .expect("the stylesheet");
        let rules = parse_rules(&css);
        let mut vars = HashMap::new();
        for rule in rules.iter().filter(|r| r.selectors == [":root"]) {
            for (p, v) in &rule.declarations {
                if p.starts_with("--") {
                    vars.insert(p.clone(), v.clone());
                }
            }
        }
        Stylesheet { rules, vars }
    }

    fn var(&self, name: &str) -> [u8; 3] {
        colour(&resolve(&format!("var({name})"), &self.vars))
            .unwrap_or_else(|| panic!("{name} is an opaque colour"))
    }

    /// The rules listing exactly `selector` among their selectors.
    fn rules_for(&self, selector: &str) -> Vec<&Rule> {
        self.rules
            .iter()
            .filter(|r| r.selectors.iter().any(|s| s == selector))
            .collect()
    }

    /// The last opaque colour `property` gets in the rules for `selector`.
    fn colour_of(&self, selector: &str, property: &str) -> [u8; 3] {
        self.rules_for(selector)
            .iter()
            .rev()
            .find_map(|r| {
                r.get(property)
                    .and_then(|v| colour_in(&resolve(v, &self.vars)))
            })
            .unwrap_or_else(|| panic!("no opaque {property} for {selector}"))
    }
}

#[test]
fn the_contrast_calculation_matches_known_ratios() {
    let white = [255, 255, 255];
    assert!((contrast(white, [0, 0, 0]) - 21.0).abs() < 0.01);
    // The measurement of the old orange button.
    let old_orange = colour("#c9822b").expect("colour");
    assert!((contrast(white, old_orange) - 3.13).abs() < 0.01);
    assert_eq!(colour("#fff"), Some(white));
    assert_eq!(colour("rgba(255, 255, 255, 0.15)"), None);
    assert_eq!(colour_in("3px solid #1d4a78"), Some([0x1d, 0x4a, 0x78]));
}

#[test]
fn every_rule_pairing_text_with_a_background_has_at_least_4_5_to_1() {
    let sheet = Stylesheet::load();
    let mut checked = Vec::new();
    let mut failures = Vec::new();
    for rule in &sheet.rules {
        let fg = rule.get("color").map(|v| resolve(v, &sheet.vars));
        let bg = rule
            .get("background-color")
            .or_else(|| rule.get("background"))
            .map(|v| resolve(v, &sheet.vars));
        let (Some(fg), Some(bg)) = (fg.and_then(|v| colour(&v)), bg.and_then(|v| colour_in(&v)))
        else {
            continue;
        };
        let ratio = contrast(fg, bg);
        checked.push(rule.selectors.join(", "));
        if ratio < 4.5 {
            failures.push(format!("{}: {ratio:.2}", rule.selectors.join(", ")));
        }
    }
    assert!(failures.is_empty(), "text below 4.5:1: {failures:?}");
    // The pairs the issue is about are among those checked.
    for selector in [
        "button",
        ".button",
        ".button-primary",
        ".button-secondary",
        ".pagination a[aria-current=\"page\"]",
        ".cart-count",
        ".flash-warning",
        ".filter-chip",
        "button:disabled",
    ] {
        assert!(
            checked.iter().any(|c| c.split(", ").any(|s| s == selector)),
            "{selector} is not among the checked pairs: {checked:?}"
        );
    }
}

#[test]
fn text_colours_on_the_page_and_panels_have_at_least_4_5_to_1() {
    let sheet = Stylesheet::load();
    let paper = sheet.colour_of("body", "background");
    let panel = sheet.var("--panel");
    let header = sheet.colour_of(".site-header", "background");
    for text in [
        "--ink",
        "--muted",
        "--brand",
        "--ok-ink",
        "--warn-ink",
        "--error-ink",
        "--info-ink",
    ] {
        for (bg_name, bg) in [("page", paper), ("panel", panel)] {
            let ratio = contrast(sheet.var(text), bg);
            assert!(ratio >= 4.5, "{text} on the {bg_name}: {ratio:.2}");
        }
    }
    // The placeholder cover's label.
    let ratio = contrast(
        sheet.colour_of(".cover-placeholder", "color"),
        sheet.colour_of(".cover-placeholder", "background"),
    );
    assert!(ratio >= 4.5, "placeholder label: {ratio:.2}");
    // White header text.
    let ratio = contrast(sheet.colour_of(".brand", "color"), header);
    assert!(ratio >= 4.5, "header text: {ratio:.2}");
}

#[test]
fn input_borders_and_the_focus_ring_have_at_least_3_to_1() {
    let sheet = Stylesheet::load();
    let paper = sheet.colour_of("body", "background");
    let panel = sheet.var("--panel");
    let input_bg = sheet.colour_of("input", "background");
    let border = sheet.colour_of("input", "border");
    for (what, bg) in [("input", input_bg), ("page", paper), ("panel", panel)] {
        let ratio = contrast(border, bg);
        assert!(ratio >= 3.0, "input border against the {what}: {ratio:.2}");
    }
    let invalid = sheet.colour_of("[aria-invalid=\"true\"]", "border");
    assert!(contrast(invalid, input_bg) >= 3.0);
    let ring = sheet.colour_of(":focus-visible", "outline");
    for (what, bg) in [("page", paper), ("panel", panel), ("input", input_bg)] {
        let ratio = contrast(ring, bg);
        assert!(ratio >= 3.0, "focus ring against the {what}: {ratio:.2}");
    }
    // In the header the ring is drawn on the brand colour.
    let header = sheet.colour_of(".site-header", "background");
    let header_ring = sheet.colour_of(".site-header :focus-visible", "outline-color");
    let ratio = contrast(header_ring, header);
    assert!(ratio >= 3.0, "focus ring in the header: {ratio:.2}");
}

// ---------------------------------------------------------------------------------------------
// Headings and link names in the rendered pages.

/// The levels of the headings in `main`, in document order.
fn heading_levels(doc: &scraper::Html) -> Vec<(u8, String)> {
    let s =
        Selector::parse("main h1, main h2, main h3, main h4, main h5, main h6").expect("selector");
    doc.select(&s)
        .map(|h| {
            let level = h.value().name()[1..].parse().expect("h1..h6");
            (level, h.text().collect::<String>().trim().to_string())
        })
        .collect()
}

/// One `h1`, first, and no level skipped going down (h2 → h4 is a skip; h3 → h2 is fine).
fn assert_heading_order(doc: &scraper::Html, page: &str) {
    let levels = heading_levels(doc);
    assert!(!levels.is_empty(), "{page} has headings");
    assert_eq!(levels[0].0, 1, "{page} starts with an h1: {levels:?}");
    assert_eq!(
        levels.iter().filter(|(l, _)| *l == 1).count(),
        1,
        "{page} has one h1: {levels:?}"
    );
    for pair in levels.windows(2) {
        assert!(
            pair[1].0 <= pair[0].0 + 1,
            "{page} skips from h{} ({:?}) to h{} ({:?})",
            pair[0].0,
            pair[0].1,
            pair[1].0,
            pair[1].1
        );
    }
}

/// The accessible name of a link as a screen reader computes it here: `aria-label` if given,
/// else its text (visually hidden text included).
fn accessible_name(link: ElementRef) -> String {
    if let Some(label) = link.value().attr("aria-label") {
        return label.trim().to_string();
    }
    let text: String = link
        .descendants()
        .filter_map(|n| match n.value() {
            Node::Text(t) => Some(t.to_string()),
            _ => None,
        })
        .collect();
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

#[tokio::test]
async fn the_main_pages_keep_their_heading_order() {
    let app = spawn_app().await;
    for path in [
        "/",
        "/products",
        "/products?type=album&genre=jazz",
        "/categories",
        "/categories/jazz",
        "/categories/music",
        "/products/kind-of-blue",
        "/products/star-wars",
        "/products/neuromancer",
        "/orders/lookup",
        "/no-such-page",
        "/cart",
    ] {
        let doc = html(&body(app.get(path).await).await);
        assert_heading_order(&doc, path);
    }
    // A shopper's cart, checkout (with its error summary) and order page.
    product_with_stock(&app.db, "h", 5).await;
    let shopper = Shopper::new(&app).await;
    shopper.add("h", "1").await;
    for path in ["/cart", "/checkout"] {
        let doc = html(&body(shopper.get(path).await).await);
        assert_heading_order(&doc, path);
    }
    let response = shopper
        .post("/checkout", &[("email", "not an address")])
        .await;
    let doc = html(&body(response).await);
    assert_eq!(count(&doc, ".error-summary h2"), 1);
    assert_heading_order(&doc, "checkout with errors");
    let response = shopper.checkout("4242 4242 4242 4242").await;
    let order = location(&response);
    let doc = html(&body(shopper.get(&order).await).await);
    assert_heading_order(&doc, &order);
    app.stop().await;
}

#[tokio::test]
async fn repeated_links_have_distinct_accessible_names() {
    let app = spawn_app().await;
    // On sale, featured and discounted: a product on each of the home page's three shelves.
    crate::common::builders::ProductBuilder::new("n1")
        .stock(5)
        .featured()
        .build(&app.db)
        .await;
    let doc = html(&body(app.get("/").await).await);
    let s = Selector::parse(".shelf .more a").expect("selector");
    let names: Vec<String> = doc.select(&s).map(accessible_name).collect();
    assert_eq!(names.len(), 3, "{names:?}");
    assert!(names.iter().all(|n| n.starts_with("See more")), "{names:?}");
    let distinct: std::collections::BTreeSet<&String> = names.iter().collect();
    assert_eq!(distinct.len(), names.len(), "{names:?}");
    // Cart buttons and filter chips name their item too.
    product_with_stock(&app.db, "n2", 5).await;
    let shopper = Shopper::new(&app).await;
    shopper.add("n1", "1").await;
    shopper.add("n2", "1").await;
    let doc = html(&body(shopper.get("/cart").await).await);
    let removes = texts(&doc, ".line-remove button");
    assert_eq!(removes.len(), 2);
    assert_ne!(removes[0], removes[1]);
    let doc = html(&body(app.get("/products?type=album&in_stock=1").await).await);
    let s = Selector::parse(".filter-chip a").expect("selector");
    let chips: Vec<String> = doc.select(&s).map(accessible_name).collect();
    assert_eq!(chips, ["Remove filter: Albums", "Remove filter: In stock"]);
    app.stop().await;
}
