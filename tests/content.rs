//! The public side of the CMS and tumblelog: section lists, node pages with each type's
//! partial, tag pages with products, Atom feeds, drafts and scheduled nodes kept hidden,
//! Markdown and other editor input rendered inert, and an index behind every query.

use crate::common::builders::{NodeBuilder, ProductBuilder};
use crate::common::*;
use bazaar::content::model::{self, Detail, LinkDetail, QuoteDetail, TextDetail, VideoDetail};
use bazaar::content::store;
use bson::{doc, DateTime};
use reqwest::StatusCode;

const DAY_MS: i64 = 24 * 3600 * 1000;

fn days_from_now(days: i64) -> DateTime {
    DateTime::from_millis(DateTime::now().timestamp_millis() + days * DAY_MS)
}

/// A YouTube video (a watch URL, as an editor pastes it).
fn youtube() -> Detail {
    Detail::Video(VideoDetail {
        url: "https://www.youtube.com/watch?v=zqNTltOGh5c".into(),
        provider: "youtube".into(),
        ..Default::default()
    })
}

fn entry(text: &str) -> Detail {
    Detail::Entry(TextDetail {
        text: text.to_string(),
        ..Default::default()
    })
}

#[tokio::test]
async fn the_about_and_shipping_pages_have_stable_urls_linked_from_the_footer() {
    // About the demo data: the about and shipping pages a new shop starts with.
    let app = spawn_app_with_demo().await;
    let home = page(&app, "/").await;
    let footer_links: Vec<String> = {
        let sel = scraper::Selector::parse("footer a").unwrap();
        home.select(&sel)
            .filter_map(|a| a.value().attr("href").map(str::to_string))
            .collect()
    };
    assert!(
        footer_links.contains(&"/pages/about".to_string()),
        "{footer_links:?}"
    );
    assert!(
        footer_links.contains(&"/pages/shipping".to_string()),
        "{footer_links:?}"
    );

    let about = page(&app, "/pages/about").await;
    assert_eq!(heading(&about), "About Bazaar");
    // Markdown became HTML: a second-level heading and a list.
    assert_eq!(texts(&about, ".post-text h2"), ["What we do"]);
    assert_eq!(count(&about, ".post-text li"), 3);
    let shipping = page(&app, "/pages/shipping").await;
    assert_eq!(heading(&shipping), "Shipping and returns");
    // The configured rates: a header row, four weights and the charge per further 500 g.
    assert_eq!(count(&shipping, ".post-text table.shipping-rates tr"), 6);
}

#[tokio::test]
async fn the_blog_is_a_stream_of_every_post_type_newest_first_with_comment_counts() {
    let app = spawn_app().await;
    let db = &app.db;
    NodeBuilder::post("three-futures")
        .title("Three futures")
        .days_ago(9)
        .build(db)
        .await;
    let quote = QuoteDetail {
        text: "It's not the notes you play, it's the notes you don't play.".into(),
        source: "Attributed to Miles Davis".into(),
        ..Default::default()
    };
    NodeBuilder::new("blog", "miles-on-so-what", Detail::Quote(quote))
        .title("Miles on modal jazz")
        .days_ago(7)
        .build(db)
        .await;
    NodeBuilder::new("blog", "a-session-worth-watching", youtube())
        .title("A session worth watching")
        .days_ago(5)
        .build(db)
        .await;
    let link = LinkDetail {
        url: "https://en.wikipedia.org/wiki/Liner_notes".into(),
        text: "What liner notes are".into(),
        ..Default::default()
    };
    NodeBuilder::new("blog", "liner-notes-archive", Detail::Link(link))
        .title("Liner notes, archived")
        .days_ago(3)
        .build(db)
        .await;
    NodeBuilder::photo("new-shelves")
        .section("blog")
        .title("New shelves")
        .days_ago(2)
        .build(db)
        .await;
    // Comments are kept by another area; it counts them on the node.
    store::collection(&app.db)
        .update_one(
            doc! { "metadata.section": "blog", "metadata.slug": "three-futures" },
            doc! { "$set": { "metadata.comment_count": 3 } },
        )
        .await
        .unwrap();
    let doc = page(&app, "/blog/").await;
    assert_eq!(heading(&doc), "Blog");
    for kind in ["entry", "photo", "video", "quote", "link"] {
        assert!(
            count(&doc, &format!("article.node-{kind}")) >= 1,
            "no {kind} post in the stream"
        );
    }
    let titles = texts(&doc, "article.node-summary h2");
    assert_eq!(
        titles,
        [
            "New shelves",
            "Liner notes, archived",
            "A session worth watching",
            "Miles on modal jazz",
            "Three futures",
        ]
    );
    let counts = texts(&doc, "article.node-summary .comment-count");
    assert_eq!(counts[4], "3 comments");
    assert_eq!(counts[0], "0 comments");
    // The same page without the trailing slash.
    assert_eq!(app.get("/blog").await.status(), StatusCode::OK);
    // The quote and link partials.
    let quote = page(&app, "/blog/miles-on-so-what").await;
    assert_eq!(
        texts(&quote, ".post-quote blockquote"),
        ["It's not the notes you play, it's the notes you don't play."]
    );
    assert_eq!(
        texts(&quote, ".post-quote figcaption"),
        ["— Attributed to Miles Davis"]
    );
    let link = page(&app, "/blog/liner-notes-archive").await;
    assert_eq!(
        attr(&link, ".post-link a", "href").as_deref(),
        Some("https://en.wikipedia.org/wiki/Liner_notes")
    );
}

