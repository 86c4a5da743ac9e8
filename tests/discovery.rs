//! Being found and shared (issue 38), checked with parsers independent of the code that writes:
//! sitemaps through Python's XML parser against the sitemaps.org rules (and every listed address
//! fetched), robots.txt through Python's `urllib.robotparser`, JSON-LD and OpenGraph through
//! `extruct`, feed autodiscovery through `feedfinder2` given only a page's address, canonical
//! addresses and `noindex` through the HTML parser, conditional GETs (ETag, Last-Modified, 304)
//! on feeds, sitemaps and robots.txt, hostile titles (`</script>`, quotes, Unicode) in every new
//! tag, and an index behind every new query.
//!
//! The Python packages (`extruct`, `feedfinder2`) are installed by `.ci/run`; without them a test
//! says why and skips, except in CI (`CI` set), where they are required.

use crate::common;
use std::collections::HashSet;
use std::io::Write;
use std::process::{Command, Stdio};

use crate::common::builders::{CategoryBuilder, NodeBuilder};
use crate::common::shop::*;
use crate::common::*;
use bazaar::catalog::products;
use bazaar::content::model::{Detail, PhotoDetail, TextDetail};
use bazaar::content::store;
use bazaar::discovery::sitemap;
use bson::{doc, Bson, DateTime};
use reqwest::StatusCode;
use serde_json::Value;

const HOST: &str = "https://shop.example";
/// A title that tries to end the JSON-LD script and every attribute it lands in.
const HOSTILE_TITLE: &str =
    "</script><script>alert(1)</script> \"quoted\" & 'single' <b>bold</b> — Ünïcødé ✓ 🎵";

/// Run `code` with Python, `stdin` as its input; its standard output. `None` (after saying why)
/// when Python or one of `modules` is missing outside CI; in CI that fails the test.
fn python(modules: &[&str], code: &str, args: &[&str], stdin: &str) -> Option<String> {
    let imports = modules
        .iter()
        .map(|m| format!("import {m}"))
        .collect::<Vec<_>>()
        .join("; ");
    let probe = Command::new("python3")
        .args(["-c", &imports])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status();
    if !probe.is_ok_and(|s| s.success()) {
        let why =
            format!("python3 with {modules:?} is not available (pip install extruct feedfinder2)");
        assert!(std::env::var_os("CI").is_none(), "{why}: required in CI");
        eprintln!("skipped: {why}");
        return None;
    }
    let mut child = Command::new("python3")
        .arg("-c")
        .arg(code)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("python starts");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(stdin.as_bytes())
        .expect("input written");
    let out = child.wait_with_output().expect("python runs");
    assert!(
        out.status.success(),
        "python failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    Some(String::from_utf8(out.stdout).expect("utf-8 output"))
}

/// An XML document parsed by Python's ElementTree: `{root, ns, entries: [{loc, lastmod}]}`.
fn parse_sitemap_xml(xml: &str) -> Value {
    const CODE: &str = r#"
import json, sys, xml.etree.ElementTree as ET
root = ET.fromstring(sys.stdin.buffer.read())
ns, _, tag = root.tag[1:].partition('}') if root.tag.startswith('{') else ('', '', root.tag)
entries = []
for child in root:
    entry = {'tag': child.tag}
    for field in child:
        entry[field.tag.split('}')[-1]] = field.text
    entries.append(entry)
print(json.dumps({'root': tag, 'ns': ns, 'entries': entries}))
"#;
    let out = python(&[], CODE, &[], xml).expect("python3 runs");
    serde_json::from_str(&out).expect("json")
}

/// `syntaxes` (`json-ld`, `opengraph`) found by extruct in `html` read at `url`.
fn extruct(html: &str, url: &str) -> Option<Value> {
    const CODE: &str = r#"
import json, sys, extruct
data = extruct.extract(sys.stdin.read(), base_url=sys.argv[1], syntaxes=['json-ld', 'opengraph'], uniform=True)
print(json.dumps(data))
"#;
    python(&["extruct"], CODE, &[url], html).map(|out| serde_json::from_str(&out).expect("json"))
}

/// The JSON-LD objects of type `kind`.
fn of_type<'a>(data: &'a Value, kind: &str) -> Vec<&'a Value> {
    data["json-ld"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|item| item["@type"] == kind)
        .collect()
}

/// OpenGraph property `key` as extruct found it (uniform output: one object per page, with
/// `og:type` given as `@type`).
fn og<'a>(data: &'a Value, key: &str) -> &'a Value {
    let key = if key == "og:type" { "@type" } else { key };
    &data["opengraph"][0][key]
}

/// Whether `s` is a W3C Datetime in one of the forms the sitemap protocol allows.
fn is_w3c_datetime(s: &str) -> bool {
    let re = regex::Regex::new(
        r"^\d{4}(-\d{2}(-\d{2}(T\d{2}:\d{2}(:\d{2}(\.\d+)?)?(Z|[+-]\d{2}:\d{2}))?)?)?$",
    )
    .expect("pattern");
    re.is_match(s)
}

async fn app_on(host: &str) -> TestApp {
    spawn_app_with(&[("BAZAAR_SERVER__PUBLIC_URL", host)]).await
}

/// An app whose public address is its real one (feed finders fetch what pages announce).
async fn app_at_its_own_address() -> TestApp {
    let port = free_port().to_string();
    let url = format!("http://127.0.0.1:{port}");
    spawn_app_with(&[
        ("BAZAAR_SERVER__PORT", port.as_str()),
        ("BAZAAR_SERVER__PUBLIC_URL", url.as_str()),
    ])
    .await
}

