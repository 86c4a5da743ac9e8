//! A post's page from the content cache (`content::cache`): the post and the first page of its
//! comments are kept for at most `content::cache::TTL`, dropped at once by this instance's
//! writes (an editor's save, an unpublish, a comment posted or removed), followed within the
//! bound when another instance (another database handle) writes, and checked against the
//! site's clock at each view, so a scheduled post shows once its time comes.

use std::time::Instant;

use bazaar::content::cache::TTL;
use bazaar::content::model::{Detail, NodeInput, TextDetail};
use bazaar::content::store;
use bson::DateTime;
use reqwest::StatusCode;

use crate::common::builders::{CommentBuilder, NodeBuilder};
use crate::common::shop::Shopper;
use crate::common::*;

/// The commands one GET of `path` sent (the app counts them with `log.database_commands`).
async fn commands_for(app: &TestApp, path: &str) -> Vec<String> {
    app.db.commands().record();
    let response = app.get(path).await;
    let status = response.status();
    let _ = body(response).await;
    assert_eq!(status, StatusCode::OK, "{path}");
    app.db
        .commands()
        .take()
        .iter()
        .map(|c| c.to_string())
        .collect()
}

/// The post's heading and its comments heading ("2 comments").
async fn shown(app: &TestApp, path: &str) -> (String, Vec<String>) {
    let doc = page(app, path).await;
    (heading(&doc), texts(&doc, "#comments-heading"))
}

/// The stored post as an editor's form would submit it, retitled.
fn retitled(node: &bazaar::content::model::Node, title: &str) -> NodeInput {
    NodeInput {
        section: node.metadata.section.clone(),
        slug: node.metadata.slug.clone(),
        title: title.to_string(),
        author: node.metadata.author.name.clone(),
        detail: Detail::Entry(TextDetail {
            text: "The text.".to_string(),
            excerpt: String::new(),
        }),
    }
}

#[tokio::test]
async fn a_warm_post_page_sends_no_command_and_a_post_with_comments_none_either() {
    let app = spawn_app_with(&[
        ("BAZAAR_LOG__DATABASE_COMMANDS", "true"),
        ("BAZAAR_ANALYTICS__EVENTS", "false"),
    ])
    .await;
    for (slug, days) in [("older", 3), ("quiet", 2), ("newer", 1)] {
        NodeBuilder::post(slug).days_ago(days).build(&app.db).await;
    }
    let talked = NodeBuilder::post("talked").days_ago(4).build(&app.db).await;
    CommentBuilder::on_node(&talked).build(&app.db).await;
    // The site settings are cached by the first page after start: not what this pins.
    let _ = body(app.get("/tags/").await).await;
    // First view: the post and its two neighbours; then nothing.
    assert_eq!(
        commands_for(&app, "/blog/quiet").await,
        ["find nodes", "find nodes", "find nodes"]
    );
    assert!(commands_for(&app, "/blog/quiet").await.is_empty());
    // With comments: their first page once more, then nothing either.
    let first = commands_for(&app, "/blog/talked").await;
    assert_eq!(
        first.iter().filter(|c| *c == "find comments").count(),
        1,
        "{first:?}"
    );
    assert!(commands_for(&app, "/blog/talked").await.is_empty());
    // A later page of the comments is read each time (only the first page is kept).
    assert_eq!(
        commands_for(&app, "/blog/talked?after=0").await,
        ["find comments"]
    );
    app.stop().await;
}

