//! A bounded hostile-input pass over every public page and form (the shop, the content sections
//! and feeds, tag pages and tag feeds, sitemaps, robots.txt, the comment forms and permalinks,
//! and the customer account pages and forms, signed in), through HTTP: query strings, path
//! segments, form values, cookies and Basic headers made of control characters, markup,
//! operator-looking JSON, huge and negative numbers and random Unicode. Whatever arrives, the
//! site answers without a 5xx, never reflects markup unescaped, and a POST without the
//! session's CSRF token changes nothing.
//!
//! Two parts: a fixed corpus of known-bad values sent to every route, then proptest-generated
//! values. Each generated case sends a few dozen requests, so the number of cases is set here
//! rather than taken from `PROPTEST_CASES` (CI sets 4096 for the cheap property tests, which
//! would make this pass take many minutes); `HOSTILE_INPUT_CASES` raises it for a longer run.

use crate::common::builders::{CategoryBuilder, CommentBuilder, NodeBuilder, ProductBuilder};
use crate::common::shop::*;
use crate::common::*;
use bson::doc;
use proptest::prelude::*;
use proptest::test_runner::{Config, TestCaseError, TestRunner};
use reqwest::StatusCode;

/// An ObjectId no comment has.
const FAKE_ID: &str = "65a1b2c3d4e5f60718293a4b";

/// Generated cases per run unless `HOSTILE_INPUT_CASES` says otherwise (see the module comment).
const DEFAULT_CASES: u32 = 24;

/// Appended to values so an unescaped reflection shows as this exact text in a page.
pub(crate) const MARK: &str = "<hx7 q=\"'\">";
/// What [`MARK`] looks like when it reached a page unescaped.
pub(crate) const UNESCAPED: &str = "<hx7";

pub(crate) const CORPUS: &[&str] = &[
    "\0",
    "a\0b",
    "\u{1}\u{1f}\u{7f}",
    "\r\nSet-Cookie: x=1",
    "-9223372036854775808",
    "9223372036854775807",
    "18446744073709551616",
    "-1",
    "0",
    "1e308",
    "NaN",
    "inf",
    "0x10",
    "99.999",
    "$where",
    "{\"$gt\": \"\"}",
    "[$ne]=1",
    "../../../etc/passwd",
    "..%2f..%2fetc%2fpasswd",
    "<script>alert(1)</script>",
    "\"><svg onload=alert(1)>",
    "javascript:alert(1)",
    "\u{202e}gnp.exe",
    "\u{fffd}\u{10ffff}",
    "%00%ff%fe",
    "a@example.com?bcc=x@evil.example",
    "(*+?[ .^$|{}\\",
];

/// Listing query keys (and one the site does not know).
const LISTING_KEYS: &[&str] = &[
    "q",
    "page",
    "sort",
    "type",
    "genre",
    "person",
    "min_price",
    "max_price",
    "min_discount",
    "in_stock",
    "utm_source",
];

const CHECKOUT_FIELDS: &[&str] = &[
    "email",
    "name",
    "street",
    "city",
    "postcode",
    "country",
    "card_number",
    "expiry",
    "cvc",
];

pub(crate) fn encode(text: &str) -> String {
    form_urlencoded::byte_serialize(text.as_bytes()).collect()
}

/// The post and product ([`hostile_app`] builds them) whose discussions the pass posts to.
const POST: &str = "/blog/miles-on-so-what";
const PRODUCT: &str = "/products/kind-of-blue";

/// What the shop holds: any change by a refused POST would show here.
async fn state_snapshot(app: &TestApp) -> (u64, u64, u64, i64, i64, u64) {
    let count = |name: &'static str| {
        let db = app.db.clone();
        async move {
            db.collection::<bson::Document>(name)
                .count_documents(doc! {})
                .await
                .expect("count")
        }
    };
    let products: Vec<bazaar::catalog::products::Product> = {
        use futures::TryStreamExt;
        bazaar::catalog::products::collection(&app.db)
            .find(doc! {})
            .await
            .expect("find")
            .try_collect()
            .await
            .expect("products")
    };
    let available = products.iter().map(|p| p.qty).sum();
    let reserved = products.iter().map(|p| p.reserved).sum();
    let addresses: u64 = {
        use futures::TryStreamExt;
        let accounts: Vec<bazaar::accounts::Account> = bazaar::accounts::store::collection(&app.db)
            .find(doc! {})
            .await
            .expect("find")
            .try_collect()
            .await
            .expect("accounts");
        accounts.iter().map(|a| a.addresses.len() as u64).sum()
    };
    (
        count("carts").await,
        count("orders").await,
        count("comments").await,
        available,
        reserved,
        count("accounts").await
            + count("sign_in_tokens").await
            + count("privacy_requests").await
            + addresses,
    )
}

