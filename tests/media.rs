//! Photos: uploads sniffed and streamed into GridFS, thumbnails, and `/media/{file_id}` with
//! its validators and caching; generated covers.

use std::io::Cursor;

use crate::common::builders::ProductBuilder;
use crate::common::*;
use bazaar::catalog::products::Product;
use reqwest::StatusCode;

fn header(response: &reqwest::Response, name: &str) -> String {
    response
        .headers()
        .get(name)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_string()
}

/// A gradient image of the given size in the given format.
fn encoded(width: u32, height: u32, format: image::ImageFormat) -> Vec<u8> {
    let img = image::RgbaImage::from_fn(width, height, |x, y| {
        image::Rgba([x as u8, y as u8, 90, 255])
    });
    let mut out = Cursor::new(Vec::new());
    image::DynamicImage::ImageRgba8(img)
        .write_to(&mut out, format)
        .expect("encodes");
    out.into_inner()
}

fn png(width: u32, height: u32) -> Vec<u8> {
    encoded(width, height, image::ImageFormat::Png)
}

/// The album "Kind of Blue" at `/products/kind-of-blue`, with its generated cover.
async fn kind_of_blue(app: &TestApp) -> Product {
    ProductBuilder::new("kob")
        .slug("kind-of-blue")
        .title("Kind of Blue")
        .cover()
        .build(&app.db)
        .await
}

/// The product "Dune", with its generated cover.
async fn dune(app: &TestApp) -> Product {
    ProductBuilder::new("dune")
        .title("Dune")
        .cover()
        .build(&app.db)
        .await
}

/// POST a multipart form with one file field `photo`.
async fn upload(app: &TestApp, action: &str, filename: &str, bytes: &[u8]) -> reqwest::Response {
    let boundary = "----bazaar-test-boundary-7MA4YWxkTrZu0gW";
    let body = png_upload_body(boundary, "photo", filename, bytes);
    app.post_admin_multipart(action, boundary, body).await
}

#[tokio::test]
async fn a_generated_cover_is_served_with_type_length_etag_and_long_caching() {
    let app = spawn_app().await;
    kind_of_blue(&app).await;
    let doc = html(&body(app.get("/products/kind-of-blue").await).await);
    let src = attr(&doc, "img.product-photo", "src").expect("a cover");
    let response = app.get(&src).await;
    assert_eq!(response.status(), StatusCode::OK);
    // A cover fits the display size, so its full-size copy (re-encoded, a JPEG) is shown.
    assert_eq!(header(&response, "content-type"), "image/jpeg");
    assert!(header(&response, "cache-control").contains("max-age=31536000"));
    let etag = header(&response, "etag");
    assert!(etag.starts_with('"') && etag.len() > 2, "{etag}");
    let length: usize = header(&response, "content-length")
        .parse()
        .expect("a length");
    let bytes = response.bytes().await.expect("body");
    assert_eq!(bytes.len(), length);
    let cover = image::load_from_memory(&bytes).expect("a real image");
    assert_eq!((cover.width(), cover.height()), (320, 320));

    let response = app
        .client
        .get(app.url(&src))
        .header("if-none-match", &etag)
        .send()
        .await
        .expect("sent");
    assert_eq!(response.status(), StatusCode::NOT_MODIFIED);
    assert_eq!(header(&response, "etag"), etag);
    assert!(response.bytes().await.expect("body").is_empty());

    // The product cards use the thumbnail.
    let doc = html(&body(app.get("/products?q=kind+of+blue").await).await);
    let thumb = attr(&doc, ".product-card img", "src").expect("a thumbnail");
    assert!(thumb.ends_with("/thumb"), "{thumb}");
    let bytes = app.get(&thumb).await.bytes().await.expect("body");
    let img = image::load_from_memory(&bytes).expect("a real PNG");
    assert!(img.width() <= 240 && img.height() <= 240);

    for path in [
        "/media/nonsense",
        "/media/0123456789abcdef01234567",
        "/media/0123456789abcdef01234567/thumb",
    ] {
        assert_eq!(
            app.get(path).await.status(),
            StatusCode::NOT_FOUND,
            "{path}"
        );
    }
}

