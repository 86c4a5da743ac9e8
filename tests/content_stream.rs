//! The content streams (`content::stream`): walking a section by its Older and Newer links visits
//! every post once and in order, ties included; a stream shows cards (excerpt, "Continue
//! reading", reading time), never whole bodies; a post links to its neighbours; every stream
//! query runs on the `section_published_id` index without a sort in memory; a post's neighbours
//! are cached within their staleness bound; and nodes stored before summaries existed get theirs
//! at start-up.

use crate::common::builders::NodeBuilder;
use crate::common::*;
use bazaar::content::model::{self, Detail, QuoteDetail, TextDetail};
use bazaar::content::store;
use bazaar::content::stream::{self, Cursor};
use bson::{doc, Bson, DateTime};
use reqwest::StatusCode;

/// The titles of a stream page and its Older link.
async fn stream_page(app: &TestApp, path: &str) -> (Vec<String>, Option<String>) {
    let doc = page(app, path).await;
    (
        texts(&doc, "article.node-summary h2"),
        attr(&doc, "a[rel=next]", "href"),
    )
}

#[tokio::test]
async fn walking_older_links_visits_every_post_once_in_order_even_when_posts_share_a_millisecond() {
    let app = spawn_app().await;
    let base = DateTime::now().timestamp_millis() - 3_600_000;
    // 27 posts; the 12 in the middle were all published in the same millisecond, so the page
    // boundaries fall inside the tie.
    let mut expected = Vec::new();
    for i in 0..27i64 {
        let at = if (8..20).contains(&i) { 8 } else { i };
        let node = NodeBuilder::post(&format!("p-{i:02}"))
            .title(&format!("P{i:02}"))
            .published(Some(DateTime::from_millis(base - at * 60_000)))
            .build(&app.db)
            .await;
        expected.push((at, node.id, node.metadata.title));
    }
    // Newest first; ties by `_id`, larger first.
    expected.sort_by(|a, b| a.0.cmp(&b.0).then(b.1.cmp(&a.1)));
    let expected: Vec<String> = expected.into_iter().map(|(_, _, t)| t).collect();

    let mut seen = Vec::new();
    let mut next = Some("/blog/".to_string());
    let mut pages = Vec::new();
    while let Some(path) = next {
        let (titles, older) = stream_page(&app, &path).await;
        assert!(!titles.is_empty(), "{path} is empty");
        seen.extend(titles);
        pages.push(path);
        next = older;
        assert!(pages.len() < 10, "the walk does not end");
    }
    assert_eq!(seen, expected);
    assert_eq!(pages.len(), 3);

    // And back with the Newer links from the last page.
    let mut back = Vec::new();
    let mut path = Some(pages[2].clone());
    while let Some(p) = path {
        let doc = page(&app, &p).await;
        let mut titles = texts(&doc, "article.node-summary h2");
        titles.extend(back);
        back = titles;
        path = attr(&doc, "a[rel=prev]", "href");
    }
    assert_eq!(back, expected);
    app.stop().await;
}

#[tokio::test]
async fn a_stream_shows_excerpts_with_continue_reading_and_never_a_whole_long_body() {
    let app = spawn_app().await;
    let opening = "The first set opened with a ballad nobody expected.";
    let mut long = format!("{opening} ");
    for i in 0..120 {
        long.push_str(&format!(
            "Sentence number {i} of the review goes on a while. "
        ));
    }
    long.push_str("\n\n## The encore\n\nThe closing words no stream shows.");
    NodeBuilder::post("long-review")
        .title("A long review")
        .text(&long)
        .build(&app.db)
        .await;
    NodeBuilder::post("short-note")
        .title("A short note")
        .text("Only *this*.")
        .build(&app.db)
        .await;
    let quote = QuoteDetail {
        text: "Simplicity is the ultimate sophistication.".into(),
        source: "A reader".into(),
        ..Default::default()
    };
    NodeBuilder::new("blog", "a-quote", Detail::Quote(quote))
        .build(&app.db)
        .await;

    let stream = body(app.get("/blog/").await).await;
    let doc = html(&stream);
    assert!(
        !stream.contains("The closing words"),
        "the whole body is shown"
    );
    assert!(
        !stream.contains("Sentence number 100"),
        "the whole body is shown"
    );
    let excerpts = texts(&doc, ".post-excerpt");
    assert!(
        excerpts.iter().any(|e| e.starts_with(opening)),
        "{excerpts:?}"
    );
    assert!(excerpts.contains(&"Only this.".to_string()), "{excerpts:?}");
    // Only the long post has more to read: its link and its reading time (about 1 300 words).
    let more = texts(&doc, ".continue-reading");
    assert_eq!(more.len(), 1, "{more:?}");
    assert!(more[0].contains("Continue reading"), "{more:?}");
    assert!(more[0].contains("6 min read"), "{more:?}");
    assert_eq!(
        attr(&doc, ".continue-reading a", "href").as_deref(),
        Some("/blog/long-review")
    );
    assert_eq!(
        texts(&doc, ".post-quote blockquote"),
        ["Simplicity is the ultimate sophistication."]
    );
    assert_eq!(texts(&doc, ".post-quote figcaption"), ["— A reader"]);
    // The post's own page shows all of it, and describes itself with its opening.
    let post = body(app.get("/blog/long-review").await).await;
    assert!(post.contains("The closing words no stream shows."));
    let post = html(&post);
    let description = attr(&post, "meta[name=description]", "content").unwrap_or_default();
    assert!(description.starts_with(opening), "{description}");
    app.stop().await;
}

