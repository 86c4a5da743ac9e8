//! Admin → Media, the media library: originals listed with their size, dimensions and where
//! each is used; several files uploaded at once; alt text and caption; deleting refused while a
//! file is used; the editor's "Insert a picture" list; the `metadata.media` every node keeps.

use std::io::Cursor;

use crate::common::builders::{NodeBuilder, ProductBuilder};
use crate::common::*;
use bazaar::content::model;
use bazaar::content::store;
use bazaar::media::StoredImage;
use bson::oid::ObjectId;
use bson::{doc, Document};
use reqwest::StatusCode;

fn png(width: u32, height: u32) -> Vec<u8> {
    let img = image::RgbImage::from_fn(width, height, |x, y| image::Rgb([x as u8, y as u8, 90]));
    let mut out = Cursor::new(Vec::new());
    image::DynamicImage::ImageRgb8(img)
        .write_to(&mut out, image::ImageFormat::Png)
        .expect("encodes");
    out.into_inner()
}

/// Store `bytes` as an uploaded image, as the upload pages do.
async fn store(app: &TestApp, name: &str, bytes: Vec<u8>) -> StoredImage {
    let body = futures::stream::iter([Ok::<_, std::io::Error>(actix_web::web::Bytes::from(bytes))]);
    bazaar::media::store_upload(&app.db, name, body, 50 * 1024 * 1024)
        .await
        .expect("stored")
}

async fn file_exists(app: &TestApp, id: ObjectId) -> bool {
    app.db
        .collection::<Document>("assets.files")
        .find_one(doc! { "_id": id })
        .await
        .expect("read")
        .is_some()
}

/// The library's items: `(file id, text of the item)`.
async fn listed(app: &TestApp, path: &str) -> Vec<(String, String)> {
    let doc = admin_page(app, path).await;
    let sel = scraper::Selector::parse("li.media-item").expect("selector");
    doc.select(&sel)
        .map(|item| {
            let id = item
                .value()
                .attr("data-file")
                .unwrap_or_default()
                .to_string();
            let text = item.text().collect::<Vec<_>>().join(" ");
            (id, text.split_whitespace().collect::<Vec<_>>().join(" "))
        })
        .collect()
}

/// Make node `id` look stored before `metadata.media` existed (not yet back-filled).
async fn forget_media(app: &TestApp, id: ObjectId) {
    app.db
        .collection::<Document>(store::COLLECTION)
        .update_one(
            doc! { "_id": id },
            doc! { "$unset": { "metadata.media": "" } },
        )
        .await
        .expect("unset");
}

async fn csrf_of(app: &TestApp, path: &str) -> String {
    csrf_token(&admin_page(app, path).await).expect("a form with a token")
}

#[tokio::test]
async fn the_library_lists_originals_newest_first_with_dimensions_size_and_where_each_is_used() {
    let app = spawn_app().await;
    let on_product = store(&app, "cover.png", png(300, 200)).await;
    let in_text = store(&app, "in-text.png", png(64, 48)).await;
    let unused = store(&app, "unused.png", png(30, 20)).await;
    let product = ProductBuilder::new("kob")
        .title("Kind of Blue")
        .build(&app.db)
        .await;
    bazaar::catalog::products::add_photo(&app.db, product.id, on_product.id)
        .await
        .expect("attached");
    NodeBuilder::post("with-a-picture")
        .title("With a picture")
        .text(&format!("Look: ![shop](/media/{})", in_text.id.to_hex()))
        .build(&app.db)
        .await;

    let items = listed(&app, "/admin/media").await;
    let ids: Vec<&str> = items.iter().map(|(id, _)| id.as_str()).collect();
    // Originals only (no thumbnails, display or sized copies), newest first.
    assert_eq!(
        ids,
        [
            unused.id.to_hex(),
            in_text.id.to_hex(),
            on_product.id.to_hex()
        ]
    );
    let text_of = |id: ObjectId| {
        items
            .iter()
            .find(|(i, _)| *i == id.to_hex())
            .map(|(_, t)| t.clone())
            .unwrap_or_default()
    };
    assert!(text_of(on_product.id).contains("300×200 px"), "{items:?}");
    assert!(text_of(on_product.id).contains("Product “Kind of Blue”"));
    assert!(text_of(in_text.id).contains("Content “With a picture”"));
    assert!(text_of(unused.id).contains("Not used"));
    assert!(text_of(unused.id).contains("No alt text"));
}