#[tokio::test]
async fn an_uploaded_png_gets_a_thumbnail_and_a_non_image_or_oversized_file_is_refused() {
    let app = spawn_app().await;
    dune(&app).await;
    let doc = html(&body(app.get_admin("/admin/products?q=dune").await).await);
    let edit = attr(&doc, "table.admin-products tbody a", "href").expect("edit link");
    let doc = html(&body(app.get_admin(&edit).await).await);
    let action = attr(&doc, ".photos-panel form", "action").expect("upload form");
    assert!(action.contains("csrf_token="), "{action}");
    assert_eq!(count(&doc, ".admin-photos img"), 1, "its cover");

    let response = upload(&app, &action, "desert.png", &png(800, 400)).await;
    assert_eq!(response.status(), StatusCode::SEE_OTHER);
    let doc = html(&body(app.get_admin(&edit).await).await);
    assert_eq!(texts(&doc, ".flash-success"), ["Photo added."]);
    let thumbs: Vec<String> = {
        let sel = scraper::Selector::parse(".admin-photos img").unwrap();
        doc.select(&sel)
            .filter_map(|i| i.value().attr("src").map(str::to_string))
            .collect()
    };
    assert_eq!(thumbs.len(), 2);
    let bytes = app.get(&thumbs[1]).await.bytes().await.expect("body");
    let thumb = image::load_from_memory(&bytes).expect("a PNG thumbnail");
    assert_eq!((thumb.width(), thumb.height()), (240, 120));
    let original = app.get(thumbs[1].trim_end_matches("/thumb")).await;
    assert_eq!(header(&original, "content-type"), "image/png");

    // Named .png but not an image: refused from its bytes.
    let response = upload(
        &app,
        &action,
        "evil.png",
        b"<svg xmlns=\"http://www.w3.org/2000/svg\"><script>alert(1)</script></svg>",
    )
    .await;
    assert_eq!(response.status(), StatusCode::SEE_OTHER);
    let doc = html(&body(app.get_admin(&edit).await).await);
    assert!(texts(&doc, ".flash-error")[0].contains("not a JPEG, PNG, GIF or WebP"));
    assert_eq!(count(&doc, ".admin-photos img"), 2);

    // Over the size limit: refused, nothing kept.
    let mut big = png(8, 8);
    big.resize(11 * 1024 * 1024, 0);
    let response = upload(&app, &action, "huge.png", &big).await;
    assert_eq!(response.status(), StatusCode::SEE_OTHER);
    let doc = html(&body(app.get_admin(&edit).await).await);
    assert!(texts(&doc, ".flash-error")[0].contains("larger than 10 MiB"));
    assert_eq!(count(&doc, ".admin-photos img"), 2);
    let system = html(&body(app.get_admin("/admin/system").await).await);
    let files = texts(&system, "table.counts tbody tr")
        .into_iter()
        .find(|r| r.starts_with("assets.files"))
        .expect("files row");
    // The cover and the upload, each with its thumbnail and social card, and their sized copies
    // (the 320 px cover one, the 800 px upload two: 400 and 800).
    assert_eq!(files, format!("assets.files{}", (1 + 1) * 3 + 1 + 2));

    // Without the token in the query the upload is refused before it is read.
    let no_token = action.split('?').next().unwrap_or_default().to_string();
    let response = upload(&app, &no_token, "desert.png", &png(10, 10)).await;
    assert_eq!(response.status(), StatusCode::FORBIDDEN);
}

/// The `src` of every photo thumbnail on an admin edit page.
fn thumbnail_srcs(doc: &scraper::Html) -> Vec<String> {
    let sel = scraper::Selector::parse(".admin-photos img").expect("selector");
    doc.select(&sel)
        .filter_map(|i| i.value().attr("src").map(str::to_string))
        .collect()
}