#[tokio::test]
async fn section_lists_page_by_older_and_newer_links_newest_first() {
    let app = spawn_app().await;
    for i in 0..19 {
        add_node(
            &app,
            "blog",
            &format!("post-{i:02}"),
            &format!("Post {i:02}"),
            entry("Text."),
            Some(days_from_now(-1 - i)),
            &[],
        )
        .await;
    }
    // 19 posts: a page of 10, then 9.
    let first = page(&app, "/blog/").await;
    let titles = texts(&first, "article.node-summary h2");
    assert_eq!(titles.len(), 10);
    assert_eq!(titles[0], "Post 00");
    assert!(attr(&first, "a[rel=prev]", "href").is_none());
    let older = attr(&first, "a[rel=next]", "href").expect("an Older link");
    assert!(older.starts_with("/blog/?before="), "{older}");
    let second = page(&app, &older).await;
    let titles = texts(&second, "article.node-summary h2");
    assert_eq!(titles.len(), 9);
    assert_eq!(titles[0], "Post 10");
    assert!(attr(&second, "a[rel=next]", "href").is_none());
    let newer = attr(&second, "a[rel=prev]", "href").expect("a Newer link");
    assert!(newer.starts_with("/blog/?after="), "{newer}");
    let back = page(&app, &newer).await;
    assert_eq!(
        texts(&back, "article.node-summary h2"),
        texts(&first, "article.node-summary h2")
    );
    // The numbered pages of earlier versions still answer, within bounds.
    let numbered = page(&app, "/blog/?page=2").await;
    assert_eq!(texts(&numbered, "article.node-summary h2")[0], "Post 10");
    assert_eq!(
        app.get("/blog/?page=3").await.status(),
        StatusCode::NOT_FOUND
    );
    for bad in [
        "/blog/?page=abc",
        "/blog/?page=0",
        "/blog/?page=101",
        "/blog/?before=yesterday",
        "/blog/?after=1.zz",
    ] {
        assert_eq!(
            app.get(bad).await.status(),
            StatusCode::BAD_REQUEST,
            "{bad}"
        );
    }
}

#[tokio::test]
async fn drafts_and_scheduled_nodes_are_invisible_to_the_public() {
    let app = spawn_app().await;
    add_node(
        &app,
        "blog",
        "a-draft",
        "A draft",
        entry("Not yet."),
        None,
        &["jazz"],
    )
    .await;
    add_node(
        &app,
        "blog",
        "tomorrow",
        "Scheduled for tomorrow",
        entry("Soon."),
        Some(days_from_now(1)),
        &["jazz"],
    )
    .await;
    add_node(
        &app,
        "pages",
        "secret",
        "Secret page",
        Detail::Page(TextDetail {
            text: "x".into(),
            ..Default::default()
        }),
        None,
        &[],
    )
    .await;
    for path in ["/blog/a-draft", "/blog/tomorrow", "/pages/secret"] {
        let response = app.get(path).await;
        assert_eq!(response.status(), StatusCode::NOT_FOUND, "{path}");
        let doc = html(&body(response).await);
        assert_eq!(heading(&doc), "Page not found");
    }
    let blog = body(app.get("/blog/").await).await;
    let tag = body(app.get("/tags/jazz").await).await;
    let feed = body(app.get("/blog/feed.atom").await).await;
    for text in [&blog, &tag, &feed] {
        assert!(!text.contains("A draft"));
        assert!(!text.contains("Scheduled for tomorrow"));
    }
    // Published, it appears.
    add_node(
        &app,
        "blog",
        "now-live",
        "Now live",
        entry("Here."),
        Some(days_from_now(0)),
        &["jazz"],
    )
    .await;
    assert_eq!(app.get("/blog/now-live").await.status(), StatusCode::OK);
    assert!(body(app.get("/tags/jazz").await).await.contains("Now live"));
}

/// Whether the public sees blog post `slug` titled `title`: its page, the blog stream, its tag
/// page and the feed; all four must agree.
async fn publicly_shown(app: &TestApp, slug: &str, title: &str) -> bool {
    let page = app.get(&format!("/blog/{slug}")).await.status() == StatusCode::OK;
    let blog = body(app.get("/blog/").await).await.contains(title);
    let tag = body(app.get("/tags/steps").await).await.contains(title);
    let feed = body(app.get("/blog/feed.atom").await).await.contains(title);
    assert!(
        page == blog && blog == tag && tag == feed,
        "page {page}, blog {blog}, tag {tag}, feed {feed}"
    );
    page
}