#[tokio::test]
async fn this_instances_save_comment_removal_and_unpublish_show_on_the_next_view() {
    let app = spawn_app_with(&[("BAZAAR_COMMENTS__RATE_LIMIT_PER_MINUTE", "0")]).await;
    let post = NodeBuilder::post("cached")
        .title("First title")
        .days_ago(1)
        .build(&app.db)
        .await;
    let path = "/blog/cached";
    assert_eq!(shown(&app, path).await.0, "First title");
    // The editor saves a new title through this instance.
    assert!(store::save_with_nonce(
        &app.db,
        &post,
        post.metadata.nonce,
        &retitled(&post, "Second title")
    )
    .await
    .unwrap());
    assert_eq!(shown(&app, path).await.0, "Second title");
    // A reader comments through the page's form: the page they are sent back to shows it.
    let reader = Shopper::new(&app).await;
    let posted = reader
        .post(
            &format!("{path}/comments"),
            &[("name", "Ada"), ("text", "Seen at once"), ("website", "")],
        )
        .await;
    assert_eq!(posted.status(), StatusCode::SEE_OTHER);
    let doc = html(&body(reader.get(path).await).await);
    assert!(texts(&doc, ".comment-text").contains(&"Seen at once".to_string()));
    assert_eq!(texts(&doc, "#comments-heading"), ["1 comment"]);
    // A moderator deletes it: gone from the next view, and uncounted.
    let comment = bazaar::comments::store::collection(&app.db)
        .find_one(bson::doc! { "discussion_id": post.id })
        .await
        .unwrap()
        .expect("the comment");
    let queue = admin_page(&app, "/admin/comments").await;
    let token = csrf_token(&queue).expect("a token");
    let deleted = app
        .post_admin_form(
            &format!("/admin/comments/{}/delete", comment.id.to_hex()),
            &[("csrf_token", token.as_str())],
        )
        .await;
    assert_eq!(deleted.status(), StatusCode::SEE_OTHER);
    let doc = page(&app, path).await;
    assert!(!texts(&doc, ".comment-text").contains(&"Seen at once".to_string()));
    assert_eq!(texts(&doc, "#comments-heading"), ["0 comments"]);
    // Unpublished through this instance: gone at once.
    assert!(store::set_published(&app.db, post.id, None).await.unwrap());
    assert_eq!(app.get(path).await.status(), StatusCode::NOT_FOUND);
    app.stop().await;
}

#[tokio::test]
async fn a_scheduled_post_shows_once_its_time_comes_by_the_clock_of_the_view() {
    let app = spawn_app_with(&[
        ("BAZAAR_LOG__DATABASE_COMMANDS", "true"),
        ("BAZAAR_ANALYTICS__EVENTS", "false"),
    ])
    .await;
    let later = DateTime::from_millis(app.db.now().timestamp_millis() + 500);
    NodeBuilder::post("scheduled")
        .published(Some(later))
        .build(&app.db)
        .await;
    let path = "/blog/scheduled";
    assert_eq!(app.get(path).await.status(), StatusCode::NOT_FOUND);
    // Half the cache's bound later by the site's clock: the entry loaded above is still
    // fresh, and the view's own time says the post is out.
    app.clock.step_forward(TTL / 2);
    // Not reloaded: the view marks the post live (shown once, it stays shown even if the
    // clock is stepped back) and reads its neighbours, which the 404 did not.
    assert_eq!(
        commands_for(&app, path).await,
        ["update nodes", "find nodes", "find nodes"]
    );
    // Marked once per entry, not once per view.
    assert!(commands_for(&app, path).await.is_empty());
    app.stop().await;
}

#[tokio::test]
async fn another_instances_write_shows_on_a_post_page_within_the_bound() {
    // The app and "another instance": a second handle on the same store, with its own change
    // counters, so the app hears nothing of its writes.
    let (server, other) = memory_db("post-cache").await;
    let app = spawn_app_with(&[
        ("BAZAAR_DATABASE__URI", &server.uri()),
        ("BAZAAR_DATABASE__NAME", "post-cache"),
    ])
    .await;
    let post = NodeBuilder::post("shared")
        .title("Before")
        .days_ago(1)
        .build(&other)
        .await;
    let path = "/blog/shared";
    let loaded = Instant::now();
    assert_eq!(
        shown(&app, path).await,
        ("Before".into(), vec!["0 comments".into()])
    );
    assert!(store::save_with_nonce(
        &other,
        &post,
        post.metadata.nonce,
        &retitled(&post, "After")
    )
    .await
    .unwrap());
    CommentBuilder::on_node(&post).build(&other).await;
    let seen = shown(&app, path).await;
    if loaded.elapsed() < TTL {
        assert_eq!(
            seen,
            ("Before".into(), vec!["0 comments".into()]),
            "from the cache"
        );
    }
    // Past the bound by the site's clock, both show.
    app.clock.step_forward(TTL);
    assert_eq!(
        shown(&app, path).await,
        ("After".into(), vec!["1 comment".into()])
    );
    // Unpublished by the other instance: a 404 within the bound.
    assert!(store::set_published(&other, post.id, None).await.unwrap());
    app.clock.step_forward(TTL);
    assert_eq!(app.get(path).await.status(), StatusCode::NOT_FOUND);
    app.stop().await;
    drop(server);
}