/// Whatever was posted or refused, each discussion's stored counter equals its visible comments.
async fn assert_comment_counts_exact(app: &TestApp) {
    let visible = |id: bson::oid::ObjectId| {
        let db = app.db.clone();
        async move {
            db.collection::<bson::Document>("comments")
                .count_documents(doc! { "discussion_id": id, "status": "visible" })
                .await
                .expect("count") as i64
        }
    };
    let post = app
        .db
        .collection::<bson::Document>("nodes")
        .find_one(doc! { "metadata.section": "blog", "metadata.slug": "miles-on-so-what" })
        .await
        .expect("query")
        .expect("the post");
    let counter = match post
        .get_document("metadata")
        .expect("metadata")
        .get("comment_count")
    {
        Some(bson::Bson::Int32(n)) => i64::from(*n),
        Some(bson::Bson::Int64(n)) => *n,
        other => panic!("comment_count is {other:?}"),
    };
    assert_eq!(counter, visible(post.get_object_id("_id").unwrap()).await);
    let product = bazaar::catalog::products::by_slug(&app.db, &slug("kind-of-blue"))
        .await
        .expect("query")
        .expect("the product");
    assert_eq!(product.comment_count, visible(product.id).await);
}

/// One request's outcome checked: no 5xx, no unescaped marker in what came back (following one
/// redirect, where a flash message may repeat the input).
async fn check(shopper: &Shopper, what: &str, response: reqwest::Response) -> Result<(), String> {
    let status = response.status();
    if status.is_server_error() {
        return Err(format!("{what}: answered {status}"));
    }
    let next = (status == StatusCode::SEE_OTHER).then(|| location(&response));
    let text = response.text().await.unwrap_or_default();
    if text.contains(UNESCAPED) {
        return Err(format!("{what}: the input was reflected unescaped"));
    }
    if let Some(next) = next.filter(|n| n.starts_with('/')) {
        let followed = shopper.get(&next).await;
        let status = followed.status();
        if status.is_server_error() {
            return Err(format!("{what} → {next}: answered {status}"));
        }
        if followed
            .text()
            .await
            .unwrap_or_default()
            .contains(UNESCAPED)
        {
            return Err(format!(
                "{what} → {next}: the input was reflected unescaped"
            ));
        }
    }
    Ok(())
}