async fn stored_live(app: &TestApp, id: bson::oid::ObjectId) -> bool {
    store::by_id(&app.db, id)
        .await
        .expect("query")
        .expect("node")
        .metadata
        .live
}

const HOUR: std::time::Duration = std::time::Duration::from_secs(3600);

#[tokio::test]
async fn a_post_published_now_stays_shown_when_the_clock_steps_back_and_goes_when_unpublished() {
    let app = spawn_app().await;
    let draft = add_node(
        &app,
        "blog",
        "step-now",
        "Published now",
        entry("Hi."),
        None,
        &["steps"],
    )
    .await;
    assert!(!publicly_shown(&app, "step-now", "Published now").await);
    // What "Publish now" does.
    assert!(store::set_published(&app.db, draft.id, Some(app.db.now()))
        .await
        .expect("publish"));
    assert!(publicly_shown(&app, "step-now", "Published now").await);
    assert!(stored_live(&app, draft.id).await);
    app.clock.step_back(HOUR);
    assert!(
        publicly_shown(&app, "step-now", "Published now").await,
        "an hour's step back hid a published post"
    );
    // Back to draft: gone, and not live any more, whatever the clock says.
    assert!(store::set_published(&app.db, draft.id, None)
        .await
        .expect("unpublish"));
    assert!(!stored_live(&app, draft.id).await);
    app.clock.step_forward(2 * HOUR);
    assert!(!publicly_shown(&app, "step-now", "Published now").await);
}

#[tokio::test]
async fn a_scheduled_post_that_appeared_stays_shown_when_the_clock_steps_back_before_its_time() {
    let app = spawn_app().await;
    let clock = app.clock.clone();
    let at = DateTime::from_millis(app.db.now().timestamp_millis() + 10 * 60 * 1000);
    let node = add_node(
        &app,
        "blog",
        "step-sched",
        "Scheduled",
        entry("Later."),
        Some(at),
        &["steps"],
    )
    .await;
    assert!(!stored_live(&app, node.id).await);
    assert!(!publicly_shown(&app, "step-sched", "Scheduled").await);
    // Its time comes: shown before any job ran, and the read that showed it marked it live.
    clock.step_forward(std::time::Duration::from_secs(11 * 60));
    assert!(publicly_shown(&app, "step-sched", "Scheduled").await);
    assert!(stored_live(&app, node.id).await);
    // The clock is stepped back to before its time: readers keep seeing it.
    clock.step_back(HOUR);
    assert!(
        publicly_shown(&app, "step-sched", "Scheduled").await,
        "a scheduled post that had appeared was hidden by a step back"
    );
    // Rescheduling it to later takes it off the site until then.
    let later = DateTime::from_millis(app.db.now().timestamp_millis() + HOUR.as_millis() as i64);
    store::set_published(&app.db, node.id, Some(later))
        .await
        .expect("reschedule");
    assert!(!stored_live(&app, node.id).await);
    assert!(!publicly_shown(&app, "step-sched", "Scheduled").await);
}

#[tokio::test]
async fn the_jobs_mark_a_due_post_live_before_anyone_reads_it_and_only_once() {
    let app = spawn_app().await;
    let clock = app.clock.clone();
    let at = DateTime::from_millis(app.db.now().timestamp_millis() + 60_000);
    let due = add_node(
        &app,
        "blog",
        "step-job",
        "By the job",
        entry("."),
        Some(at),
        &["steps"],
    )
    .await;
    let far = add_node(
        &app,
        "blog",
        "step-far",
        "Far off",
        entry("."),
        Some(days_from_now(3)),
        &[],
    )
    .await;
    let draft = add_node(&app, "blog", "step-draft", "Draft", entry("."), None, &[]).await;
    assert_eq!(store::go_live_due(&app.db).await.expect("job"), 0);
    clock.step_forward(std::time::Duration::from_secs(120));
    assert_eq!(store::go_live_due(&app.db).await.expect("job"), 1);
    assert_eq!(store::go_live_due(&app.db).await.expect("job again"), 0);
    assert!(stored_live(&app, due.id).await);
    assert!(!stored_live(&app, far.id).await);
    assert!(!stored_live(&app, draft.id).await);
    clock.step_back(HOUR);
    assert!(publicly_shown(&app, "step-job", "By the job").await);
}