async fn set_status(app: &TestApp, id: bson::oid::ObjectId, status: &str) {
    products::collection(&app.db)
        .update_one(doc! { "_id": id }, doc! { "$set": { "status": status } })
        .await
        .expect("status set");
}

/// A blog entry published now.
async fn post(app: &TestApp, slug: &str, title: &str, body: &str, tags: &[&str]) {
    add_node(
        app,
        "blog",
        slug,
        title,
        text(body),
        Some(DateTime::now()),
        tags,
    )
    .await;
}

fn text(body: &str) -> Detail {
    Detail::Entry(TextDetail {
        text: body.to_string(),
        ..Default::default()
    })
}

fn days_from_now(days: i64) -> DateTime {
    DateTime::from_millis(DateTime::now().timestamp_millis() + days * 24 * 3600 * 1000)
}

/// The path of an absolute address on [`HOST`].
fn on_host(loc: &str) -> &str {
    loc.strip_prefix(HOST)
        .filter(|p| p.starts_with('/'))
        .unwrap_or_else(|| panic!("{loc} is not an absolute address on {HOST}"))
}

#[tokio::test]
async fn the_sitemaps_follow_the_protocol_list_only_public_things_and_every_address_answers() {
    let app = app_on(HOST).await;
    let shown = product_with_stock(&app.db, "shown", 5).await;
    let draft = product_with_stock(&app.db, "drafted", 5).await;
    set_status(&app, draft.id, "draft").await;
    let archived = product_with_stock(&app.db, "archived", 5).await;
    set_status(&app, archived.id, "archived").await;
    let tagged_product = product_with_stock(&app.db, "tagged", 5).await;
    products::set_tags(
        &app.db,
        tagged_product.id,
        &["sitemap-product-tag".to_string()],
    )
    .await
    .expect("tags set");
    post(&app, "live-post", "Live", "Hi", &["sitemap-live-tag"]).await;
    add_node(
        &app,
        "blog",
        "draft-post",
        "Draft",
        text("Hi"),
        None,
        &["sitemap-draft-tag"],
    )
    .await;
    add_node(
        &app,
        "blog",
        "later-post",
        "Later",
        text("Hi"),
        Some(days_from_now(3)),
        &["sitemap-later-tag"],
    )
    .await;

    let response = app.get("/sitemap.xml").await;
    assert_eq!(response.status(), StatusCode::OK);
    assert!(response.headers()["content-type"]
        .to_str()
        .unwrap()
        .starts_with("application/xml"));
    let index = parse_sitemap_xml(&body(response).await);
    assert_eq!(index["root"], "sitemapindex");
    assert_eq!(index["ns"], sitemap::NAMESPACE);
    let mut listed: Vec<String> = Vec::new();
    let children = index["entries"].as_array().expect("entries");
    assert!(children.len() >= 5, "{index}");
    for child in children {
        assert_eq!(child["tag"], format!("{{{}}}sitemap", sitemap::NAMESPACE));
        let loc = child["loc"].as_str().expect("loc");
        if let Some(lastmod) = child["lastmod"].as_str() {
            assert!(is_w3c_datetime(lastmod), "{lastmod}");
        }
        let response = app.get(on_host(loc)).await;
        assert_eq!(response.status(), StatusCode::OK, "{loc}");
        let set = parse_sitemap_xml(&body(response).await);
        assert_eq!(set["root"], "urlset", "{loc}");
        assert_eq!(set["ns"], sitemap::NAMESPACE, "{loc}");
        let urls = set["entries"].as_array().expect("urls");
        assert!(!urls.is_empty() && urls.len() <= sitemap::MAX_URLS, "{loc}");
        for url in urls {
            assert_eq!(url["tag"], format!("{{{}}}url", sitemap::NAMESPACE));
            let loc = url["loc"].as_str().expect("loc");
            on_host(loc);
            if let Some(lastmod) = url["lastmod"].as_str() {
                assert!(is_w3c_datetime(lastmod), "{lastmod}");
            }
            listed.push(loc.to_string());
        }
    }
    let unique: HashSet<&String> = listed.iter().collect();
    assert_eq!(unique.len(), listed.len(), "no address is listed twice");
    for loc in &listed {
        let response = app.get(on_host(loc)).await;
        assert_eq!(response.status(), StatusCode::OK, "{loc}");
    }
    let has = |path: &str| listed.contains(&format!("{HOST}{path}"));
    for path in [
        "/",
        "/products",
        "/blog/",
        "/blog/live-post",
        "/tags/sitemap-live-tag",
        "/tags/sitemap-product-tag",
    ] {
        assert!(has(path), "{path} is listed");
    }
    assert!(has(&shown.url()));
    for hidden in [
        draft.url(),
        archived.url(),
        "/blog/draft-post".to_string(),
        "/blog/later-post".to_string(),
        "/tags/sitemap-draft-tag".to_string(),
        "/tags/sitemap-later-tag".to_string(),
    ] {
        assert!(!has(&hidden), "{hidden} is not listed");
    }
    // Names the index would not list are not sitemaps.
    for bad in [
        "/sitemaps/nothing.xml",
        "/sitemaps/products-zz.xml",
        "/sitemaps/products-ffffffffffffffffffffffff.xml",
        "/sitemaps/blog-0.xml",
        "/sitemaps/blog-99.xml",
        "/sitemaps/blog-9223372036854775807.xml",
        "/sitemaps/admin-1.xml",
        "/sitemaps/tags",
    ] {
        assert_eq!(app.get(bad).await.status(), StatusCode::NOT_FOUND, "{bad}");
    }
    app.stop().await;
}

