//! Threaded comments through HTTP: posting and replying, the threaded view and permalinks,
//! moderation, the exact comment count under concurrency, spam checks, escaping, and the index
//! behind every comment query.

use crate::common::builders::{CommentBuilder, NodeBuilder};
use crate::common::shop::{product_with_stock, Shopper};
use crate::common::*;
use bazaar::catalog::products::{self, Product};
use bazaar::comments::{self, slugs, Comment, CommentStatus};
use bazaar::db::Db;
use bson::doc;
use futures::TryStreamExt;
use reqwest::StatusCode;
use scraper::Selector;

/// Every comment stored for a product, in thread order.
async fn stored(db: &Db, product: &Product) -> Vec<Comment> {
    comments::store::collection(db)
        .find(doc! { "discussion_id": product.id })
        .sort(doc! { "full_slug": 1 })
        .await
        .expect("query")
        .try_collect()
        .await
        .expect("comments")
}

async fn comment_count(db: &Db, product: &Product) -> i64 {
    products::by_slug(db, &product.slug)
        .await
        .expect("query")
        .expect("product")
        .comment_count
}

async fn visible_count(db: &Db, product: &Product) -> i64 {
    stored(db, product)
        .await
        .iter()
        .filter(|c| c.status == CommentStatus::Visible)
        .count() as i64
}

/// The slug a post's redirect points at (`…#comment-34db-8bda` → `34db/8bda`).
fn posted_slug(response: &reqwest::Response) -> String {
    assert_eq!(
        response.status(),
        StatusCode::SEE_OTHER,
        "the comment was not accepted"
    );
    let to = location(response);
    let anchor = to.rsplit_once("#comment-").expect("an anchor").1;
    anchor.replace('-', "/")
}

async fn post(shopper: &Shopper, product: &Product, name: &str, text: &str) -> reqwest::Response {
    shopper
        .post(
            &format!("/products/{}/comments", product.slug),
            &[("name", name), ("text", text), ("website", "")],
        )
        .await
}

async fn reply(
    shopper: &Shopper,
    product: &Product,
    parent: &str,
    name: &str,
    text: &str,
) -> reqwest::Response {
    shopper
        .post(
            &format!("/products/{}/comments/{parent}", product.slug),
            &[("name", name), ("text", text), ("website", "")],
        )
        .await
}

/// `(slug, depth, indent class, text)` of each comment drawn on a page, in order.
fn drawn(doc: &scraper::Html) -> Vec<(String, usize, String, String)> {
    let item = Selector::parse(".comment-thread li.comment").unwrap();
    let text = Selector::parse(".comment-text, .comment-placeholder").unwrap();
    doc.select(&item)
        .map(|li| {
            let v = li.value();
            let indent = v
                .classes()
                .find(|c| c.starts_with("indent-"))
                .unwrap_or_default()
                .to_string();
            let words = li
                .select(&text)
                .next()
                .map(|t| t.text().collect::<String>().trim().to_string())
                .unwrap_or_default();
            (
                v.attr("data-slug").unwrap_or_default().to_string(),
                v.attr("data-depth").unwrap_or("0").parse().unwrap(),
                indent,
                words,
            )
        })
        .collect()
}

async fn page(shopper: &Shopper, path: &str) -> scraper::Html {
    let response = shopper.get(path).await;
    assert_eq!(response.status(), StatusCode::OK, "{path}");
    html(&body(response).await)
}

async fn admin_token(app: &TestApp) -> String {
    // The System page always has a form (the demo-data one), whatever the comment list holds.
    csrf_token(&html(&body(app.get_admin("/admin/system").await).await)).expect("a token")
}

async fn moderate(app: &TestApp, comment: &Comment, action: &str) {
    let token = admin_token(app).await;
    let response = app
        .post_admin_form(
            &format!("/admin/comments/{}/{action}", comment.id.to_hex()),
            &[("csrf_token", token.as_str())],
        )
        .await;
    assert_eq!(response.status(), StatusCode::SEE_OTHER, "{action}");
}

async fn by_slug(db: &Db, product: &Product, slug: &str) -> Comment {
    comments::store::by_slug(
        db,
        product.id,
        &bazaar::comments::CommentPath::parse(slug).expect("a test permalink"),
    )
    .await
    .expect("query")
    .expect("comment exists")
}

#[tokio::test]
async fn a_deep_thread_renders_in_order_indented_by_depth_with_the_indentation_capped() {
    let app = spawn_unlimited().await;
    let product = product_with_stock(&app.db, "deep1", 5).await;
    let shopper = Shopper::new(&app).await;
    let top = posted_slug(&post(&shopper, &product, "Ann", "level 0").await);
    let mut parent = top.clone();
    let mut chain = vec![top.clone()];
    for level in 1..=8 {
        let slug = posted_slug(
            &reply(
                &shopper,
                &product,
                &parent,
                "Ben",
                &format!("level {level}"),
            )
            .await,
        );
        assert!(
            slug.starts_with(&format!("{parent}/")),
            "{slug} under {parent}"
        );
        chain.push(slug.clone());
        parent = slug;
    }
    let sibling = posted_slug(&reply(&shopper, &product, &top, "Cy", "second reply to 0").await);
    let later = posted_slug(&post(&shopper, &product, "Di", "another thread").await);

    let doc = page(&shopper, &format!("/products/{}", product.slug)).await;
    let rows = drawn(&doc);
    let slugs: Vec<&str> = rows.iter().map(|r| r.0.as_str()).collect();
    let mut expected: Vec<&str> = chain.iter().map(String::as_str).collect();
    expected.push(&sibling);
    expected.push(&later);
    assert_eq!(slugs, expected, "thread order");
    for (i, row) in rows.iter().take(9).enumerate() {
        assert_eq!(row.1, i, "depth of {}", row.0);
        assert_eq!(
            row.2,
            format!("indent-{}", i.min(6)),
            "indentation of {}",
            row.0
        );
        assert_eq!(row.3, format!("level {i}"));
    }
    assert_eq!((rows[9].1, rows[9].2.as_str()), (1, "indent-1"));
    assert_eq!((rows[10].1, rows[10].2.as_str()), (0, "indent-0"));
    // Each reply's item is inside its parent's, down to the cap; the two past it say whom they
    // answer.
    for depth in 1..=6 {
        let nested = format!(
            "li.comment[data-depth='{}'] > ol.replies > li.comment[data-depth='{depth}']",
            depth - 1
        );
        assert_eq!(
            count(&doc, &nested),
            if depth == 1 { 2 } else { 1 },
            "{nested}"
        );
    }
    assert_eq!(
        texts(&doc, ".replying-to"),
        vec!["replying to Ben", "replying to Ben"],
        "depths 7 and 8 are drawn at depth 6"
    );
    assert_eq!(
        count(&doc, "ol.comment-thread > li.comment"),
        2,
        "two threads"
    );
    assert_eq!(texts(&doc, "#comments-heading"), vec!["11 comments"]);
    assert_eq!(comment_count(&app.db, &product).await, 11);
}

#[tokio::test]
async fn a_permalink_shows_exactly_its_comment_and_sub_thread_with_a_way_back() {
    let app = spawn_unlimited().await;
    let product = product_with_stock(&app.db, "perma1", 5).await;
    let s = Shopper::new(&app).await;
    let a = posted_slug(&post(&s, &product, "A", "a").await);
    let b = posted_slug(&reply(&s, &product, &a, "B", "b").await);
    let c = posted_slug(&reply(&s, &product, &b, "C", "c").await);
    let d = posted_slug(&reply(&s, &product, &a, "D", "d").await);
    let e = posted_slug(&post(&s, &product, "E", "e").await);
    let _f = posted_slug(&reply(&s, &product, &e, "F", "f").await);

    let doc = page(&s, &format!("/products/{}/comments/{b}", product.slug)).await;
    let rows = drawn(&doc);
    let shown: Vec<(&str, usize)> = rows.iter().map(|r| (r.0.as_str(), r.1)).collect();
    assert_eq!(shown, vec![(b.as_str(), 0), (c.as_str(), 1)]);
    assert_eq!(
        attr(&doc, ".back-link a", "href").as_deref(),
        Some(format!("/products/{}#comments", product.slug).as_str())
    );
    assert_eq!(count(&doc, "li.comment-focus"), 1);

    let doc = page(&s, &format!("/products/{}/comments/{a}", product.slug)).await;
    let shown: Vec<String> = drawn(&doc).into_iter().map(|r| r.0).collect();
    assert_eq!(shown, vec![a.clone(), b.clone(), c.clone(), d.clone()]);

    let missing = page_status(&s, &format!("/products/{}/comments/ffff", product.slug)).await;
    assert_eq!(missing, StatusCode::NOT_FOUND);
}