#[tokio::test]
async fn nodes_stored_before_the_live_flag_are_shown_by_their_date_and_marked_live_once() {
    let app = spawn_app().await;
    let nodes = app.db.collection::<bson::Document>(store::COLLECTION);
    let old = add_node(
        &app,
        "blog",
        "legacy-old",
        "Legacy old",
        entry("."),
        Some(days_from_now(-2)),
        &["steps"],
    )
    .await;
    let soon = add_node(
        &app,
        "blog",
        "legacy-soon",
        "Legacy soon",
        entry("."),
        Some(days_from_now(1)),
        &[],
    )
    .await;
    let draft = add_node(
        &app,
        "blog",
        "legacy-draft",
        "Legacy draft",
        entry("."),
        None,
        &[],
    )
    .await;
    // As a release before `metadata.live` stored them.
    let ours = [old.id, soon.id, draft.id];
    let forget_live = || async {
        nodes
            .update_many(
                doc! { "_id": { "$in": ours.to_vec() } },
                doc! { "$unset": { "metadata.live": "" } },
            )
            .await
            .expect("unset");
    };
    forget_live().await;
    // Start-up's pass marks the one published in the past, and only it.
    assert_eq!(store::go_live_due(&app.db).await.expect("migration"), 1);
    assert!(stored_live(&app, old.id).await);
    for id in [soon.id, draft.id] {
        let raw = nodes.find_one(doc! { "_id": id }).await.unwrap().unwrap();
        assert!(raw.get_document("metadata").unwrap().get("live").is_none());
    }
    assert_eq!(store::go_live_due(&app.db).await.expect("again"), 0);
    // Before that pass ran, readers see them by their date; the read marks what it showed.
    forget_live().await;
    assert!(publicly_shown(&app, "legacy-old", "Legacy old").await);
    assert_eq!(
        app.get("/blog/legacy-soon").await.status(),
        StatusCode::NOT_FOUND
    );
    assert!(stored_live(&app, old.id).await);
    app.clock.step_back(3 * 24 * HOUR);
    assert!(publicly_shown(&app, "legacy-old", "Legacy old").await);
}

#[tokio::test]
async fn unknown_sections_and_slugs_are_not_found() {
    let app = spawn_app().await;
    for path in [
        "/blog/no-such-post",
        "/pages/no-such-page",
        "/gallery/no-such-photo",
        "/nosection/",
        "/nosection/about",
        "/nosection/feed.atom",
        "/tags/no-such-tag",
        "/blog/about",
    ] {
        let response = app.get(path).await;
        assert_eq!(response.status(), StatusCode::NOT_FOUND, "{path}");
    }
}

#[tokio::test]
async fn the_gallery_shows_a_grid_of_thumbnails_and_a_photo_page_shows_the_image_and_caption() {
    let app = spawn_app().await;
    for slug in ["shop-window", "paperback-wall", "film-night"] {
        NodeBuilder::photo(slug).build(&app.db).await;
    }
    NodeBuilder::photo("listening-corner")
        .title("Listening corner")
        .caption("Two chairs, one turntable, no hurry.")
        .build(&app.db)
        .await;
    // A blog photo is not in the gallery.
    NodeBuilder::photo("new-shelves")
        .section("blog")
        .build(&app.db)
        .await;
    let doc = page(&app, "/gallery/").await;
    assert_eq!(count(&doc, ".gallery-grid li"), 4);
    // Tiles show the photos' sized copies (the generated 320 px image has one, 320 wide).
    let thumb = attr(&doc, ".gallery-grid img", "src").expect("a tile's image");
    assert!(
        thumb.starts_with("/media/") && thumb.ends_with("/w/320"),
        "{thumb}"
    );
    assert_eq!(
        attr(&doc, ".gallery-grid img", "srcset"),
        Some(format!("{thumb} 320w"))
    );
    let response = app.get(&thumb).await;
    assert_eq!(response.status(), StatusCode::OK);
    assert_eq!(
        response.headers().get("content-type").unwrap(),
        "image/jpeg"
    );

    let photo = page(&app, "/gallery/listening-corner").await;
    assert_eq!(heading(&photo), "Listening corner");
    let src = attr(&photo, ".post-photo img", "src").expect("the image");
    assert_eq!(app.get(&src).await.status(), StatusCode::OK);
    assert_eq!(
        attr(&photo, ".post-photo img", "width").as_deref(),
        Some("320")
    );
    assert_eq!(
        texts(&photo, ".post-photo figcaption"),
        ["Two chairs, one turntable, no hurry."]
    );
}

#[tokio::test]
async fn a_tag_page_lists_the_published_nodes_and_the_products_with_that_tag() {
    let app = spawn_app().await;
    let db = &app.db;
    NodeBuilder::post("the-record")
        .title("The record that never leaves the turntable")
        .tags(&["jazz", "staff-picks"])
        .build(db)
        .await;
    NodeBuilder::photo("listening-corner")
        .title("Listening corner")
        .tags(&["shop", "jazz"])
        .build(db)
        .await;
    NodeBuilder::post("jazz-draft")
        .title("A draft about jazz")
        .tags(&["jazz"])
        .draft()
        .build(db)
        .await;
    for (sku, title, tag) in [
        ("mv", "Maiden Voyage", "jazz"),
        ("kob", "Kind of Blue", "jazz"),
        ("als", "A Love Supreme", "jazz"),
        ("dune", "Dune", "science-fiction"),
    ] {
        ProductBuilder::new(sku)
            .title(title)
            .tags(&[tag])
            .build(db)
            .await;
    }
    let doc = page(&app, "/tags/jazz").await;
    assert_eq!(heading(&doc), "Tagged “jazz”");
    let nodes = texts(&doc, ".tag-nodes a");
    assert!(
        nodes.contains(&"The record that never leaves the turntable".to_string()),
        "{nodes:?}"
    );
    assert!(nodes.contains(&"Listening corner".to_string()), "{nodes:?}");
    assert!(
        !nodes.contains(&"A draft about jazz".to_string()),
        "{nodes:?}"
    );
    let products = texts(&doc, ".product-grid .product-title");
    assert_eq!(
        products,
        ["A Love Supreme", "Kind of Blue", "Maiden Voyage"]
    );
    let scifi = page(&app, "/tags/science-fiction").await;
    assert!(texts(&scifi, ".product-grid .product-title").contains(&"Dune".to_string()));
}