/// Every public page and form with `value` in each place input can go.
async fn probe(app: &TestApp, shopper: &Shopper, value: &str) -> Result<(), String> {
    let v = encode(value);
    let mut gets: Vec<String> = vec![
        format!("/products/{v}"),
        format!("/categories/{v}"),
        format!("/orders/{v}"),
        format!("/media/{v}"),
        format!("/media/{v}/thumb"),
        format!("/media/{v}/display"),
        format!("/media/{v}/social"),
        format!("/static/{v}"),
        format!("/{v}"),
        format!("/cart?{v}={v}"),
        format!("/checkout?{v}={v}"),
        format!("/?{v}"),
        format!("/healthz?{v}"),
        format!("/categories/jazz?q={v}&page={v}&sort={v}"),
        format!("/search?q={v}"),
        format!("/search?q=jazz&page={v}&{v}={v}"),
    ];
    if v.len() < 4_000 {
        // Every filter at once (a URL of many long values would exceed what clients send).
        let listing: Vec<String> = LISTING_KEYS.iter().map(|k| format!("{k}={v}")).collect();
        gets.push(format!("/products?{}", listing.join("&")));
    }
    for key in LISTING_KEYS {
        gets.push(format!("/products?{key}={v}"));
    }
    // Content sections, feeds, tag pages and comment permalinks.
    gets.extend([
        format!("/blog/?page={v}"),
        format!("/blog?page={v}&{v}={v}"),
        format!("/blog/{v}"),
        format!("{POST}?after={v}"),
        format!("{POST}?before={v}&{v}={v}"),
        format!("/pages/about?{v}={v}"),
        format!("/pages/{v}"),
        format!("/gallery/?page={v}"),
        format!("/gallery/{v}"),
        format!("/blog/feed.atom?{v}={v}"),
        format!("/gallery/feed.atom?page={v}"),
        format!("/tags/{v}"),
        format!("/tags/jazz?page={v}&{v}={v}"),
        format!("{POST}/comments/{v}"),
        format!("{POST}/comments/m001/{v}"),
        format!("{POST}/comments/m001?after={v}"),
        format!("{POST}/comments?{v}={v}"),
        format!("/blog/{v}/comments/{v}"),
        format!("{PRODUCT}/comments/{v}"),
        format!("{PRODUCT}/comments/d001/{v}"),
        format!("{PRODUCT}/comments/d001?after={v}"),
        format!("{PRODUCT}?after={v}&before={v}"),
        format!("/orders/lookup?{v}={v}"),
        // Customer accounts (the pass's shopper is signed in: see `hostile_app`).
        format!("/account?{v}={v}"),
        format!("/account/sign-in?{v}={v}"),
        format!("/account/sign-in/code?{v}={v}"),
        format!("/account/sign-in/link/{v}"),
        format!("/account/orders/{v}"),
        format!("/account/addresses?{v}={v}"),
        format!("/account/addresses/new?{v}={v}"),
        format!("/account/addresses/{v}"),
        format!("/account/settings?{v}={v}"),
        format!("/account/privacy?{v}={v}"),
        format!("/account/comments?{v}={v}"),
        format!("/account/comments/{v}"),
        format!("/account/comments/{FAKE_ID}"),
        format!("/account/privacy/confirm/{v}"),
        format!("/comments/unsubscribe/{v}/{v}"),
        format!("/comments/unsubscribe/{FAKE_ID}/{v}"),
        // Sitemaps, robots.txt and tag feeds.
        format!("/sitemap.xml?{v}={v}"),
        format!("/sitemaps/{v}"),
        format!("/sitemaps/{v}.xml"),
        format!("/sitemaps/products-{v}.xml"),
        format!("/sitemaps/blog-{v}.xml"),
        format!("/sitemaps/{v}-1.xml"),
        format!("/robots.txt?{v}"),
        format!("/tags/{v}/"),
        format!("/tags/{v}/feed.atom"),
        format!("/tags/jazz/feed.atom?{v}={v}"),
    ]);
    for path in &gets {
        let response = shopper.get(path).await;
        check(shopper, &format!("GET {path}"), response).await?;
    }
    // Forged cookies and Basic headers on a public page.
    let printable: String = value
        .chars()
        .filter(|c| c.is_ascii_graphic() && *c != ';')
        .collect();
    let forged = shopper
        .client
        .get(app.url("/products"))
        .header("cookie", format!("bazaar_session={printable}"))
        .basic_auth(value, Some(value))
        .send()
        .await
        .map_err(|e| format!("forged cookie: {e}"))?;
    check(shopper, "GET /products with a forged cookie", forged).await?;

    // The forms, with the session's token.
    let address = hostile_address(app).await;
    let forms: Vec<(String, Vec<(&str, &str)>)> = vec![
        (
            "/cart/items".to_string(),
            vec![("sku", value), ("qty", value)],
        ),
        (
            "/cart/items".to_string(),
            vec![("sku", "hx"), ("qty", value)],
        ),
        (format!("/cart/items/{v}"), vec![("qty", value)]),
        ("/cart/items/hx".to_string(), vec![("qty", value)]),
        (format!("/cart/items/{v}/remove"), vec![]),
        // Comments and replies with a hostile name and text: stored and shown escaped, or
        // refused with a form message (a 4xx); never a 5xx.
        (
            format!("{POST}/comments"),
            vec![("name", value), ("text", value), ("website", "")],
        ),
        (
            format!("{POST}/comments"),
            vec![("name", "hx"), ("text", value), ("website", value)],
        ),
        (
            format!("{POST}/comments/m001"),
            vec![("name", value), ("text", value), ("website", "")],
        ),
        (
            format!("{POST}/comments/{v}"),
            vec![("name", "hx"), ("text", value), ("website", "")],
        ),
        (
            format!("/blog/{v}/comments"),
            vec![("name", value), ("text", "hx"), ("website", "")],
        ),
        (
            format!("{PRODUCT}/comments"),
            vec![("name", value), ("text", value), ("website", "")],
        ),
        (
            format!("{PRODUCT}/comments/d001"),
            vec![("name", "hx"), ("text", value), ("website", "")],
        ),
        (
            format!("{PRODUCT}/comments/{v}"),
            vec![("name", value), ("text", "hx"), ("website", "")],
        ),
        // "Remember me" with a hostile name: kept in the session and pre-filled (escaped) into
        // every form this shopper sees next; and a hostile tick value.
        (
            format!("{POST}/comments"),
            vec![
                ("name", value),
                ("email", "hx@example.com"),
                ("remember", "yes"),
                ("text", "hx"),
                ("website", ""),
            ],
        ),
        (
            format!("{PRODUCT}/comments"),
            vec![
                ("name", "hx"),
                ("remember", value),
                ("text", "hx"),
                ("website", ""),
            ],
        ),
        // The optional email and the notify tick.
        (
            format!("{POST}/comments"),
            vec![
                ("name", "hx"),
                ("email", value),
                ("notify", value),
                ("text", "hx"),
                ("website", ""),
            ],
        ),
        (
            format!("{PRODUCT}/comments/d001"),
            vec![
                ("name", "hx"),
                ("email", "hx@example.com"),
                ("notify", "yes"),
                ("text", value),
                ("website", ""),
            ],
        ),
        (
            "/checkout".to_string(),
            CHECKOUT_FIELDS.iter().map(|f| (*f, value)).collect(),
        ),
        (
            "/orders/lookup".to_string(),
            vec![("number", value), ("email", value)],
        ),
        ("/account/sign-in".to_string(), vec![("email", value)]),
        ("/account/sign-in/code".to_string(), vec![("code", value)]),
        (format!("/account/sign-in/link/{v}"), vec![]),
        (
            "/account/settings".to_string(),
            vec![("display_name", value), ("notify_replies", value)],
        ),
        (
            "/account/addresses".to_string(),
            ADDRESS_FIELDS.iter().map(|f| (*f, value)).collect(),
        ),
        (
            format!("/account/addresses/{address}"),
            ADDRESS_FIELDS.iter().map(|f| (*f, value)).collect(),
        ),
        (
            format!("/account/addresses/{v}"),
            ADDRESS_FIELDS.iter().map(|f| (*f, value)).collect(),
        ),
        (format!("/account/addresses/{v}/delete"), vec![]),
        (format!("/account/addresses/{v}/default"), vec![]),
        (format!("/account/comments/{v}"), vec![("text", value)]),
        (
            format!("/account/comments/{FAKE_ID}"),
            vec![("text", value)],
        ),
        (format!("/account/comments/{v}/delete"), vec![]),
        // Asking for a confirmation email takes no fields; the links' tokens are made up here.
        ("/account/privacy/export".to_string(), vec![("hx", value)]),
        ("/account/privacy/delete".to_string(), vec![("hx", value)]),
        (format!("/account/privacy/confirm/{v}"), vec![("hx", value)]),
        (
            format!("/account/privacy/confirm/{}", "a".repeat(64)),
            vec![],
        ),
    ];
    for (path, fields) in &forms {
        let response = shopper.post(path, fields).await;
        check(shopper, &format!("POST {path}"), response).await?;
    }
    // The one-click unsubscribe takes POSTs without a token (its signature authorises it): a
    // made-up one is not found, whatever it carries.
    for path in [
        format!("/comments/unsubscribe/{v}/{v}"),
        format!("/comments/unsubscribe/{FAKE_ID}/{v}"),
        format!("/comments/unsubscribe/{FAKE_ID}/{}", "a".repeat(64)),
    ] {
        let response = shopper
            .client
            .post(app.url(&path))
            .form(&[("List-Unsubscribe", value)])
            .send()
            .await
            .map_err(|e| format!("POST {path}: {e}"))?;
        let status = response.status();
        if status != StatusCode::NOT_FOUND && status != StatusCode::BAD_REQUEST {
            return Err(format!("POST {path} answered {status}"));
        }
        check(shopper, &format!("POST {path}"), response).await?;
    }

    // The same forms without a token (or with a wrong one) change nothing; nor do the
    // sign-out forms (not sent with the token above: they would end the pass's session).
    let before = state_snapshot(app).await;
    let sign_outs = ["/account/sign-out", "/account/sign-out-everywhere"]
        .map(|path| (path.to_string(), vec![("hx", value)]));
    for (path, fields) in forms.iter().chain(sign_outs.iter()) {
        for token in [None, Some(value)] {
            let mut body: Vec<(&str, &str)> = fields.clone();
            if let Some(t) = token {
                body.push(("csrf_token", t));
            }
            let response = shopper
                .client
                .post(app.url(path))
                .form(&body)
                .send()
                .await
                .map_err(|e| format!("POST {path}: {e}"))?;
            if response.status() != StatusCode::FORBIDDEN {
                return Err(format!(
                    "POST {path} without a valid token answered {}",
                    response.status()
                ));
            }
        }
    }
    let after = state_snapshot(app).await;
    if before != after {
        return Err(format!(
            "POSTs without a token changed the shop: {before:?} → {after:?}"
        ));
    }
    Ok(())
}