/// The app with no comment rate limit, for tests that post more than a visitor may.
async fn spawn_unlimited() -> TestApp {
    spawn_app_with(&[("BAZAAR_COMMENTS__RATE_LIMIT_PER_MINUTE", "0")]).await
}

async fn page_status(s: &Shopper, path: &str) -> StatusCode {
    s.get(path).await.status()
}

#[tokio::test]
async fn a_deleted_comment_leaves_the_page_and_its_place_after_the_restore_period_is_purged() {
    let app = spawn_app().await;
    let product = product_with_stock(&app.db, "del1", 5).await;
    let s = Shopper::new(&app).await;
    let a = posted_slug(&post(&s, &product, "Alice", "parent text").await);
    let b = posted_slug(&reply(&s, &product, &a, "Bob", "child text").await);
    let c = posted_slug(&reply(&s, &product, &b, "Cat", "grandchild").await);
    let lone = posted_slug(&post(&s, &product, "Lone", "no replies").await);
    assert_eq!(comment_count(&app.db, &product).await, 4);

    moderate(&app, &by_slug(&app.db, &product, &a).await, "delete").await;
    moderate(&app, &by_slug(&app.db, &product, &lone).await, "delete").await;

    let doc = page(&s, &format!("/products/{}", product.slug)).await;
    let rows = drawn(&doc);
    let shown: Vec<(&str, &str)> = rows.iter().map(|r| (r.0.as_str(), r.3.as_str())).collect();
    assert_eq!(
        shown,
        vec![
            (a.as_str(), "[deleted]"),
            (b.as_str(), "child text"),
            (c.as_str(), "grandchild")
        ]
    );
    let page_text = doc.root_element().text().collect::<String>();
    assert!(!page_text.contains("parent text") && !page_text.contains("Alice"));
    assert!(!page_text.contains("no replies"));
    assert_eq!(comment_count(&app.db, &product).await, 2);
    assert_eq!(visible_count(&app.db, &product).await, 2);
    // Kept whole until the restore period is over.
    assert_eq!(by_slug(&app.db, &product, &lone).await.text, "no replies");
    assert_eq!(
        comments::store::purge_deleted(&app.db, 30).await.unwrap(),
        0
    );

    app.clock.step_forward(31 * 24 * HOUR);
    assert_eq!(
        comments::store::purge_deleted(&app.db, 30).await.unwrap(),
        2
    );
    let kept = by_slug(&app.db, &product, &a).await;
    assert_eq!(kept.status, CommentStatus::Deleted);
    assert!(kept.text.is_empty() && kept.author.name.is_empty() && kept.deleted_at.is_none());
    assert!(comments::store::by_slug(
        &app.db,
        product.id,
        &bazaar::comments::CommentPath::parse(&lone).unwrap()
    )
    .await
    .unwrap()
    .is_none());
    assert_eq!(
        comments::store::purge_deleted(&app.db, 30).await.unwrap(),
        0
    );
    let admin = html(&body(app.get_admin("/admin/comments?status=deleted").await).await);
    assert!(texts(&admin, ".comment-row button")
        .iter()
        .all(|b| b != "Restore"));

    // Deleting the last replies under "[deleted]" removes it too once they are purged.
    moderate(&app, &by_slug(&app.db, &product, &c).await, "delete").await;
    moderate(&app, &by_slug(&app.db, &product, &b).await, "delete").await;
    assert_eq!(comment_count(&app.db, &product).await, 0);
    assert_eq!(stored(&app.db, &product).await.len(), 3);
    app.clock.step_forward(31 * 24 * HOUR);
    assert_eq!(
        comments::store::purge_deleted(&app.db, 30).await.unwrap(),
        2
    );
    assert!(stored(&app.db, &product).await.is_empty());
    assert_eq!(comment_count(&app.db, &product).await, 0);
}

#[tokio::test]
async fn a_deleted_comment_is_listed_under_deleted_and_restore_brings_it_back_with_exact_counts() {
    let app = spawn_unlimited().await;
    let product = product_with_stock(&app.db, "restore1", 5).await;
    let s = Shopper::new(&app).await;
    let a = posted_slug(&post(&s, &product, "Ada", "worth keeping").await);
    posted_slug(&post(&s, &product, "Bo", "another").await);
    let comment = by_slug(&app.db, &product, &a).await;
    moderate(&app, &comment, "delete").await;
    moderate(&app, &comment, "delete").await; // a second click changes nothing
    assert_eq!(comment_count(&app.db, &product).await, 1);
    let doc = page(&s, &format!("/products/{}", product.slug)).await;
    assert!(!texts(&doc, ".comment-text").contains(&"worth keeping".to_string()));
    assert_eq!(
        page_status(&s, &format!("/products/{}/comments/{a}", product.slug)).await,
        StatusCode::NOT_FOUND
    );

    let admin = html(&body(app.get_admin("/admin/comments?status=deleted").await).await);
    assert_eq!(
        texts(&admin, ".comment-row .comment-excerpt"),
        vec!["worth keeping"]
    );
    assert!(texts(&admin, ".comment-row button").contains(&"Restore".to_string()));

    moderate(&app, &comment, "restore").await;
    moderate(&app, &comment, "restore").await; // nothing more to restore
    assert_eq!(comment_count(&app.db, &product).await, 2);
    assert_eq!(visible_count(&app.db, &product).await, 2);
    let restored = by_slug(&app.db, &product, &a).await;
    assert_eq!(restored.status, CommentStatus::Visible);
    assert!(restored.deleted_at.is_none());
    let doc = page(&s, &format!("/products/{}", product.slug)).await;
    assert!(texts(&doc, ".comment-text").contains(&"worth keeping".to_string()));

    // A hidden comment deleted comes back hidden; past the period it cannot come back.
    moderate(&app, &comment, "hide").await;
    moderate(&app, &comment, "delete").await;
    moderate(&app, &comment, "restore").await;
    assert_eq!(
        by_slug(&app.db, &product, &a).await.status,
        CommentStatus::Hidden
    );
    assert_eq!(comment_count(&app.db, &product).await, 1);
    moderate(&app, &comment, "delete").await;
    app.clock.step_forward(31 * 24 * HOUR);
    moderate(&app, &comment, "restore").await;
    assert_eq!(
        by_slug(&app.db, &product, &a).await.status,
        CommentStatus::Deleted
    );
    assert_eq!(comment_count(&app.db, &product).await, 1);
}

#[tokio::test]
async fn hiding_and_unhiding_keep_the_count_exact_and_a_hidden_comment_off_the_page() {
    let app = spawn_app().await;
    let product = product_with_stock(&app.db, "hide1", 5).await;
    let s = Shopper::new(&app).await;
    let a = posted_slug(&post(&s, &product, "Spammer", "buy pills").await);
    let b = posted_slug(&post(&s, &product, "Reader", "nice record").await);
    let spam = by_slug(&app.db, &product, &a).await;
    moderate(&app, &spam, "hide").await;
    moderate(&app, &spam, "hide").await; // a second click changes nothing
    assert_eq!(comment_count(&app.db, &product).await, 1);
    let doc = page(&s, &format!("/products/{}", product.slug)).await;
    assert_eq!(
        drawn(&doc).into_iter().map(|r| r.0).collect::<Vec<_>>(),
        vec![b.clone()]
    );
    let hidden = page_status(&s, &format!("/products/{}/comments/{a}", product.slug)).await;
    assert_eq!(hidden, StatusCode::NOT_FOUND);

    let admin = html(&body(app.get_admin("/admin/comments?status=hidden").await).await);
    assert_eq!(
        texts(&admin, ".comment-row .comment-excerpt"),
        vec!["buy pills"]
    );
    moderate(&app, &spam, "unhide").await;
    assert_eq!(comment_count(&app.db, &product).await, 2);
    let doc = page(&s, &format!("/products/{}", product.slug)).await;
    assert_eq!(drawn(&doc).len(), 2);
}