#[tokio::test]
async fn the_atom_feed_parses_with_entries_newest_first_absolute_links_and_no_drafts() {
    let app = spawn_app_with(&[("BAZAAR_SERVER__PUBLIC_URL", "https://shop.example.com")]).await;
    for (slug, title, days) in [("older", "Older post", 3), ("oldest", "Oldest post", 9)] {
        NodeBuilder::post(slug)
            .title(title)
            .days_ago(days)
            .build(&app.db)
            .await;
    }
    for slug in [
        "shop-window",
        "listening-corner",
        "paperback-wall",
        "film-night",
    ] {
        NodeBuilder::photo(slug).build(&app.db).await;
    }
    add_node(
        &app,
        "blog",
        "hidden-draft",
        "Hidden draft",
        entry("x"),
        None,
        &[],
    )
    .await;
    add_node(
        &app,
        "blog",
        "future",
        "Future post",
        entry("x"),
        Some(days_from_now(2)),
        &[],
    )
    .await;
    add_node(
        &app,
        "blog",
        "escaped",
        "Fish & chips <b>bold</b>",
        entry("Text with <script>alert(1)</script> & more"),
        Some(days_from_now(0)),
        &["food"],
    )
    .await;
    let response = app.get("/blog/feed.atom").await;
    assert_eq!(response.status(), StatusCode::OK);
    assert!(response
        .headers()
        .get("content-type")
        .unwrap()
        .to_str()
        .unwrap()
        .starts_with("application/atom+xml"));
    let xml = response.bytes().await.unwrap();
    let feed = feed_rs::parser::parse(&xml[..]).expect("a valid feed");
    assert_eq!(feed.feed_type, feed_rs::model::FeedType::Atom);
    let titles: Vec<String> = feed
        .entries
        .iter()
        .map(|e| e.title.as_ref().unwrap().content.clone())
        .collect();
    assert_eq!(
        titles,
        ["Fish & chips <b>bold</b>", "Older post", "Oldest post",]
    );
    let published: Vec<_> = feed.entries.iter().map(|e| e.published.unwrap()).collect();
    assert!(published.windows(2).all(|w| w[0] >= w[1]), "{published:?}");
    assert!(feed.entries.iter().all(|e| e.updated.is_some()));
    let first = &feed.entries[0];
    assert_eq!(first.links[0].href, "https://shop.example.com/blog/escaped");
    assert_eq!(first.id, "https://shop.example.com/blog/escaped");
    let content = first.content.as_ref().unwrap().body.as_ref().unwrap();
    assert!(content.contains("&amp; more"), "{content}");
    assert!(!content.contains("<script"), "{content}");
    assert_eq!(first.categories[0].term, "food");
    assert!(feed
        .links
        .iter()
        .any(|l| l.href == "https://shop.example.com/blog/feed.atom"));
    // The gallery has its own feed; a feed holds at most 20 entries.
    for i in 0..25 {
        add_node(
            &app,
            "pages",
            &format!("p{i}"),
            &format!("P{i}"),
            Detail::Page(TextDetail {
                text: "x".into(),
                ..Default::default()
            }),
            Some(days_from_now(0)),
            &[],
        )
        .await;
    }
    let xml = app.get("/pages/feed.atom").await.bytes().await.unwrap();
    let feed = feed_rs::parser::parse(&xml[..]).expect("a valid feed");
    assert_eq!(feed.entries.len(), 20);
    let xml = app.get("/gallery/feed.atom").await.bytes().await.unwrap();
    assert_eq!(feed_rs::parser::parse(&xml[..]).unwrap().entries.len(), 4);
}