#[tokio::test]
async fn uploaded_gif_and_webp_photos_get_png_thumbnails_like_png_and_jpeg() {
    let app = spawn_app().await;
    dune(&app).await;
    let doc = html(&body(app.get_admin("/admin/products?q=dune").await).await);
    let edit = attr(&doc, "table.admin-products tbody a", "href").expect("edit link");
    let doc = html(&body(app.get_admin(&edit).await).await);
    let action = attr(&doc, ".photos-panel form", "action").expect("upload form");
    let gif = encoded(300, 150, image::ImageFormat::Gif);
    let webp = encoded(120, 480, image::ImageFormat::WebP);
    assert!(gif.starts_with(b"GIF8") && webp.starts_with(b"RIFF"));
    for (name, bytes, mime, thumb_size) in [
        ("dunes.gif", &gif, "image/gif", (240, 120)),
        ("tower.webp", &webp, "image/webp", (60, 240)),
    ] {
        let response = upload(&app, &action, name, bytes).await;
        assert_eq!(response.status(), StatusCode::SEE_OTHER, "{name}");
        let doc = html(&body(app.get_admin(&edit).await).await);
        assert_eq!(texts(&doc, ".flash-success"), ["Photo added."], "{name}");
        let thumb_url = thumbnail_srcs(&doc).pop().expect("the new photo");
        let thumb = app.get(&thumb_url).await;
        assert_eq!(header(&thumb, "content-type"), "image/png", "{name}");
        let bytes = thumb.bytes().await.expect("body");
        let thumb = image::load_from_memory_with_format(&bytes, image::ImageFormat::Png)
            .expect("a PNG thumbnail");
        assert_eq!((thumb.width(), thumb.height()), thumb_size, "{name}");
        // The original as uploaded is the admin's; the public URL sends a re-encoded copy (PNG:
        // these decode with an alpha channel).
        let original = thumb_url.trim_end_matches("/thumb");
        let admin = app.get_admin(&format!("/admin{original}")).await;
        assert_eq!(header(&admin, "content-type"), mime, "{name}");
        let public = app.get(original).await;
        assert_eq!(header(&public, "content-type"), "image/png", "{name}");
    }

    // A file that starts like a GIF but is not one is refused, not kept without a thumbnail.
    let mut broken = gif[..16].to_vec();
    broken.extend_from_slice(&[0xAB; 64]);
    let response = upload(&app, &action, "broken.gif", &broken).await;
    assert_eq!(response.status(), StatusCode::SEE_OTHER);
    let doc = html(&body(app.get_admin(&edit).await).await);
    assert!(texts(&doc, ".flash-error")[0].contains("not a JPEG, PNG, GIF or WebP"));
    assert_eq!(
        count(&doc, ".admin-photos img"),
        3,
        "the cover and two uploads"
    );
}

#[tokio::test]
async fn the_size_of_a_stored_gif_or_webp_is_recorded_with_its_thumbnail() {
    let (_server, db) = memory_db("media_test").await;
    for (name, format, kind) in [
        (
            "a.gif",
            image::ImageFormat::Gif,
            bazaar::media::ImageKind::Gif,
        ),
        (
            "a.webp",
            image::ImageFormat::WebP,
            bazaar::media::ImageKind::WebP,
        ),
    ] {
        let bytes = encoded(37, 23, format);
        let body =
            futures::stream::iter([Ok::<_, std::io::Error>(actix_web::web::Bytes::from(bytes))]);
        let stored = bazaar::media::store_upload(&db, name, body, 1024 * 1024)
            .await
            .expect("stored");
        assert_eq!(stored.kind, kind, "{name}");
        assert_eq!((stored.width, stored.height), (37, 23), "{name}");
        assert_ne!(stored.thumbnail, stored.id, "{name}");
        let file = db
            .database()
            .collection::<bson::Document>("assets.files")
            .find_one(bson::doc! { "_id": stored.id })
            .await
            .expect("query")
            .expect("the file");
        let metadata = file.get_document("metadata").expect("metadata");
        let pixels = |field: &str| match metadata.get(field) {
            Some(bson::Bson::Int32(n)) => Some(i64::from(*n)),
            Some(bson::Bson::Int64(n)) => Some(*n),
            _ => None,
        };
        assert_eq!(
            (pixels("width"), pixels("height")),
            (Some(37), Some(23)),
            "{name}"
        );
        assert_eq!(
            metadata.get_object_id("thumbnail").ok(),
            Some(stored.thumbnail),
            "{name}"
        );
    }
}