#[tokio::test]
async fn product_sitemaps_split_the_catalog_into_keyset_chunks_with_their_newest_change() {
    let app = app_on(HOST).await;
    let on_sale = products::collection(&app.db)
        .count_documents(bazaar::catalog::lifecycle::on_sale())
        .await
        .expect("count");
    for i in 0..25 {
        product_with_stock(&app.db, &format!("chunk{i:02}"), 1).await;
    }
    let total = on_sale + 25;
    let chunks = sitemap::product_chunks(&app.db, 10).await.expect("walk");
    assert_eq!(chunks.len() as u64, total.div_ceil(10));
    // Each start is the first product on sale at or after it, and the chunks ascend.
    for pair in chunks.windows(2) {
        assert!(pair[0].0 < pair[1].0);
        let between = products::collection(&app.db)
            .count_documents(bazaar::catalog::lifecycle::on_sale_within(
                doc! { "_id": { "$gte": pair[0].0, "$lt": pair[1].0 } },
            ))
            .await
            .expect("count");
        assert_eq!(between, 10);
    }
    assert!(chunks.iter().all(|(_, newest)| newest.is_some()));
    app.stop().await;
}

#[tokio::test]
async fn robots_txt_keeps_crawlers_out_of_the_admin_and_carts_and_points_at_the_sitemap() {
    let app = app_on(HOST).await;
    let robots = body(app.get("/robots.txt").await).await;
    const CODE: &str = r#"
import json, sys, urllib.robotparser
rp = urllib.robotparser.RobotFileParser()
rp.parse(sys.stdin.read().splitlines())
print(json.dumps({'fetch': {p: rp.can_fetch('AnyBot', sys.argv[1] + p) for p in sys.argv[2:]}, 'sitemaps': rp.site_maps()}))
"#;
    let paths = [
        "/",
        "/products",
        "/products/test-x",
        "/blog/",
        "/tags/jazz",
        "/sitemap.xml",
        "/admin",
        "/admin/products",
        "/cart",
        "/checkout",
        "/orders/lookup",
        "/search?q=jazz",
    ];
    let mut args = vec![HOST];
    args.extend(paths);
    let parsed: Value =
        serde_json::from_str(&python(&[], CODE, &args, &robots).expect("python3 runs"))
            .expect("json");
    for allowed in [
        "/",
        "/products",
        "/products/test-x",
        "/blog/",
        "/tags/jazz",
        "/sitemap.xml",
    ] {
        assert_eq!(
            parsed["fetch"][allowed], true,
            "{allowed} is open: {robots}"
        );
    }
    for denied in [
        "/admin",
        "/admin/products",
        "/cart",
        "/checkout",
        "/orders/lookup",
        "/search?q=jazz",
    ] {
        assert_eq!(
            parsed["fetch"][denied], false,
            "{denied} is closed: {robots}"
        );
    }
    assert_eq!(
        parsed["sitemaps"],
        serde_json::json!([format!("{HOST}/sitemap.xml")])
    );

    // The admin changes the rules; the sitemap line is still added.
    let token = csrf_token(&admin_page(&app, "/admin/settings").await).expect("form");
    let mut form = settings_form(&app).await;
    set_field(&mut form, "csrf_token", &token);
    set_field(
        &mut form,
        "robots_txt",
        "User-agent: *\r\nDisallow: /products",
    );
    let saved = app
        .post_admin_form("/admin/settings", &as_pairs(&form))
        .await;
    assert_eq!(saved.status(), StatusCode::SEE_OTHER);
    let robots = body(app.get("/robots.txt").await).await;
    let parsed: Value = serde_json::from_str(
        &python(&[], CODE, &[HOST, "/products", "/blog/"], &robots).expect("python3 runs"),
    )
    .expect("json");
    assert_eq!(parsed["fetch"]["/products"], false, "{robots}");
    assert_eq!(parsed["fetch"]["/blog/"], true, "{robots}");
    assert_eq!(parsed["sitemaps"][0], format!("{HOST}/sitemap.xml"));
    app.stop().await;
}

/// The settings form's fields as the admin's browser would send them.
pub(crate) async fn settings_form(app: &TestApp) -> Vec<(String, String)> {
    let page = admin_page(app, "/admin/settings").await;
    let inputs = scraper::Selector::parse("form.settings-form input, form.settings-form textarea")
        .expect("selector");
    page.select(&inputs)
        .filter_map(|el| {
            let name = el.value().attr("name")?.to_string();
            let value = match el.value().name() {
                "textarea" => el.text().collect(),
                _ => el.value().attr("value").unwrap_or_default().to_string(),
            };
            Some((name, value))
        })
        .collect()
}

pub(crate) fn set_field(form: &mut Vec<(String, String)>, name: &str, value: &str) {
    match form.iter_mut().find(|(n, _)| n == name) {
        Some(field) => field.1 = value.to_string(),
        None => form.push((name.to_string(), value.to_string())),
    }
}

pub(crate) fn as_pairs(form: &[(String, String)]) -> Vec<(&str, &str)> {
    form.iter().map(|(n, v)| (n.as_str(), v.as_str())).collect()
}