/// Every element's text in `xml`, read by a strict XML parser (quick-xml's reader, which fails
/// on malformed markup and undefined entities), as (element name, unescaped text).
fn xml_texts(xml: &[u8]) -> Vec<(String, String)> {
    use quick_xml::events::Event;
    let mut reader = quick_xml::Reader::from_reader(xml);
    reader.config_mut().check_end_names = true;
    let (mut open, mut texts, mut text) = (Vec::<String>::new(), Vec::new(), String::new());
    let mut buf = Vec::new();
    loop {
        let event = reader.read_event_into(&mut buf).expect("well-formed XML");
        match &event {
            Event::Text(t) => text.push_str(&t.xml10_content()),
            Event::GeneralRef(r) => {
                let name: &str = r;
                let resolved = match r.resolve_char_ref().expect("a valid character reference") {
                    Some(c) => c.to_string(),
                    None => quick_xml::escape::resolve_xml_entity(name)
                        .expect("a defined entity")
                        .to_string(),
                };
                text.push_str(&resolved);
            }
            _ => {
                if !text.trim().is_empty() {
                    texts.push((open.last().cloned().unwrap_or_default(), text.clone()));
                }
                text.clear();
            }
        }
        match event {
            Event::Start(e) => open.push(e.name().as_ref().to_string()),
            Event::End(_) => {
                open.pop();
            }
            Event::Eof => break,
            _ => {}
        }
        buf.clear();
    }
    texts
}

#[tokio::test]
async fn a_title_with_cdata_ends_markup_and_control_characters_round_trips_through_the_feed() {
    let app = spawn_app_with(&[("BAZAAR_SERVER__PUBLIC_URL", "https://shop.example.com")]).await;
    let title = "End ]]> of <b>CDATA</b> & \"more\"\u{1}\u{8}\u{b}\u{1b}\u{7f}\tdone";
    add_node(
        &app,
        "blog",
        "tricky",
        title,
        Detail::Quote(QuoteDetail {
            text: "a ]]> b < c & d\u{0}".into(),
            source: "'Q' <src>".into(),
            ..Default::default()
        }),
        Some(days_from_now(0)),
        &["x<y&z\"]]>"],
    )
    .await;
    let response = app.get("/blog/feed.atom").await;
    assert_eq!(response.status(), StatusCode::OK);
    let xml = response.bytes().await.unwrap();
    // What XML 1.0 cannot hold at all (C0 controls but tab) is dropped; the rest comes back.
    let expected = "End ]]> of <b>CDATA</b> & \"more\"\u{7f}\tdone";
    let texts = xml_texts(&xml);
    assert!(
        texts.contains(&("title".to_string(), expected.to_string())),
        "{texts:?}"
    );
    let feed = feed_rs::parser::parse(&xml[..]).expect("a valid feed");
    let first = &feed.entries[0];
    assert_eq!(first.title.as_ref().unwrap().content, expected);
    assert_eq!(first.categories[0].term, "x<y&z\"]]>");
    // The entry's content is HTML inside XML: both layers unescape back to the text.
    let content = first.content.as_ref().unwrap().body.as_ref().unwrap();
    let html = scraper::Html::parse_fragment(content);
    let quote = scraper::Selector::parse("blockquote p").unwrap();
    let text: String = html.select(&quote).flat_map(|p| p.text()).collect();
    assert_eq!(text, "a ]]> b < c & d");
    let source = scraper::Selector::parse("blockquote + p").unwrap();
    let text: String = html.select(&source).flat_map(|p| p.text()).collect();
    assert_eq!(text, "— 'Q' <src>", "{content}");
}

#[tokio::test]
async fn markdown_titles_tags_videos_and_links_from_editors_come_out_inert() {
    let app = spawn_app().await;
    add_node(
        &app,
        "blog",
        "xss",
        "<script>alert('title')</script>",
        entry(
            "<script>alert(1)</script>\n\n<img src=x onerror=alert(2)>\n\n[click](javascript:alert(3))\n\n<a href=\"javascript:alert(4)\" onclick=\"alert(5)\">y</a>\n\n<iframe src=\"https://evil.example\"></iframe>",
        ),
        Some(days_from_now(0)),
        &[],
    )
    .await;
    // Tags with HTML (stored directly, bypassing the admin's normalising).
    store::collection(&app.db)
        .update_one(
            doc! { "metadata.slug": "xss" },
            doc! { "$set": { "metadata.tags": ["<b onmouseover=alert(6)>x</b>"] } },
        )
        .await
        .unwrap();
    add_node(
        &app,
        "blog",
        "bad-video",
        "Bad video",
        Detail::Video(VideoDetail {
            url: "https://evil.example.com/watch?v=dQw4w9WgXcQ".into(),
            provider: "youtube".into(),
            ..Default::default()
        }),
        Some(days_from_now(0)),
        &[],
    )
    .await;
    add_node(
        &app,
        "blog",
        "bad-link",
        "Bad link",
        Detail::Link(LinkDetail {
            url: "javascript:alert(7)".into(),
            text: "<img src=x onerror=alert(8)>".into(),
            ..Default::default()
        }),
        Some(days_from_now(0)),
        &[],
    )
    .await;
    add_node(
        &app,
        "blog",
        "quote",
        "Quote",
        Detail::Quote(QuoteDetail {
            text: "<script>alert(9)</script>".into(),
            source: "<i>me</i>".into(),
            ..Default::default()
        }),
        Some(days_from_now(0)),
        &[],
    )
    .await;
    for path in [
        "/blog/xss",
        "/blog/bad-video",
        "/blog/bad-link",
        "/blog/quote",
        "/blog/",
    ] {
        let text = body(app.get(path).await).await;
        for bad in [
            "<script>alert",
            "<img src=x",
            "<b onmouseover",
            "<i>me",
            "<iframe src=\"https://evil",
        ] {
            assert!(!text.contains(bad), "{path} contains {bad}");
        }
        let doc = html(&text);
        assert_eq!(count(&doc, "main script"), 0, "{path}");
        // No element carries an event handler or a javascript: address.
        let all = scraper::Selector::parse("*").unwrap();
        for el in doc.select(&all) {
            for (name, value) in el.value().attrs() {
                assert!(!name.starts_with("on"), "{path}: {name}={value}");
                assert!(
                    !value.trim().to_ascii_lowercase().starts_with("javascript:"),
                    "{path}: {name}={value}"
                );
                assert!(!value.contains("evil.example"), "{path}: {name}={value}");
            }
        }
        for src in texts_of_attr(&doc, "iframe", "src") {
            assert!(
                src.starts_with("https://www.youtube-nocookie.com/embed/")
                    || src.starts_with("https://player.vimeo.com/video/"),
                "{path}: {src}"
            );
        }
    }
    let doc = page(&app, "/blog/xss").await;
    assert_eq!(heading(&doc), "<script>alert('title')</script>");
    assert_eq!(texts(&doc, ".tags a"), ["<b onmouseover=alert(6)>x</b>"]);
    let video = page(&app, "/blog/bad-video").await;
    assert_eq!(count(&video, "iframe"), 0);
    assert_eq!(
        texts(&video, ".video-missing"),
        ["This video cannot be shown."]
    );
}

