//! Admin → Content: creating and editing nodes with field errors, saving under the nonce
//! (two editors merged three ways, sixteen concurrent saves, the 409 page with only the true
//! conflicts, per-conflict choices and discard), publishing and scheduling from the one edit
//! form, tags, photo uploads under the lock, replacing photos without ever pointing at a
//! missing file, and deleting.

use std::time::Duration;

use crate::common::builders::{NodeBuilder, ProductBuilder};
use crate::common::*;
use bazaar::content::model::{self, Node};
use bazaar::content::photos;
use bazaar::content::store;
use bson::oid::ObjectId;
use bson::{doc, DateTime};
use futures::future::join_all;
use reqwest::StatusCode;

async fn node_by_slug(app: &TestApp, section: &str, slug: &str) -> Node {
    store::collection(&app.db)
        .find_one(doc! { "metadata.section": section, "metadata.slug": slug })
        .await
        .unwrap()
        .expect("node exists")
}

/// A page "About Bazaar" at `/pages/about`, three lines long.
async fn about_page(app: &TestApp) -> Node {
    NodeBuilder::page("about")
        .title("About Bazaar")
        .text("Line one\nLine two\nLine three")
        .build(&app.db)
        .await
}

async fn stored_text(app: &TestApp, id: ObjectId) -> String {
    let node = store::by_id(&app.db, id).await.unwrap().unwrap();
    node.metadata.detail.get_str("text").unwrap().to_string()
}

/// An editor's open edit form: every field as a browser would submit it, and where it posts.
struct EditForm {
    fields: Vec<(String, String)>,
    action: String,
}

impl EditForm {
    /// The form `selector` of `doc`: inputs (unticked radios and boxes left out) and textareas.
    fn read(doc: &scraper::Html, selector: &str) -> EditForm {
        let sel = scraper::Selector::parse(&format!("{selector} input, {selector} textarea"))
            .expect("selector");
        let fields = doc
            .select(&sel)
            .filter_map(|el| {
                let v = el.value();
                let name = v.attr("name")?.to_string();
                if v.name() == "textarea" {
                    return Some((name, el.text().collect()));
                }
                if matches!(v.attr("type"), Some("radio") | Some("checkbox"))
                    && v.attr("checked").is_none()
                {
                    return None;
                }
                Some((name, v.attr("value").unwrap_or_default().to_string()))
            })
            .collect();
        EditForm {
            fields,
            action: attr(doc, selector, "action").expect("the form's action"),
        }
    }

    fn get(&self, name: &str) -> &str {
        self.fields
            .iter()
            .find(|(k, _)| k == name)
            .map_or("", |(_, v)| v.as_str())
    }

    /// Set a field (added when the form has none, as a pressed button's name and value are).
    fn set(&mut self, name: &str, value: &str) -> &mut EditForm {
        match self.fields.iter_mut().find(|(k, _)| k == name) {
            Some(field) => field.1 = value.to_string(),
            None => self.fields.push((name.to_string(), value.to_string())),
        }
        self
    }

    async fn post(&self, app: &TestApp, button: &str) -> reqwest::Response {
        let mut fields: Vec<(&str, &str)> = self
            .fields
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect();
        if !button.is_empty() {
            fields.push(("action", button));
        }
        app.post_admin_form(&self.action, &fields).await
    }
}

async fn open_editor(app: &TestApp, id: ObjectId) -> EditForm {
    let doc = admin_page(app, &format!("/admin/content/{}/edit", id.to_hex())).await;
    EditForm::read(&doc, "form.edit-form")
}

async fn save_page(app: &TestApp, form: &EditForm, title: &str, text: &str) -> reqwest::Response {
    let mut form = EditForm {
        fields: form.fields.clone(),
        action: form.action.clone(),
    };
    form.set("title", title).set("text", text);
    form.post(app, "save").await
}

#[tokio::test]
async fn two_editors_changing_the_same_line_get_a_conflict_page_with_only_that_line_and_a_choice_each(
) {
    let app = spawn_app().await;
    let about = about_page(&app).await;
    let alice = open_editor(&app, about.id).await;
    let bob = open_editor(&app, about.id).await;
    assert_eq!(alice.get("edit_version"), bob.get("edit_version"));

    let response = save_page(
        &app,
        &alice,
        "About Bazaar",
        "Line one\nAlice's line\nLine three",
    )
    .await;
    assert_eq!(response.status(), StatusCode::SEE_OTHER);
    assert_eq!(
        stored_text(&app, about.id).await,
        "Line one\nAlice's line\nLine three"
    );

    let response = save_page(&app, &bob, "About us", "Line one\nBob's line\nLine three").await;
    assert_eq!(response.status(), StatusCode::CONFLICT);
    assert_security_headers(response.headers(), "the conflict page");
    let doc = html(&body(response).await);
    assert_eq!(heading(&doc), "Changed since you opened it");
    // Alice's save stands, and the page says who saved it.
    assert_eq!(
        stored_text(&app, about.id).await,
        "Line one\nAlice's line\nLine three"
    );
    let notice = texts(&doc, "p.form-error").join(" ");
    assert!(notice.contains(&format!("{ADMIN_USER} saved")), "{notice}");
    // Only the text conflicts (the title was Bob's change alone), and only its line.
    assert_eq!(count(&doc, "div.conflict-field"), 1);
    assert_eq!(count(&doc, "#conflict-text"), 1);
    assert_eq!(texts(&doc, ".conflict-mine pre"), ["Bob's line"]);
    assert_eq!(texts(&doc, ".conflict-theirs pre"), ["Alice's line"]);

    // The form holds the merged edit: Bob's title, both lines between markers, the stored nonce.
    let mut resolve = EditForm::read(&doc, "form.reapply-form");
    let stored_node = store::by_id(&app.db, about.id).await.unwrap().unwrap();
    assert_eq!(
        resolve.get("edit_version"),
        stored_node.metadata.nonce.to_hex()
    );
    assert_eq!(resolve.get("title"), "About us");
    let marked = resolve.get("text").to_string();
    assert!(marked.contains("Alice's line") && marked.contains("Bob's line"));
    // Saved as it is, the markers are refused: nothing is lost to a hasty click.
    let response = resolve.post(&app, "").await;
    assert_eq!(response.status(), StatusCode::UNPROCESSABLE_ENTITY);
    assert_eq!(
        stored_text(&app, about.id).await,
        "Line one\nAlice's line\nLine three"
    );
    let discard = attr(&doc, "a.discard", "href").unwrap();
    // Choosing Bob's line: saved with Bob's title.
    resolve.set("choice_text", "mine");
    let response = resolve.post(&app, "").await;
    assert_eq!(response.status(), StatusCode::SEE_OTHER);
    let node = store::by_id(&app.db, about.id).await.unwrap().unwrap();
    assert_eq!(node.metadata.title, "About us");
    assert_eq!(node.metadata.updated_by.as_deref(), Some(ADMIN_USER));
    assert_eq!(
        stored_text(&app, about.id).await,
        "Line one\nBob's line\nLine three"
    );

    // Discard: Alice, now stale, gets the conflict page and takes the stored version instead.
    let response = save_page(&app, &alice, "About Bazaar", "Alice again").await;
    assert_eq!(response.status(), StatusCode::CONFLICT);
    let doc = html(&body(response).await);
    let discard_again = attr(&doc, "a.discard", "href").unwrap();
    assert_eq!(discard, discard_again);
    let editor = admin_page(&app, &discard).await;
    assert_eq!(
        texts(&editor, "form.content-form textarea[name=text]"),
        ["Line one\nBob's line\nLine three"]
    );
    // The public page shows the stored version.
    let public = html(&body(app.get("/pages/about").await).await);
    assert_eq!(heading(&public), "About us");
}