#[tokio::test]
async fn the_library_pages_by_upload_order_and_a_bad_page_token_starts_from_the_newest() {
    let app = spawn_app().await;
    let mut stored = Vec::new();
    for i in 0..(bazaar::content::library::PAGE_SIZE + 2) {
        stored.push(store(&app, &format!("f{i}.png"), png(8, 8)).await.id);
    }
    let first = listed(&app, "/admin/media").await;
    assert_eq!(first.len() as i64, bazaar::content::library::PAGE_SIZE);
    let doc = admin_page(&app, "/admin/media").await;
    let older = attr(&doc, "a[rel=next]", "href").expect("a link to older files");
    let second = listed(&app, &older).await;
    let mut all: Vec<String> = first.into_iter().chain(second).map(|(id, _)| id).collect();
    all.reverse();
    let expected: Vec<String> = stored.iter().map(|id| id.to_hex()).collect();
    assert_eq!(all, expected, "every file once, in upload order");
    assert_eq!(
        listed(&app, "/admin/media?before=not-an-id").await.len() as i64,
        bazaar::content::library::PAGE_SIZE
    );
}

/// A multipart body with `files` parts: `(filename, content type, bytes)`.
fn files_body(boundary: &str, files: &[(&str, &str, Vec<u8>)]) -> Vec<u8> {
    let mut body = Vec::new();
    for (name, kind, bytes) in files {
        body.extend_from_slice(
            format!(
                "--{boundary}\r\nContent-Disposition: form-data; name=\"files\"; filename=\"{name}\"\r\nContent-Type: {kind}\r\n\r\n"
            )
            .as_bytes(),
        );
        body.extend_from_slice(bytes);
        body.extend_from_slice(b"\r\n");
    }
    body.extend_from_slice(format!("--{boundary}--\r\n").as_bytes());
    body
}

#[tokio::test]
async fn several_images_upload_at_once_and_a_refused_file_does_not_stop_the_others() {
    let app = spawn_app().await;
    let doc = admin_page(&app, "/admin/media").await;
    let action = attr(&doc, ".media-upload form", "action").expect("the upload form");
    let boundary = "----bazaar-library-boundary";
    let body = files_body(
        boundary,
        &[
            ("one.png", "image/png", png(40, 30)),
            ("notes.txt", "text/plain", b"not a picture at all".to_vec()),
            ("two.png", "image/png", png(50, 20)),
        ],
    );
    let response = app.post_admin_multipart(&action, boundary, body).await;
    assert_eq!(response.status(), StatusCode::SEE_OTHER);
    assert_eq!(location(&response), "/admin/media");
    let doc = admin_page(&app, "/admin/media").await;
    let flashes = texts(&doc, ".flash-success, .flash-error").join(" | ");
    assert!(flashes.contains("Uploaded 2 files"), "{flashes}");
    assert!(
        flashes.contains("notes.txt: the file is not a JPEG, PNG, GIF or WebP image"),
        "{flashes}"
    );
    let names: Vec<String> = texts(&doc, "li.media-item .media-name");
    assert_eq!(names, ["two.png", "one.png"]);

    // Without the token nothing is stored.
    let body = files_body(boundary, &[("three.png", "image/png", png(10, 10))]);
    let refused = app
        .post_admin_multipart("/admin/media", boundary, body)
        .await;
    assert_eq!(refused.status(), StatusCode::FORBIDDEN);
    assert_eq!(listed(&app, "/admin/media").await.len(), 2);
}