#[tokio::test]
async fn products_posts_and_the_site_carry_structured_data_and_cards_an_extractor_reads() {
    let app = app_on(HOST).await;
    let plenty = product_with_stock(&app.db, "plenty", 50).await;
    let few = product_with_stock(&app.db, "few", 2).await;
    let none = product_with_stock(&app.db, "none", 0).await;
    // Filed under a category with a parent: the breadcrumb has both.
    let music = CategoryBuilder::new("music")
        .name("Music")
        .build(&app.db)
        .await;
    let child = CategoryBuilder::new("jazz")
        .name("Jazz")
        .parent(&music)
        .build(&app.db)
        .await;
    products::collection(&app.db)
        .update_one(
            doc! { "_id": plenty.id },
            doc! { "$set": { "categories": [child.id], "category_path": [child.id] } },
        )
        .await
        .expect("filed");
    bazaar::catalog::changes::site_changed(&app.db);

    let Some(home) = extruct(&body(app.get("/").await).await, &format!("{HOST}/")) else {
        return;
    };
    let site = of_type(&home, "WebSite");
    assert_eq!(site.len(), 1, "{home}");
    let action = &site[0]["potentialAction"];
    assert_eq!(action["@type"], "SearchAction");
    let target = action["target"]["urlTemplate"].as_str().expect("target");
    assert!(
        target.starts_with(&format!("{HOST}/search?q=")) && target.contains("{search_term_string}")
    );
    assert_eq!(action["query-input"], "required name=search_term_string");
    let org = of_type(&home, "Organization");
    assert_eq!(org.len(), 1);
    assert_eq!(org[0]["name"], "Bazaar");
    assert_eq!(org[0]["url"], format!("{HOST}/"));
    assert_eq!(og(&home, "og:type"), "website");
    assert_eq!(og(&home, "og:url"), format!("{HOST}/").as_str());

    for (product, availability) in [
        (&plenty, "https://schema.org/InStock"),
        (&few, "https://schema.org/LimitedAvailability"),
        (&none, "https://schema.org/OutOfStock"),
    ] {
        let url = format!("{HOST}{}", product.url());
        let data = extruct(&body(app.get(&product.url()).await).await, &url).expect("extruct");
        let found = of_type(&data, "Product");
        assert_eq!(found.len(), 1, "{data}");
        let p = found[0];
        assert_eq!(p["name"], product.title.as_str());
        assert_eq!(p["sku"], product.sku.as_str());
        assert_eq!(p["url"], url);
        let offer = &p["offers"];
        assert_eq!(offer["@type"], "Offer");
        assert_eq!(offer["price"], "12.00");
        assert_eq!(offer["priceCurrency"], "USD");
        assert_eq!(offer["availability"], availability);
        assert_eq!(og(&data, "og:type"), "product");
        assert_eq!(og(&data, "og:title"), product.title.as_str());
        assert_eq!(og(&data, "og:url"), url.as_str());
    }
    let data = extruct(&body(app.get(&plenty.url()).await).await, HOST).expect("extruct");
    let crumbs = of_type(&data, "BreadcrumbList");
    assert_eq!(crumbs.len(), 1, "{data}");
    let items = crumbs[0]["itemListElement"].as_array().expect("items");
    let names: Vec<&str> = items.iter().map(|i| i["name"].as_str().unwrap()).collect();
    let mut expected: Vec<String> = vec!["Bazaar".into()];
    expected.extend(child.ancestors.iter().map(|a| a.name.clone()));
    expected.push(child.name.clone());
    expected.push(plenty.title.clone());
    assert_eq!(names, expected);
    for (i, item) in items.iter().enumerate() {
        assert_eq!(item["position"], i + 1);
        on_host(item["item"].as_str().expect("item url"));
    }
    assert_eq!(
        items.last().unwrap()["item"],
        format!("{HOST}{}", plenty.url())
    );

    // A photo post: BlogPosting with author, dates and the photo (its social card).
    let file = bson::oid::ObjectId::new();
    add_node(
        &app,
        "blog",
        "photo-post",
        "A photo",
        Detail::Photo(PhotoDetail {
            file_id: Some(file),
            caption: "The shop at dawn".into(),
            ..Default::default()
        }),
        Some(DateTime::now()),
        &["dawn"],
    )
    .await;
    let url = format!("{HOST}/blog/photo-post");
    let data = extruct(&body(app.get("/blog/photo-post").await).await, &url).expect("extruct");
    let posts = of_type(&data, "BlogPosting");
    assert_eq!(posts.len(), 1, "{data}");
    let post = posts[0];
    assert_eq!(post["headline"], "A photo");
    assert_eq!(post["author"]["@type"], "Person");
    assert_eq!(post["author"]["name"], "Tester");
    for date in ["datePublished", "dateModified"] {
        assert!(is_w3c_datetime(post[date].as_str().expect(date)), "{date}");
    }
    let image = format!("{HOST}/media/{}/social", file.to_hex());
    assert_eq!(post["image"][0], image.as_str());
    assert_eq!(og(&data, "og:type"), "article");
    assert_eq!(og(&data, "og:image"), image.as_str());
    assert_eq!(og(&data, "og:description"), "The shop at dawn");
    app.stop().await;
}