/// The fields of the saved-address form.
const ADDRESS_FIELDS: &[&str] = &[
    "name", "line1", "line2", "city", "postcode", "country", "default",
];

/// The email the pass's shopper is signed in with.
const HOSTILE_ACCOUNT: &str = "hostile@example.com";

/// The id of the pass's shopper's saved address.
async fn hostile_address(app: &TestApp) -> String {
    let email = bazaar::domain::EmailAddress::parse(HOSTILE_ACCOUNT).expect("valid");
    let account = bazaar::accounts::store::find_by_email(&app.db, &email)
        .await
        .expect("query")
        .expect("the pass's shopper has an account");
    account.addresses[0].id.to_hex()
}

/// Sign `shopper` in by the code of the sign-in email (read from the outbox), with one saved
/// address, so the account pages and forms are probed signed in.
async fn sign_in(app: &TestApp, shopper: &mut Shopper) {
    let asked = shopper
        .post("/account/sign-in", &[("email", HOSTILE_ACCOUNT)])
        .await;
    assert_eq!(asked.status(), StatusCode::SEE_OTHER);
    let sent = app
        .db
        .collection::<bson::Document>("outbox")
        .find_one(doc! { "kind": "sign-in", "to": HOSTILE_ACCOUNT })
        .await
        .expect("query")
        .expect("the sign-in email was queued");
    let text = sent.get_str("text").expect("text");
    let code = text
        .lines()
        .map(str::trim)
        .find(|l| l.len() == 6 && l.bytes().all(|b| b.is_ascii_digit()))
        .expect("a code");
    let entered = shopper
        .post("/account/sign-in/code", &[("code", code)])
        .await;
    assert_eq!(entered.status(), StatusCode::SEE_OTHER);
    shopper.refresh_token().await;
    let saved = shopper
        .post(
            "/account/addresses",
            &[
                ("name", "Hx"),
                ("line1", "1 Hx Street"),
                ("city", "Hx"),
                ("postcode", "HX1"),
                ("country", "United Kingdom"),
            ],
        )
        .await;
    assert_eq!(saved.status(), StatusCode::SEE_OTHER);
}