#[tokio::test]
async fn alt_text_and_caption_are_saved_and_a_refused_one_comes_back_as_typed() {
    let app = spawn_app().await;
    let file = store(&app, "shop.png", png(40, 30)).await;
    let path = format!("/admin/media/{}/edit", file.id.to_hex());
    let token = csrf_of(&app, &path).await;
    let saved = app
        .post_admin_form(
            &path,
            &[
                ("csrf_token", &token),
                ("alt", "  The shop's front window at dusk "),
                ("caption", "Our window in March"),
            ],
        )
        .await;
    assert_eq!(saved.status(), StatusCode::SEE_OTHER);
    let doc = admin_page(&app, &path).await;
    assert_eq!(
        texts(&doc, "#field-alt"),
        ["The shop's front window at dusk"]
    );
    assert_eq!(texts(&doc, "#field-caption"), ["Our window in March"]);
    assert_eq!(
        attr(&doc, "#media-markdown", "value").as_deref(),
        Some(
            format!(
                "![The shop's front window at dusk](/media/{})",
                file.id.to_hex()
            )
            .as_str()
        )
    );

    let long = "x".repeat(bazaar::content::library::MAX_TEXT_CHARS + 1);
    let refused = app
        .post_admin_form(
            &path,
            &[("csrf_token", &token), ("alt", &long), ("caption", "kept")],
        )
        .await;
    assert_eq!(refused.status(), StatusCode::UNPROCESSABLE_ENTITY);
    let doc = html(&body(refused).await);
    assert!(texts(&doc, ".form-error")[0].contains("longer than 500 characters"));
    assert_eq!(
        texts(&doc, "#field-alt"),
        [long],
        "the typed text comes back"
    );
    assert_eq!(texts(&doc, "#field-caption"), ["kept"]);
    let entry = bazaar::content::library::file(&app.db, file.id)
        .await
        .expect("read")
        .expect("the file");
    assert_eq!(
        entry.alt, "The shop's front window at dusk",
        "nothing half-saved"
    );
}

#[tokio::test]
async fn deleting_a_used_file_is_refused_with_its_places_and_an_unused_one_goes_with_its_copies() {
    let app = spawn_app().await;
    let used = store(&app, "used.png", png(40, 30)).await;
    let unused = store(&app, "unused.png", png(40, 30)).await;
    NodeBuilder::page("about")
        .title("About us")
        .text(&format!("![us](/media/{}/w/800)", used.id.to_hex()))
        .draft()
        .build(&app.db)
        .await;
    let delete = |id: ObjectId, confirm: &'static str| {
        let app = &app;
        async move {
            let path = format!("/admin/media/{}/edit", id.to_hex());
            let token = csrf_of(app, &path).await;
            app.post_admin_form(
                &format!("/admin/media/{}/delete", id.to_hex()),
                &[("csrf_token", &token), ("confirm", confirm)],
            )
            .await
        }
    };

    let refused = delete(used.id, "1").await;
    assert_eq!(refused.status(), StatusCode::CONFLICT);
    let doc = html(&body(refused).await);
    assert!(texts(&doc, ".form-error")[0].contains("used by 1 place"));
    assert_eq!(texts(&doc, ".media-use-list li"), ["Content “About us”"]);
    assert!(file_exists(&app, used.id).await && file_exists(&app, used.thumbnail).await);

    let unconfirmed = delete(unused.id, "").await;
    assert_eq!(unconfirmed.status(), StatusCode::UNPROCESSABLE_ENTITY);
    assert!(file_exists(&app, unused.id).await);

    let deleted = delete(unused.id, "1").await;
    assert_eq!(deleted.status(), StatusCode::SEE_OTHER);
    assert!(!file_exists(&app, unused.id).await, "the original went");
    assert!(
        !file_exists(&app, unused.thumbnail).await,
        "with its thumbnail"
    );
    assert_eq!(
        app.db
            .collection::<Document>("assets.files")
            .count_documents(doc! { "metadata.thumbnail_of": unused.id })
            .await
            .expect("count"),
        0
    );
}