#[tokio::test]
async fn titles_with_script_tags_quotes_and_unicode_stay_inside_every_tag() {
    let app = app_on(HOST).await;
    let product = product_with_stock(&app.db, "hostile", 5).await;
    products::collection(&app.db)
        .update_one(
            doc! { "_id": product.id },
            doc! { "$set": { "title": HOSTILE_TITLE, "description": HOSTILE_TITLE } },
        )
        .await
        .expect("renamed");
    post(
        &app,
        "hostile-post",
        HOSTILE_TITLE,
        HOSTILE_TITLE,
        &["hostile"],
    )
    .await;
    for path in [product.url(), "/blog/hostile-post".to_string()] {
        let html = body(app.get(&path).await).await;
        let doc = common::html(&html);
        // No script but the structured data, and the page's body is intact after the head.
        assert_eq!(
            count(&doc, "script:not([type='application/ld+json'])"),
            0,
            "{path}"
        );
        assert!(count(&doc, "main#main") == 1, "{path}");
        for selector in ["meta[property='og:title']", "meta[name='twitter:title']"] {
            assert_eq!(
                attr(&doc, selector, "content").as_deref(),
                Some(HOSTILE_TITLE),
                "{path} {selector}"
            );
        }
        // A product's description is plain text, kept as written; a post's is its Markdown
        // made plain (the tags are gone, the words stay).
        let description = attr(&doc, "meta[name=description]", "content").expect("description");
        if path == product.url() {
            assert_eq!(description, HOSTILE_TITLE);
        } else {
            assert!(!description.contains('<'), "{description}");
            assert!(
                description.contains("\"quoted\" & 'single'"),
                "{description}"
            );
            assert!(description.ends_with("Ünïcødé ✓ 🎵"), "{description}");
        }
        let Some(data) = extruct(&html, &format!("{HOST}{path}")) else {
            continue;
        };
        let named: Vec<&Value> = data["json-ld"]
            .as_array()
            .expect("json-ld")
            .iter()
            .filter(|d| d["@type"] == "Product" || d["@type"] == "BlogPosting")
            .collect();
        assert_eq!(named.len(), 1, "{data}");
        let title = named[0]
            .get("name")
            .or(named[0].get("headline"))
            .expect("title");
        assert_eq!(title, HOSTILE_TITLE);
    }
    // The feed of the tag carries the title as text, too (parsed by feed-rs).
    let feed = app.get("/tags/hostile/feed.atom").await;
    assert_eq!(feed.status(), StatusCode::OK);
    let parsed = feed_rs::parser::parse(body(feed).await.as_bytes()).expect("the feed parses");
    assert_eq!(parsed.entries.len(), 1);
    assert_eq!(
        parsed.entries[0].title.as_ref().unwrap().content,
        HOSTILE_TITLE
    );
    app.stop().await;
}

#[tokio::test]
async fn product_and_post_cards_show_a_stored_1200_by_630_jpeg_of_the_photo() {
    let app = app_on(HOST).await;
    // A tall PNG with transparency: the card is cropped to the shape, flattened, a JPEG.
    let tall = image::RgbaImage::from_fn(500, 900, |x, y| {
        image::Rgba([
            (x % 256) as u8,
            (y % 256) as u8,
            90,
            if y < 100 { 0 } else { 255 },
        ])
    });
    let mut png = std::io::Cursor::new(Vec::new());
    image::DynamicImage::ImageRgba8(tall)
        .write_to(&mut png, image::ImageFormat::Png)
        .expect("png");
    let body_stream = futures::stream::iter([Ok::<_, std::io::Error>(
        actix_web::web::Bytes::from(png.into_inner()),
    )]);
    let photo = bazaar::media::store_upload(&app.db, "tall.png", body_stream, 10 << 20)
        .await
        .expect("stored");
    let product = product_with_stock(&app.db, "pictured", 5).await;
    products::collection(&app.db)
        .update_one(
            doc! { "_id": product.id },
            doc! { "$set": { "photos": [photo.id] } },
        )
        .await
        .expect("photo set");
    add_node(
        &app,
        "blog",
        "pictured-post",
        "Pictured",
        Detail::Photo(PhotoDetail {
            file_id: Some(photo.id),
            caption: "Tall".into(),
            ..Default::default()
        }),
        Some(DateTime::now()),
        &[],
    )
    .await;
    let card = format!("{HOST}/media/{}/social", photo.id.to_hex());
    for page in [product.url(), "/blog/pictured-post".to_string()] {
        let data = extruct(&body(app.get(&page).await).await, HOST).expect("extruct");
        assert_eq!(og(&data, "og:image"), card.as_str(), "{page}");
        assert_eq!(og(&data, "og:image:width"), "1200", "{page}");
        assert_eq!(og(&data, "og:image:height"), "630", "{page}");
    }
    let response = app.get(on_host(&card)).await;
    assert_eq!(response.status(), StatusCode::OK);
    assert_eq!(
        response.headers()["content-type"].to_str().unwrap(),
        "image/jpeg"
    );
    let etag = response.headers()["etag"].to_str().unwrap().to_string();
    let bytes = response.bytes().await.expect("bytes");
    let decoded =
        image::load_from_memory_with_format(&bytes, image::ImageFormat::Jpeg).expect("a JPEG");
    assert_eq!((decoded.width(), decoded.height()), (1200, 630));
    // Made once, when the photo was stored: what is sent is the copy the original names.
    let entry = app
        .db
        .collection::<bson::Document>(bazaar::media::FILES)
        .find_one(doc! { "_id": photo.id })
        .await
        .expect("read")
        .expect("stored");
    let social = entry
        .get_document("metadata")
        .and_then(|m| m.get_object_id("social"))
        .expect("the original names its social card");
    assert_eq!(etag, format!("\"{}\"", social.to_hex()));
    app.stop().await;
}