#[tokio::test]
async fn thirty_two_concurrent_commenters_each_store_one_comment_and_the_count_is_exact() {
    let app = spawn_app_with(&[
        ("BAZAAR_COMMENTS__RATE_LIMIT_PER_MINUTE", "0"),
        ("BAZAAR_COMMENTS__PAGE_SIZE", "100"),
        ("BAZAAR_SERVER__WORKERS", "4"),
    ])
    .await;
    let product = product_with_stock(&app.db, "busy1", 5).await;
    let first = Shopper::new(&app).await;
    let root = posted_slug(&post(&first, &product, "Host", "Say hello below").await);
    let mut tasks = Vec::new();
    for i in 0..32 {
        let shopper = Shopper::new(&app).await;
        let (product, root) = (product.clone(), root.clone());
        tasks.push(tokio::spawn(async move {
            let text = format!("hello from commenter {i}");
            let response = if i % 2 == 0 {
                reply(&shopper, &product, &root, &format!("c{i}"), &text).await
            } else {
                post(&shopper, &product, &format!("c{i}"), &text).await
            };
            posted_slug(&response)
        }));
    }
    let mut slugs = Vec::new();
    for t in tasks {
        slugs.push(t.await.expect("commenter finished"));
    }
    let all = stored(&app.db, &product).await;
    assert_eq!(all.len(), 33);
    for i in 0..32 {
        let text = format!("hello from commenter {i}");
        assert_eq!(all.iter().filter(|c| c.text == text).count(), 1, "{text}");
    }
    slugs.sort();
    slugs.dedup();
    assert_eq!(slugs.len(), 32);
    let doc = page(&first, &format!("/products/{}", product.slug)).await;
    let visible = drawn(&doc).len() as i64;
    assert_eq!(visible, 33);
    assert_eq!(comment_count(&app.db, &product).await, visible);
}

#[tokio::test]
async fn two_comments_given_the_same_slug_in_the_same_second_are_both_stored() {
    let app = spawn_app().await;
    let product = product_with_stock(&app.db, "clash1", 5).await;
    let s = Shopper::new(&app).await;
    slugs::script_parts(product.id, &["0a0a", "abcd", "abcd", "abce"]);
    let parent = posted_slug(&post(&s, &product, "P", "parent").await);
    assert_eq!(parent, "0a0a");
    let first = posted_slug(&reply(&s, &product, &parent, "One", "first").await);
    let second = posted_slug(&reply(&s, &product, &parent, "Two", "second").await);
    assert_eq!(first, "0a0a/abcd");
    assert_eq!(
        second, "0a0a/abce",
        "the collision was retried with a new part"
    );
    let all = stored(&app.db, &product).await;
    assert_eq!(all.len(), 3);
    assert_eq!(comment_count(&app.db, &product).await, 3);
    let doc = page(&s, &format!("/products/{}", product.slug)).await;
    let texts: Vec<String> = drawn(&doc).into_iter().map(|r| r.3).collect();
    assert_eq!(texts, vec!["parent", "first", "second"]);
}

#[tokio::test]
async fn a_filled_honeypot_stores_nothing_and_says_why() {
    let app = spawn_app().await;
    let product = product_with_stock(&app.db, "honey1", 5).await;
    let s = Shopper::new(&app).await;
    let response = s
        .post(
            &format!("/products/{}/comments", product.slug),
            &[
                ("name", "Bot"),
                ("text", "cheap watches"),
                ("website", "http://spam.example"),
            ],
        )
        .await;
    assert_eq!(response.status(), StatusCode::UNPROCESSABLE_ENTITY);
    let doc = html(&body(response).await);
    let notice = &texts(&doc, ".comment-notice")[0];
    assert!(
        notice.contains("spam check") && notice.contains("post it again"),
        "{notice}"
    );
    assert!(
        !notice.contains("leave this empty"),
        "no field people cannot see"
    );
    assert!(stored(&app.db, &product).await.is_empty());
    assert_eq!(comment_count(&app.db, &product).await, 0);
}

#[tokio::test]
async fn past_the_rate_limit_a_comment_is_kept_in_the_form_with_a_message_and_not_stored() {
    let app = spawn_app_with(&[("BAZAAR_COMMENTS__RATE_LIMIT_PER_MINUTE", "3")]).await;
    let product = product_with_stock(&app.db, "rate1", 5).await;
    let s = Shopper::new(&app).await;
    for i in 0..3 {
        posted_slug(&post(&s, &product, "Quick", &format!("comment {i}")).await);
    }
    let response = post(&s, &product, "Quick", "one too many").await;
    assert_eq!(response.status(), StatusCode::TOO_MANY_REQUESTS);
    let doc = html(&body(response).await);
    assert!(texts(&doc, ".comment-notice")[0].contains("please wait a minute"));
    assert_eq!(texts(&doc, "#new-comment-text"), vec!["one too many"]);
    assert_eq!(stored(&app.db, &product).await.len(), 3);
    assert_eq!(comment_count(&app.db, &product).await, 3);
}

#[tokio::test]
async fn a_comment_over_the_length_limit_gets_a_form_error_with_the_text_kept() {
    let app = spawn_app().await;
    let product = product_with_stock(&app.db, "long1", 5).await;
    let s = Shopper::new(&app).await;
    let long = "x".repeat(5001);
    let response = post(&s, &product, "Verbose", &long).await;
    assert_eq!(response.status(), StatusCode::UNPROCESSABLE_ENTITY);
    let doc = html(&body(response).await);
    assert!(texts(&doc, "#new-comment .field-error")[0].contains("5000 characters"));
    assert_eq!(texts(&doc, "#new-comment-text"), vec![long.clone()]);
    assert_eq!(
        attr(&doc, "#new-comment-name", "value").as_deref(),
        Some("Verbose")
    );
    assert!(stored(&app.db, &product).await.is_empty());

    let empty = post(&s, &product, "", "").await;
    assert_eq!(empty.status(), StatusCode::UNPROCESSABLE_ENTITY);
    let doc = html(&body(empty).await);
    assert_eq!(count(&doc, "#new-comment .field-error"), 2);

    posted_slug(&post(&s, &product, "Verbose", &long[..5000]).await);
    assert_eq!(stored(&app.db, &product).await.len(), 1);
}

#[tokio::test]
async fn markup_in_a_comment_is_inert_and_a_web_address_becomes_a_nofollow_link() {
    let app = spawn_app().await;
    let product = product_with_stock(&app.db, "xss1", 5).await;
    let s = Shopper::new(&app).await;
    let text = "<script>alert(1)</script>\n<a href=javascript:alert(2)>click</a>\n\
                see https://example.com/page?a=1&b=2 too";
    posted_slug(&post(&s, &product, "<b onmouseover=alert(3)>Bob</b>", text).await);
    let response = s.get(&format!("/products/{}", product.slug)).await;
    let raw = body(response).await;
    assert!(!raw.contains("<script>alert(1)"), "script tag got through");
    assert!(!raw.contains("<b onmouseover"), "name markup got through");
    let doc = html(&raw);
    assert_eq!(count(&doc, ".comment-text script, .comment-author b"), 0);
    assert_eq!(
        texts(&doc, ".comment-author"),
        vec!["<b onmouseover=alert(3)>Bob</b>"]
    );
    let links = Selector::parse(".comment-text a").unwrap();
    let links: Vec<(String, String)> = doc
        .select(&links)
        .map(|a| {
            (
                a.value().attr("href").unwrap_or_default().to_string(),
                a.value().attr("rel").unwrap_or_default().to_string(),
            )
        })
        .collect();
    assert_eq!(
        links,
        vec![(
            "https://example.com/page?a=1&b=2".to_string(),
            "nofollow ugc".to_string()
        )]
    );
    assert_eq!(count(&doc, ".comment-text br"), 2, "line breaks kept");
}

#[tokio::test]
async fn a_permalink_slug_with_regex_metacharacters_or_dots_is_not_found() {
    let app = spawn_app().await;
    let product = product_with_stock(&app.db, "meta1", 5).await;
    let s = Shopper::new(&app).await;
    let a = posted_slug(&post(&s, &product, "A", "a").await);
    for bad in [
        ".*".to_string(),
        format!("{a}.*"),
        format!("{a}/.."),
        format!("{a}/..%2F.."),
        "..abcd".to_string(),
        "%2E%2E".to_string(),
        "(a%7C.*)".to_string(),
        "%5Ba-f%5D%7B4%7D".to_string(),
        "abc%2B".to_string(),
        format!("{a}%5C"),
        "ABCD".to_string(),
    ] {
        let path = format!("/products/{}/comments/{bad}", product.slug);
        assert_eq!(
            s.get(&path).await.status(),
            StatusCode::NOT_FOUND,
            "GET {bad}"
        );
        let posted = s.post(&path, &[("name", "x"), ("text", "y")]).await;
        assert_eq!(posted.status(), StatusCode::NOT_FOUND, "POST {bad}");
    }
    assert_eq!(stored(&app.db, &product).await.len(), 1);
}