#[tokio::test]
async fn two_editors_changing_different_lines_and_tags_are_merged_with_a_notice() {
    let app = spawn_app().await;
    let about = about_page(&app).await;
    let mut alice = open_editor(&app, about.id).await;
    let mut bob = open_editor(&app, about.id).await;
    alice
        .set("text", "Line one, Alice\nLine two\nLine three")
        .set("tags", "jazz, alice");
    assert_eq!(
        alice.post(&app, "save").await.status(),
        StatusCode::SEE_OTHER
    );
    bob.set("text", "Line one\nLine two\nLine three, Bob")
        .set("tags", "bob")
        .set("author", "Bob");
    let response = bob.post(&app, "save").await;
    assert_eq!(response.status(), StatusCode::SEE_OTHER);
    let node = store::by_id(&app.db, about.id).await.unwrap().unwrap();
    assert_eq!(
        stored_text(&app, about.id).await,
        "Line one, Alice\nLine two\nLine three, Bob"
    );
    assert_eq!(node.metadata.tags, ["jazz", "alice", "bob"]);
    assert_eq!(node.metadata.author.name, "Bob");
    let edit = admin_page(&app, &location(&response)).await;
    let flash = texts(&edit, ".flash").join(" ");
    assert!(flash.contains("Merged with the changes"), "{flash}");
    assert!(flash.contains("Text") && flash.contains("Tags"), "{flash}");
}

#[tokio::test]
async fn a_publication_changed_differently_by_two_editors_is_a_conflict_settled_by_a_choice() {
    let app = spawn_app().await;
    let about = about_page(&app).await;
    let alice = open_editor(&app, about.id).await;
    let mut bob = open_editor(&app, about.id).await;
    assert_eq!(
        alice.post(&app, "unpublish").await.status(),
        StatusCode::SEE_OTHER
    );
    bob.set("published_at", "2031-01-02T10:30")
        .set("text", "Line one\nLine two\nLine three, Bob");
    let response = bob.post(&app, "schedule").await;
    assert_eq!(response.status(), StatusCode::CONFLICT);
    let doc = html(&body(response).await);
    assert_eq!(count(&doc, "div.conflict-field"), 1);
    assert_eq!(
        texts(&doc, "#conflict-publication .conflict-mine pre"),
        ["2031-01-02 10:30 UTC"]
    );
    assert_eq!(
        texts(&doc, "#conflict-publication .conflict-theirs pre"),
        ["draft"]
    );
    // Keeping the other editor's choice (a draft) still saves this editor's text.
    let mut resolve = EditForm::read(&doc, "form.reapply-form");
    resolve.set("choice_publication", "theirs");
    assert_eq!(resolve.post(&app, "").await.status(), StatusCode::SEE_OTHER);
    let node = store::by_id(&app.db, about.id).await.unwrap().unwrap();
    assert_eq!(node.metadata.published, None);
    assert_eq!(
        stored_text(&app, about.id).await,
        "Line one\nLine two\nLine three, Bob"
    );
}

#[tokio::test]
async fn sixteen_concurrent_saves_carrying_the_same_nonce_exactly_one_wins() {
    let app = spawn_app().await;
    let about = about_page(&app).await;
    let form = open_editor(&app, about.id).await;
    let texts_sent: Vec<String> = (0..16).map(|i| format!("Version {i}")).collect();
    let responses = join_all(
        texts_sent
            .iter()
            .map(|text| save_page(&app, &form, "About Bazaar", text)),
    )
    .await;
    let statuses: Vec<StatusCode> = responses.iter().map(|r| r.status()).collect();
    let won: Vec<usize> = statuses
        .iter()
        .enumerate()
        .filter(|(_, s)| **s == StatusCode::SEE_OTHER)
        .map(|(i, _)| i)
        .collect();
    assert_eq!(won.len(), 1, "{statuses:?}");
    assert_eq!(
        statuses
            .iter()
            .filter(|s| **s == StatusCode::CONFLICT)
            .count(),
        15,
        "{statuses:?}"
    );
    assert_eq!(stored_text(&app, about.id).await, texts_sent[won[0]]);
}

#[tokio::test]
async fn creating_an_entry_makes_a_draft_that_publishing_shows_and_scheduling_or_unpublishing_hides(
) {
    let app = spawn_app().await;
    let doc = admin_page(&app, "/admin/content/new?section=blog&type=entry").await;
    let token = csrf_token(&doc).unwrap();
    let response = app
        .post_admin_form(
            "/admin/content/new?section=blog&type=entry",
            &[
                ("csrf_token", &token),
                ("title", "Hello, world"),
                ("slug", ""),
                ("author", "Me"),
                ("text", "First *post*."),
            ],
        )
        .await;
    assert_eq!(response.status(), StatusCode::SEE_OTHER);
    let node = node_by_slug(&app, "blog", "hello-world").await;
    assert_eq!(
        location(&response),
        format!("/admin/content/{}/edit", node.id.to_hex())
    );
    assert_eq!(node.metadata.published, None);
    assert_eq!(
        app.get("/blog/hello-world").await.status(),
        StatusCode::NOT_FOUND
    );

    let list = admin_page(&app, "/admin/content?section=blog&type=entry&sort=updated").await;
    assert_eq!(
        texts(&list, "table.admin-content tbody tr:first-child td")[0],
        "Hello, world"
    );
    assert_eq!(
        texts(&list, "table.admin-content tbody tr:first-child td")[2],
        "draft"
    );

    // Everything from the one edit form: its Publish button publishes what is typed with it.
    let mut form = open_editor(&app, node.id).await;
    form.set("text", "First *post*, edited.")
        .set("tags", "news");
    let response = form.post(&app, "publish").await;
    assert_eq!(response.status(), StatusCode::SEE_OTHER);
    let page = html(&body(app.get("/blog/hello-world").await).await);
    assert_eq!(texts(&page, ".post-text em"), ["post"]);
    let published = node_by_slug(&app, "blog", "hello-world").await;
    assert_eq!(published.metadata.tags, ["news"]);
    let first_date = published.metadata.published.expect("published");

    // Publishing (or updating) a published post keeps its date.
    let mut form = open_editor(&app, node.id).await;
    form.set("title", "Hello again");
    assert_eq!(
        form.post(&app, "publish").await.status(),
        StatusCode::SEE_OTHER
    );
    let again = node_by_slug(&app, "blog", "hello-world").await;
    assert_eq!(again.metadata.title, "Hello again");
    assert_eq!(again.metadata.published, Some(first_date));

    // Scheduled for next year: hidden again until then.
    let next_year =
        DateTime::from_millis(DateTime::now().timestamp_millis() + 365 * 24 * 3600 * 1000)
            .to_chrono()
            .format("%Y-%m-%dT%H:%M")
            .to_string();
    let mut form = open_editor(&app, node.id).await;
    form.set("published_at", &next_year);
    let response = form.post(&app, "schedule").await;
    assert_eq!(response.status(), StatusCode::SEE_OTHER);
    assert_eq!(
        app.get("/blog/hello-world").await.status(),
        StatusCode::NOT_FOUND
    );
    let edit = admin_page(&app, &location(&response)).await;
    assert_eq!(texts(&edit, ".publish-panel strong"), ["scheduled"]);
    // A bad time is refused, changes nothing and keeps what was typed.
    let mut form = EditForm::read(&edit, "form.edit-form");
    form.set("published_at", "tomorrow-ish")
        .set("text", "Kept text");
    let response = form.post(&app, "schedule").await;
    assert_eq!(response.status(), StatusCode::UNPROCESSABLE_ENTITY);
    let doc = html(&body(response).await);
    assert!(texts(&doc, "#error-published_at")[0].contains("YYYY-MM-DD"));
    assert_eq!(texts(&doc, "textarea[name=text]"), ["Kept text"]);
    assert_eq!(
        attr(&doc, "input[name=published_at]", "value").as_deref(),
        Some("tomorrow-ish")
    );
    let edit = admin_page(&app, &format!("/admin/content/{}/edit", node.id.to_hex())).await;
    assert_eq!(texts(&edit, ".publish-panel strong"), ["scheduled"]);

    let form = EditForm::read(&edit, "form.edit-form");
    assert_eq!(
        form.post(&app, "publish").await.status(),
        StatusCode::SEE_OTHER
    );
    assert_eq!(app.get("/blog/hello-world").await.status(), StatusCode::OK);
    let form = open_editor(&app, node.id).await;
    let response = form.post(&app, "unpublish").await;
    assert_eq!(response.status(), StatusCode::SEE_OTHER);
    assert_eq!(
        app.get("/blog/hello-world").await.status(),
        StatusCode::NOT_FOUND
    );
    let draft = node_by_slug(&app, "blog", "hello-world").await;
    assert_eq!(draft.metadata.published, None);
    assert!(!draft.metadata.live);
    // A time typed into a draft's form is not dropped by "Save draft": it asks for Schedule.
    let mut form = open_editor(&app, node.id).await;
    form.set("published_at", &next_year);
    let response = form.post(&app, "save").await;
    assert_eq!(response.status(), StatusCode::UNPROCESSABLE_ENTITY);
    let doc = html(&body(response).await);
    assert!(texts(&doc, "#error-published_at")[0].contains("Schedule"));
}