#[tokio::test]
async fn no_file_is_deleted_while_older_content_waits_for_its_list_of_files() {
    let app = spawn_app().await;
    let shown = store(&app, "shown.png", png(40, 30)).await;
    let node = NodeBuilder::page("old")
        .title("Old page")
        .text(&format!("![old](/media/{})", shown.id.to_hex()))
        .build(&app.db)
        .await;
    // Stored before `metadata.media` existed, and not back-filled yet.
    forget_media(&app, node.id).await;
    let delete = || {
        let app = &app;
        async move {
            let path = format!("/admin/media/{}/edit", shown.id.to_hex());
            let token = csrf_of(app, &path).await;
            app.post_admin_form(
                &format!("/admin/media/{}/delete", shown.id.to_hex()),
                &[("csrf_token", &token), ("confirm", "1")],
            )
            .await
        }
    };
    let refused = delete().await;
    assert_eq!(refused.status(), StatusCode::SERVICE_UNAVAILABLE);
    let doc = html(&body(refused).await);
    assert!(texts(&doc, ".form-error")[0].contains("Try again in a minute"));
    assert!(file_exists(&app, shown.id).await);
    // Once the back-fill has run, the page is found showing it.
    store::backfill_summaries(&app.db)
        .await
        .expect("back-filled");
    assert_eq!(delete().await.status(), StatusCode::CONFLICT);
    assert!(file_exists(&app, shown.id).await);
}

#[tokio::test]
async fn a_nodes_media_follows_its_text_and_old_nodes_get_theirs_at_start_up() {
    let app = spawn_app().await;
    let a = store(&app, "a.png", png(20, 20)).await.id;
    let b = store(&app, "b.png", png(20, 20)).await.id;
    let node = NodeBuilder::post("pictures")
        .text(&format!(
            "![a](/media/{a}) and ![a again](/media/{a}/thumb)"
        ))
        .build(&app.db)
        .await;
    let media_of = |id: ObjectId| {
        let db = app.db.clone();
        async move {
            store::by_id(&db, id)
                .await
                .expect("read")
                .expect("node")
                .metadata
                .media
        }
    };
    assert_eq!(media_of(node.id).await, Some(vec![a]));

    let input = model::NodeInput {
        section: "blog".into(),
        slug: crate::common::slug("pictures"),
        title: "pictures".into(),
        author: "x".into(),
        detail: model::Detail::Entry(model::TextDetail {
            text: format!("Now only ![b](/media/{b})"),
            ..Default::default()
        }),
    };
    assert!(
        store::save_with_nonce(&app.db, &node, node.metadata.nonce, &input)
            .await
            .expect("saved")
    );
    assert_eq!(media_of(node.id).await, Some(vec![b]));

    // A node stored before `metadata.media` existed gets it from start-up's back-fill.
    forget_media(&app, node.id).await;
    assert_eq!(media_of(node.id).await, None);
    store::backfill_summaries(&app.db)
        .await
        .expect("back-filled");
    assert_eq!(media_of(node.id).await, Some(vec![b]));

    let photo = NodeBuilder::photo("a-photo").build(&app.db).await;
    assert_eq!(
        media_of(photo.id).await,
        photo.photo_file().map(|f| vec![f])
    );

    assert_uses_index(
        &app.db,
        "where a file is used",
        store::COLLECTION,
        doc! { "metadata.media": { "$in": [a, b] } },
        doc! {},
    )
    .await;
}

