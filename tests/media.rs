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

fn png(width: u32, height: u32) -> Vec<u8> {
    let img = image::RgbImage::from_fn(width, height, |x, y| image::Rgb([x as u8, y as u8, 90]));
    let mut out = Cursor::new(Vec::new());
    image::DynamicImage::ImageRgb8(img)
        .write_to(&mut out, image::ImageFormat::Png)
        .expect("encodes");
    out.into_inner()
}

/// POST a multipart form with one file field `photo`.
async fn upload(app: &TestApp, action: &str, filename: &str, bytes: &[u8]) -> reqwest::Response {
    let boundary = "----bazaar-test-boundary-7MA4YWxkTrZu0gW";
    let mut body = Vec::new();
    body.extend_from_slice(
        format!(
            "--{boundary}\r\nContent-Disposition: form-data; name=\"photo\"; filename=\"{filename}\"\r\nContent-Type: image/png\r\n\r\n"
        )
        .as_bytes(),
    );
    body.extend_from_slice(bytes);
    body.extend_from_slice(format!("\r\n--{boundary}--\r\n").as_bytes());
    app.client
        .post(app.url(action))
        .basic_auth(ADMIN_USER, Some(ADMIN_PASSWORD))
        .header(
            "content-type",
            format!("multipart/form-data; boundary={boundary}"),
        )
        .body(body)
        .send()
        .await
        .expect("sent")
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
    let dashboard = html(&body(app.get_admin("/admin").await).await);
    let files = texts(&dashboard, "table.counts tbody tr")
        .into_iter()
        .find(|r| r.starts_with("assets.files"))
        .expect("files row");
    // 36 covers and their thumbnails, plus the upload and its thumbnail.
    assert_eq!(files, format!("assets.files{}", 36 * 2 + 2));

    // Without the token in the query the upload is refused before it is read.
    let no_token = action.split('?').next().unwrap_or_default().to_string();
    let response = upload(&app, &no_token, "desert.png", &png(10, 10)).await;
    assert_eq!(response.status(), StatusCode::FORBIDDEN);
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