#[tokio::test]
async fn empty_titles_slugs_with_spaces_duplicate_slugs_and_foreign_video_urls_are_form_errors_with_kept_values(
) {
    let app = spawn_app().await;
    // The pages whose slugs the forms try to take.
    NodeBuilder::page("about")
        .title("About")
        .build(&app.db)
        .await;
    NodeBuilder::page("shipping")
        .title("Shipping and returns")
        .build(&app.db)
        .await;
    let doc = admin_page(&app, "/admin/content/new?section=pages&type=page").await;
    let token = csrf_token(&doc).unwrap();
    let before = store::collection(&app.db)
        .count_documents(doc! {})
        .await
        .unwrap();
    let response = app
        .post_admin_form(
            "/admin/content/new?section=pages&type=page",
            &[
                ("csrf_token", &token),
                ("title", ""),
                ("slug", "two words"),
                ("text", "Kept text"),
            ],
        )
        .await;
    assert_eq!(response.status(), StatusCode::UNPROCESSABLE_ENTITY);
    let doc = html(&body(response).await);
    assert_eq!(texts(&doc, "#error-title"), ["Enter a title."]);
    assert!(texts(&doc, "#error-slug")[0].contains("no spaces"));
    assert_eq!(texts(&doc, "textarea[name=text]"), ["Kept text"]);
    assert_eq!(
        attr(&doc, "input[name=slug]", "value").as_deref(),
        Some("two words")
    );

    // A slug another page already has: a form error, not a 500.
    let response = app
        .post_admin_form(
            "/admin/content/new?section=pages&type=page",
            &[
                ("csrf_token", &token),
                ("title", "About again"),
                ("slug", "about"),
                ("text", "x"),
            ],
        )
        .await;
    assert_eq!(response.status(), StatusCode::UNPROCESSABLE_ENTITY);
    let doc = html(&body(response).await);
    assert_eq!(
        texts(&doc, "#error-slug"),
        ["That slug is already used in this section; choose another."]
    );
    assert_eq!(
        store::collection(&app.db)
            .count_documents(doc! {})
            .await
            .unwrap(),
        before
    );
    // The same slug in another section is fine.
    let response = app
        .post_admin_form(
            "/admin/content/new?section=blog&type=entry",
            &[
                ("csrf_token", &token),
                ("title", "About"),
                ("slug", "about"),
                ("text", "x"),
            ],
        )
        .await;
    assert_eq!(response.status(), StatusCode::SEE_OTHER);

    // Editing into a taken slug: a form error, the node unchanged, the nonce kept.
    let shipping = node_by_slug(&app, "pages", "shipping").await;
    let mut form = open_editor(&app, shipping.id).await;
    form.set("slug", "about");
    let response = save_page(&app, &form, "Shipping", "x").await;
    assert_eq!(response.status(), StatusCode::UNPROCESSABLE_ENTITY);
    let doc = html(&body(response).await);
    assert!(texts(&doc, "#error-slug")[0].contains("already used"));
    assert_eq!(
        attr(&doc, "input[name=edit_version]", "value").unwrap(),
        form.get("edit_version")
    );
    assert_eq!(
        node_by_slug(&app, "pages", "shipping").await.metadata.title,
        "Shipping and returns"
    );

    // A video that is not on YouTube or Vimeo.
    let response = app
        .post_admin_form(
            "/admin/content/new?section=blog&type=video",
            &[
                ("csrf_token", &token),
                ("title", "Clip"),
                ("url", "https://evil.example.com/v/123"),
            ],
        )
        .await;
    assert_eq!(response.status(), StatusCode::UNPROCESSABLE_ENTITY);
    let doc = html(&body(response).await);
    assert_eq!(
        texts(&doc, "#error-url"),
        ["Enter the address of a YouTube or Vimeo video."]
    );
    // A link must be http(s).
    let response = app
        .post_admin_form(
            "/admin/content/new?section=blog&type=link",
            &[
                ("csrf_token", &token),
                ("title", "L"),
                ("url", "javascript:alert(1)"),
            ],
        )
        .await;
    assert_eq!(response.status(), StatusCode::UNPROCESSABLE_ENTITY);
    // A type the section does not hold, and an unknown section.
    assert_eq!(
        app.get_admin("/admin/content/new?section=pages&type=video")
            .await
            .status(),
        StatusCode::BAD_REQUEST
    );
    assert_eq!(
        app.get_admin("/admin/content?section=nowhere")
            .await
            .status(),
        StatusCode::BAD_REQUEST
    );
    assert_eq!(
        app.get_admin("/admin/content/000000000000000000000000/edit")
            .await
            .status(),
        StatusCode::NOT_FOUND
    );
}

