//! Revisions of content nodes: every save through the edit form keeps the version it replaced;
//! the edit page lists them, a revision's page shows its line diff against the current version
//! (or another revision) and restores it through the nonce-guarded save; only the newest
//! `content.revisions_kept` are kept, deleting a node deletes them, and their queries use the
//! `node_at` index.

use std::time::Duration;

use crate::common::builders::NodeBuilder;
use crate::common::*;
use bazaar::content::model::Node;
use bazaar::content::revisions::{self, Revision};
use bazaar::content::store;
use bson::doc;
use bson::oid::ObjectId;
use reqwest::StatusCode;

/// A page "About" at `/pages/about` whose text is `text`.
async fn page(app: &TestApp, text: &str) -> Node {
    NodeBuilder::page("about")
        .title("About")
        .text(text)
        .build(&app.db)
        .await
}

fn edit_path(id: ObjectId) -> String {
    format!("/admin/content/{}/edit", id.to_hex())
}

/// The inputs and textareas of `form` in `doc`, as a browser submits them.
fn form_fields(doc: &scraper::Html, form: &str) -> Vec<(String, String)> {
    let sel = scraper::Selector::parse(&format!("{form} input, {form} textarea")).unwrap();
    doc.select(&sel)
        .filter_map(|el| {
            let name = el.value().attr("name")?.to_string();
            let value = if el.value().name() == "textarea" {
                el.text().collect()
            } else {
                el.value().attr("value").unwrap_or_default().to_string()
            };
            Some((name, value))
        })
        .collect()
}

async fn post_fields(app: &TestApp, path: &str, fields: &[(String, String)]) -> reqwest::Response {
    let fields: Vec<(&str, &str)> = fields
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect();
    app.post_admin_form(path, &fields).await
}

/// Save `title` and `text` through the edit form, a second of the clock later than the last
/// save (so that each version has its own time).
async fn save(app: &TestApp, id: ObjectId, title: &str, text: &str) {
    app.clock.step_forward(Duration::from_secs(1));
    let doc = admin_page(app, &edit_path(id)).await;
    let mut fields = form_fields(&doc, "form.edit-form");
    for (name, value) in fields.iter_mut() {
        match name.as_str() {
            "title" => *value = title.to_string(),
            "text" => *value = text.to_string(),
            _ => {}
        }
    }
    fields.push(("action".into(), "save".into()));
    let response = post_fields(app, &edit_path(id), &fields).await;
    assert_eq!(response.status(), StatusCode::SEE_OTHER, "the save lands");
}

async fn stored_text(app: &TestApp, id: ObjectId) -> String {
    let node = store::by_id(&app.db, id).await.unwrap().unwrap();
    node.metadata.detail.get_str("text").unwrap().to_string()
}

async fn all_revisions(app: &TestApp, id: ObjectId) -> Vec<Revision> {
    let listed = revisions::list(&app.db, id, 1000).await.unwrap();
    let mut whole = Vec::new();
    for r in listed {
        whole.push(revisions::get(&app.db, id, r.id).await.unwrap().unwrap());
    }
    whole
}

fn revision_path(id: ObjectId, rev: ObjectId) -> String {
    format!("/admin/content/{}/revisions/{}", id.to_hex(), rev.to_hex())
}

#[tokio::test]
async fn two_saves_keep_two_revisions_holding_the_texts_they_replaced_listed_on_the_edit_page() {
    let app = spawn_app().await;
    let about = page(&app, "First text").await;
    save(&app, about.id, "About", "Second text").await;
    save(&app, about.id, "About us", "Third text").await;

    let kept = all_revisions(&app, about.id).await;
    let texts_kept: Vec<&str> = kept
        .iter()
        .map(|r| r.detail.get_str("text").unwrap())
        .collect();
    assert_eq!(texts_kept, ["Second text", "First text"], "newest first");
    assert_eq!(kept[0].by.as_deref(), Some(ADMIN_USER));
    assert_eq!(kept[1].by, None, "the builder's version names no editor");
    assert_eq!(stored_text(&app, about.id).await, "Third text");

    let editor = admin_page(&app, &edit_path(about.id)).await;
    let listed = texts(&editor, ".revisions-panel li");
    assert_eq!(listed.len(), 2, "{listed:?}");
    assert!(
        listed[0].contains(&format!("by {ADMIN_USER}")),
        "{listed:?}"
    );
    assert!(listed[1].contains("“About”"), "{listed:?}");
}