#[tokio::test]
async fn a_post_links_to_the_posts_just_newer_and_older_in_its_section() {
    let app = spawn_app().await;
    let base = DateTime::now().timestamp_millis() - 3_600_000;
    let at = |minutes: i64| Some(DateTime::from_millis(base - minutes * 60_000));
    for (slug, minutes) in [("oldest", 30), ("middle", 20), ("newest", 10)] {
        NodeBuilder::post(slug)
            .title(&format!("The {slug}"))
            .published(at(minutes))
            .build(&app.db)
            .await;
    }
    // Another section's posts and drafts are not neighbours.
    NodeBuilder::photo("in-the-gallery")
        .published(at(15))
        .build(&app.db)
        .await;
    NodeBuilder::post("a-draft").draft().build(&app.db).await;
    let links = |doc: &scraper::Html| {
        (
            attr(doc, ".post-neighbours a[rel=prev]", "href"),
            attr(doc, ".post-neighbours a[rel=next]", "href"),
        )
    };
    let middle = page(&app, "/blog/middle").await;
    assert_eq!(
        links(&middle),
        (Some("/blog/newest".into()), Some("/blog/oldest".into()))
    );
    assert_eq!(texts(&middle, ".post-neighbours .newer a"), ["The newest"]);
    assert_eq!(links(&page(&app, "/blog/newest").await).0, None);
    assert_eq!(links(&page(&app, "/blog/oldest").await).1, None);

    // Two posts in one millisecond are still each other's neighbours, in `_id` order.
    let tied_at = at(20);
    let twin = NodeBuilder::post("middle-twin")
        .published(tied_at)
        .build(&app.db)
        .await;
    let middle_id = store::collection(&app.db)
        .find_one(doc! { "metadata.slug": "middle" })
        .await
        .unwrap()
        .unwrap()
        .id;
    assert!(twin.id > middle_id);
    assert_eq!(
        links(&page(&app, "/blog/middle").await),
        (
            Some("/blog/middle-twin".into()),
            Some("/blog/oldest".into())
        )
    );
    assert_eq!(
        links(&page(&app, "/blog/middle-twin").await),
        (Some("/blog/newest".into()), Some("/blog/middle".into()))
    );
    // Pages are not a sequence.
    NodeBuilder::page("about").build(&app.db).await;
    NodeBuilder::page("contact").build(&app.db).await;
    assert_eq!(
        count(&page(&app, "/pages/about").await, ".post-neighbours"),
        0
    );
    app.stop().await;
}

/// The query plan of a find, failing on a collection scan or a sort in memory.
async fn index_of(app: &TestApp, filter: bson::Document, sort: bson::Document) -> bson::Document {
    let explain = app
        .db
        .database()
        .run_command(doc! {
            "explain": { "find": store::COLLECTION, "filter": filter, "sort": sort, "limit": 11 },
            "verbosity": "queryPlanner",
        })
        .await
        .expect("explain runs");
    let plan = Bson::Document(explain.clone());
    assert!(find_stage(&plan, "COLLSCAN").is_none(), "{explain}");
    assert!(
        find_stage(&plan, "SORT").is_none(),
        "a sort in memory: {explain}"
    );
    find_stage(&plan, "IXSCAN")
        .and_then(|s| s.get_document("keyPattern").ok().cloned())
        .unwrap_or_else(|| panic!("an index scan: {explain}"))
}