#[tokio::test]
async fn tags_are_edited_as_one_list_in_the_edit_form_normalised_and_each_once() {
    let app = spawn_app().await;
    let about = about_page(&app).await;
    let mut form = open_editor(&app, about.id).await;
    form.set("tags", "Jazz, New Releases, jazz, <b>");
    assert_eq!(
        form.post(&app, "save").await.status(),
        StatusCode::SEE_OTHER
    );
    let node = store::by_id(&app.db, about.id).await.unwrap().unwrap();
    assert_eq!(node.metadata.tags, ["jazz", "new-releases", "b"]);
    let tag_page = html(&body(app.get("/tags/new-releases").await).await);
    assert_eq!(texts(&tag_page, ".tag-nodes a"), ["About Bazaar"]);

    let mut form = open_editor(&app, about.id).await;
    assert_eq!(form.get("tags"), "jazz, new-releases, b");
    form.set("tags", "jazz, b");
    assert_eq!(
        form.post(&app, "save").await.status(),
        StatusCode::SEE_OTHER
    );
    let node = store::by_id(&app.db, about.id).await.unwrap().unwrap();
    assert_eq!(node.metadata.tags, ["jazz", "b"]);
    assert_eq!(
        app.get("/tags/new-releases").await.status(),
        StatusCode::NOT_FOUND
    );
    // A tag without a letter or digit is a form error; the text typed with it is kept.
    let mut form = open_editor(&app, about.id).await;
    form.set("tags", "jazz, ???")
        .set("text", "Typed with a bad tag");
    let response = form.post(&app, "save").await;
    assert_eq!(response.status(), StatusCode::UNPROCESSABLE_ENTITY);
    let doc = html(&body(response).await);
    assert!(texts(&doc, "#error-tags")[0].contains("no letter or digit"));
    assert_eq!(texts(&doc, "textarea[name=text]"), ["Typed with a bad tag"]);
}

#[tokio::test]
async fn a_photo_post_cannot_be_published_before_its_photo_is_uploaded() {
    let app = spawn_app().await;
    let doc = admin_page(&app, "/admin/content/new?section=gallery&type=photo").await;
    let token = csrf_token(&doc).unwrap();
    let response = app
        .post_admin_form(
            "/admin/content/new?section=gallery&type=photo",
            &[
                ("csrf_token", &token),
                ("title", "Sunset"),
                ("caption", "Red"),
            ],
        )
        .await;
    assert_eq!(response.status(), StatusCode::SEE_OTHER);
    let node = node_by_slug(&app, "gallery", "sunset").await;
    let form = open_editor(&app, node.id).await;
    let response = form.post(&app, "publish").await;
    assert_eq!(response.status(), StatusCode::UNPROCESSABLE_ENTITY);
    let doc = html(&body(response).await);
    assert!(texts(&doc, "#error-published_at")[0].contains("Upload the photo first"));
    let node = node_by_slug(&app, "gallery", "sunset").await;
    assert_eq!(node.metadata.published, None);
}

#[tokio::test]
async fn a_product_tagged_in_the_admin_form_appears_on_the_tag_page() {
    let app = spawn_app().await;
    let product = ProductBuilder::new("casa")
        .slug("casablanca")
        .title("Casablanca")
        .build(&app.db)
        .await;
    let path = format!("/admin/products/{}/edit", product.id.to_hex());
    let doc = admin_page(&app, &path).await;
    let token = csrf_token(&doc).unwrap();
    // Post back every field as shown, with tags added.
    let mut fields: Vec<(String, String)> = Vec::new();
    let sel =
        scraper::Selector::parse("form.product-form input, form.product-form textarea").unwrap();
    for el in doc.select(&sel) {
        let Some(name) = el.value().attr("name") else {
            continue;
        };
        if el.value().attr("type") == Some("checkbox") && el.value().attr("checked").is_none() {
            continue;
        }
        let value = if el.value().name() == "textarea" {
            el.text().collect::<String>()
        } else {
            el.value().attr("value").unwrap_or_default().to_string()
        };
        fields.push((name.to_string(), value));
    }
    for (name, value) in fields.iter_mut() {
        if name == "tags" {
            *value = "Film Noir, classics".to_string();
        }
        if name == "csrf_token" {
            *value = token.clone();
        }
    }
    let response = app
        .client
        .post(app.url(&path))
        .basic_auth(ADMIN_USER, Some(ADMIN_PASSWORD))
        .form(&fields)
        .send()
        .await
        .unwrap();
    assert_eq!(
        response.status(),
        StatusCode::SEE_OTHER,
        "{}",
        body(response).await
    );
    let tagged = bazaar::catalog::products::by_slug(&app.db, &slug("casablanca"))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(tagged.tags, ["classics", "film-noir"]);
    let doc = html(&body(app.get("/tags/film-noir").await).await);
    assert_eq!(texts(&doc, ".product-grid .product-title"), ["Casablanca"]);
    assert_eq!(count(&doc, ".tag-nodes"), 0);
}

#[tokio::test]
async fn the_admin_list_filters_by_section_and_type_searches_titles_sorts_and_pages() {
    let app = spawn_app().await;
    let db = &app.db;
    // Two pages (the first section, listed by default); in the blog three entries, two quotes
    // and two links.
    NodeBuilder::page("about").title("About").build(db).await;
    NodeBuilder::page("shipping")
        .title("Shipping")
        .build(db)
        .await;
    for title in [
        "Welcome to the blog",
        "Three futures",
        "The record that never leaves the turntable",
    ] {
        NodeBuilder::post(&bazaar::domain::slugify(title))
            .title(title)
            .build(db)
            .await;
    }
    for n in 0..2 {
        NodeBuilder::new(
            "blog",
            &format!("quote-{n}"),
            model::Detail::Quote(model::QuoteDetail {
                text: "Do not fear mistakes.".into(),
                source: "Miles Davis".into(),
                commentary: String::new(),
            }),
        )
        .title(&format!("Quote {n}"))
        .build(db)
        .await;
        NodeBuilder::new(
            "blog",
            &format!("link-{n}"),
            model::Detail::Link(model::LinkDetail {
                url: "https://example.com/".into(),
                text: "Elsewhere".into(),
                commentary: String::new(),
            }),
        )
        .title(&format!("Link {n}"))
        .build(db)
        .await;
    }
    let doc = admin_page(&app, "/admin/content").await;
    assert_eq!(texts(&doc, ".result-count .total"), ["2"]);
    assert_eq!(
        attr(&doc, "header nav a[aria-current=page]", "href").as_deref(),
        Some("/admin/content")
    );
    let doc = admin_page(&app, "/admin/content?section=blog").await;
    assert_eq!(texts(&doc, ".result-count .total"), ["7"]);
    let doc = admin_page(&app, "/admin/content?section=blog&type=entry&sort=title").await;
    assert_eq!(
        texts(&doc, "table.admin-content tbody td:first-child"),
        [
            "The record that never leaves the turntable",
            "Three futures",
            "Welcome to the blog"
        ]
    );
    let doc = admin_page(&app, "/admin/content?section=blog&q=FUTURE").await;
    assert_eq!(
        texts(&doc, "table.admin-content tbody td:first-child"),
        ["Three futures"]
    );
    // A search is taken literally, not as a pattern.
    let doc = admin_page(&app, "/admin/content?section=blog&q=.*").await;
    assert_eq!(texts(&doc, ".result-count .total"), ["0"]);
    for i in 0..30 {
        store::create(
            &app.db,
            model::NodeInput {
                section: "gallery".into(),
                slug: crate::common::slug(&format!("g{i}")),
                title: format!("G{i:02}"),
                author: "x".into(),
                detail: model::Detail::Photo(Default::default()),
            },
            None,
            vec![],
        )
        .await
        .unwrap();
    }
    let doc = admin_page(&app, "/admin/content?section=gallery&sort=title").await;
    assert_eq!(count(&doc, "table.admin-content tbody tr"), 25);
    let next = attr(&doc, "a[rel=next]", "href").unwrap();
    let doc = admin_page(&app, &next).await;
    assert_eq!(count(&doc, "table.admin-content tbody tr"), 5);
}