#[tokio::test]
async fn the_upload_limit_comes_from_configuration() {
    let app = spawn_app_with(&[("BAZAAR_MEDIA__MAX_UPLOAD_MB", "1")]).await;
    dune(&app).await;
    let doc = html(&body(app.get_admin("/admin/products?q=dune").await).await);
    let edit = attr(&doc, "table.admin-products tbody a", "href").expect("edit link");
    let doc = html(&body(app.get_admin(&edit).await).await);
    let action = attr(&doc, ".photos-panel form", "action").expect("upload form");
    let mut two_mib = png(8, 8);
    two_mib.resize(2 * 1024 * 1024, 0);
    let response = upload(&app, &action, "big.png", &two_mib).await;
    assert_eq!(response.status(), StatusCode::SEE_OTHER);
    let doc = html(&body(app.get_admin(&edit).await).await);
    assert!(texts(&doc, ".flash-error")[0].contains("larger than 1 MiB"));
    assert_eq!(count(&doc, ".admin-photos img"), 1, "only its cover");
}

// ---------------------------------------------------------------------------------------------
// Copies belong to their original; the orphan clean-up; drafts' photos.

use bazaar::content::model;
use bazaar::content::store;
use bson::oid::ObjectId;
use bson::{doc, DateTime, Document};
use std::time::Duration;

/// A photo of the given size (a gradient PNG).
fn photo_png(width: u32, height: u32) -> Vec<u8> {
    png(width, height)
}

/// Store `bytes` as an uploaded image, as the upload pages do.
async fn store(app: &TestApp, name: &str, bytes: Vec<u8>) -> bazaar::media::StoredImage {
    let body = futures::stream::iter([Ok::<_, std::io::Error>(actix_web::web::Bytes::from(bytes))]);
    bazaar::media::store_upload(&app.db, name, body, 50 * 1024 * 1024)
        .await
        .expect("stored")
}

/// The stored file entry of `id`, if any.
async fn file_entry(app: &TestApp, id: ObjectId) -> Option<Document> {
    app.db
        .collection::<Document>("assets.files")
        .find_one(doc! { "_id": id })
        .await
        .expect("read")
}

fn metadata_id(entry: &Document, field: &str) -> Option<ObjectId> {
    entry
        .get_document("metadata")
        .ok()?
        .get_object_id(field)
        .ok()
}

/// Make every stored file two hours old, past the clean-up's grace period.
async fn age_every_file(app: &TestApp) {
    let two_hours_ago = DateTime::from_millis(DateTime::now().timestamp_millis() - 2 * 3600 * 1000);
    app.db
        .collection::<Document>("assets.files")
        .update_many(doc! {}, doc! { "$set": { "uploadDate": two_hours_ago } })
        .await
        .expect("aged");
}

/// Orphans as the admin's review page lists them (the `data-file` of each row).
async fn listed_orphans(app: &TestApp) -> Vec<String> {
    let doc = admin_page(app, "/admin/content/orphans").await;
    let sel = scraper::Selector::parse("tr.orphan").expect("selector");
    doc.select(&sel)
        .filter_map(|r| r.value().attr("data-file").map(str::to_string))
        .collect()
}

/// Confirm the review page's form as shown: deletes what it listed.
async fn confirm_clean_up(app: &TestApp) -> reqwest::Response {
    let doc = admin_page(app, "/admin/content/orphans").await;
    let token = csrf_token(&doc).expect("the page lists files to delete");
    let mut fields = vec![("csrf_token".to_string(), token)];
    let sel = scraper::Selector::parse("input[name=file]").expect("selector");
    fields.extend(
        doc.select(&sel)
            .filter_map(|i| i.value().attr("value"))
            .map(|v| ("file".to_string(), v.to_string())),
    );
    app.client
        .post(app.url("/admin/content/orphans"))
        .basic_auth(ADMIN_USER, Some(ADMIN_PASSWORD))
        .form(&fields)
        .send()
        .await
        .expect("sent")
}