#[tokio::test]
async fn a_revision_page_shows_the_line_diff_against_the_current_version_or_another_revision() {
    let app = spawn_app().await;
    let about = page(&app, "Line one\nLine two\nLine three").await;
    save(&app, about.id, "About", "Line one\nLine 2\nLine three").await;
    save(
        &app,
        about.id,
        "About us",
        "Line one\nLine 2\nLine three\nLine four",
    )
    .await;
    let kept = all_revisions(&app, about.id).await;
    let (newer, oldest) = (&kept[0], &kept[1]);

    let doc = admin_page(&app, &revision_path(about.id, oldest.id)).await;
    let diff = texts(&doc, ".revision-diff .differs pre.diff").join("\n");
    for line in [
        "- Line two",
        "+ Line 2",
        "+ Line four",
        "- About",
        "+ About us",
    ] {
        assert!(diff.contains(line), "{line:?} in {diff}");
    }
    assert_eq!(count(&doc, "form.restore-form button"), 1);

    let against = format!(
        "{}?against={}",
        revision_path(about.id, oldest.id),
        newer.id.to_hex()
    );
    let doc = admin_page(&app, &against).await;
    let diff = texts(&doc, ".revision-diff .differs pre.diff").join("\n");
    assert!(
        diff.contains("- Line two") && diff.contains("+ Line 2"),
        "{diff}"
    );
    assert!(
        !diff.contains("Line four"),
        "only in the current version: {diff}"
    );
}

#[tokio::test]
async fn restoring_an_old_revision_brings_its_text_back_and_keeps_the_version_it_replaced() {
    let app = spawn_app().await;
    let about = page(&app, "The good text").await;
    save(&app, about.id, "Oops", "A bad save").await;
    let good = all_revisions(&app, about.id).await.remove(0);
    assert_eq!(good.detail.get_str("text").unwrap(), "The good text");

    app.clock.step_forward(Duration::from_secs(1));
    let doc = admin_page(&app, &revision_path(about.id, good.id)).await;
    let fields = form_fields(&doc, "form.restore-form");
    let action = attr(&doc, "form.restore-form", "action").unwrap();
    let response = post_fields(&app, &action, &fields).await;
    assert_eq!(response.status(), StatusCode::SEE_OTHER);

    let node = store::by_id(&app.db, about.id).await.unwrap().unwrap();
    assert_eq!(node.metadata.title, "About");
    assert_eq!(stored_text(&app, about.id).await, "The good text");
    assert_eq!(node.metadata.updated_by.as_deref(), Some(ADMIN_USER));
    // The restore is a save: the bad version is now the newest revision.
    let kept = all_revisions(&app, about.id).await;
    assert_eq!(kept.len(), 2);
    assert_eq!(kept[0].detail.get_str("text").unwrap(), "A bad save");
    assert_eq!(kept[0].title, "Oops");
    let public = html(&body(app.get("/pages/about").await).await);
    assert_eq!(heading(&public), "About");
}

#[tokio::test]
async fn a_restore_from_a_page_opened_before_another_save_is_refused_and_changes_nothing() {
    let app = spawn_app().await;
    let about = page(&app, "Old text").await;
    save(&app, about.id, "About", "Newer text").await;
    let old = all_revisions(&app, about.id).await.remove(0);
    let doc = admin_page(&app, &revision_path(about.id, old.id)).await;
    let fields = form_fields(&doc, "form.restore-form");
    let action = attr(&doc, "form.restore-form", "action").unwrap();

    save(&app, about.id, "About", "Newest text").await;
    let response = post_fields(&app, &action, &fields).await;
    assert_eq!(response.status(), StatusCode::CONFLICT);
    assert_eq!(stored_text(&app, about.id).await, "Newest text");
    assert_eq!(all_revisions(&app, about.id).await.len(), 2);
}

#[tokio::test]
async fn only_the_newest_revisions_are_kept_as_the_setting_says() {
    let app = spawn_app_with(&[("BAZAAR_CONTENT__REVISIONS_KEPT", "2")]).await;
    let about = page(&app, "Text 0").await;
    for n in 1..=4 {
        save(&app, about.id, "About", &format!("Text {n}")).await;
    }
    let kept: Vec<String> = all_revisions(&app, about.id)
        .await
        .iter()
        .map(|r| r.detail.get_str("text").unwrap().to_string())
        .collect();
    assert_eq!(kept, ["Text 3", "Text 2"]);
}