/// Who wrote the comment [`hostile_app`] starts the post's discussion with.
const FIRST_COMMENTER: &str = "Early Reader";

async fn hostile_app() -> (TestApp, Shopper) {
    // Generous cart and comment limits: this pass looks for errors, not for the limits
    // themselves.
    let app = spawn_app_with(&[
        ("BAZAAR_CART__NEW_CARTS_PER_HOUR", "1000000"),
        ("BAZAAR_COMMENTS__RATE_LIMIT_PER_MINUTE", "0"),
        ("BAZAAR_CART__ORDER_LOOKUPS_PER_HOUR", "100000"),
        ("BAZAAR_SEARCH__PER_CLIENT_PER_MINUTE", "1000000"),
        ("BAZAAR_ACCOUNTS__SIGN_INS_PER_CLIENT_PER_HOUR", "1000000"),
        ("BAZAAR_METRICS__TOKEN", METRICS_TOKEN),
    ])
    .await;
    let db = &app.db;
    // What the probed pages show: a category with a product, a blog post with a comment, a
    // page and a gallery photo.
    let jazz = CategoryBuilder::new("jazz").name("Jazz").build(db).await;
    ProductBuilder::new("kind")
        .slug("kind-of-blue")
        .title("Kind of Blue")
        .stock(5)
        .category(&jazz)
        .build(db)
        .await;
    let post = NodeBuilder::post("miles-on-so-what")
        .title("Miles on So What")
        .text("Two chords, and all the room in between.")
        .build(db)
        .await;
    CommentBuilder::on_node(&post)
        .name(FIRST_COMMENTER)
        .build(db)
        .await;
    NodeBuilder::page("about").title("About").build(db).await;
    NodeBuilder::photo("blue-hour").build(db).await;
    product_with_stock(&app.db, "hx", 1000).await;
    let mut shopper = Shopper::new(&app).await;
    sign_in(&app, &mut shopper).await;
    shopper.add("hx", "1").await;
    (app, shopper)
}