#[tokio::test]
async fn pages_continue_from_the_last_comment_shown_and_link_to_a_thread_they_start_inside() {
    let app = spawn_app_with(&[
        ("BAZAAR_COMMENTS__PAGE_SIZE", "3"),
        ("BAZAAR_COMMENTS__RATE_LIMIT_PER_MINUTE", "0"),
    ])
    .await;
    let product = product_with_stock(&app.db, "pages1", 5).await;
    let s = Shopper::new(&app).await;
    let a = posted_slug(&post(&s, &product, "A", "t1").await);
    let mut p = a.clone();
    for i in 2..=4 {
        p = posted_slug(&reply(&s, &product, &p, "R", &format!("t{i}")).await);
    }
    for i in 5..=7 {
        posted_slug(&post(&s, &product, "T", &format!("t{i}")).await);
    }
    let first = page(&s, &format!("/products/{}", product.slug)).await;
    let words = |d: &scraper::Html| drawn(d).into_iter().map(|r| r.3).collect::<Vec<_>>();
    assert_eq!(words(&first), vec!["t1", "t2", "t3"]);
    assert_eq!(count(&first, ".comments-older"), 0);
    let next = attr(&first, ".comments-newer", "href").expect("a newer link");
    let second = page(&s, &next).await;
    assert_eq!(words(&second), vec!["t4", "t5", "t6"]);
    assert_eq!(
        attr(&second, ".thread-continues a", "href"),
        Some(format!("/products/{}/comments/{a}", product.slug))
    );
    let third = page(&s, &attr(&second, ".comments-newer", "href").unwrap()).await;
    assert_eq!(words(&third), vec!["t7"]);
    assert_eq!(count(&third, ".comments-newer"), 0);
    let back = page(&s, &attr(&third, ".comments-older", "href").unwrap()).await;
    assert_eq!(words(&back), vec!["t4", "t5", "t6"]);
    let start = page(&s, &attr(&back, ".comments-older", "href").unwrap()).await;
    assert_eq!(words(&start), vec!["t1", "t2", "t3"]);
}

#[tokio::test]
async fn the_admin_lists_comments_newest_first_with_links_in_context_and_the_dashboard_shows_them()
{
    let app = spawn_app().await;
    let elsewhere = product_with_stock(&app.db, "adm0", 5).await;
    CommentBuilder::on_product(&elsewhere)
        .text("on another product")
        .build(&app.db)
        .await;
    let product = product_with_stock(&app.db, "adm1", 5).await;
    let s = Shopper::new(&app).await;
    let a = posted_slug(&post(&s, &product, "First", "older one").await);
    let b = posted_slug(&reply(&s, &product, &a, "Second", "newer one").await);
    let doc = html(&body(app.get_admin("/admin/comments").await).await);
    let excerpts = texts(&doc, ".comment-row .comment-excerpt");
    assert_eq!(&excerpts[..2], &["newer one", "older one"]);
    let anchor = format!("comment-{}", b.replace('/', "-"));
    assert_eq!(
        attr(&doc, ".comment-row .comment-discussion a", "href"),
        Some(format!("/products/{}/comments/{a}#{anchor}", product.slug))
    );
    let deleted = html(&body(app.get_admin("/admin/comments?status=deleted").await).await);
    assert_eq!(count(&deleted, ".comment-row"), 0);
    let one = html(
        &body(
            app.get_admin(&format!(
                "/admin/comments?discussion={}",
                product.id.to_hex()
            ))
            .await,
        )
        .await,
    );
    assert_eq!(
        texts(&one, ".comment-row .comment-excerpt"),
        vec!["newer one", "older one"]
    );
    let all = html(&body(app.get_admin("/admin/comments").await).await);
    assert!(
        count(&all, ".comment-row") > 2,
        "the other discussion's comments are listed too"
    );
    let dash = html(&body(app.get_admin("/admin").await).await);
    assert!(texts(&dash, ".recent-comment")[0].contains("Second"));
    // Moderation needs the admin's CSRF token.
    let refused = app
        .post_admin_form(
            &format!(
                "/admin/comments/{}/hide",
                by_slug(&app.db, &product, &a).await.id.to_hex()
            ),
            &[("csrf_token", "wrong")],
        )
        .await;
    assert_eq!(refused.status(), StatusCode::FORBIDDEN);
    assert_eq!(comment_count(&app.db, &product).await, 2);
}

#[tokio::test]
async fn demo_discussions_are_seeded_once_with_exact_counts() {
    // About the demo data: its discussions, seeded once.
    let app = spawn_app_with_demo().await;
    let product = products::by_slug(&app.db, &slug("kind-of-blue"))
        .await
        .unwrap()
        .expect("demo product");
    let before = stored(&app.db, &product).await.len();
    assert!(before >= 4, "a demo thread on {}", product.slug);
    bazaar::demo::run(&app.db).await.expect("seed again");
    assert_eq!(stored(&app.db, &product).await.len(), before);
    assert_eq!(
        comment_count(&app.db, &product).await,
        visible_count(&app.db, &product).await
    );
    let s = Shopper::new(&app).await;
    let doc = page(&s, "/products/kind-of-blue").await;
    let depths: Vec<usize> = drawn(&doc).into_iter().map(|r| r.1).collect();
    assert!(depths.iter().any(|d| *d >= 3), "{depths:?}");

    // Two demo blog posts carry discussions too, counted exactly and never seeded twice.
    for (slug, seeded) in [("miles-on-so-what", 5), ("three-futures", 3)] {
        assert_eq!(node_comment_count(&app.db, slug).await, seeded, "{slug}");
        let doc = page(&s, &format!("/blog/{slug}")).await;
        let rows = drawn(&doc);
        assert_eq!(rows.len() as i64, seeded, "{slug}: {rows:?}");
        assert!(
            rows.iter().any(|r| r.1 >= 1),
            "{slug} has replies: {rows:?}"
        );
    }
    let all_stored = comments::store::collection(&app.db)
        .count_documents(doc! {})
        .await
        .expect("count");
    bazaar::demo::run(&app.db).await.expect("seed a third time");
    assert_eq!(
        comments::store::collection(&app.db)
            .count_documents(doc! {})
            .await
            .expect("count"),
        all_stored
    );
    assert_eq!(node_comment_count(&app.db, "miles-on-so-what").await, 5);
    let stream = body(s.get("/blog/").await).await;
    assert!(
        stream.contains("5 comments"),
        "the stream shows the seeded count"
    );
}

const HOUR: std::time::Duration = std::time::Duration::from_secs(3600);

#[tokio::test]
async fn comments_posted_after_the_clock_steps_back_still_sort_below_older_ones() {
    let app = spawn_unlimited().await;
    let product = product_with_stock(&app.db, "step1", 5).await;
    let s = Shopper::new(&app).await;
    let clock = app.clock;
    let first = posted_slug(&post(&s, &product, "Ada", "first").await);
    clock.step_back(HOUR);
    posted_slug(&post(&s, &product, "Bo", "second").await);
    posted_slug(&reply(&s, &product, &first, "Cy", "reply one").await);
    clock.step_back(std::time::Duration::from_secs(60));
    posted_slug(&reply(&s, &product, &first, "Di", "reply two").await);
    posted_slug(&post(&s, &product, "Ed", "third").await);
    // Stepped well ahead, then corrected back: what came after stays after.
    clock.step_forward(3 * HOUR);
    posted_slug(&post(&s, &product, "Fay", "fourth").await);
    clock.step_back(2 * HOUR);
    posted_slug(&post(&s, &product, "Gus", "fifth").await);
    let in_order = [
        "first",
        "reply one",
        "reply two",
        "second",
        "third",
        "fourth",
        "fifth",
    ];
    let all = stored(&app.db, &product).await;
    let texts: Vec<&str> = all.iter().map(|c| c.text.as_str()).collect();
    assert_eq!(texts, in_order);
    let doc = page(&s, &format!("/products/{}", product.slug)).await;
    let drawn: Vec<String> = drawn(&doc)
        .into_iter()
        .map(|(_, _, _, text)| text)
        .collect();
    assert_eq!(drawn, in_order);
    // The time shown is still the clock's reading.
    assert!(
        all[3].posted < all[0].posted,
        "{:?} {:?}",
        all[3].posted,
        all[0].posted
    );
}