// Several threads: the feed finder (a blocking child process) fetches from this app meanwhile.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_feed_reader_given_the_home_page_or_a_tag_page_finds_their_feeds() {
    let app = app_at_its_own_address().await;
    NodeBuilder::page("about")
        .title("About")
        .build(&app.db)
        .await;
    post(&app, "tagged-post", "Tagged post", "Hello", &["found-tag"]).await;
    post(&app, "untagged-post", "Other post", "Hello", &[]).await;
    add_node(
        &app,
        "blog",
        "draft-tagged",
        "Draft",
        text("Hello"),
        None,
        &["found-tag"],
    )
    .await;
    const CODE: &str = r#"
import json, sys, feedfinder2
print(json.dumps(feedfinder2.find_feeds(sys.argv[1])))
"#;
    let Some(found) = python(&["feedfinder2"], CODE, &[&app.url("/")], "") else {
        return;
    };
    let feeds: Vec<String> = serde_json::from_str(&found).expect("json");
    assert!(feeds.contains(&app.url("/blog/feed.atom")), "{feeds:?}");
    // Found through the page's <link rel="alternate">, which every public page carries.
    for path in ["/", "/products", "/pages/about", "/categories"] {
        let doc = page(&app, path).await;
        assert_eq!(
            attr(
                &doc,
                "link[rel=alternate][type='application/atom+xml']",
                "href"
            ),
            Some(app.url("/blog/feed.atom")),
            "{path}"
        );
    }
    let found = python(&["feedfinder2"], CODE, &[&app.url("/tags/found-tag")], "").expect("python");
    let feeds: Vec<String> = serde_json::from_str(&found).expect("json");
    assert!(
        feeds.contains(&app.url("/tags/found-tag/feed.atom")),
        "{feeds:?}"
    );
    let gallery = page(&app, "/gallery/").await;
    let hrefs: Vec<String> = {
        let sel = scraper::Selector::parse("link[rel=alternate]").unwrap();
        gallery
            .select(&sel)
            .filter_map(|l| l.value().attr("href").map(String::from))
            .collect()
    };
    assert!(hrefs.contains(&app.url("/gallery/feed.atom")), "{hrefs:?}");

    // The tag feed holds the tag's published posts only, linking back to the tag page.
    let feed = app.get("/tags/found-tag/feed.atom").await;
    assert_eq!(feed.status(), StatusCode::OK);
    let parsed = feed_rs::parser::parse(body(feed).await.as_bytes()).expect("the feed parses");
    let titles: Vec<String> = parsed
        .entries
        .iter()
        .filter_map(|e| e.title.as_ref().map(|t| t.content.clone()))
        .collect();
    assert_eq!(titles, vec!["Tagged post".to_string()]);
    let alternate = parsed
        .links
        .iter()
        .find(|l| l.rel.as_deref() == Some("alternate"))
        .expect("alternate link");
    assert_eq!(
        app.get(alternate.href.strip_prefix(&app.address).unwrap())
            .await
            .status(),
        StatusCode::OK
    );
    assert_eq!(
        app.get("/tags/no-such-tag/feed.atom").await.status(),
        StatusCode::NOT_FOUND
    );
    app.stop().await;
}

/// `GET path` with one request header.
async fn get_with(app: &TestApp, path: &str, name: &str, value: &str) -> reqwest::Response {
    app.client
        .get(app.url(path))
        .header(name, value)
        .send()
        .await
        .expect("request sent")
}

#[tokio::test]
async fn feeds_sitemaps_and_robots_answer_not_modified_to_a_client_that_has_them() {
    let app = app_on(HOST).await;
    post(&app, "cached-post", "Cached", "Hi", &["cached"]).await;
    for path in [
        "/blog/feed.atom",
        "/tags/cached/feed.atom",
        "/sitemap.xml",
        "/sitemaps/categories.xml",
        "/robots.txt",
    ] {
        let first = app.get(path).await;
        assert_eq!(first.status(), StatusCode::OK, "{path}");
        let etag = first.headers()["etag"].to_str().unwrap().to_string();
        let modified = first
            .headers()
            .get("last-modified")
            .map(|v| v.to_str().unwrap().to_string());
        let again = get_with(&app, path, "if-none-match", &etag).await;
        assert_eq!(again.status(), StatusCode::NOT_MODIFIED, "{path}");
        assert!(body(again).await.is_empty());
        let other = get_with(&app, path, "if-none-match", "\"something-else\"").await;
        assert_eq!(other.status(), StatusCode::OK, "{path}");
        if let Some(modified) = modified {
            let since = get_with(&app, path, "if-modified-since", &modified).await;
            assert_eq!(since.status(), StatusCode::NOT_MODIFIED, "{path}");
        }
    }
    // A new post changes the feed: the old ETag no longer matches.
    let etag = app.get("/blog/feed.atom").await.headers()["etag"]
        .to_str()
        .unwrap()
        .to_string();
    post(&app, "newer-post", "Newer", "Hi", &[]).await;
    let after = get_with(&app, "/blog/feed.atom", "if-none-match", &etag).await;
    assert_eq!(after.status(), StatusCode::OK);
    app.stop().await;
}