#[tokio::test]
async fn every_public_page_and_form_survives_the_hostile_corpus() {
    let (app, shopper) = hostile_app().await;
    // The marker does reach pages, escaped: the reflection check below is not vacuous.
    let page = body(shopper.get(&format!("/products?q={}", encode(MARK))).await).await;
    assert!(
        page.contains("&#60;hx7") || page.contains("&lt;hx7"),
        "the search box shows the marker escaped"
    );
    // A comment carrying the marker is stored and its permalink shows it, escaped.
    let posted = shopper
        .post(
            &format!("{POST}/comments"),
            &[("name", MARK), ("text", MARK), ("website", "")],
        )
        .await;
    assert_eq!(
        posted.status(),
        StatusCode::SEE_OTHER,
        "the comment is taken"
    );
    let permalink = body(shopper.get(&location(&posted)).await).await;
    assert!(
        permalink.contains("&#60;hx7") || permalink.contains("&lt;hx7"),
        "the permalink shows the marker escaped"
    );
    assert!(!permalink.contains(UNESCAPED));
    let comments_before = state_snapshot(&app).await.2;
    let long = "x".repeat(10_000);
    let values = CORPUS.iter().copied().chain([long.as_str()]);
    for value in values {
        for candidate in [value.to_string(), format!("{value}{MARK}")] {
            if let Err(problem) = probe(&app, &shopper, &candidate).await {
                panic!("input {candidate:?}: {problem}");
            }
        }
    }
    // Hostile comments did reach the store (and so the pages checked above), not only errors.
    let comments_after = state_snapshot(&app).await.2;
    assert!(
        comments_after > comments_before + CORPUS.len() as u64,
        "{comments_before} → {comments_after} comments"
    );
    assert_carts_match_reservations(&app.db).await;
    assert_comment_counts_exact(&app).await;
    assert_metric_labels_are_bounded(&app).await;
}

const METRICS_TOKEN: &str = "hostile-input-metrics-token";

/// The hostile paths and values created no metric series of their own: every request series is
/// labelled by a route template of the route table (or `unmatched`).
async fn assert_metric_labels_are_bounded(app: &TestApp) {
    let text = app
        .client
        .get(app.url("/metrics"))
        .bearer_auth(METRICS_TOKEN)
        .send()
        .await
        .expect("metrics answered")
        .text()
        .await
        .expect("body");
    let routes: std::collections::BTreeSet<&str> = text
        .lines()
        .filter(|l| l.starts_with("bazaar_http_requests_total{"))
        .filter_map(|l| l.split("route=\"").nth(1)?.split('"').next())
        .collect();
    assert!(!routes.is_empty(), "requests are counted: {text}");
    for route in &routes {
        assert!(
            *route == "unmatched" || (route.starts_with('/') && !route.contains("hx7")),
            "a request series is labelled {route:?}"
        );
    }
    assert!(
        routes.len() < 120,
        "{} route labels: {routes:?}",
        routes.len()
    );
}