fn texts_of_attr(doc: &scraper::Html, selector: &str, name: &str) -> Vec<String> {
    let sel = scraper::Selector::parse(selector).unwrap();
    doc.select(&sel)
        .filter_map(|e| e.value().attr(name).map(str::to_string))
        .collect()
}

#[tokio::test]
async fn video_posts_embed_youtube_by_id_and_the_policy_allows_frames_only_from_the_video_hosts() {
    let app = spawn_app().await;
    NodeBuilder::new("blog", "a-session-worth-watching", youtube())
        .build(&app.db)
        .await;
    let response = app.get("/blog/a-session-worth-watching").await;
    let csp = response
        .headers()
        .get("content-security-policy")
        .unwrap()
        .to_str()
        .unwrap()
        .to_string();
    assert!(
        csp.contains("frame-src https://www.youtube-nocookie.com https://player.vimeo.com;"),
        "{csp}"
    );
    assert_security_headers(response.headers(), "a video page");
    let doc = html(&body(response).await);
    assert_eq!(
        attr(&doc, ".post-video iframe", "src").as_deref(),
        Some("https://www.youtube-nocookie.com/embed/zqNTltOGh5c")
    );
}

#[tokio::test]
async fn seeding_again_adds_no_content() {
    // About the demo data: seeding it again finds all of it in place.
    let app = spawn_app_with_demo().await;
    let before = store::collection(&app.db)
        .count_documents(doc! {})
        .await
        .unwrap();
    assert_eq!(before, 13);
    let files_before = app
        .db
        .collection::<bson::Document>("assets.files")
        .count_documents(doc! {})
        .await
        .unwrap();
    let report = bazaar::demo::run(&app.db).await.unwrap();
    assert_eq!(report.total(), 0, "{report:?}");
    let after = store::collection(&app.db)
        .count_documents(doc! {})
        .await
        .unwrap();
    assert_eq!(after, before);
    let files_after = app
        .db
        .collection::<bson::Document>("assets.files")
        .count_documents(doc! {})
        .await
        .unwrap();
    assert_eq!(files_after, files_before);
}