#[tokio::test]
async fn cleaning_up_orphans_keeps_a_live_product_photos_display_copy() {
    let app = spawn_app().await;
    let photo = store(&app, "big.png", photo_png(1600, 1200)).await;
    let product = kind_of_blue(&app).await;
    assert!(
        bazaar::catalog::products::add_photo(&app.db, product.id, photo.id)
            .await
            .expect("added")
    );
    let entry = file_entry(&app, photo.id).await.expect("stored");
    let display = metadata_id(&entry, "display").expect("a 1600×1200 photo gets a display copy");
    let display_url = format!("/media/{}/display", photo.id.to_hex());
    assert_eq!(app.get(&display_url).await.status(), StatusCode::OK);

    // An unused upload, so the review page has something to delete.
    let unused = store(&app, "unused.png", photo_png(300, 200)).await;
    age_every_file(&app).await;
    assert_eq!(
        listed_orphans(&app).await,
        [unused.id.to_hex()],
        "neither the photo nor its copies are offered for deletion"
    );
    let response = confirm_clean_up(&app).await;
    assert_eq!(response.status(), StatusCode::SEE_OTHER);
    assert!(file_entry(&app, unused.id).await.is_none());
    // The clean-up without the review (the function the page calls) keeps it too.
    bazaar::content::photos::clean_orphans(&app.db, Duration::ZERO)
        .await
        .expect("cleaned");

    let shown = app.get(&display_url).await;
    assert_eq!(shown.status(), StatusCode::OK, "the page's copy survives");
    let shown = image::load_from_memory(&shown.bytes().await.expect("body")).expect("an image");
    assert_eq!(
        (shown.width(), shown.height()),
        (1200, 900),
        "the scaled copy, not the original"
    );
    assert!(file_entry(&app, display).await.is_some());
    assert!(file_entry(&app, photo.thumbnail).await.is_some());
}

#[tokio::test]
async fn deleting_an_original_deletes_its_thumbnail_display_copy_and_social_card() {
    let app = spawn_app().await;
    let photo = store(&app, "big.png", photo_png(1600, 1200)).await;
    let entry = file_entry(&app, photo.id).await.expect("stored");
    let display = metadata_id(&entry, "display").expect("a display copy");
    let social = metadata_id(&entry, "social").expect("a social card");
    let deleted = bazaar::media::delete_file(&app.db, photo.id)
        .await
        .expect("deleted");
    assert_eq!(
        deleted,
        4 + 4,
        "the original, its thumbnail, its display copy, its social card and its four sized copies"
    );
    let sizes = bazaar::media::sizes::recorded(&entry).expect("sized copies");
    assert_eq!(sizes.len(), 4, "400, 800, 1200 and 1600 px");
    let sized = sizes.iter().map(|s| s.file);
    for id in [photo.id, photo.thumbnail, display, social]
        .into_iter()
        .chain(sized)
    {
        assert!(file_entry(&app, id).await.is_none(), "{id} is gone");
    }
    assert_eq!(
        app.get(&format!("/media/{}/display", photo.id.to_hex()))
            .await
            .status(),
        StatusCode::NOT_FOUND
    );
}

#[tokio::test]
async fn a_file_linked_only_from_a_markdown_body_survives_the_clean_up_and_an_unused_one_goes() {
    let app = spawn_app().await;
    let linked = store(&app, "linked.png", photo_png(300, 200)).await;
    let unused = store(&app, "unused.png", photo_png(300, 200)).await;
    store::create(
        &app.db,
        model::NodeInput {
            section: "blog".into(),
            slug: crate::common::slug("with-a-picture"),
            title: "With a picture".into(),
            author: "x".into(),
            detail: model::Detail::Entry(model::TextDetail {
                text: format!("Look: ![the shop](/media/{}/display)", linked.id.to_hex()),
                ..Default::default()
            }),
        },
        Some(DateTime::now()),
        vec![],
    )
    .await
    .expect("created");
    age_every_file(&app).await;

    // The dry run lists the unused file only, and deletes nothing.
    let listed = listed_orphans(&app).await;
    assert_eq!(
        listed,
        [unused.id.to_hex()],
        "only the unused file is listed"
    );
    assert!(
        file_entry(&app, unused.id).await.is_some(),
        "a dry run deletes nothing"
    );

    let response = confirm_clean_up(&app).await;
    assert_eq!(response.status(), StatusCode::SEE_OTHER);
    let doc = admin_page(&app, "/admin/content").await;
    assert!(
        texts(&doc, ".flash-success")
            .iter()
            .any(|f| f.contains("Removed 4 orphaned files")),
        "the file, its thumbnail, its social card and its sized copy"
    );
    assert!(
        file_entry(&app, linked.id).await.is_some(),
        "the linked file stays"
    );
    assert!(file_entry(&app, linked.thumbnail).await.is_some());
    assert!(
        file_entry(&app, unused.id).await.is_none(),
        "the unused file went"
    );
    assert!(
        file_entry(&app, unused.thumbnail).await.is_none(),
        "with its thumbnail"
    );
    assert!(listed_orphans(&app).await.is_empty());
}