#[tokio::test]
async fn deleting_a_node_deletes_its_revisions_and_not_another_nodes() {
    let app = spawn_app().await;
    let about = page(&app, "One").await;
    let other = NodeBuilder::page("other")
        .title("Other")
        .text("Other one")
        .build(&app.db)
        .await;
    save(&app, about.id, "About", "Two").await;
    save(&app, other.id, "Other", "Other two").await;

    let doc = admin_page(
        &app,
        &format!("/admin/content/{}/delete", about.id.to_hex()),
    )
    .await;
    let token = csrf_token(&doc).expect("token");
    let response = app
        .post_admin_form(
            &format!("/admin/content/{}/delete", about.id.to_hex()),
            &[("csrf_token", token.as_str())],
        )
        .await;
    assert_eq!(response.status(), StatusCode::SEE_OTHER);
    assert!(all_revisions(&app, about.id).await.is_empty());
    assert_eq!(all_revisions(&app, other.id).await.len(), 1);
}

#[tokio::test]
async fn bad_or_foreign_revision_ids_are_not_found() {
    let app = spawn_app().await;
    let about = page(&app, "One").await;
    let other = NodeBuilder::page("other")
        .title("Other")
        .text("Other one")
        .build(&app.db)
        .await;
    save(&app, about.id, "About", "Two").await;
    save(&app, other.id, "Other", "Other two").await;
    let mine = all_revisions(&app, about.id).await.remove(0);
    let foreign = all_revisions(&app, other.id).await.remove(0);
    let id = about.id.to_hex();
    for path in [
        format!("/admin/content/{id}/revisions/nope"),
        format!("/admin/content/{id}/revisions/{}", ObjectId::new().to_hex()),
        format!("/admin/content/{id}/revisions/{}", foreign.id.to_hex()),
        format!(
            "/admin/content/{}/revisions/{}",
            ObjectId::new().to_hex(),
            mine.id.to_hex()
        ),
        format!(
            "/admin/content/{id}/revisions/{}?against=%00",
            mine.id.to_hex()
        ),
        format!(
            "/admin/content/{id}/revisions/{}?against={}",
            mine.id.to_hex(),
            foreign.id.to_hex()
        ),
    ] {
        let response = app.get_admin(&path).await;
        assert_eq!(response.status(), StatusCode::NOT_FOUND, "{path}");
    }
    let doc = admin_page(&app, &revision_path(about.id, mine.id)).await;
    let fields = form_fields(&doc, "form.restore-form");
    for path in [
        format!(
            "/admin/content/{id}/revisions/{}/restore",
            foreign.id.to_hex()
        ),
        format!("/admin/content/{id}/revisions/%27/restore"),
    ] {
        let response = post_fields(&app, &path, &fields).await;
        assert_eq!(response.status(), StatusCode::NOT_FOUND, "{path}");
    }
    assert_eq!(stored_text(&app, about.id).await, "Two");
}

#[tokio::test]
async fn the_revision_queries_use_the_node_at_index() {
    let app = spawn_app().await;
    let about = page(&app, "One").await;
    save(&app, about.id, "About", "Two").await;
    assert_uses_index(
        &app.db,
        "a node's revisions, newest first",
        revisions::COLLECTION,
        revisions::of_node(about.id),
        revisions::newest_first(),
    )
    .await;
    assert_uses_index(
        &app.db,
        "the retention cut",
        revisions::COLLECTION,
        doc! { "node_id": about.id, "at": { "$lt": bson::DateTime::now() } },
        doc! {},
    )
    .await;
}

#[tokio::test]
async fn a_restore_without_the_forms_csrf_token_is_refused_and_changes_nothing() {
    let app = spawn_app().await;
    let about = page(&app, "Old text").await;
    save(&app, about.id, "About", "Newer text").await;
    let old = all_revisions(&app, about.id).await.remove(0);
    let doc = admin_page(&app, &revision_path(about.id, old.id)).await;
    let fields: Vec<(String, String)> = form_fields(&doc, "form.restore-form")
        .into_iter()
        .filter(|(name, _)| name != "csrf_token")
        .collect();
    let action = attr(&doc, "form.restore-form", "action").unwrap();
    let response = post_fields(&app, &action, &fields).await;
    assert_eq!(response.status(), StatusCode::FORBIDDEN);
    assert_eq!(stored_text(&app, about.id).await, "Newer text");
    assert_eq!(all_revisions(&app, about.id).await.len(), 1);
}
