//! Preview links (`content::preview`): the admin opens a draft as readers will see it through a
//! signed link that works logged out until it expires, that no search engine or cache keeps,
//! and that cannot be made up or stretched.

use crate::common::builders::NodeBuilder;
use crate::common::*;
use reqwest::StatusCode;
use std::time::Duration;

/// The preview link the admin's "preview" button leads to for `node`.
async fn preview_link(app: &TestApp, id: bson::oid::ObjectId) -> String {
    let response = app
        .get_admin(&format!("/admin/content/{}/preview", id.to_hex()))
        .await;
    assert_eq!(response.status(), StatusCode::SEE_OTHER);
    location(&response)
}

#[tokio::test]
async fn a_drafts_preview_link_shows_it_logged_out_until_it_expires() {
    let app = spawn_app().await;
    let draft = NodeBuilder::post("not-yet")
        .title("Not yet")
        .text("The **draft** text.")
        .draft()
        .build(&app.db)
        .await;
    assert_eq!(
        app.get("/blog/not-yet").await.status(),
        StatusCode::NOT_FOUND
    );
    // The edit page offers the preview.
    let edit = admin_page(&app, &format!("/admin/content/{}/edit", draft.id.to_hex())).await;
    assert_eq!(
        attr(&edit, "a.preview-link", "href"),
        Some(format!("/admin/content/{}/preview", draft.id.to_hex()))
    );
    let link = preview_link(&app, draft.id).await;
    assert!(link.starts_with("/preview/"), "{link}");

    // A reviewer without an admin account.
    let (reviewer, _) = new_client();
    let response = reviewer.get(app.url(&link)).send().await.unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    // No cache keeps it (the answer also sets the session cookie that lets this browser see
    // the draft's photo, which makes it `no-store` outright).
    let cache_control = response
        .headers()
        .get("cache-control")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_string();
    assert!(cache_control.contains("no-store"), "{cache_control}");
    let doc = html(&body(response).await);
    assert_eq!(heading(&doc), "Not yet");
    assert_eq!(texts(&doc, ".post-text strong"), ["draft"]);
    assert!(texts(&doc, ".preview-banner")[0].contains("once it is published"));
    assert!(attr(&doc, "meta[name=robots]", "content")
        .unwrap_or_default()
        .contains("noindex"));
    assert_eq!(count(&doc, "form.comment-form"), 0);

    // Altered links are not the site's.
    let (path, query) = link.split_once('?').unwrap();
    let other = NodeBuilder::post("other").draft().build(&app.db).await;
    let tampered = [
        format!("/preview/{}?{query}", other.id.to_hex()),
        format!("{path}?{}", query.replace("expires=", "expires=9")),
        format!("{path}?{}", &query[..query.len() - 1]),
        path.to_string(),
        "/preview/not-an-id?expires=1&sig=x".to_string(),
    ];
    for bad in tampered {
        let status = reviewer.get(app.url(&bad)).send().await.unwrap().status();
        assert_eq!(status, StatusCode::NOT_FOUND, "{bad}");
    }

    // Eight days later the link has expired, and says so.
    app.clock.step_forward(Duration::from_secs(8 * 24 * 3600));
    let response = reviewer.get(app.url(&link)).send().await.unwrap();
    assert_eq!(response.status(), StatusCode::FORBIDDEN);
    assert!(body(response).await.contains("expired"));
    // A new one works again.
    let fresh = preview_link(&app, draft.id).await;
    let status = reviewer.get(app.url(&fresh)).send().await.unwrap().status();
    assert_eq!(status, StatusCode::OK);
    app.stop().await;
}

#[tokio::test]
async fn a_preview_of_a_missing_node_is_not_found() {
    let app = spawn_app().await;
    let id = bson::oid::ObjectId::new().to_hex();
    let response = app.get_admin(&format!("/admin/content/{id}/preview")).await;
    assert_eq!(response.status(), StatusCode::NOT_FOUND);
    app.stop().await;
}

#[tokio::test]
async fn a_reviewer_holding_a_preview_link_sees_the_drafts_photo_and_nobody_else_does() {
    let app = spawn_app().await;
    let draft = NodeBuilder::photo("secret-shot")
        .title("Secret shot")
        .draft()
        .build(&app.db)
        .await;
    let file = draft.photo_file().expect("a photo");
    let photo_url = format!("/media/{}", file.to_hex());
    let link = preview_link(&app, draft.id).await;

    // Before opening the link, the reviewer's browser gets what a guesser gets.
    let (reviewer, _) = new_client();
    let before = reviewer.get(app.url(&photo_url)).send().await.unwrap();
    assert_eq!(before.status(), StatusCode::NOT_FOUND);
    let page = reviewer.get(app.url(&link)).send().await.unwrap();
    assert_eq!(page.status(), StatusCode::OK);
    let doc = html(&body(page).await);
    let src = attr(&doc, "figure img", "src").expect("the photo on the preview");
    let shown = reviewer.get(app.url(&src)).send().await.unwrap();
    assert_eq!(shown.status(), StatusCode::OK, "{src}");
    assert_eq!(
        shown
            .headers()
            .get("cache-control")
            .and_then(|v| v.to_str().ok()),
        Some("private, no-store"),
        "never kept by a shared cache"
    );
    // Another visitor without the link still gets nothing.
    let (stranger, _) = new_client();
    assert_eq!(
        stranger.get(app.url(&src)).send().await.unwrap().status(),
        StatusCode::NOT_FOUND
    );
    // Once the link's week is over, neither does the reviewer.
    app.clock.step_forward(Duration::from_secs(8 * 24 * 3600));
    assert_eq!(
        reviewer.get(app.url(&src)).send().await.unwrap().status(),
        StatusCode::NOT_FOUND
    );
}