#[tokio::test]
async fn deleting_asks_for_confirmation_then_removes_the_node_and_its_photo_file() {
    let app = spawn_app().await;
    let photo = NodeBuilder::photo("film-night")
        .title("Film night")
        .build(&app.db)
        .await;
    NodeBuilder::photo("shop-window").build(&app.db).await;
    let file = photo.photo_file().unwrap();
    let path = format!("/admin/content/{}/delete", photo.id.to_hex());
    let doc = admin_page(&app, &path).await;
    assert_eq!(heading(&doc), "Delete “Film night”?");
    assert!(texts(&doc, ".delete-consequences li")
        .iter()
        .any(|t| t.contains("photo file")));
    let token = csrf_token(&doc).unwrap();
    // A GET deletes nothing.
    assert!(store::by_id(&app.db, photo.id).await.unwrap().is_some());
    let response = app.post_admin_form(&path, &[("csrf_token", &token)]).await;
    assert_eq!(response.status(), StatusCode::SEE_OTHER);
    assert!(store::by_id(&app.db, photo.id).await.unwrap().is_none());
    assert_eq!(
        app.get(&format!("/media/{}", file.to_hex())).await.status(),
        StatusCode::NOT_FOUND
    );
    assert_eq!(
        app.get("/gallery/film-night").await.status(),
        StatusCode::NOT_FOUND
    );
    // Without the token: refused.
    let other = node_by_slug(&app, "gallery", "shop-window").await;
    let response = app
        .post_admin_form(&format!("/admin/content/{}/delete", other.id.to_hex()), &[])
        .await;
    assert_eq!(response.status(), StatusCode::FORBIDDEN);
    assert!(store::by_id(&app.db, other.id).await.unwrap().is_some());
}

// ------------------------------------------------------------------------------------------
// Photos

fn png(width: u32, height: u32, shade: u8) -> Vec<u8> {
    let img = image::RgbImage::from_pixel(width, height, image::Rgb([shade, 100, 200]));
    let mut out = std::io::Cursor::new(Vec::new());
    image::DynamicImage::ImageRgb8(img)
        .write_to(&mut out, image::ImageFormat::Png)
        .unwrap();
    out.into_inner()
}

const BOUNDARY: &str = "----bazaar-content-test-boundary";

fn multipart(filename: &str, bytes: &[u8]) -> Vec<u8> {
    png_upload_body(BOUNDARY, "photo", filename, bytes)
}

/// The photo-only upload route of the node (`/admin/content/{id}/photo`, for scripts: the
/// edit page's one form carries the picker), with the edit page's token and nonce.
async fn upload_action(app: &TestApp, id: ObjectId) -> String {
    let doc = admin_page(app, &format!("/admin/content/{}/edit", id.to_hex())).await;
    let form = EditForm::read(&doc, "form.edit-form");
    format!(
        "/admin/content/{}/photo?csrf_token={}&edit_version={}",
        id.to_hex(),
        form.get("csrf_token"),
        form.get("edit_version")
    )
}

async fn upload(app: &TestApp, action: &str, body: reqwest::Body) -> reqwest::Response {
    app.post_admin_multipart(action, BOUNDARY, body).await
}

async fn file_count(app: &TestApp) -> u64 {
    app.db
        .collection::<bson::Document>("assets.files")
        .count_documents(doc! {})
        .await
        .unwrap()
}

async fn file_exists(app: &TestApp, id: ObjectId) -> bool {
    app.db
        .collection::<bson::Document>("assets.files")
        .find_one(doc! { "_id": id })
        .await
        .unwrap()
        .is_some()
}

async fn new_photo_node(app: &TestApp, slug: &str) -> Node {
    store::create(
        &app.db,
        model::NodeInput {
            section: "gallery".into(),
            slug: crate::common::slug(slug),
            title: "Upload test".into(),
            author: "x".into(),
            detail: model::Detail::Photo(Default::default()),
        },
        Some(DateTime::now()),
        vec![],
    )
    .await
    .unwrap()
}

#[tokio::test]
async fn a_photo_upload_records_its_size_and_thumbnail_and_a_replacement_deletes_the_old_file() {
    let app = spawn_app().await;
    let node = new_photo_node(&app, "upload-test").await;
    let action = upload_action(&app, node.id).await;
    let response = upload(
        &app,
        &action,
        multipart("one.png", &png(640, 480, 10)).into(),
    )
    .await;
    assert_eq!(response.status(), StatusCode::SEE_OTHER);
    let stored = store::by_id(&app.db, node.id).await.unwrap().unwrap();
    let photo = stored.photo().unwrap();
    let first = photo.file_id.unwrap();
    assert_eq!((photo.width, photo.height), (640, 480));
    assert_eq!(photo.content_type, "image/png");
    assert_eq!(photo.filename, "one.png");
    assert_eq!(stored.metadata.locked, None, "the lock is released");
    let thumb = app.get(&format!("/media/{}/thumb", first.to_hex())).await;
    assert_eq!(thumb.status(), StatusCode::OK);
    // The page shows a sized copy (640 px is its largest of the widths it gets, 400 and 640).
    let page = html(&body(app.get("/gallery/upload-test").await).await);
    assert_eq!(
        attr(&page, ".post-photo img", "src"),
        Some(format!("/media/{}/w/640", first.to_hex()))
    );

    // Replace: the form now carries the new nonce.
    let action = upload_action(&app, node.id).await;
    let files_before = file_count(&app).await;
    let response = upload(
        &app,
        &action,
        multipart("two.png", &png(300, 200, 99)).into(),
    )
    .await;
    assert_eq!(response.status(), StatusCode::SEE_OTHER);
    let second = store::by_id(&app.db, node.id)
        .await
        .unwrap()
        .unwrap()
        .photo_file()
        .unwrap();
    assert_ne!(first, second);
    assert!(!file_exists(&app, first).await, "the old file is deleted");
    assert!(file_exists(&app, second).await);
    assert_eq!(
        file_count(&app).await,
        files_before - 1,
        "old file and its copies out, new ones in (one sized copy fewer: 300 px wide, not 640)"
    );
    // A stale form (the nonce before the replacement) replaces nothing and leaves no file.
    let response = upload(
        &app,
        &action,
        multipart("three.png", &png(10, 10, 1)).into(),
    )
    .await;
    assert_eq!(response.status(), StatusCode::SEE_OTHER);
    assert_eq!(
        store::by_id(&app.db, node.id)
            .await
            .unwrap()
            .unwrap()
            .photo_file(),
        Some(second)
    );
    assert_eq!(file_count(&app).await, files_before - 1);
}