#[tokio::test]
async fn every_stream_query_reads_the_section_index_in_order() {
    let app = spawn_app().await;
    for i in 0..3 {
        NodeBuilder::post(&format!("p{i}")).build(&app.db).await;
    }
    let index = doc! { "metadata.section": 1, "metadata.published": -1, "_id": -1 };
    let now = DateTime::now();
    let point = Cursor {
        published: now,
        id: bson::oid::ObjectId::new(),
    };
    let mut section = doc! { "metadata.section": "blog" };
    section.extend(store::visible_at(now));
    assert_eq!(index_of(&app, section, store::newest_first()).await, index);
    for find in stream::neighbour_probes("blog", point, now) {
        let filter = find.get_document("filter").unwrap().clone();
        let sort = find.get_document("sort").unwrap().clone();
        assert_eq!(index_of(&app, filter, sort).await, index, "neighbours");
    }
    // A tag page: newest first within the tag.
    let mut tagged = doc! { "metadata.tags": "jazz" };
    tagged.extend(store::visible_at(now));
    assert_eq!(
        index_of(&app, tagged, doc! { "metadata.published": -1 }).await,
        doc! { "metadata.tags": 1, "metadata.published": -1 }
    );
    for older in [true, false] {
        for find in stream::finds_past("blog", point, older, now) {
            let filter = find.get_document("filter").unwrap().clone();
            let sort = find.get_document("sort").unwrap().clone();
            assert_eq!(index_of(&app, filter, sort).await, index, "older: {older}");
        }
    }
    // The retired index is gone, and nothing else lost.
    let names = store::collection(&app.db).list_index_names().await.unwrap();
    assert!(
        names.contains(&"section_published_id".to_string()),
        "{names:?}"
    );
    assert!(
        !names.contains(&"section_published".to_string()),
        "{names:?}"
    );
    app.stop().await;
}

#[tokio::test]
async fn nodes_stored_before_summaries_get_them_and_a_later_save_is_not_overwritten() {
    let app = spawn_app().await;
    let old = NodeBuilder::post("from-last-year")
        .text("An old post. It was stored without a summary.")
        .build(&app.db)
        .await;
    let edited = NodeBuilder::post("edited-meanwhile")
        .text("Before.")
        .build(&app.db)
        .await;
    store::collection(&app.db)
        .update_many(doc! {}, doc! { "$unset": { "metadata.summary": "" } })
        .await
        .unwrap();
    // An editor saves one of them first: the save writes its own summary.
    let input = model::NodeInput {
        section: "blog".into(),
        slug: crate::common::slug("edited-meanwhile"),
        title: "edited-meanwhile".into(),
        author: "Tester".into(),
        detail: Detail::Entry(TextDetail {
            text: "After the edit.".into(),
            ..Default::default()
        }),
    };
    assert!(
        store::save_with_nonce(&app.db, &edited, edited.metadata.nonce, &input)
            .await
            .unwrap()
    );
    assert_eq!(store::backfill_summaries(&app.db).await.unwrap(), 1);
    let summary = |id| {
        let db = app.db.clone();
        async move {
            store::by_id(&db, id)
                .await
                .unwrap()
                .unwrap()
                .metadata
                .summary
                .expect("a summary")
        }
    };
    assert_eq!(
        summary(old.id).await.text,
        "An old post. It was stored without a summary."
    );
    assert_eq!(summary(edited.id).await.text, "After the edit.");
    // Nothing is left to fill: a second start-up writes nothing.
    assert_eq!(store::backfill_summaries(&app.db).await.unwrap(), 0);
    let stream = page(&app, "/blog/").await;
    assert!(texts(&stream, ".post-excerpt").contains(&"After the edit.".to_string()));
    app.stop().await;
}