#[tokio::test]
async fn the_editor_offers_the_librarys_pictures_with_their_markdown() {
    let app = spawn_app().await;
    let file = store(&app, "window.png", png(40, 30)).await;
    bazaar::content::library::describe(
        &app.db,
        file.id,
        &bazaar::content::library::Description::parse("Our [window]", "").expect("valid"),
    )
    .await
    .expect("described");
    let post = NodeBuilder::post("news").text("Hello").build(&app.db).await;
    let doc = admin_page(&app, &format!("/admin/content/{}/edit", post.id.to_hex())).await;
    assert_eq!(
        attr(&doc, ".media-picker li input", "value"),
        Some(format!("![Our  window](/media/{})", file.id.to_hex())),
        "brackets in the alt text cannot end the Markdown early"
    );
    assert!(
        doc.select(&scraper::Selector::parse("button.media-insert[hidden]").expect("selector"))
            .next()
            .is_some(),
        "the Insert button waits for the script; without it the Markdown is there to copy"
    );
}

#[tokio::test]
async fn the_library_routes_answer_bad_ids_with_not_found() {
    let app = spawn_app().await;
    let any = store(&app, "any.png", png(20, 20)).await;
    let token = csrf_of(&app, &format!("/admin/media/{}/edit", any.id.to_hex())).await;
    for path in ["/admin/media/zzz/edit", "/admin/media/0123/edit"] {
        assert_eq!(
            app.get_admin(path).await.status(),
            StatusCode::NOT_FOUND,
            "{path}"
        );
    }
    let missing = ObjectId::new().to_hex();
    for path in [
        format!("/admin/media/{missing}/edit"),
        format!("/admin/media/{missing}/delete"),
        "/admin/media/zzz/delete".to_string(),
    ] {
        let response = app
            .post_admin_form(&path, &[("csrf_token", &token), ("confirm", "1")])
            .await;
        assert_eq!(response.status(), StatusCode::NOT_FOUND, "{path}");
    }
    // A copy is not a library file of its own.
    let file = store(&app, "a.png", png(20, 20)).await;
    let thumb = format!("/admin/media/{}/edit", file.thumbnail.to_hex());
    assert_eq!(app.get_admin(&thumb).await.status(), StatusCode::NOT_FOUND);
}

/// The hostile-input pass (`hostile_input`'s corpus) over the library's routes and forms: no
/// 5xx, nothing reflected unescaped, and a stored alt text is shown escaped.
#[tokio::test]
async fn the_library_routes_and_forms_survive_the_hostile_corpus() {
    use crate::hostile_input::{encode, CORPUS, MARK, UNESCAPED};
    let app = spawn_app().await;
    let file = store(&app, "a.png", png(20, 20)).await;
    let edit = format!("/admin/media/{}/edit", file.id.to_hex());
    let token = csrf_of(&app, &edit).await;
    for value in CORPUS {
        let v = encode(&format!("{value}{MARK}"));
        for path in [
            format!("/admin/media?before={v}"),
            format!("/admin/media/{v}/edit"),
        ] {
            let response = app.get_admin(&path).await;
            assert!(!response.status().is_server_error(), "GET {path}");
            assert!(
                !body(response).await.contains(UNESCAPED),
                "GET {path} reflected"
            );
        }
        let marked = format!("{value}{MARK}");
        for (path, fields) in [
            (
                edit.clone(),
                vec![("alt", marked.as_str()), ("caption", marked.as_str())],
            ),
            (
                format!("/admin/media/{v}/delete"),
                vec![("confirm", marked.as_str())],
            ),
            (
                format!("/admin/media/{}/delete", file.id.to_hex()),
                vec![("confirm", marked.as_str())],
            ),
        ] {
            let mut fields = fields.clone();
            fields.push(("csrf_token", token.as_str()));
            let response = app.post_admin_form(&path, &fields).await;
            let status = response.status();
            assert!(!status.is_server_error(), "POST {path} answered {status}");
            assert!(
                !body(response).await.contains(UNESCAPED),
                "POST {path} reflected"
            );
        }
    }
    assert!(
        file_exists(&app, file.id).await,
        "no hostile confirm deleted the file"
    );
    let page = body(app.get_admin(&edit).await).await;
    assert!(!page.contains(UNESCAPED));
    let library = body(app.get_admin("/admin/media").await).await;
    assert!(!library.contains(UNESCAPED));
}