#[tokio::test]
async fn oversized_and_non_image_uploads_are_refused_with_a_message_and_nothing_is_stored() {
    let app = spawn_app_with(&[("BAZAAR_MEDIA__MAX_UPLOAD_MB", "1")]).await;
    let node = new_photo_node(&app, "upload-test").await;
    let action = upload_action(&app, node.id).await;
    let files_before = file_count(&app).await;
    let mut big = png(8, 8, 5);
    big.resize(1024 * 1024 + 10, 0);
    for (name, bytes, message) in [
        ("big.png", big, "larger than 1 MiB"),
        (
            "fake.png",
            b"<svg xmlns=\"http://www.w3.org/2000/svg\"><script>alert(1)</script></svg>".to_vec(),
            "not a JPEG, PNG, GIF or WebP",
        ),
        (
            "broken.png",
            b"\x89PNG\r\n\x1a\nnot really a png at all".to_vec(),
            "not a JPEG, PNG, GIF or WebP",
        ),
    ] {
        let response = upload(&app, &action, multipart(name, &bytes).into()).await;
        assert_eq!(response.status(), StatusCode::SEE_OTHER, "{name}");
        let doc = admin_page(&app, &location(&response)).await;
        let flashes = texts(&doc, ".flash");
        assert!(
            flashes.iter().any(|f| f.contains(message)),
            "{name}: {flashes:?}"
        );
        assert_eq!(file_count(&app).await, files_before, "{name}");
        let stored = store::by_id(&app.db, node.id).await.unwrap().unwrap();
        assert_eq!(stored.photo_file(), None, "{name}");
        assert_eq!(stored.metadata.locked, None, "{name}: the lock is released");
    }
    // Uploading to a node that is not a photo: not found.
    let about = about_page(&app).await;
    let response = upload(
        &app,
        &action.replace(&node.id.to_hex(), &about.id.to_hex()),
        multipart("x.png", &png(4, 4, 1)).into(),
    )
    .await;
    assert_eq!(response.status(), StatusCode::NOT_FOUND);
}