#[tokio::test]
async fn a_deep_stream_page_and_a_post_send_a_pinned_number_of_commands() {
    // The traffic log (off the request path) is off: only the page's own commands count.
    let app = spawn_app_with(&[
        ("BAZAAR_LOG__DATABASE_COMMANDS", "true"),
        ("BAZAAR_ANALYTICS__EVENTS", "false"),
    ])
    .await;
    for i in 0..25 {
        NodeBuilder::post(&format!("p{i:02}"))
            .days_ago(i + 1)
            .build(&app.db)
            .await;
    }
    // The commands of one view of `path`.
    let commands = |path: String| {
        let app = &app;
        async move {
            app.db.commands().record();
            let response = app.get(&path).await;
            assert_eq!(response.status(), StatusCode::OK, "{path}");
            let _ = body(response).await;
            app.db
                .commands()
                .take()
                .iter()
                .map(|c| c.to_string())
                .collect::<Vec<_>>()
        }
    };
    // The site settings are cached by the first page after start: not what this pins.
    let _ = body(app.get("/tags/").await).await;
    // The first page: one find, no count; then served from the content cache.
    assert_eq!(commands("/blog/".into()).await, ["find nodes"]);
    assert_eq!(commands("/blog/".into()).await, Vec::<String>::new());
    let (_, older) = stream_page(&app, "/blog/").await;
    let older = older.expect("an Older link");
    // Deeper: the ties at the point (none here), then the rest; then from the cache.
    assert_eq!(commands(older.clone()).await, ["find nodes", "find nodes"]);
    assert_eq!(commands(older).await, Vec::<String>::new());
    // An old numbered page: the anchors (one find of the points only), then the page read
    // from its anchor like an Older page; then from the cache.
    assert_eq!(
        commands("/blog/?page=2".into()).await,
        ["find nodes", "find nodes", "find nodes"]
    );
    assert_eq!(commands("/blog/?page=2".into()).await, Vec::<String>::new());
    // Another numbered page: the anchors are cached.
    assert_eq!(
        commands("/blog/?page=3".into()).await,
        ["find nodes", "find nodes"]
    );
    // The feed: 20 whole nodes once, then the cached document.
    assert_eq!(commands("/blog/feed.atom".into()).await, ["find nodes"]);
    assert_eq!(
        commands("/blog/feed.atom".into()).await,
        Vec::<String>::new()
    );
    // A post: itself and its two neighbours on the first view, then nothing: the post and its
    // neighbours come from the content cache (they were three finds on every view).
    commands("/blog/p10".into()).await;
    assert_eq!(commands("/blog/p10".into()).await, Vec::<String>::new());
    // The first view of a post (nothing cached) reads the neighbours, both ways.
    app.db.commands().record();
    let _ = body(app.get("/blog/p11").await).await;
    let first_view: Vec<String> = app
        .db
        .commands()
        .take()
        .iter()
        .map(|c| c.to_string())
        .collect();
    assert_eq!(first_view, ["find nodes", "find nodes", "find nodes"]);
    app.stop().await;
}

/// A post's neighbour links are cached per instance: this instance's own node writes show at
/// once, another instance's (a write this process hears nothing of) within
/// `content::cache::TTL`.
#[tokio::test]
async fn cached_neighbours_follow_this_instances_writes_at_once_and_others_within_the_bound() {
    let app = spawn_app().await;
    let base = DateTime::now().timestamp_millis() - 3_600_000;
    let at = |minutes: i64| Some(DateTime::from_millis(base - minutes * 60_000));
    for (slug, minutes) in [("older", 20), ("newer", 10)] {
        NodeBuilder::post(slug)
            .title(&format!("The {slug}"))
            .published(at(minutes))
            .build(&app.db)
            .await;
    }
    let newer_link = |doc: scraper::Html| attr(&doc, ".post-neighbours a[rel=prev]", "href");
    let loaded = std::time::Instant::now();
    assert_eq!(
        newer_link(page(&app, "/blog/older").await),
        Some("/blog/newer".into())
    );
    // The entry was loaded between `loaded` and now.
    let answered = std::time::Instant::now();
    // Unpublished as another instance would: straight in the database.
    let newer_id = store::collection(&app.db)
        .find_one(doc! { "metadata.slug": "newer" })
        .await
        .unwrap()
        .unwrap()
        .id;
    store::collection(&app.db)
        .update_one(
            doc! { "_id": newer_id },
            doc! { "$set": { "metadata.published": Bson::Null, "metadata.live": false } },
        )
        .await
        .unwrap();
    let shown = newer_link(page(&app, "/blog/older").await);
    if loaded.elapsed() < bazaar::content::cache::TTL {
        assert_eq!(shown, Some("/blog/newer".into()), "served from the cache");
    }
    // Past the bound the link is gone.
    tokio::time::sleep(bazaar::content::cache::TTL.saturating_sub(answered.elapsed())).await;
    assert_eq!(newer_link(page(&app, "/blog/older").await), None);
    // Published again through this instance: shown on the next view.
    assert!(store::set_published(&app.db, newer_id, at(10))
        .await
        .unwrap());
    assert_eq!(
        newer_link(page(&app, "/blog/older").await),
        Some("/blog/newer".into())
    );
    // Deleted through this instance: gone on the next view.
    store::delete(&app.db, newer_id).await.unwrap();
    assert_eq!(newer_link(page(&app, "/blog/older").await), None);
    app.stop().await;
}