#[tokio::test]
async fn every_public_page_has_an_absolute_canonical_address_and_filtered_listings_are_noindex() {
    let app = app_on(HOST).await;
    let product = product_with_stock(&app.db, "canon", 3).await;
    // A second page of products, and the about page.
    for n in 0..bazaar::catalog::seek::PAGE_SIZE {
        product_with_stock(&app.db, &format!("canon-{n}"), 3).await;
    }
    NodeBuilder::page("about")
        .title("About")
        .build(&app.db)
        .await;
    let cases: Vec<(String, String, bool)> = vec![
        ("/".into(), format!("{HOST}/"), false),
        ("/?utm_source=x".into(), format!("{HOST}/"), false),
        ("/products".into(), format!("{HOST}/products"), false),
        (
            "/products?page=2".into(),
            format!("{HOST}/products?page=2"),
            false,
        ),
        (
            "/products?sort=price".into(),
            format!("{HOST}/products"),
            true,
        ),
        (
            "/products?type=album".into(),
            format!("{HOST}/products"),
            true,
        ),
        (product.url(), format!("{HOST}{}", product.url()), false),
        ("/categories".into(), format!("{HOST}/categories"), false),
        ("/blog".into(), format!("{HOST}/blog/"), false),
        ("/blog/".into(), format!("{HOST}/blog/"), false),
        ("/pages/about".into(), format!("{HOST}/pages/about"), false),
        ("/cart".into(), format!("{HOST}/cart"), true),
        ("/search?q=jazz".into(), format!("{HOST}/search"), true),
        (
            "/orders/lookup".into(),
            format!("{HOST}/orders/lookup"),
            true,
        ),
    ];
    for (path, canonical, noindex) in cases {
        let doc = page(&app, &path).await;
        assert_eq!(count(&doc, "link[rel=canonical]"), 1, "{path}");
        assert_eq!(
            attr(&doc, "link[rel=canonical]", "href"),
            Some(canonical),
            "{path}"
        );
        let robots = attr(&doc, "meta[name=robots]", "content");
        assert_eq!(
            robots.is_some_and(|r| r.contains("noindex")),
            noindex,
            "{path}"
        );
        let description = attr(&doc, "meta[name=description]", "content").unwrap_or_default();
        assert!(!description.trim().is_empty(), "{path} has a description");
        assert!(
            attr(&doc, "meta[name='twitter:card']", "content").is_some(),
            "{path}"
        );
    }
    // The admin's pages carry none of it.
    let admin = admin_page(&app, "/admin").await;
    assert_eq!(count(&admin, "link[rel=canonical]"), 0);
    app.stop().await;
}

#[tokio::test]
async fn links_to_the_shops_own_pages_are_followed_and_only_links_leaving_it_are_nofollow() {
    let app = app_on(HOST).await;
    add_node(
        &app,
        "blog",
        "links-post",
        "Links",
        text("See [the shop](/products), [notes](#notes) and [elsewhere](https://example.com/x)."),
        Some(DateTime::now()),
        &[],
    )
    .await;
    let doc = page(&app, "/blog/links-post").await;
    let rel_of = |href: &str| attr(&doc, &format!("article a[href='{href}']"), "rel");
    assert_eq!(rel_of("/products"), None);
    assert_eq!(rel_of("#notes"), None);
    let outside = rel_of("https://example.com/x").expect("a rel");
    assert!(outside.split(' ').any(|r| r == "nofollow"), "{outside}");
    app.stop().await;
}

#[tokio::test]
async fn the_admin_sets_the_description_social_image_and_organisation_and_bad_values_are_explained()
{
    let app = app_on(HOST).await;
    let token = csrf_token(&admin_page(&app, "/admin/settings").await).expect("form");
    let mut form = settings_form(&app).await;
    set_field(&mut form, "csrf_token", &token);
    set_field(&mut form, "description", HOSTILE_TITLE);
    set_field(&mut form, "social_image", "/static/images/favicon.svg");
    set_field(
        &mut form,
        "organisation",
        "Bazaar \"Records\" </script> GmbH ✓",
    );
    set_field(&mut form, "currency_code", "eur");
    let saved = app
        .post_admin_form("/admin/settings", &as_pairs(&form))
        .await;
    assert_eq!(saved.status(), StatusCode::SEE_OTHER);
    let html = body(app.get("/").await).await;
    let doc = common::html(&html);
    assert_eq!(
        attr(&doc, "meta[name=description]", "content").as_deref(),
        Some(HOSTILE_TITLE)
    );
    assert_eq!(
        attr(&doc, "meta[property='og:image']", "content"),
        Some(format!("{HOST}/static/images/favicon.svg"))
    );
    assert_eq!(count(&doc, "script:not([type='application/ld+json'])"), 0);
    if let Some(data) = extruct(&html, HOST) {
        assert_eq!(
            of_type(&data, "Organization")[0]["name"],
            "Bazaar \"Records\" </script> GmbH ✓"
        );
        assert_eq!(of_type(&data, "WebSite")[0]["description"], HOSTILE_TITLE);
    }
    let product = product_with_stock(&app.db, "euro", 3).await;
    if let Some(data) = extruct(&body(app.get(&product.url()).await).await, HOST) {
        assert_eq!(
            of_type(&data, "Product")[0]["offers"]["priceCurrency"],
            "EUR"
        );
    }

    // Bad values: the form again (422) with the field marked, nothing saved.
    for (field, value) in [
        ("social_image", "javascript:alert(1)"),
        ("social_image", "//evil.example/x.png"),
        ("currency_code", "€€"),
        ("description", "two\nlines"),
        ("organisation", &"x".repeat(101)),
    ] {
        let mut bad = form.clone();
        set_field(&mut bad, field, value);
        let response = app
            .post_admin_form("/admin/settings", &as_pairs(&bad))
            .await;
        assert_eq!(
            response.status(),
            StatusCode::UNPROCESSABLE_ENTITY,
            "{field}={value:?}"
        );
        let doc = common::html(&body(response).await);
        assert_eq!(
            attr(&doc, &format!("#{field}"), "aria-invalid").as_deref(),
            Some("true"),
            "{field}"
        );
    }
    let settings = bazaar::db::site::load(&app.db).await.expect("settings");
    assert_eq!(settings.social_image, "/static/images/favicon.svg");
    assert_eq!(settings.currency_code, "EUR");
    // A form from before these fields existed changes the others and keeps these.
    let older: Vec<(&str, &str)> = as_pairs(&form)
        .into_iter()
        .filter(|(n, _)| {
            ![
                "currency_code",
                "description",
                "social_image",
                "organisation",
                "robots_txt",
                "tagline",
            ]
            .contains(n)
        })
        .chain([("tagline", "Older form")])
        .collect();
    let saved = app.post_admin_form("/admin/settings", &older).await;
    assert_eq!(saved.status(), StatusCode::SEE_OTHER);
    let after = bazaar::db::site::load(&app.db).await.expect("settings");
    assert_eq!(after.tagline, "Older form");
    assert_eq!(
        (
            after.social_image,
            after.currency_code,
            after.organisation,
            after.robots_txt
        ),
        (
            settings.social_image.clone(),
            settings.currency_code.clone(),
            settings.organisation.clone(),
            settings.robots_txt.clone()
        )
    );
    // Without the session's token, nothing is saved.
    let mut forged = form.clone();
    set_field(&mut forged, "csrf_token", "forged");
    set_field(&mut forged, "organisation", "Forged");
    let response = app
        .post_admin_form("/admin/settings", &as_pairs(&forged))
        .await;
    assert_eq!(response.status(), StatusCode::FORBIDDEN);
    assert_ne!(
        bazaar::db::site::load(&app.db).await.unwrap().organisation,
        "Forged"
    );
    app.stop().await;
}