#[tokio::test]
async fn a_file_linked_after_the_review_is_kept_when_the_clean_up_is_confirmed() {
    let app = spawn_app().await;
    let photo = store(&app, "late.png", photo_png(300, 200)).await;
    age_every_file(&app).await;
    let doc = admin_page(&app, "/admin/content/orphans").await;
    let token = csrf_token(&doc).expect("token");
    assert_eq!(count(&doc, "tr.orphan"), 1);
    // Meanwhile an editor puts it on a product.
    let product = kind_of_blue(&app).await;
    bazaar::catalog::products::add_photo(&app.db, product.id, photo.id)
        .await
        .expect("added");
    let response = app
        .post_admin_form(
            "/admin/content/orphans",
            &[("csrf_token", &token), ("file", &photo.id.to_hex())],
        )
        .await;
    assert_eq!(response.status(), StatusCode::SEE_OTHER);
    assert!(file_entry(&app, photo.id).await.is_some());
}

/// A photo node in the gallery showing a freshly stored image, published or a draft.
async fn photo_node(
    app: &TestApp,
    slug: &str,
    published: Option<DateTime>,
) -> (ObjectId, bazaar::media::StoredImage) {
    let image = store(app, &format!("{slug}.png"), photo_png(1600, 1200)).await;
    store::create(
        &app.db,
        model::NodeInput {
            section: "gallery".into(),
            slug: crate::common::slug(slug),
            title: slug.into(),
            author: "x".into(),
            detail: model::Detail::Photo(model::PhotoDetail {
                file_id: Some(image.id),
                filename: format!("{slug}.png"),
                content_type: "image/png".into(),
                width: 1600,
                height: 1200,
                caption: String::new(),
                alt: String::new(),
            }),
        },
        published,
        vec![],
    )
    .await
    .expect("created");
    let entry = file_entry(app, image.id).await.expect("stored");
    (metadata_id(&entry, "display").expect("display copy"), image)
}