#[tokio::test]
async fn replies_posted_at_once_after_a_step_back_are_all_stored_after_the_older_reply() {
    let app = spawn_app_with(&[
        ("BAZAAR_COMMENTS__RATE_LIMIT_PER_MINUTE", "0"),
        ("BAZAAR_COMMENTS__PAGE_SIZE", "100"),
        ("BAZAAR_SERVER__WORKERS", "4"),
    ])
    .await;
    let product = product_with_stock(&app.db, "step2", 5).await;
    let first = Shopper::new(&app).await;
    let root = posted_slug(&post(&first, &product, "Host", "root").await);
    posted_slug(&reply(&first, &product, &root, "Early", "early reply").await);
    app.clock.step_back(HOUR);
    let mut tasks = Vec::new();
    for i in 0..12 {
        let shopper = Shopper::new(&app).await;
        let (product, root) = (product.clone(), root.clone());
        tasks.push(tokio::spawn(async move {
            let text = format!("late reply {i}");
            posted_slug(&reply(&shopper, &product, &root, &format!("r{i}"), &text).await)
        }));
    }
    let mut slugs = Vec::new();
    for t in tasks {
        slugs.push(t.await.expect("replier finished"));
    }
    slugs.sort();
    slugs.dedup();
    assert_eq!(slugs.len(), 12, "every reply has its own slug");
    let all = stored(&app.db, &product).await;
    assert_eq!(all.len(), 14);
    assert_eq!(all[0].text, "root");
    assert_eq!(all[1].text, "early reply");
    assert!(all[2..].iter().all(|c| c.text.starts_with("late reply")));
    let full_slugs: std::collections::HashSet<&str> =
        all.iter().map(|c| c.full_slug.as_str()).collect();
    assert_eq!(full_slugs.len(), 14);
}

#[tokio::test]
async fn every_comment_query_uses_an_index() {
    let app = spawn_app().await;
    let db = &app.db;
    let id = bson::oid::ObjectId::new();
    let c = comments::COLLECTION;
    let cases = [
        (
            "thread page",
            doc! { "discussion_id": id },
            doc! { "full_slug": 1 },
        ),
        (
            "next page",
            doc! { "discussion_id": id, "full_slug": { "$gt": "2026.01.01.00.00.00:abcd" } },
            doc! { "full_slug": 1 },
        ),
        (
            "previous page",
            doc! { "discussion_id": id, "full_slug": { "$lt": "2026.01.01.00.00.00:abcd" } },
            doc! { "full_slug": -1 },
        ),
        (
            "sub-thread",
            comments::store::below(id, "2026.01.01.00.00.00:abcd"),
            doc! { "full_slug": 1 },
        ),
        (
            "permalink",
            doc! { "discussion_id": id, "slug": "abcd/ef01" },
            doc! {},
        ),
        (
            "a discussion by time",
            doc! { "discussion_id": id },
            doc! { "posted": -1 },
        ),
        ("moderation list", doc! {}, doc! { "posted": -1 }),
        (
            "moderation by status",
            doc! { "status": "hidden" },
            doc! { "posted": -1 },
        ),
        (
            "moderation of one discussion by status",
            doc! { "status": "hidden", "discussion_id": id },
            doc! { "posted": -1 },
        ),
    ];
    for (what, filter, sort) in cases {
        assert_uses_index(db, what, c, filter, sort).await;
    }
    let parent = comments::Comment {
        id: bson::oid::ObjectId::new(),
        discussion_id: id,
        parent_id: None,
        slug: bazaar::comments::CommentPath::parse("abcd").unwrap(),
        full_slug: "2026.01.01.00.00.00.000:abcd".into(),
        posted: bson::DateTime::now(),
        author: comments::Author { name: "A".into() },
        text: String::new(),
        status: CommentStatus::Visible,
        staff: false,
        email: None,
        notify: false,
        deleted_at: None,
        deleted_from: None,
        account_id: None,
        verified: false,
    };
    for (what, parent) in [
        ("latest top-level comment", None),
        ("latest reply", Some(&parent)),
    ] {
        let (filter, sort) = comments::store::last_sibling_query(id, parent);
        assert_uses_index(db, what, c, filter, sort).await;
    }
    // The escaped prefix bounds the scan to the sub-thread, not to every comment of the year.
    let explain = db
        .database()
        .run_command(doc! {
            "explain": { "find": c, "filter": comments::store::below(id, "2026.01.01.00.00.00:abcd") },
            "verbosity": "queryPlanner",
        })
        .await
        .unwrap();
    let scan = find_stage(&bson::Bson::Document(explain.clone()), "IXSCAN").expect("an index scan");
    let bounds = scan
        .get_document("indexBounds")
        .map(|b| b.to_string())
        .unwrap_or_default();
    assert!(
        bounds.contains("2026.01.01.00.00.00:abcd/"),
        "bounds: {bounds} in {explain}"
    );
}

/// `metadata.comment_count` of the blog post `slug`.
async fn node_comment_count(db: &Db, slug: &str) -> i64 {
    let node = db
        .collection::<bson::Document>("nodes")
        .find_one(doc! { "metadata.section": "blog", "metadata.slug": slug })
        .await
        .expect("query")
        .expect("node");
    match node
        .get_document("metadata")
        .expect("metadata")
        .get("comment_count")
    {
        Some(bson::Bson::Int32(n)) => i64::from(*n),
        Some(bson::Bson::Int64(n)) => *n,
        other => panic!("comment_count is {other:?}"),
    }
}

#[tokio::test]
async fn a_blog_post_takes_threaded_comments_and_its_count_shows_in_the_stream() {
    let app = spawn_unlimited().await;
    let post = NodeBuilder::post("miles-on-so-what").build(&app.db).await;
    CommentBuilder::on_node(&post).build(&app.db).await;
    let s = Shopper::new(&app).await;
    let post_url = "/blog/miles-on-so-what";
    let before = node_comment_count(&app.db, "miles-on-so-what").await;

    let response = s
        .post(
            &format!("{post_url}/comments"),
            &[("name", "Ada"), ("text", "First!"), ("website", "")],
        )
        .await;
    let first = posted_slug(&response);
    let response = s
        .post(
            &format!("{post_url}/comments/{first}"),
            &[("name", "Bo"), ("text", "A reply"), ("website", "")],
        )
        .await;
    let second = posted_slug(&response);
    assert!(second.starts_with(&format!("{first}/")), "{second}");

    let doc = page(&s, post_url).await;
    let rows: Vec<(String, usize, String)> = drawn(&doc)
        .into_iter()
        .map(|r| (r.0, r.1, r.3))
        .filter(|r| r.0 == first || r.0 == second)
        .collect();
    assert_eq!(
        rows,
        vec![
            (first.clone(), 0, "First!".to_string()),
            (second.clone(), 1, "A reply".to_string())
        ]
    );
    assert_eq!(
        node_comment_count(&app.db, "miles-on-so-what").await,
        before + 2
    );

    let permalink = page(&s, &format!("{post_url}/comments/{second}")).await;
    let shown: Vec<String> = drawn(&permalink).into_iter().map(|r| r.0).collect();
    assert_eq!(shown, vec![second.clone()]);

    let stream = body(s.get("/blog/").await).await;
    assert!(
        stream.contains(&format!("{} comments", before + 2)),
        "the stream shows the new count"
    );
    assert_eq!(
        page_status(&s, "/blog/no-such-post/comments/ffff").await,
        StatusCode::NOT_FOUND
    );
}

// ---------------------------------------------------------------------------------------------
// Unicode tricks in names and texts.

#[tokio::test]
async fn a_name_with_a_right_to_left_override_is_stored_without_it_and_shown_isolated() {
    let app = spawn_app().await;
    let product = product_with_stock(&app.db, "bidi1", 5).await;
    let s = Shopper::new(&app).await;
    posted_slug(&post(&s, &product, "Mallory\u{202E}\u{2066}gnp.exe", "Hello").await);
    let comments = stored(&app.db, &product).await;
    assert_eq!(comments[0].author.name, "Mallorygnp.exe");
    let raw = body(s.get(&format!("/products/{}", product.slug)).await).await;
    assert!(
        !raw.contains('\u{202E}'),
        "the override never reaches the page"
    );
    let doc = html(&raw);
    // The name sits in <bdi>, so whatever it holds cannot reorder the " · date" after it.
    assert_eq!(
        texts(&doc, ".comment-meta bdi.comment-author"),
        ["Mallorygnp.exe"]
    );
}