#[tokio::test]
async fn every_sitemap_query_runs_on_an_index() {
    let app = app_on(HOST).await;
    let (filter, projection, sort) = sitemap::product_walk();
    let explain = |find: bson::Document| {
        let db = app.db.clone();
        async move {
            db.database()
                .run_command(doc! { "explain": find, "verbosity": "queryPlanner" })
                .await
                .expect("explain runs")
        }
    };
    let key_of = |explain: &bson::Document| {
        let plan = Bson::Document(explain.clone());
        assert!(find_stage(&plan, "COLLSCAN").is_none(), "{explain}");
        find_stage(&plan, "IXSCAN")
            .and_then(|s| s.get_document("keyPattern").ok().cloned())
            .unwrap_or_else(|| panic!("an index scan: {explain}"))
    };
    let walk = explain(doc! {
        "find": products::COLLECTION, "filter": filter, "projection": projection, "sort": sort.clone(),
    })
    .await;
    assert_eq!(key_of(&walk), doc! { "_id": 1 });
    let chunk = explain(doc! {
        "find": products::COLLECTION,
        "filter": sitemap::product_chunk_filter(bson::oid::ObjectId::new()),
        "sort": sort, "limit": 50_000,
    })
    .await;
    assert_eq!(key_of(&chunk), doc! { "_id": 1 });
    let section = explain(doc! {
        "find": store::COLLECTION,
        "filter": sitemap::section_filter("blog", DateTime::now()),
        "sort": { "metadata.published": -1 },
    })
    .await;
    assert_eq!(
        key_of(&section),
        doc! { "metadata.section": 1, "metadata.published": -1, "_id": -1 }
    );
    for (collection, pipeline) in sitemap::tag_pipelines(DateTime::now()) {
        let filter = pipeline[0]
            .get_document("$match")
            .expect("$match first")
            .clone();
        let tags = explain(doc! { "find": collection, "filter": filter }).await;
        let key = key_of(&tags);
        assert!(
            key == doc! { "metadata.tags": 1, "metadata.published": -1 }
                || key == doc! { "tags": 1 },
            "{collection}: {key}"
        );
    }
    app.stop().await;
}

#[tokio::test]
async fn the_sitemap_index_walks_the_products_once_a_period_and_a_new_product_is_still_listed() {
    let app = spawn_app_with(&[
        ("BAZAAR_SERVER__PUBLIC_URL", HOST),
        ("BAZAAR_LOG__DATABASE_COMMANDS", "true"),
        ("BAZAAR_ANALYTICS__EVENTS", "false"),
    ])
    .await;
    for n in 0..5 {
        product_with_stock(&app.db, &format!("mapped-{n}"), 3).await;
    }
    let product_reads = |app: &TestApp| {
        app.db
            .commands()
            .take()
            .iter()
            .filter(|c| c.name == "find" && c.target == products::COLLECTION)
            .count()
    };
    app.db.commands().record();
    let first = body(app.get("/sitemap.xml").await).await;
    assert!(
        product_reads(&app) >= 1,
        "the first index walks the products"
    );
    // A crawler looping on the index costs no further walk within the period.
    for _ in 0..3 {
        assert_eq!(body(app.get("/sitemap.xml").await).await, first);
    }
    assert_eq!(product_reads(&app), 0, "the later indexes reuse the walk");

    // A product added since is listed at once, in the last product sitemap, read live.
    let added = product_with_stock(&app.db, "added-after-the-walk", 3).await;
    let index = parse_sitemap_xml(&first);
    let last_products = index["entries"]
        .as_array()
        .expect("entries")
        .iter()
        .filter_map(|e| e["loc"].as_str())
        .rfind(|loc| loc.contains("/sitemaps/products-"))
        .expect("a product sitemap")
        .to_string();
    let sitemap = body(app.get(on_host(&last_products)).await).await;
    assert!(
        sitemap.contains(&format!("/products/{}", added.slug)),
        "the new product is in {last_products}"
    );
    app.stop().await;
}