#[tokio::test]
async fn a_drafts_photo_and_its_copies_are_not_found_by_the_public_but_shown_to_the_admin() {
    let app = spawn_app().await;
    let (display, image) = photo_node(&app, "secret-draft", None).await;
    assert_eq!(
        app.get("/gallery/secret-draft").await.status(),
        StatusCode::NOT_FOUND,
        "the draft's page is hidden"
    );
    let id = image.id.to_hex();
    for path in [
        format!("/media/{id}"),
        format!("/media/{id}/thumb"),
        format!("/media/{id}/display"),
        // The copies' own ids are no way round it.
        format!("/media/{}", image.thumbnail.to_hex()),
        format!("/media/{}", display.to_hex()),
    ] {
        let (anonymous, _) = new_client();
        let response = anonymous.get(app.url(&path)).send().await.expect("sent");
        assert_eq!(response.status(), StatusCode::NOT_FOUND, "{path}");
    }
    // The admin sees it, with Basic auth on the public URL or on the admin's own, never cached.
    for path in [format!("/media/{id}"), format!("/admin/media/{id}/thumb")] {
        let response = app.get_admin(&path).await;
        assert_eq!(response.status(), StatusCode::OK, "{path}");
        assert_eq!(header(&response, "cache-control"), "no-store", "{path}");
        assert!(header(&response, "content-type").starts_with("image/"));
    }
    let wrong = app
        .client
        .get(app.url(&format!("/media/{id}")))
        .basic_auth(ADMIN_USER, Some("not the password"))
        .send()
        .await
        .expect("sent");
    assert_eq!(wrong.status(), StatusCode::NOT_FOUND);
    // The editor's form shows the draft's photo through the admin's URL.
    let doc = admin_page(
        &app,
        &format!(
            "/admin/content/{}/edit",
            node_id(&app, "secret-draft").await
        ),
    )
    .await;
    let src = attr(&doc, "img[alt^='Current photo']", "src").expect("the current photo");
    assert_eq!(src, format!("/admin/media/{id}/thumb"));

    // A scheduled photo is as hidden as a draft until its date.
    let tomorrow = DateTime::from_millis(DateTime::now().timestamp_millis() + 24 * 3600 * 1000);
    let (_, scheduled) = photo_node(&app, "scheduled", Some(tomorrow)).await;
    let (anonymous, _) = new_client();
    let response = anonymous
        .get(app.url(&format!("/media/{}", scheduled.id.to_hex())))
        .send()
        .await
        .expect("sent");
    assert_eq!(response.status(), StatusCode::NOT_FOUND);
}

async fn node_id(app: &TestApp, slug: &str) -> String {
    app.db
        .collection::<Document>("nodes")
        .find_one(doc! { "metadata.slug": slug })
        .await
        .expect("read")
        .expect("the node")
        .get_object_id("_id")
        .expect("id")
        .to_hex()
}

#[tokio::test]
async fn a_published_photo_and_a_product_photo_stay_public_and_cacheable() {
    let app = spawn_app().await;
    let (_, published) = photo_node(&app, "on-show", Some(DateTime::now())).await;
    let product = kind_of_blue(&app).await;
    let cover = product.photos[0];
    for path in [
        format!("/media/{}", published.id.to_hex()),
        format!("/media/{}/display", published.id.to_hex()),
        format!("/media/{}/thumb", cover.to_hex()),
    ] {
        let (anonymous, _) = new_client();
        let response = anonymous.get(app.url(&path)).send().await.expect("sent");
        assert_eq!(response.status(), StatusCode::OK, "{path}");
        assert_eq!(
            header(&response, "cache-control"),
            "public, max-age=31536000, immutable",
            "{path}"
        );
    }
    // Unpublishing hides it again.
    let node = node_id(&app, "on-show").await;
    bazaar::content::store::set_published(&app.db, ObjectId::parse_str(&node).unwrap(), None)
        .await
        .expect("unpublished");
    let (anonymous, _) = new_client();
    let response = anonymous
        .get(app.url(&format!("/media/{}", published.id.to_hex())))
        .send()
        .await
        .expect("sent");
    assert_eq!(response.status(), StatusCode::NOT_FOUND);
}

#[tokio::test]
async fn the_new_media_and_orphan_routes_answer_bad_input_with_a_client_error() {
    let app = spawn_app().await;
    for path in [
        "/admin/media/not-an-id",
        "/admin/media/not-an-id/thumb",
        "/admin/media/000000000000000000000000/display",
    ] {
        let status = app.get_admin(path).await.status();
        assert!(
            status.is_client_error(),
            "{path} answered {status} for a bad or unknown id"
        );
    }
    let review = app.get_admin("/admin/content/orphans").await;
    assert_eq!(review.status(), StatusCode::OK);
    // The session's token, from a page with a form (an empty review has none).
    let token =
        csrf_token(&admin_page(&app, "/admin/system").await).expect("the system page has a form");
    let response = app
        .post_admin_form(
            "/admin/content/orphans",
            &[
                ("csrf_token", token.as_str()),
                ("file", "not-an-id"),
                ("file", "\u{0}<script>"),
            ],
        )
        .await;
    assert!(
        !response.status().is_server_error(),
        "garbage file ids: {}",
        response.status()
    );
    app.stop().await;
}