#[tokio::test]
async fn names_that_pass_for_the_shops_own_are_refused_in_any_lookalike_spelling() {
    let app = spawn_app().await;
    let product = product_with_stock(&app.db, "bidi2", 5).await;
    let s = Shopper::new(&app).await;
    for name in [
        "The\u{200B} Bazaar team",
        "THE BAZAAR TEAM",
        "Ｔｈｅ Ｂａｚａａｒ ｔｅａｍ",
        "Bazaar\u{00A0}staff",
        "admin",
    ] {
        let response = post(&s, &product, name, "Official announcement").await;
        assert_eq!(
            response.status(),
            StatusCode::UNPROCESSABLE_ENTITY,
            "{name:?}"
        );
        let doc = html(&body(response).await);
        assert!(
            texts(&doc, "#new-comment .field-error")
                .iter()
                .any(|e| e.contains("kept for the shop's own staff")),
            "{name:?}"
        );
    }
    assert!(stored(&app.db, &product).await.is_empty());
    // A zero-width space alone is no name at all.
    let response = post(&s, &product, "\u{200B}\u{200D}", "Hello").await;
    assert_eq!(response.status(), StatusCode::UNPROCESSABLE_ENTITY);
    assert!(stored(&app.db, &product).await.is_empty());
}

#[tokio::test]
async fn a_letter_with_thousands_of_combining_marks_keeps_only_a_few() {
    let app = spawn_app().await;
    let product = product_with_stock(&app.db, "zalgo", 5).await;
    let s = Shopper::new(&app).await;
    let marks = "\u{0336}".repeat(4800);
    posted_slug(&post(&s, &product, &format!("Z{marks}oe"), &format!("a{marks}!")).await);
    let comment = &stored(&app.db, &product).await[0];
    let kept = bazaar::comments::names::MAX_MARKS_PER_BASE;
    assert_eq!(
        comment.author.name,
        format!("Z{}oe", "\u{0336}".repeat(kept))
    );
    assert_eq!(comment.text, format!("a{}!", "\u{0336}".repeat(kept)));
}

#[tokio::test]
async fn every_demo_comment_has_a_working_permalink_and_a_reply_form_that_posts_under_it() {
    // About the demo data: every seeded comment, on products and posts.
    let app = spawn_app_with_demo_and(&[("BAZAAR_COMMENTS__RATE_LIMIT_PER_MINUTE", "0")]).await;
    let s = Shopper::new(&app).await;
    let all: Vec<Comment> = comments::store::collection(&app.db)
        .find(doc! {})
        .await
        .expect("query")
        .try_collect()
        .await
        .expect("comments");
    assert!(all.len() >= 17, "the demo comments are seeded");
    let mut ids: Vec<_> = all.iter().map(|c| c.discussion_id).collect();
    ids.sort();
    ids.dedup();
    let links = comments::store::discussion_links(&app.db, &ids)
        .await
        .expect("links");
    assert!(
        links.values().any(|l| l.base_url.starts_with("/blog/")),
        "blog posts' comments are walked too"
    );
    for c in &all {
        let base = &links[&c.discussion_id].base_url;
        let url = format!("{base}/comments/{}", c.slug);
        let doc = page(&s, &url).await;
        let form = format!("#{} details.comment-reply form", c.anchor());
        assert_eq!(
            attr(&doc, &form, "action").as_deref(),
            Some(url.as_str()),
            "{url}"
        );
        let response = s
            .post(
                &url,
                &[("name", "Walker"), ("text", "a reply"), ("website", "")],
            )
            .await;
        let reply = posted_slug(&response);
        assert!(
            reply.starts_with(&format!("{}/", c.slug)),
            "{reply} under {}",
            c.slug
        );
    }
}

#[tokio::test]
async fn a_refused_comment_shows_a_focused_error_summary_by_the_form_with_the_fields_marked() {
    let app = spawn_unlimited().await;
    let product = product_with_stock(&app.db, "errs1", 5).await;
    let s = Shopper::new(&app).await;
    let response = s
        .post(
            &format!("/products/{}/comments", product.slug),
            &[
                ("name", ""),
                ("email", "not-an-address"),
                ("text", ""),
                ("website", ""),
            ],
        )
        .await;
    assert_eq!(response.status(), StatusCode::UNPROCESSABLE_ENTITY);
    let doc = html(&body(response).await);
    assert_eq!(
        count(
            &doc,
            "#new-comment-errors[role=alert][autofocus][tabindex='-1']"
        ),
        1
    );
    let links: Vec<String> = doc
        .select(&Selector::parse("#new-comment-errors a").unwrap())
        .filter_map(|a| a.value().attr("href").map(str::to_string))
        .collect();
    assert_eq!(
        links,
        vec![
            "#new-comment-name",
            "#new-comment-email",
            "#new-comment-text"
        ]
    );
    for field in ["name", "email", "text"] {
        let id = format!("#new-comment-{field}");
        assert_eq!(
            attr(&doc, &id, "aria-invalid").as_deref(),
            Some("true"),
            "{id}"
        );
        let described = attr(&doc, &id, "aria-describedby").expect("described");
        assert_eq!(count(&doc, &format!("#{described}.field-error")), 1, "{id}");
    }
    assert_eq!(
        attr(&doc, "#new-comment-email", "value").as_deref(),
        Some("not-an-address")
    );

    // A refused reply: its own form, open, with its own summary; other forms untouched.
    let top = posted_slug(&post(&s, &product, "Ann", "hello").await);
    let response = reply(&s, &product, &top, "Ben", "").await;
    assert_eq!(response.status(), StatusCode::UNPROCESSABLE_ENTITY);
    let doc = html(&body(response).await);
    let anchor = comments::anchor_of(&top);
    assert_eq!(
        count(
            &doc,
            &format!("details.comment-reply[open] #{anchor}-errors[autofocus]")
        ),
        1
    );
    assert_eq!(
        attr(&doc, &format!("#{anchor}-text"), "aria-invalid").as_deref(),
        Some("true")
    );
    assert_eq!(attr(&doc, &format!("#{anchor}-name"), "aria-invalid"), None);
    assert_eq!(count(&doc, "[autofocus]"), 1, "one thing takes focus");
    // Asking for replies needs an address.
    let response = s
        .post(
            &format!("/products/{}/comments", product.slug),
            &[
                ("name", "Cy"),
                ("notify", "yes"),
                ("text", "hi"),
                ("website", ""),
            ],
        )
        .await;
    assert_eq!(response.status(), StatusCode::UNPROCESSABLE_ENTITY);
    let doc = html(&body(response).await);
    assert!(texts(&doc, "#new-comment-email-error")[0].contains("email address"));
    assert_eq!(stored(&app.db, &product).await.len(), 1);
}

#[tokio::test]
async fn posting_returns_to_the_post_at_the_new_comment_with_a_posted_notice() {
    let app = spawn_app_with(&[
        ("BAZAAR_COMMENTS__RATE_LIMIT_PER_MINUTE", "0"),
        ("BAZAAR_COMMENTS__PAGE_SIZE", "3"),
    ])
    .await;
    let product = product_with_stock(&app.db, "back1", 5).await;
    let s = Shopper::new(&app).await;
    let response = post(&s, &product, "Ann", "first").await;
    let first = posted_slug(&response);
    let to = location(&response);
    assert_eq!(
        to,
        format!("/products/{}#{}", product.slug, comments::anchor_of(&first))
    );
    let doc = page(&s, &to).await;
    assert!(texts(&doc, ".flash")[0].contains("posted"));
    assert_eq!(
        count(&doc, &format!("li#{}", comments::anchor_of(&first))),
        1
    );
    let r = reply(&s, &product, &first, "Ben", "a reply").await;
    assert!(location(&r).starts_with(&format!("/products/{}#comment-", product.slug)));
    posted_slug(&post(&s, &product, "Cy", "second").await);
    // The fourth comment is past the first page: its own permalink holds it.
    let response = post(&s, &product, "Di", "third").await;
    let third = posted_slug(&response);
    assert_eq!(
        location(&response),
        format!(
            "/products/{}/comments/{third}#{}",
            product.slug,
            comments::anchor_of(&third)
        )
    );
}

#[tokio::test]
async fn the_query_placing_a_new_comment_on_the_first_page_uses_an_index() {
    let (_server, db) = memory_db("first-page-explain").await;
    bazaar::startup::indexes::ensure_indexes(&db)
        .await
        .expect("indexes");
    let filter = comments::store::up_to_query(bson::oid::ObjectId::new(), "2026.01.01:abcd");
    assert_uses_index(
        &db,
        "comments up to one",
        comments::COLLECTION,
        filter,
        doc! {},
    )
    .await;
}