/// The admin's moderation, closing, staff-reply and mail forms with hostile ids and values: no
/// 5xx, no reflection, and the comment counters stay exact.
#[tokio::test]
async fn the_admin_moderation_and_mail_forms_survive_the_hostile_corpus() {
    let (app, _shopper) = hostile_app().await;
    let token = csrf_token(&admin_page(&app, "/admin/comments").await).expect("token");
    let long = "x".repeat(10_000);
    let values = CORPUS.iter().copied().chain([long.as_str()]);
    for value in values {
        let v = encode(value);
        let candidate = format!("{value}{MARK}");
        for value in [value, candidate.as_str()] {
            let gets = [
                format!("/admin/comments/{v}/reply"),
                format!("/admin/comments/{FAKE_ID}/reply"),
                format!("/admin/comments?status={v}&discussion={v}"),
                format!("/admin/comments?status={v}&discussion={FAKE_ID}"),
                format!("/admin/comments?q={v}"),
                format!("/admin/comments?status=pending&discussion={FAKE_ID}&q={v}"),
            ];
            for path in &gets {
                let response = app.get_admin(path).await;
                assert!(!response.status().is_server_error(), "GET {path}");
                assert!(
                    !body(response).await.contains(UNESCAPED),
                    "GET {path} reflected"
                );
            }
            let forms: Vec<(String, Vec<(&str, &str)>)> = vec![
                (
                    "/admin/comments/bulk".into(),
                    vec![("action", value), ("id", value), ("back_status", value)],
                ),
                (
                    "/admin/comments/bulk".into(),
                    vec![("action", "approve"), ("id", value), ("id", FAKE_ID)],
                ),
                (
                    format!("/admin/comments/{v}/approve"),
                    vec![("back_status", value)],
                ),
                (format!("/admin/comments/{v}/spam"), vec![]),
                (
                    format!("/admin/comments/{v}/restore"),
                    vec![("back_status", value)],
                ),
                (format!("/admin/comments/{FAKE_ID}/restore"), vec![]),
                (format!("/admin/comments/{FAKE_ID}/approve"), vec![]),
                (
                    format!("/admin/comments/{v}/reply"),
                    vec![("name", value), ("text", value)],
                ),
                ("/admin/mail/retry".into(), vec![("id", value)]),
                (
                    format!("/admin/comments/discussions/{v}/closed"),
                    vec![("closed", value)],
                ),
                (
                    format!("/admin/comments/discussions/{FAKE_ID}/closed"),
                    vec![("closed", value)],
                ),
            ];
            for (path, fields) in &forms {
                let mut body_fields = fields.clone();
                body_fields.push(("csrf_token", token.as_str()));
                let response = app.post_admin_form(path, &body_fields).await;
                let status = response.status();
                assert!(!status.is_server_error(), "POST {path} answered {status}");
                assert!(
                    !body(response).await.contains(UNESCAPED),
                    "POST {path} reflected"
                );
            }
        }
    }
    // A staff reply with the marker is stored and shown escaped.
    let first = bazaar::comments::store::collection(&app.db)
        .find_one(doc! { "author.name": FIRST_COMMENTER })
        .await
        .expect("query")
        .expect("the post's comment");
    let path = format!("/admin/comments/{}/reply", first.id.to_hex());
    let response = app
        .post_admin_form(
            &path,
            &[
                ("name", MARK),
                ("text", MARK),
                ("csrf_token", token.as_str()),
            ],
        )
        .await;
    assert_eq!(response.status(), StatusCode::SEE_OTHER);
    let page = body(app.get(&location(&response)).await).await;
    assert!(page.contains("&#60;hx7") || page.contains("&lt;hx7"));
    assert!(!page.contains(UNESCAPED));
    assert_comment_counts_exact(&app).await;
}

fn hostile_value() -> impl Strategy<Value = String> {
    let base = prop_oneof![
        proptest::sample::select(CORPUS).prop_map(str::to_string),
        any::<i64>().prop_map(|n| n.to_string()),
        any::<u64>().prop_map(|n| format!("{n}{n}")),
        any::<f64>().prop_map(|f| f.to_string()),
        // Any Unicode, control characters included.
        proptest::collection::vec(any::<char>(), 0..40).prop_map(|c| c.into_iter().collect()),
        "[\\x00-\\x1f<>\"'&%$.{}\\[\\]]{0,30}",
    ];
    (base, any::<bool>()).prop_map(|(v, mark)| if mark { format!("{v}{MARK}") } else { v })
}