#[tokio::test]
async fn every_content_query_uses_an_index() {
    let app = spawn_app().await;
    let db = &app.db;
    let now = DateTime::now();
    let c = store::COLLECTION;
    let visible = |mut filter: bson::Document| {
        filter.extend(store::visible_at(now));
        filter
    };
    assert_uses_index(
        db,
        "a node by section and slug",
        c,
        visible(doc! { "metadata.section": "blog", "metadata.slug": "three-futures" }),
        doc! {},
    )
    .await;
    assert_uses_index(
        db,
        "a section's list and feed",
        c,
        visible(doc! { "metadata.section": "blog" }),
        doc! { "metadata.published": -1 },
    )
    .await;
    assert_uses_index(
        db,
        "a tag page's nodes",
        c,
        visible(doc! { "metadata.tags": "jazz" }),
        doc! { "metadata.published": -1 },
    )
    .await;
    assert_uses_index(db, "due scheduled nodes", c, store::due_query(now), doc! {}).await;
    assert_uses_index(
        db,
        "a tag page's products",
        "products",
        doc! { "tags": "jazz" },
        doc! { "search_title": 1 },
    )
    .await;
    for sort in ["updated", "title", "published"] {
        let q = store::AdminQuery {
            section: "blog",
            kind: Some(model::NodeType::Entry),
            search: "the",
            sort,
            skip: 0,
            limit: 25,
        };
        assert_uses_index(
            db,
            "the admin content list",
            c,
            store::admin_filter(&q),
            store::admin_sort(sort),
        )
        .await;
    }
    let file = bson::oid::ObjectId::new();
    assert_uses_index(
        db,
        "orphan check: photo nodes",
        c,
        doc! { "metadata.detail.file_id": file },
        doc! {},
    )
    .await;
    assert_uses_index(
        db,
        "orphan check: product photos",
        "products",
        doc! { "photos": file },
        doc! {},
    )
    .await;
    assert_uses_index(
        db,
        "the upload lock",
        c,
        doc! { "_id": file, "metadata.type": "photo", "$or": [ { "metadata.locked": null }, { "metadata.locked": { "$lt": now } } ] },
        doc! {},
    )
    .await;
}

#[tokio::test]
async fn an_editors_excerpt_replaces_the_automatic_one_in_the_stream_and_keeps_the_reading_time() {
    let app = spawn_app().await;
    let long = "Word ".repeat(700);
    NodeBuilder::new(
        "blog",
        "with-excerpt",
        Detail::Entry(TextDetail {
            text: format!("The opening sentence.\n\n{long}"),
            excerpt: "A hand-written teaser.".into(),
        }),
    )
    .build(&app.db)
    .await;
    NodeBuilder::post("without-excerpt")
        .text("Only the opening.")
        .build(&app.db)
        .await;
    let doc = page(&app, "/blog/").await;
    let excerpts = texts(&doc, ".post-excerpt");
    assert!(
        excerpts.contains(&"A hand-written teaser.".to_string()),
        "{excerpts:?}"
    );
    assert!(
        excerpts.contains(&"Only the opening.".to_string()),
        "{excerpts:?}"
    );
    assert!(!excerpts.iter().any(|e| e.contains("The opening sentence")));
    let times = texts(&doc, ".reading-time");
    assert_eq!(times, ["· 4 min read"], "703 words at 230 a minute");
    // The post page shows the whole text, not the excerpt.
    let post = page(&app, "/blog/with-excerpt").await;
    assert!(texts(&post, ".post-text")
        .concat()
        .contains("The opening sentence."));
}

#[tokio::test]
async fn videos_quotes_and_links_show_their_commentary_rendered_and_sanitised() {
    let app = spawn_app().await;
    let commentary = "Why it *matters*: [the notes](/pages/about).\n\n<script>alert(1)</script>";
    NodeBuilder::new(
        "blog",
        "a-video",
        Detail::Video(VideoDetail {
            url: "https://www.youtube.com/watch?v=zqNTltOGh5c".into(),
            provider: "youtube".into(),
            commentary: commentary.into(),
        }),
    )
    .build(&app.db)
    .await;
    NodeBuilder::new(
        "blog",
        "a-link",
        Detail::Link(LinkDetail {
            url: "https://example.com/".into(),
            text: "An example".into(),
            commentary: "Worth a *look*.".into(),
        }),
    )
    .build(&app.db)
    .await;
    NodeBuilder::new(
        "blog",
        "a-quote",
        Detail::Quote(QuoteDetail {
            text: "So what.".into(),
            source: "Miles".into(),
            ..Default::default()
        }),
    )
    .build(&app.db)
    .await;

    let video = page(&app, "/blog/a-video").await;
    assert_eq!(texts(&video, ".post-commentary em"), ["matters"]);
    assert_eq!(
        attr(&video, ".post-commentary a", "href").as_deref(),
        Some("/pages/about")
    );
    assert!(video
        .select(&scraper::Selector::parse(".post-commentary script").expect("selector"))
        .next()
        .is_none());
    let link = page(&app, "/blog/a-link").await;
    assert_eq!(texts(&link, ".post-commentary em"), ["look"]);
    let quote = page(&app, "/blog/a-quote").await;
    assert!(
        texts(&quote, ".post-commentary").is_empty(),
        "none written, none shown"
    );

    // The stream: the video's commentary as its excerpt, the link points to its commentary.
    let stream = page(&app, "/blog/").await;
    let excerpts = texts(&stream, ".post-excerpt");
    assert!(
        excerpts
            .iter()
            .any(|e| e.starts_with("Why it matters: the notes.")),
        "{excerpts:?}"
    );
    let more: Vec<String> = texts(&stream, ".continue-reading");
    assert!(
        more.iter().any(|m| m.contains("Read the commentary")),
        "{more:?}"
    );

    // The feed carries the commentary after the item.
    let feed = body(app.get("/blog/feed.atom").await).await;
    assert!(
        feed.contains("Worth a &lt;em&gt;look&lt;/em&gt;."),
        "{feed}"
    );
}