/// Stream pages, tag pages and feeds are cached per instance (`content::cache`): this
/// instance's own node writes show at once, another instance's within `cache::TTL`, and a
/// second instance on the same database (its own handle, its own cache) sees the same bound.
#[tokio::test]
async fn cached_content_pages_follow_this_instances_writes_at_once_and_others_within_the_bound() {
    let app = spawn_app().await;
    for (slug, days) in [("older", 2), ("newer", 1)] {
        NodeBuilder::post(slug)
            .title(&format!("The {slug}"))
            .tags(&["cached"])
            .days_ago(days)
            .build(&app.db)
            .await;
    }
    let paths = ["/blog/", "/tags/cached", "/blog/feed.atom"];
    let shows_newer = |text: &str| text.contains("The newer");
    // The entries were loaded between `first` and `loaded`.
    let first = std::time::Instant::now();
    for path in paths {
        assert!(shows_newer(&body(app.get(path).await).await), "{path}");
    }
    let loaded = std::time::Instant::now();
    // Unpublished as another instance would: straight in the database.
    let newer_id = store::collection(&app.db)
        .find_one(doc! { "metadata.slug": "newer" })
        .await
        .unwrap()
        .unwrap()
        .id;
    store::collection(&app.db)
        .update_one(
            doc! { "_id": newer_id },
            doc! { "$set": { "metadata.published": Bson::Null, "metadata.live": false } },
        )
        .await
        .unwrap();
    for path in paths {
        let text = body(app.get(path).await).await;
        if first.elapsed() < bazaar::content::cache::TTL {
            assert!(shows_newer(&text), "{path} is served from the cache");
        }
    }
    // Past the bound it is gone everywhere.
    tokio::time::sleep(bazaar::content::cache::TTL.saturating_sub(loaded.elapsed())).await;
    for path in paths {
        assert!(!shows_newer(&body(app.get(path).await).await), "{path}");
    }
    // Published again through this instance: shown on the next view.
    assert!(
        store::set_published(&app.db, newer_id, Some(DateTime::now()))
            .await
            .unwrap()
    );
    for path in paths {
        assert!(shows_newer(&body(app.get(path).await).await), "{path}");
    }
    // Deleted through this instance: gone on the next view.
    store::delete(&app.db, newer_id).await.unwrap();
    for path in paths {
        assert!(!shows_newer(&body(app.get(path).await).await), "{path}");
    }
    app.stop().await;
}

/// `?page=N`, the numbered pages of earlier versions, shows what walking the Older links
/// shows, read from the anchors rather than by skipping; past the end it is a 404.
#[tokio::test]
async fn a_numbered_page_shows_the_posts_the_older_links_reach_there() {
    let app = spawn_app().await;
    for i in 0..35 {
        NodeBuilder::post(&format!("n-{i:02}"))
            .title(&format!("N{i:02}"))
            .days_ago(i + 1)
            .build(&app.db)
            .await;
    }
    let mut next = Some("/blog/".to_string());
    let mut walked = Vec::new();
    while let Some(path) = next {
        let (titles, older) = stream_page(&app, &path).await;
        walked.push(titles);
        next = older;
    }
    assert_eq!(walked.len(), 4);
    for (n, titles) in walked.iter().enumerate() {
        let (numbered, _) = stream_page(&app, &format!("/blog/?page={}", n + 1)).await;
        assert_eq!(&numbered, titles, "page {}", n + 1);
    }
    assert_eq!(
        app.get("/blog/?page=5").await.status(),
        StatusCode::NOT_FOUND
    );
    assert_eq!(
        app.get("/blog/?page=100").await.status(),
        StatusCode::NOT_FOUND
    );
    app.stop().await;
}

#[tokio::test]
async fn generated_posts_for_load_tests_are_added_once_with_their_summaries() {
    let app = spawn_app().await;
    let mut reported = Vec::new();
    let added = bazaar::demo::content::seed_generated_posts(&app.db, 12, |done, total| {
        reported.push((done, total))
    })
    .await
    .unwrap();
    assert_eq!(added, 12);
    assert_eq!(reported.last(), Some(&(12, 12)));
    let again = bazaar::demo::content::seed_generated_posts(&app.db, 12, |_, _| {})
        .await
        .unwrap();
    assert_eq!(again, 0);
    let stored = store::collection(&app.db)
        .count_documents(doc! { "metadata.summary": { "$ne": null } })
        .await
        .unwrap();
    assert_eq!(stored, 12);
    let (titles, older) = stream_page(&app, "/blog/").await;
    assert_eq!(titles.first().map(String::as_str), Some("Generated post 0"));
    assert!(older.is_some());
    // Every type renders; the entry's five paragraphs show as an excerpt.
    let doc = page(&app, "/blog/").await;
    for kind in ["entry", "photo", "video", "quote", "link"] {
        assert!(count(&doc, &format!("article.node-{kind}")) >= 1, "{kind}");
    }
    assert_eq!(count(&doc, ".continue-reading"), 2);
    app.stop().await;
}