#[test]
fn generated_hostile_values_never_cause_a_server_error_a_reflection_or_a_change_without_a_token() {
    let cases = std::env::var("HOSTILE_INPUT_CASES")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(DEFAULT_CASES);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    let (app, shopper) = runtime.block_on(hostile_app());
    let mut runner = TestRunner::new(Config {
        // Failures are reported with the input; no file of past failures is written.
        failure_persistence: None,
        ..Config::with_cases(cases)
    });
    let outcome = runner.run(&hostile_value(), |value| {
        runtime
            .block_on(probe(&app, &shopper, &value))
            .map_err(TestCaseError::fail)
    });
    if let Err(e) = outcome {
        panic!("{e}");
    }
    runtime.block_on(assert_carts_match_reservations(&app.db));
    runtime.block_on(assert_comment_counts_exact(&app));
}

// ---------------------------------------------------------------------------------------------
// Search as a lever against the rest of the site.

/// Products a phrase-and-negation search has to read one by one: every one has the words.
async fn searchable_products(app: &TestApp, n: usize) {
    let products = app.db.collection::<bson::Document>("products");
    let numbers: Vec<usize> = (0..n).collect();
    for chunk in numbers.chunks(1000) {
        let docs: Vec<bson::Document> = chunk
            .iter()
            .map(|i| {
                doc! {
                    "sku": format!("load{i:05}"),
                    "slug": format!("load-{i:05}"),
                    "type": "album",
                    "title": format!("Blue note session {i}"),
                    "description": "A blue note session recorded live: blue train, blue moon, \
                                    and a long note held over the blue hour.",
                    "tags": ["blue", "note"],
                }
            })
            .collect();
        products.insert_many(docs).await.expect("inserted");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unrelated_page_stays_fast_while_clients_loop_on_expensive_searches() {
    let app = spawn_app_with(&[
        ("BAZAAR_SERVER__WORKERS", "2"),
        // The per-client limit is not what this measures: all clients share one address here.
        ("BAZAAR_SEARCH__PER_CLIENT_PER_MINUTE", "1000000"),
    ])
    .await;
    NodeBuilder::page("about")
        .title("About")
        .build(&app.db)
        .await;
    searchable_products(&app, 10_000).await;
    let expensive = [
        "/search?q=%22blue+note+session%22+-moon",
        "/search?q=%22note+held%22+-train",
    ];
    let looping = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(true));
    let searchers: Vec<_> = (0..4)
        .map(|n| {
            let (client, _) = new_client();
            let url = app.url(expensive[n % expensive.len()]);
            let looping = looping.clone();
            tokio::spawn(async move {
                let mut statuses = Vec::new();
                while looping.load(std::sync::atomic::Ordering::Relaxed) {
                    let status = client.get(&url).send().await.expect("answered").status();
                    statuses.push(status);
                }
                statuses
            })
        })
        .collect();
    // Let the searches pile up first.
    tokio::time::sleep(std::time::Duration::from_secs(1)).await;
    let (reader, _) = new_client();
    let mut latencies = Vec::new();
    for _ in 0..15 {
        let started = std::time::Instant::now();
        let response = reader
            .get(app.url("/pages/about"))
            .send()
            .await
            .expect("answered");
        assert_eq!(response.status(), StatusCode::OK);
        let _ = response.bytes().await;
        latencies.push(started.elapsed());
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    looping.store(false, std::sync::atomic::Ordering::Relaxed);
    let mut searched = 0;
    for searcher in searchers {
        for status in searcher.await.expect("searcher") {
            assert!(
                status == StatusCode::OK || status == StatusCode::SERVICE_UNAVAILABLE,
                "a search answered {status}"
            );
            searched += usize::from(status == StatusCode::OK);
        }
    }
    assert!(searched > 0, "the searches ran");
    latencies.sort();
    let median = latencies[latencies.len() / 2];
    assert!(
        median < std::time::Duration::from_secs(1),
        "median {median:?} for an unrelated page while searches loop: {latencies:?}"
    );
}