#[tokio::test]
async fn of_two_concurrent_uploads_to_one_photo_node_exactly_one_proceeds() {
    let app = spawn_app().await;
    let node = new_photo_node(&app, "upload-test").await;
    let action = upload_action(&app, node.id).await;
    let body_bytes = multipart("slow.png", &png(64, 64, 7));
    // The first upload sends half its body, then waits until the second has been answered.
    let (head, tail) = body_bytes.split_at(body_bytes.len() / 2);
    let (mut sender, receiver) =
        futures::channel::mpsc::channel::<Result<Vec<u8>, std::io::Error>>(2);
    futures::SinkExt::send(&mut sender, Ok(head.to_vec()))
        .await
        .unwrap();
    let gated = receiver;
    let first = {
        let client = app.client.clone();
        let url = app.url(&action);
        tokio::spawn(async move {
            client
                .post(url)
                .basic_auth(ADMIN_USER, Some(ADMIN_PASSWORD))
                .header(
                    "content-type",
                    format!("multipart/form-data; boundary={BOUNDARY}"),
                )
                .body(reqwest::Body::wrap_stream(gated))
                .send()
                .await
                .expect("sent")
        })
    };
    // Wait until the first upload holds the lock.
    let mut held = false;
    for _ in 0..200 {
        if store::by_id(&app.db, node.id)
            .await
            .unwrap()
            .unwrap()
            .metadata
            .locked
            .is_some()
        {
            held = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(held, "the first upload took the lock");
    let second = upload(
        &app,
        &action,
        multipart("fast.png", &png(32, 32, 200)).into(),
    )
    .await;
    assert_eq!(second.status(), StatusCode::CONFLICT);
    let text = body(second).await;
    assert!(
        text.contains("another upload to this photo is in progress"),
        "{text}"
    );
    futures::SinkExt::send(&mut sender, Ok(tail.to_vec()))
        .await
        .unwrap();
    drop(sender);
    let first = first.await.unwrap();
    assert_eq!(first.status(), StatusCode::SEE_OTHER);
    let stored = store::by_id(&app.db, node.id).await.unwrap().unwrap();
    let photo = stored.photo().unwrap();
    assert_eq!(photo.filename, "slow.png");
    assert_eq!((photo.width, photo.height), (64, 64));
    assert_eq!(stored.metadata.locked, None);
}

#[tokio::test]
async fn a_lock_left_by_a_crashed_upload_is_taken_over_after_five_minutes() {
    let app = spawn_app().await;
    let node = new_photo_node(&app, "upload-test").await;
    let action = upload_action(&app, node.id).await;
    let set_lock = |age_secs: i64| {
        let db = app.db.clone();
        async move {
            store::collection(&db)
                .update_one(
                    doc! { "_id": node.id },
                    doc! { "$set": { "metadata.locked": DateTime::from_millis(DateTime::now().timestamp_millis() - age_secs * 1000) } },
                )
                .await
                .unwrap();
        }
    };
    set_lock(60).await;
    let response = upload(&app, &action, multipart("a.png", &png(8, 8, 1)).into()).await;
    assert_eq!(response.status(), StatusCode::CONFLICT);
    assert_eq!(
        store::by_id(&app.db, node.id)
            .await
            .unwrap()
            .unwrap()
            .photo_file(),
        None
    );
    set_lock(6 * 60).await;
    let response = upload(&app, &action, multipart("a.png", &png(8, 8, 1)).into()).await;
    assert_eq!(response.status(), StatusCode::SEE_OTHER);
    let stored = store::by_id(&app.db, node.id).await.unwrap().unwrap();
    assert!(stored.photo_file().is_some());
    assert_eq!(stored.metadata.locked, None);
}

#[tokio::test]
async fn while_photos_are_replaced_the_node_always_points_at_a_stored_file() {
    let app = spawn_app().await;
    let node = new_photo_node(&app, "upload-test").await;
    let action = upload_action(&app, node.id).await;
    upload(&app, &action, multipart("0.png", &png(50, 50, 0)).into()).await;
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let watcher = {
        let db = app.db.clone();
        let stop = stop.clone();
        tokio::spawn(async move {
            let mut checks = 0u32;
            while !stop.load(std::sync::atomic::Ordering::SeqCst) {
                let seen = store::by_id(&db, node.id).await.unwrap().unwrap();
                if !photos::file_resolves(&db, &seen).await.unwrap() {
                    // The node may have moved to the next file (and the one read above been
                    // deleted) between the two reads: only a node still pointing at the
                    // missing file breaks the rule (a file id is never used again).
                    let now = store::by_id(&db, node.id).await.unwrap().unwrap();
                    assert_ne!(
                        now.photo_file(),
                        seen.photo_file(),
                        "the node points at a missing file"
                    );
                }
                checks += 1;
                tokio::task::yield_now().await;
            }
            checks
        })
    };
    for i in 1..=5u8 {
        let action = upload_action(&app, node.id).await;
        let response = upload(
            &app,
            &action,
            multipart(&format!("{i}.png"), &png(50, 50, i * 40)).into(),
        )
        .await;
        assert_eq!(response.status(), StatusCode::SEE_OTHER);
    }
    stop.store(true, std::sync::atomic::Ordering::SeqCst);
    let checks = watcher.await.expect("the watcher saw no missing file");
    assert!(checks > 5, "{checks}");
    assert_eq!(
        store::by_id(&app.db, node.id)
            .await
            .unwrap()
            .unwrap()
            .photo()
            .unwrap()
            .filename,
        "5.png"
    );
}

#[tokio::test]
async fn a_crash_between_the_swap_and_the_delete_leaves_only_an_orphan_that_clean_up_removes() {
    let app = spawn_app().await;
    // Files in use that the clean-up must keep: a gallery photo's and a product cover.
    NodeBuilder::photo("shop-window").build(&app.db).await;
    ProductBuilder::new("kob")
        .slug("kind-of-blue")
        .cover()
        .build(&app.db)
        .await;
    let node = new_photo_node(&app, "upload-test").await;
    // Steps of a replacement, run by hand: upload the first photo...
    let first = bazaar::media::store_upload(
        &app.db,
        "first.png",
        futures::stream::iter([Ok::<_, std::io::Error>(actix_web::web::Bytes::from(png(
            20, 20, 1,
        )))]),
        1 << 20,
    )
    .await
    .unwrap();
    photos::swap_file(&app.db, node.id, node.metadata.nonce, &first, "first.png")
        .await
        .unwrap();
    let node = store::by_id(&app.db, node.id).await.unwrap().unwrap();
    // ...then a replacement that uploads and swaps, and "crashes" before deleting the old file.
    let second = bazaar::media::store_upload(
        &app.db,
        "second.png",
        futures::stream::iter([Ok::<_, std::io::Error>(actix_web::web::Bytes::from(png(
            30, 30, 2,
        )))]),
        1 << 20,
    )
    .await
    .unwrap();
    // Crash point 1: uploaded, not swapped: the node still has its stored first file.
    assert!(photos::file_resolves(
        &app.db,
        &store::by_id(&app.db, node.id).await.unwrap().unwrap()
    )
    .await
    .unwrap());
    let old = photos::swap_file(&app.db, node.id, node.metadata.nonce, &second, "second.png")
        .await
        .unwrap();
    assert_eq!(old, Some(first.id));
    // Crash point 2: swapped, old not deleted: the node points at the stored second file.
    let after = store::by_id(&app.db, node.id).await.unwrap().unwrap();
    assert_eq!(after.photo_file(), Some(second.id));
    assert!(photos::file_resolves(&app.db, &after).await.unwrap());
    assert!(
        file_exists(&app, first.id).await,
        "the old file is an orphan, not lost"
    );

    // Recent files are spared (an upload may be between its steps); old orphans go.
    assert_eq!(
        photos::clean_orphans(&app.db, photos::ORPHAN_GRACE)
            .await
            .unwrap(),
        0
    );
    let removed = photos::clean_orphans(&app.db, Duration::ZERO)
        .await
        .unwrap();
    assert_eq!(
        removed, 4,
        "the orphaned file, its thumbnail, its social card and its one sized copy (20 px)"
    );
    assert!(!file_exists(&app, first.id).await);
    assert!(!file_exists(&app, first.thumbnail).await);
    // Everything still in use stays: this node's photo, other photos, product covers.
    assert!(file_exists(&app, second.id).await && file_exists(&app, second.thumbnail).await);
    let blog_photo = node_by_slug(&app, "gallery", "shop-window")
        .await
        .photo_file()
        .unwrap();
    assert!(file_exists(&app, blog_photo).await);
    let cover = bazaar::catalog::products::by_slug(&app.db, &slug("kind-of-blue"))
        .await
        .unwrap()
        .unwrap()
        .photos[0];
    assert!(file_exists(&app, cover).await);
    let page = html(&body(app.get("/products/kind-of-blue").await).await);
    assert!(attr(&page, "img.product-photo", "src").is_some());
    // The admin's review page runs the same search (with the grace period): nothing to list.
    let doc = admin_page(&app, "/admin/content/orphans").await;
    assert_eq!(count(&doc, ".orphans-none"), 1);
    assert_eq!(count(&doc, "tr.orphan"), 0);
    // A confirmation naming no file deletes nothing.
    let doc = admin_page(&app, "/admin/products/new?type=album").await;
    let token = csrf_token(&doc).unwrap();
    let response = app
        .post_admin_form("/admin/content/orphans", &[("csrf_token", &token)])
        .await;
    assert_eq!(response.status(), StatusCode::SEE_OTHER);
    let doc = admin_page(&app, &location(&response)).await;
    assert!(texts(&doc, ".flash")
        .iter()
        .any(|f| f.contains("Removed 0 orphaned files")));
}

#[tokio::test]
async fn a_photo_over_the_configured_pixel_limit_is_refused_before_decoding_and_nothing_is_stored()
{
    let app = spawn_app_with(&[("BAZAAR_MEDIA__MAX_IMAGE_MEGAPIXELS", "1")]).await;
    let node = new_photo_node(&app, "pixel-limit").await;
    let action = upload_action(&app, node.id).await;
    let files_before = file_count(&app).await;

    let response = upload(
        &app,
        &action,
        multipart("wide.png", &png(1200, 1000, 3)).into(),
    )
    .await;
    assert_eq!(response.status(), StatusCode::SEE_OTHER);
    let flashes = texts(&admin_page(&app, &location(&response)).await, ".flash");
    assert!(
        flashes.iter().any(|f| f.contains("at most 1 megapixels")),
        "{flashes:?}"
    );
    assert_eq!(file_count(&app).await, files_before);
    let stored = store::by_id(&app.db, node.id).await.unwrap().unwrap();
    assert_eq!(stored.photo_file(), None);

    // Under the limit the same node takes the photo.
    let response = upload(
        &app,
        &action,
        multipart("small.png", &png(900, 1000, 3)).into(),
    )
    .await;
    assert_eq!(response.status(), StatusCode::SEE_OTHER);
    let stored = store::by_id(&app.db, node.id).await.unwrap().unwrap();
    assert!(stored.photo_file().is_some());
}

#[tokio::test]
async fn an_entry_at_the_editors_length_limit_in_four_byte_characters_is_saved() {
    let app = spawn_app().await;
    let about = about_page(&app).await;
    let form = open_editor(&app, about.id).await;
    // 50 000 characters of 4 bytes each: 600 000 bytes once URL-encoded.
    let text = "🎷".repeat(50_000);
    let response = save_page(&app, &form, "About", &text).await;
    assert_eq!(response.status(), StatusCode::SEE_OTHER);
    assert_eq!(stored_text(&app, about.id).await, text);

    // One character more is a form error next to the field, not "the form is too large".
    let form = open_editor(&app, about.id).await;
    let response = save_page(&app, &form, "About", &format!("{text}🎺")).await;
    assert_eq!(response.status(), StatusCode::UNPROCESSABLE_ENTITY);
    let doc = html(&body(response).await);
    assert!(
        texts(&doc, ".field-error")
            .iter()
            .any(|e| e.contains("at most 50000 characters")),
        "{:?}",
        texts(&doc, ".field-error")
    );
    assert_eq!(stored_text(&app, about.id).await, text, "nothing changed");
}

#[tokio::test]
async fn a_photos_alt_text_is_its_own_and_falls_back_to_the_caption() {
    let app = spawn_app().await;
    let photo = NodeBuilder::photo("harbour")
        .title("Harbour")
        .caption("The harbour at six")
        .build(&app.db)
        .await;
    let doc = page(&app, "/gallery/harbour").await;
    assert_eq!(
        attr(&doc, "figure img", "alt").as_deref(),
        Some("The harbour at six")
    );
    let mut form = open_editor(&app, photo.id).await;
    form.set("alt", "Fishing boats moored at low tide");
    assert_eq!(
        form.post(&app, "save").await.status(),
        StatusCode::SEE_OTHER
    );
    let doc = page(&app, "/gallery/harbour").await;
    assert_eq!(
        attr(&doc, "figure img", "alt").as_deref(),
        Some("Fishing boats moored at low tide")
    );
    assert_eq!(texts(&doc, "figure figcaption"), ["The harbour at six"]);
}

#[tokio::test]
async fn preview_renders_the_typed_text_saves_nothing_and_the_form_it_returns_still_saves() {
    let app = spawn_app().await;
    let post = NodeBuilder::post("draft-news")
        .text("Old text.")
        .draft()
        .build(&app.db)
        .await;
    let mut form = open_editor(&app, post.id).await;
    let typed = "# Big news\n\nA *new* paragraph.\n\n<script>alert(1)</script>";
    form.set("text", typed).set("tags", "news, jazz");
    let response = form.post(&app, "preview").await;
    assert_eq!(response.status(), StatusCode::OK);
    let doc = html(&body(response).await);
    assert_eq!(texts(&doc, ".markdown-preview h1"), ["Big news"]);
    assert_eq!(texts(&doc, ".markdown-preview em"), ["new"]);
    assert!(
        texts(&doc, ".markdown-preview")
            .concat()
            .contains("not saved"),
        "the page says nothing is saved"
    );
    assert!(doc
        .select(&scraper::Selector::parse(".markdown-preview script").expect("selector"))
        .next()
        .is_none());
    assert_eq!(
        stored_text(&app, post.id).await,
        "Old text.",
        "nothing saved"
    );

    // The returned form carries everything typed, under the nonce and base it was loaded with.
    let returned = EditForm::read(&doc, "form.edit-form");
    assert_eq!(returned.get("text"), typed);
    assert_eq!(returned.get("tags"), "news, jazz");
    assert_eq!(returned.get("edit_version"), form.get("edit_version"));
    assert_eq!(returned.get("base_text"), "Old text.");
    assert!(attr(&doc, "form.edit-form", "data-unsaved-changes").is_some());

    let saved = returned.post(&app, "save").await;
    assert_eq!(saved.status(), StatusCode::SEE_OTHER);
    assert_eq!(stored_text(&app, post.id).await, typed);
    let node = store::by_id(&app.db, post.id)
        .await
        .expect("read")
        .expect("node");
    assert_eq!(node.metadata.tags, ["news", "jazz"]);
}

#[tokio::test]
async fn a_photo_is_chosen_in_the_one_edit_form_and_saved_with_the_fields_in_one_press() {
    let app = spawn_app().await;
    let node = new_photo_node(&app, "harbour-at-dawn").await;
    // Publish with a photo and a caption in one press: nothing typed is dropped.
    let response = save_photo_form(
        &app,
        node.id,
        &[("caption", "The harbour at dawn"), ("tags", "sea, morning")],
        "dawn.png",
        &png(400, 300, 40),
        "publish",
    )
    .await;
    assert_eq!(response.status(), StatusCode::SEE_OTHER);
    let saved = store::by_id(&app.db, node.id)
        .await
        .expect("read")
        .expect("node");
    let first = saved.photo_file().expect("the photo was saved");
    assert!(saved.is_published(app.db.now()));
    assert_eq!(saved.metadata.tags, ["sea", "morning"]);
    assert_eq!(
        saved.photo().expect("a photo").caption,
        "The harbour at dawn"
    );
    assert_eq!(saved.photo().expect("a photo").width, 400);
    assert_eq!(saved.metadata.media, Some(vec![first]));

    // Replacing it deletes the old file once the save landed.
    let response =
        save_photo_form(&app, node.id, &[], "noon.png", &png(200, 100, 90), "save").await;
    assert_eq!(response.status(), StatusCode::SEE_OTHER);
    let saved = store::by_id(&app.db, node.id)
        .await
        .expect("read")
        .expect("node");
    let second = saved.photo_file().expect("a photo");
    assert_ne!(second, first);
    assert!(!file_exists(&app, first).await, "the replaced photo went");

    // A file that is not an image comes back as a form error with the typed caption; nothing
    // changes and nothing is left stored.
    let files = file_count(&app).await;
    let doc = admin_page(&app, &format!("/admin/content/{}/edit", node.id.to_hex())).await;
    let action = attr(&doc, "form.edit-form", "action").expect("the form");
    let mut fields = form_fields(&doc, "form.edit-form");
    fields.retain(|(k, _)| k != "caption");
    fields.push(("caption".into(), "Typed while refused".into()));
    fields.push(("action".into(), "save".into()));
    let boundary = "----bazaar-refused-photo";
    let mut payload = Vec::new();
    for (name, value) in &fields {
        payload.extend_from_slice(
            format!("--{boundary}\r\nContent-Disposition: form-data; name=\"{name}\"\r\n\r\n{value}\r\n").as_bytes(),
        );
    }
    payload.extend_from_slice(
        format!("--{boundary}\r\nContent-Disposition: form-data; name=\"photo\"; filename=\"notes.txt\"\r\nContent-Type: text/plain\r\n\r\nnot a picture\r\n--{boundary}--\r\n").as_bytes(),
    );
    let refused = app.post_admin_multipart(&action, boundary, payload).await;
    assert_eq!(refused.status(), StatusCode::UNPROCESSABLE_ENTITY);
    let doc = html(&body(refused).await);
    assert!(texts(&doc, "#error-photo")[0].contains("not accepted"));
    assert_eq!(
        attr(&doc, "#field-caption", "value").as_deref(),
        Some("Typed while refused")
    );
    let unchanged = store::by_id(&app.db, node.id)
        .await
        .expect("read")
        .expect("node");
    assert_eq!(unchanged.photo_file(), Some(second));
    assert_eq!(file_count(&app).await, files, "nothing left stored");
}

#[tokio::test]
async fn a_photo_chosen_in_a_form_opened_before_another_editor_replaced_it_is_not_saved_over_theirs(
) {
    let app = spawn_app().await;
    let node = new_photo_node(&app, "two-editors").await;
    // Editor A opens the form; editor B replaces the photo meanwhile.
    let doc = admin_page(&app, &format!("/admin/content/{}/edit", node.id.to_hex())).await;
    let a_action = attr(&doc, "form.edit-form", "action").expect("the form");
    let mut a_fields = form_fields(&doc, "form.edit-form");
    let b = save_photo_form(&app, node.id, &[], "b.png", &png(300, 200, 10), "save").await;
    assert_eq!(b.status(), StatusCode::SEE_OTHER);
    let theirs = store::by_id(&app.db, node.id)
        .await
        .expect("read")
        .expect("node")
        .photo_file();
    let files = file_count(&app).await;

    a_fields.push(("action".into(), "save".into()));
    let boundary = "----bazaar-stale-photo";
    let payload = multipart_form_body(boundary, &a_fields, "photo", "a.png", &png(300, 200, 200));
    let response = app.post_admin_multipart(&a_action, boundary, payload).await;
    assert_eq!(response.status(), StatusCode::UNPROCESSABLE_ENTITY);
    let doc = html(&body(response).await);
    assert!(
        texts(&doc, "#error-photo")[0].contains("replaced the photo"),
        "{:?}",
        texts(&doc, "#error-photo")
    );
    let after = store::by_id(&app.db, node.id)
        .await
        .expect("read")
        .expect("node");
    assert_eq!(after.photo_file(), theirs, "their photo stays");
    assert_eq!(file_count(&app).await, files, "A's upload was deleted");
}