#[tokio::test]
async fn a_first_time_commenter_is_held_until_approved_from_the_queue_then_shown() {
    let app = spawn_app_with(&[
        ("BAZAAR_COMMENTS__RATE_LIMIT_PER_MINUTE", "0"),
        ("BAZAAR_COMMENTS__HOLD_FIRST_TIME", "true"),
        ("BAZAAR_COMMENTS__BLOCKLIST", "cheap watches, casino"),
    ])
    .await;
    let product = product_with_stock(&app.db, "held1", 5).await;
    let s = Shopper::new(&app).await;
    let response = post(&s, &product, "Newcomer", "My first comment here").await;
    assert_eq!(response.status(), StatusCode::SEE_OTHER);
    assert_eq!(
        location(&response),
        format!("/products/{}#comments", product.slug)
    );
    let doc = page(&s, &location(&response)).await;
    assert!(texts(&doc, ".flash")[0].contains("held for a moderator"));
    assert!(!texts(&doc, ".comment-text").contains(&"My first comment here".to_string()));
    let held = stored(&app.db, &product).await;
    assert_eq!(held.len(), 1);
    assert_eq!(held[0].status, CommentStatus::Pending);
    assert_eq!(comment_count(&app.db, &product).await, 0);

    // The approval queue lists it; approving shows it and counts it.
    let queue = admin_page(&app, "/admin/comments?status=pending").await;
    assert_eq!(
        texts(&queue, ".comment-row .comment-excerpt"),
        vec!["My first comment here"]
    );
    let token = csrf_token(&queue).expect("token");
    let approve = app
        .post_admin_form(
            &format!("/admin/comments/{}/approve", held[0].id.to_hex()),
            &[("csrf_token", token.as_str()), ("back_status", "pending")],
        )
        .await;
    assert_eq!(approve.status(), StatusCode::SEE_OTHER);
    assert_eq!(comment_count(&app.db, &product).await, 1);
    let doc = page(&s, &format!("/products/{}", product.slug)).await;
    assert!(texts(&doc, ".comment-text").contains(&"My first comment here".to_string()));

    // Known now: the next one goes live at once, unless it links too much or names a
    // blocklisted word.
    posted_slug(&post(&s, &product, "Newcomer", "Second thoughts").await);
    let many = "see https://a.example https://b.example https://c.example";
    post(&s, &product, "Newcomer", many).await;
    post(&s, &product, "Newcomer", "Great CASINO bonus").await;
    let pending: Vec<Comment> = stored(&app.db, &product)
        .await
        .into_iter()
        .filter(|c| c.status == CommentStatus::Pending)
        .collect();
    assert_eq!(pending.len(), 2, "over the link limit and blocklisted");
    assert_eq!(comment_count(&app.db, &product).await, 2);

    // Bulk: both marked spam at once, then never shown.
    let mut form: Vec<(&str, String)> = vec![
        ("csrf_token", token.clone()),
        ("action", "spam".to_string()),
    ];
    for c in &pending {
        form.push(("id", c.id.to_hex()));
    }
    let fields: Vec<(&str, &str)> = form.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let bulk = app.post_admin_form("/admin/comments/bulk", &fields).await;
    assert_eq!(bulk.status(), StatusCode::SEE_OTHER);
    let statuses: Vec<CommentStatus> = stored(&app.db, &product)
        .await
        .into_iter()
        .map(|c| c.status)
        .collect();
    assert_eq!(
        statuses
            .iter()
            .filter(|s| **s == CommentStatus::Spam)
            .count(),
        2
    );
    assert_eq!(comment_count(&app.db, &product).await, 2);
}

#[tokio::test]
async fn a_staff_reply_from_the_admin_carries_the_badge_and_the_staff_name_is_refused_in_public() {
    let app = spawn_unlimited().await;
    let product = product_with_stock(&app.db, "staff1", 5).await;
    let s = Shopper::new(&app).await;
    let top = posted_slug(&post(&s, &product, "Ann", "Is this in stock?").await);
    let parent = by_slug(&app.db, &product, &top).await;
    let form = admin_page(
        &app,
        &format!("/admin/comments/{}/reply", parent.id.to_hex()),
    )
    .await;
    let name = attr(&form, "#staff-name", "value").expect("a default name");
    assert!(name.ends_with("staff"), "{name}");
    let token = csrf_token(&form).expect("token");
    let posted = app
        .post_admin_form(
            &format!("/admin/comments/{}/reply", parent.id.to_hex()),
            &[
                ("csrf_token", token.as_str()),
                ("name", name.as_str()),
                ("text", "Yes, three left."),
            ],
        )
        .await;
    assert_eq!(posted.status(), StatusCode::SEE_OTHER);
    let doc = page(&s, &format!("/products/{}", product.slug)).await;
    let badges = texts(&doc, "li.comment[data-depth='1'] .staff-badge");
    assert_eq!(badges, vec!["Staff"]);
    assert_eq!(
        count(&doc, "li.comment[data-depth='0'] > article .staff-badge"),
        0
    );
    // The same name from the public form is refused.
    let response = post(
        &s,
        &product,
        &name,
        "50% off everything! https://evil.example",
    )
    .await;
    assert_eq!(response.status(), StatusCode::UNPROCESSABLE_ENTITY);
    let doc = html(&body(response).await);
    assert!(texts(&doc, "#new-comment-name-error")[0].contains("kept for the shop"));
    assert_eq!(stored(&app.db, &product).await.len(), 2);
}

#[tokio::test]
async fn the_moderation_policy_and_queue_queries_use_an_index() {
    let (_server, db) = memory_db("policy-explain").await;
    bazaar::startup::indexes::ensure_indexes(&db)
        .await
        .expect("indexes");
    let by_email = comments::store::NewComment {
        name: "Ann".into(),
        email: Some("ann@example.com".into()),
        ..Default::default()
    };
    let by_name = comments::store::NewComment {
        name: "Ann".into(),
        ..Default::default()
    };
    for new in [by_email, by_name] {
        let filter = comments::policy::known_commenter_query(&new);
        assert_uses_index(
            &db,
            "known commenter",
            comments::COLLECTION,
            filter,
            doc! {},
        )
        .await;
    }
    assert_uses_index(
        &db,
        "approval queue",
        comments::COLLECTION,
        doc! { "status": "pending" },
        doc! { "posted": -1 },
    )
    .await;
    // The approval-queue search reads the newest of a status (or of all) by index, bounded.
    assert_uses_index(
        &db,
        "search of all comments",
        comments::COLLECTION,
        doc! {},
        doc! { "posted": -1 },
    )
    .await;
    assert_uses_index(
        &db,
        "deleted comments past their restore period",
        comments::COLLECTION,
        comments::store::purge_query(bson::DateTime::now()),
        doc! {},
    )
    .await;
}

/// The product page's "comments closed" line, if shown, and whether it has a comment form.
async fn closed_line_and_form(s: &Shopper, product: &Product) -> (Vec<String>, bool) {
    let doc = page(s, &format!("/products/{}", product.slug)).await;
    let forms = Selector::parse(&format!(
        "form[action=\"/products/{}/comments\"]",
        product.slug
    ))
    .unwrap();
    (
        texts(&doc, ".comments-closed"),
        doc.select(&forms).next().is_some(),
    )
}

#[tokio::test]
async fn a_discussion_closes_the_configured_days_after_it_started_and_posts_to_it_are_refused() {
    let app = spawn_app_with(&[
        ("BAZAAR_COMMENTS__RATE_LIMIT_PER_MINUTE", "0"),
        ("BAZAAR_COMMENTS__CLOSE_AFTER_DAYS", "2"),
    ])
    .await;
    let product = product_with_stock(&app.db, "closing1", 5).await;
    let s = Shopper::new(&app).await;
    let first = posted_slug(&post(&s, &product, "Ada", "while open").await);
    assert_eq!(closed_line_and_form(&s, &product).await, (vec![], true));

    app.clock.step_forward(3 * 24 * HOUR);
    assert_eq!(
        closed_line_and_form(&s, &product).await,
        (vec!["Comments are closed.".to_string()], false)
    );
    let refused = post(&s, &product, "Bo", "too late").await;
    assert_eq!(refused.status(), StatusCode::FORBIDDEN);
    let doc = html(&body(refused).await);
    assert_eq!(
        texts(&doc, ".comments-closed"),
        vec!["Comments are closed on this page, so your comment was not posted."]
    );
    let refused = reply(&s, &product, &first, "Cy", "late reply").await;
    assert_eq!(refused.status(), StatusCode::FORBIDDEN);
    let doc = html(&body(refused).await);
    assert_eq!(
        texts(&doc, ".comments-closed"),
        vec!["Comments are closed on this page, so your comment was not posted."]
    );
    assert_eq!(stored(&app.db, &product).await.len(), 1);
    assert_eq!(comment_count(&app.db, &product).await, 1);
}

