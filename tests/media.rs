//! Photos: uploads sniffed and streamed into GridFS, thumbnails, and `/media/{file_id}` with
//! its validators and caching; the demo catalog's generated covers.

mod common;

use std::io::Cursor;

use common::*;
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

/// POST a multipart form with one file field `photo`.
async fn upload(app: &TestApp, action: &str, filename: &str, bytes: &[u8]) -> reqwest::Response {
    let boundary = "----bazaar-test-boundary-7MA4YWxkTrZu0gW";
    let body = png_upload_body(boundary, "photo", filename, bytes);
    app.post_admin_multipart(action, boundary, body).await
}

#[tokio::test]
async fn a_demo_cover_is_served_with_type_length_etag_and_long_caching() {
    let app = spawn_app().await;
    let doc = html(&body(app.get("/products/kind-of-blue").await).await);
    let src = attr(&doc, "img.product-photo", "src").expect("a cover");
    let response = app.get(&src).await;
    assert_eq!(response.status(), StatusCode::OK);
    assert_eq!(header(&response, "content-type"), "image/png");
    assert!(header(&response, "cache-control").contains("max-age=31536000"));
    let etag = header(&response, "etag");
    assert!(etag.starts_with('"') && etag.len() > 2, "{etag}");
    let length: usize = header(&response, "content-length")
        .parse()
        .expect("a length");
    let bytes = response.bytes().await.expect("body");
    assert_eq!(bytes.len(), length);
    let cover = image::load_from_memory(&bytes).expect("a real PNG");
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
    let doc = html(&body(app.get_admin("/admin/products?q=dune").await).await);
    let edit = attr(&doc, "table.admin-products tbody a", "href").expect("edit link");
    let doc = html(&body(app.get_admin(&edit).await).await);
    let action = attr(&doc, ".photos-panel form", "action").expect("upload form");
    assert!(action.contains("csrf_token="), "{action}");
    assert_eq!(count(&doc, ".admin-photos img"), 1, "the demo cover");

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
    // 36 covers, 5 demo content photos and their thumbnails, plus the upload and its thumbnail.
    assert_eq!(files, format!("assets.files{}", (36 + 5) * 2 + 2));

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
        let original = app.get(thumb_url.trim_end_matches("/thumb")).await;
        assert_eq!(header(&original, "content-type"), mime, "{name}");
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
    assert_eq!(count(&doc, ".admin-photos img"), 1, "only the demo cover");
}