#[tokio::test]
async fn the_admin_closes_and_reopens_one_discussion_and_readers_can_post_only_while_open() {
    let app = spawn_unlimited().await;
    let product = product_with_stock(&app.db, "closing2", 5).await;
    let s = Shopper::new(&app).await;
    posted_slug(&post(&s, &product, "Ada", "first").await);
    let list = format!("/admin/comments?discussion={}", product.id.to_hex());
    let admin = html(&body(app.get_admin(&list).await).await);
    assert_eq!(
        texts(&admin, ".discussion-closing .closing-state"),
        vec!["open"]
    );
    assert_eq!(
        texts(&admin, ".discussion-closing button"),
        vec!["Close comments"]
    );
    let token = csrf_token(&admin).expect("a token");
    let action = format!("/admin/comments/discussions/{}/closed", product.id.to_hex());

    let bad = app
        .post_admin_form(
            &action,
            &[("csrf_token", token.as_str()), ("closed", "maybe")],
        )
        .await;
    assert_eq!(bad.status(), StatusCode::BAD_REQUEST);
    assert_eq!(closed_line_and_form(&s, &product).await, (vec![], true));

    let closed = app
        .post_admin_form(
            &action,
            &[("csrf_token", token.as_str()), ("closed", "yes")],
        )
        .await;
    assert_eq!(closed.status(), StatusCode::SEE_OTHER);
    assert_eq!(location(&closed), list);
    let stored_product = products::by_slug(&app.db, &product.slug)
        .await
        .unwrap()
        .unwrap();
    assert!(stored_product.comments_closed);
    assert_eq!(
        closed_line_and_form(&s, &product).await,
        (vec!["Comments are closed.".to_string()], false)
    );
    assert_eq!(
        post(&s, &product, "Bo", "refused").await.status(),
        StatusCode::FORBIDDEN
    );
    let admin = html(&body(app.get_admin(&list).await).await);
    assert_eq!(
        texts(&admin, ".discussion-closing button"),
        vec!["Reopen comments"]
    );

    let reopened = app
        .post_admin_form(&action, &[("csrf_token", token.as_str()), ("closed", "no")])
        .await;
    assert_eq!(reopened.status(), StatusCode::SEE_OTHER);
    posted_slug(&post(&s, &product, "Cy", "open again").await);
    assert_eq!(comment_count(&app.db, &product).await, 2);

    let nowhere = format!(
        "/admin/comments/discussions/{}/closed",
        bson::oid::ObjectId::new().to_hex()
    );
    let missing = app
        .post_admin_form(
            &nowhere,
            &[("csrf_token", token.as_str()), ("closed", "yes")],
        )
        .await;
    assert_eq!(missing.status(), StatusCode::NOT_FOUND);
}

/// The `value` of the input `selector` on `doc`.
fn field_value(doc: &scraper::Html, selector: &str) -> Option<String> {
    let selector = Selector::parse(selector).unwrap();
    doc.select(&selector)
        .next()
        .and_then(|e| e.value().attr("value").map(str::to_string))
}

fn is_checked(doc: &scraper::Html, selector: &str) -> bool {
    let selector = Selector::parse(selector).unwrap();
    doc.select(&selector)
        .next()
        .is_some_and(|e| e.value().attr("checked").is_some())
}

#[tokio::test]
async fn remember_me_prefills_the_name_and_email_next_time_from_an_encrypted_http_only_cookie() {
    let app = spawn_unlimited().await;
    let product = product_with_stock(&app.db, "remember1", 5).await;
    let s = Shopper::new(&app).await;
    let path = format!("/products/{}", product.slug);
    let doc = page(&s, &path).await;
    assert_eq!(field_value(&doc, "#new-comment-name").as_deref(), Some(""));
    assert!(!is_checked(&doc, "#new-comment-remember"));

    let response = s
        .post(
            &format!("{path}/comments"),
            &[
                ("name", "Rita Remembered"),
                ("email", "rita@example.com"),
                ("text", "first"),
                ("remember", "yes"),
                ("website", ""),
            ],
        )
        .await;
    let cookies: Vec<String> = response
        .headers()
        .get_all("set-cookie")
        .iter()
        .map(|v| v.to_str().unwrap().to_string())
        .collect();
    let slug = posted_slug(&response);
    assert!(!cookies.is_empty());
    for cookie in &cookies {
        assert!(!cookie.contains("Rita") && !cookie.contains("rita%40example"));
        assert!(cookie.to_ascii_lowercase().contains("httponly"), "{cookie}");
    }

    let doc = page(&s, &path).await;
    assert_eq!(
        field_value(&doc, "#new-comment-name").as_deref(),
        Some("Rita Remembered")
    );
    assert_eq!(
        field_value(&doc, "#new-comment-email").as_deref(),
        Some("rita@example.com")
    );
    assert!(is_checked(&doc, "#new-comment-remember"));
    let anchor = by_slug(&app.db, &product, &slug).await.anchor();
    assert_eq!(
        field_value(&doc, &format!("#{anchor}-name")).as_deref(),
        Some("Rita Remembered")
    );
    let permalink = page(&s, &format!("{path}/comments/{slug}")).await;
    assert_eq!(
        field_value(&permalink, &format!("#{anchor}-email")).as_deref(),
        Some("rita@example.com")
    );

    // Another browser sees empty forms.
    let other = page(&Shopper::new(&app).await, &path).await;
    assert_eq!(
        field_value(&other, "#new-comment-name").as_deref(),
        Some("")
    );

    // Posting without the tick forgets them.
    posted_slug(&post(&s, &product, "Rita Remembered", "second").await);
    let doc = page(&s, &path).await;
    assert_eq!(field_value(&doc, "#new-comment-name").as_deref(), Some(""));
    assert_eq!(field_value(&doc, "#new-comment-email").as_deref(), Some(""));
    assert!(!is_checked(&doc, "#new-comment-remember"));
}

#[tokio::test]
async fn the_approval_queue_search_finds_comments_by_name_or_text_ignoring_case() {
    let app = spawn_app_with(&[
        ("BAZAAR_COMMENTS__RATE_LIMIT_PER_MINUTE", "0"),
        ("BAZAAR_COMMENTS__HOLD_FIRST_TIME", "true"),
    ])
    .await;
    let product = product_with_stock(&app.db, "search1", 5).await;
    let s = Shopper::new(&app).await;
    for (name, text) in [
        ("Wanda", "Cheap WATCHES here"),
        ("Otto", "a fine record"),
        ("Watson", "lovely sleeve"),
    ] {
        assert_eq!(
            post(&s, &product, name, text).await.status(),
            StatusCode::SEE_OTHER
        );
    }
    let search = |q: &str| {
        let q = q.to_string();
        let app = &app;
        async move {
            let path = format!("/admin/comments?status=pending&q={q}");
            let doc = html(&body(app.get_admin(&path).await).await);
            let mut rows = texts(&doc, ".comment-row .comment-excerpt");
            rows.sort();
            (rows, texts(&doc, ".result-count .total"))
        }
    };
    assert_eq!(
        search("wat").await,
        (
            vec![
                "Cheap WATCHES here".to_string(),
                "lovely sleeve".to_string()
            ],
            vec!["2".to_string()]
        )
    );
    assert_eq!(search("RECORD").await.0, vec!["a fine record".to_string()]);
    assert!(search("nothing%20like%20it").await.0.is_empty());
    // The box keeps the search and the status.
    let doc = html(&body(app.get_admin("/admin/comments?status=pending&q=otto").await).await);
    let value = Selector::parse("#comment-search-q").unwrap();
    assert_eq!(
        doc.select(&value).next().unwrap().value().attr("value"),
        Some("otto")
    );
    let status = Selector::parse(".comment-search input[name=status]").unwrap();
    assert_eq!(
        doc.select(&status).next().unwrap().value().attr("value"),
        Some("pending")
    );
}
