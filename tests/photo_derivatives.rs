//! Photos fit for phones and free of their uploader's metadata: a JPEG carrying GPS EXIF is
//! uploaded through the admin, and neither any URL a page shows for it nor any copy stored in
//! GridFS carries EXIF; pages offer sized copies (`srcset`, `width`/`height`, lazy below the
//! first image); images stored before sizes existed get them on first need.

use std::io::Cursor;

use crate::common::builders::NodeBuilder;
use crate::common::*;
use bazaar::content::model;
use bazaar::content::store;
use bson::oid::ObjectId;
use bson::{doc, DateTime, Document};
use futures::io::AsyncReadExt;
use image::ImageDecoder;
use reqwest::StatusCode;

/// GPS latitude 48° 51' 29.64" as the EXIF stores it (three little-endian rationals): a byte
/// run no re-encoded image contains by chance.
const LATITUDE: [u32; 6] = [48, 1, 51, 1, 2964, 100];

fn latitude_bytes() -> Vec<u8> {
    LATITUDE.iter().flat_map(|n| n.to_le_bytes()).collect()
}

/// An EXIF APP1 segment: IFD0 with the orientation and a pointer to a GPS IFD holding the
/// version, "N" and the latitude, written byte by byte as a phone's camera does.
fn exif_app1(orientation: u16) -> Vec<u8> {
    let entry = |tag: u16, kind: u16, count: u32, value: [u8; 4]| -> Vec<u8> {
        let mut e = Vec::new();
        e.extend_from_slice(&tag.to_le_bytes());
        e.extend_from_slice(&kind.to_le_bytes());
        e.extend_from_slice(&count.to_le_bytes());
        e.extend_from_slice(&value);
        e
    };
    let mut tiff = b"II\x2a\x00".to_vec();
    tiff.extend_from_slice(&8u32.to_le_bytes());
    // IFD0 at 8: two entries, then the next-IFD offset; it ends at 8 + 2 + 24 + 4 = 38.
    tiff.extend_from_slice(&2u16.to_le_bytes());
    let o = orientation.to_le_bytes();
    tiff.extend(entry(0x0112, 3, 1, [o[0], o[1], 0, 0]));
    tiff.extend(entry(0x8825, 4, 1, 38u32.to_le_bytes()));
    tiff.extend_from_slice(&0u32.to_le_bytes());
    // The GPS IFD at 38: three entries, ending at 38 + 2 + 36 + 4 = 80, where the latitude is.
    tiff.extend_from_slice(&3u16.to_le_bytes());
    tiff.extend(entry(0x0000, 1, 4, [2, 3, 0, 0]));
    tiff.extend(entry(0x0001, 2, 2, *b"N\0\0\0"));
    tiff.extend(entry(0x0002, 5, 3, 80u32.to_le_bytes()));
    tiff.extend_from_slice(&0u32.to_le_bytes());
    assert_eq!(tiff.len(), 80);
    tiff.extend(latitude_bytes());
    let mut segment = vec![0xFF, 0xE1];
    segment.extend_from_slice(&u16::try_from(2 + 6 + tiff.len()).unwrap().to_be_bytes());
    segment.extend_from_slice(b"Exif\0\0");
    segment.extend(tiff);
    segment
}

/// A photo-like JPEG (gradients, a soft pattern, a little grain) of `width`×`height` with the
/// EXIF segment of [`exif_app1`] after its JFIF header.
fn jpeg_with_gps(width: u32, height: u32, orientation: u16) -> Vec<u8> {
    let mut seed = 0x2545_f491u32;
    let img = image::RgbImage::from_fn(width, height, |x, y| {
        seed = seed.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
        let grain = (seed >> 28) as f32 - 8.0;
        let wave = ((x as f32 / 37.0).sin() * (y as f32 / 23.0).cos()) * 60.0;
        image::Rgb([
            (x * 255 / width) as u8,
            (y * 255 / height) as u8,
            (128.0 + wave + grain).clamp(0.0, 255.0) as u8,
        ])
    });
    let mut out = Cursor::new(Vec::new());
    image::DynamicImage::ImageRgb8(img)
        .write_with_encoder(image::codecs::jpeg::JpegEncoder::new_with_quality(
            &mut out, 90,
        ))
        .expect("encodes");
    let plain = out.into_inner();
    // SOI, then the JFIF APP0 segment (its length after the marker), then the EXIF.
    assert_eq!(&plain[2..4], &[0xFF, 0xE0]);
    let app0_end = 4 + usize::from(u16::from_be_bytes([plain[4], plain[5]]));
    let mut bytes = plain[..app0_end].to_vec();
    bytes.extend(exif_app1(orientation));
    bytes.extend_from_slice(&plain[app0_end..]);
    bytes
}

/// The EXIF block a decoder finds in `bytes` (any accepted type), if any.
fn exif_of(bytes: &[u8]) -> Option<Vec<u8>> {
    let mut decoder = image::ImageReader::new(Cursor::new(bytes))
        .with_guessed_format()
        .expect("readable")
        .into_decoder()
        .expect("an image");
    decoder.exif_metadata().expect("metadata readable")
}

/// Fails when `bytes` carry the uploader's metadata: an EXIF block a decoder finds, the
/// "Exif" marker, or the GPS latitude's bytes.
fn assert_no_metadata(bytes: &[u8], what: &str) {
    assert_eq!(exif_of(bytes), None, "{what}: a decoder finds EXIF");
    let contains = |needle: &[u8]| bytes.windows(needle.len()).any(|w| w == needle);
    assert!(!contains(b"Exif"), "{what}: carries an Exif segment");
    assert!(
        !contains(&latitude_bytes()),
        "{what}: carries the GPS latitude"
    );
}

/// A published gallery photo node with no photo yet.
async fn empty_photo_node(app: &TestApp, slug: &str) -> ObjectId {
    store::create(
        &app.db,
        model::NodeInput {
            section: "gallery".into(),
            slug: crate::common::slug(slug),
            title: slug.into(),
            author: "x".into(),
            detail: model::Detail::Photo(Default::default()),
        },
        Some(DateTime::from_millis(
            DateTime::now().timestamp_millis() - 60_000,
        )),
        vec![],
    )
    .await
    .expect("created")
    .id
}

/// Upload `bytes` as the photo of node `id` through the admin's form; returns the stored file.
async fn upload_photo(app: &TestApp, id: ObjectId, bytes: &[u8]) -> model::PhotoDetail {
    let response = save_photo_form(app, id, &[], "IMG_0042.JPG", bytes, "save").await;
    assert_eq!(response.status(), StatusCode::SEE_OTHER);
    let node = store::by_id(&app.db, id)
        .await
        .expect("read")
        .expect("node");
    let photo = node.photo().expect("a photo node");
    assert!(photo.file_id.is_some(), "the upload was stored");
    photo
}

/// Every URL `selector`'s images and links on `doc` point at: `src`, each `srcset` candidate,
/// `href`.
fn image_urls(doc: &scraper::Html, selector: &str) -> Vec<String> {
    let selector = scraper::Selector::parse(selector).expect("valid selector");
    let mut urls = Vec::new();
    for el in doc.select(&selector) {
        let v = el.value();
        urls.extend(v.attr("src").map(str::to_string));
        urls.extend(v.attr("href").map(str::to_string));
        if let Some(srcset) = v.attr("srcset") {
            urls.extend(
                srcset
                    .split(',')
                    .filter_map(|c| c.split_whitespace().next())
                    .map(str::to_string),
            );
        }
    }
    urls
}

/// The `srcset` candidates of the first image matching `selector`, as (URL, width).
fn srcset(doc: &scraper::Html, selector: &str) -> Vec<(String, u32)> {
    attr(doc, selector, "srcset")
        .expect("a srcset")
        .split(',')
        .map(|candidate| {
            let mut parts = candidate.split_whitespace();
            let url = parts.next().expect("a URL").to_string();
            let width = parts
                .next()
                .and_then(|w| w.strip_suffix('w'))
                .and_then(|w| w.parse().ok())
                .expect("a width descriptor");
            (url, width)
        })
        .collect()
}

/// GET `path` as a visitor (no session, no credentials): its `Cache-Control` and body.
async fn fetch_public(app: &TestApp, path: &str) -> (String, Vec<u8>) {
    let (anonymous, _) = new_client();
    let response = anonymous.get(app.url(path)).send().await.expect("sent");
    assert_eq!(response.status(), StatusCode::OK, "{path}");
    let cache_control = response
        .headers()
        .get("cache-control")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_string();
    (
        cache_control,
        response.bytes().await.expect("body").to_vec(),
    )
}

async fn stored_bytes(app: &TestApp, id: ObjectId) -> Vec<u8> {
    let mut bytes = Vec::new();
    bazaar::media::bucket(&app.db)
        .open_download_stream(bson::Bson::ObjectId(id))
        .await
        .expect("stored")
        .read_to_end(&mut bytes)
        .await
        .expect("read");
    bytes
}

async fn file_entry(app: &TestApp, id: ObjectId) -> Document {
    app.db
        .collection::<Document>("assets.files")
        .find_one(doc! { "_id": id })
        .await
        .expect("read")
        .expect("the file")
}

#[tokio::test]
async fn a_phone_photo_with_gps_exif_is_served_and_stored_only_as_copies_without_metadata() {
    let app = spawn_app().await;
    let original = jpeg_with_gps(4000, 3000, 1);
    assert!(
        exif_of(&original).is_some(),
        "the test photo carries EXIF as a phone's does"
    );
    let node = empty_photo_node(&app, "harbour-at-dawn").await;
    let photo = upload_photo(&app, node, &original).await;
    let id = photo.file_id.expect("stored");
    assert_eq!((photo.width, photo.height), (4000, 3000));

    // The photo's page: the image offers every sized copy, with its size, eager (first image).
    let photo_page = page(&app, "/gallery/harbour-at-dawn").await;
    let candidates = srcset(&photo_page, ".post-photo img");
    let widths: Vec<u32> = candidates.iter().map(|(_, w)| *w).collect();
    assert_eq!(widths, [400, 800, 1200, 2000]);
    assert_eq!(
        attr(&photo_page, ".post-photo img", "width").as_deref(),
        Some("4000")
    );
    assert_eq!(
        attr(&photo_page, ".post-photo img", "height").as_deref(),
        Some("3000")
    );
    assert!(attr(&photo_page, ".post-photo img", "sizes").is_some());
    assert_eq!(
        attr(&photo_page, ".post-photo img", "loading"),
        None,
        "first image"
    );

    // A 390 px phone takes a candidate of at most 800w: it is small and of that width.
    let (url, width) = candidates
        .iter()
        .filter(|(_, w)| *w <= 800)
        .min_by_key(|(_, w)| *w)
        .expect("a small candidate");
    let (_, small) = fetch_public(&app, url).await;
    assert!(small.len() < 150 * 1024, "{url}: {} bytes", small.len());
    let decoded = image::load_from_memory(&small).expect("an image");
    assert_eq!((decoded.width(), decoded.height()), (*width, width * 3 / 4));

    // Every URL the photo page and the gallery show, and the fixed ones: none carries EXIF.
    let gallery = page(&app, "/gallery/").await;
    let mut urls = image_urls(&photo_page, ".post-photo img, .post-photo a");
    urls.extend(image_urls(&gallery, ".gallery-item img"));
    let hex = id.to_hex();
    for suffix in ["", "/thumb", "/display", "/social", "/w/1", "/w/99999"] {
        urls.push(format!("/media/{hex}{suffix}"));
    }
    assert!(urls.len() >= 14, "{urls:?}");
    for url in &urls {
        let (cache_control, bytes) = fetch_public(&app, url).await;
        assert_eq!(
            cache_control, "public, max-age=31536000, immutable",
            "{url}"
        );
        assert_no_metadata(&bytes, url);
    }
    // The largest copy is what `/media/{id}` (Markdown links, feeds) shows.
    let (_, largest) = fetch_public(&app, &format!("/media/{hex}")).await;
    let largest = image::load_from_memory(&largest).expect("an image");
    assert_eq!((largest.width(), largest.height()), (2000, 1500));

    // Every copy stored in GridFS, read from the bucket: none carries EXIF either.
    let copies: Vec<Document> = {
        use futures::TryStreamExt;
        app.db
            .collection::<Document>("assets.files")
            .find(doc! { "_id": { "$ne": id } })
            .await
            .expect("read")
            .try_collect()
            .await
            .expect("read")
    };
    // Thumbnail, display copy, social card and four sizes.
    assert_eq!(copies.len(), 7);
    for copy in &copies {
        let copy_id = copy.get_object_id("_id").expect("id");
        assert_eq!(
            bazaar::media::original_named_in(copy),
            Some(id),
            "{copy:?} names its original"
        );
        assert_no_metadata(&stored_bytes(&app, copy_id).await, &copy_id.to_hex());
    }
    // The original is kept as uploaded, for the admin only.
    assert_eq!(stored_bytes(&app, id).await, original);
    let admin = app.get_admin(&format!("/admin/media/{hex}")).await;
    assert_eq!(admin.status(), StatusCode::OK);
    assert_eq!(
        admin.bytes().await.expect("body").to_vec(),
        original,
        "the admin gets the original"
    );
    app.stop().await;
}

#[tokio::test]
async fn a_sideways_stored_portrait_is_turned_upright_in_its_copies_and_its_recorded_size() {
    let app = spawn_app().await;
    // Stored 60×40 with "rotate 90° clockwise to view" (orientation 6), as phones store
    // portraits.
    let node = empty_photo_node(&app, "portrait").await;
    let photo = upload_photo(&app, node, &jpeg_with_gps(60, 40, 6)).await;
    assert_eq!((photo.width, photo.height), (40, 60));
    let photo_page = page(&app, "/gallery/portrait").await;
    assert_eq!(
        attr(&photo_page, ".post-photo img", "width").as_deref(),
        Some("40")
    );
    let src = attr(&photo_page, ".post-photo img", "src").expect("an image");
    let (_, bytes) = fetch_public(&app, &src).await;
    assert_no_metadata(&bytes, &src);
    let copy = image::load_from_memory(&bytes).expect("an image");
    assert_eq!((copy.width(), copy.height()), (40, 60));
    app.stop().await;
}

/// Make stored original `id` as it was before sized copies existed: none stored, none listed.
async fn as_before_sizes(app: &TestApp, id: ObjectId) {
    let entry = file_entry(app, id).await;
    let made = bazaar::media::sizes::recorded(&entry).expect("sizes made at upload");
    let ids: Vec<ObjectId> = made.iter().map(|s| s.file).collect();
    bazaar::media::delete_files(&app.db, ids)
        .await
        .expect("deleted");
    app.db
        .collection::<Document>("assets.files")
        .update_one(
            doc! { "_id": id },
            doc! { "$unset": { "metadata.sizes": "" } },
        )
        .await
        .expect("updated");
}

/// A gallery photo node `slug` showing stored JPEG `id` of `size` pixels (published unless
/// the caller makes it a draft).
fn photo_showing(slug: &str, id: ObjectId, size: (i64, i64)) -> NodeBuilder {
    NodeBuilder::new(
        "gallery",
        slug,
        model::Detail::Photo(model::PhotoDetail {
            file_id: Some(id),
            filename: format!("{slug}.jpg"),
            content_type: "image/jpeg".into(),
            width: size.0,
            height: size.1,
            caption: String::new(),
            alt: String::new(),
        }),
    )
}

async fn store_jpeg(app: &TestApp, name: &str, bytes: Vec<u8>) -> ObjectId {
    let body = futures::stream::iter([Ok::<_, std::io::Error>(actix_web::web::Bytes::from(bytes))]);
    bazaar::media::store_upload(&app.db, name, body, 50 << 20)
        .await
        .expect("stored")
        .id
}

#[tokio::test]
async fn an_older_photo_is_sized_on_its_first_view_but_a_drafts_not_for_a_visitor() {
    let app = spawn_app().await;
    let published = store_jpeg(&app, "shown.jpg", jpeg_with_gps(500, 400, 1)).await;
    let draft = store_jpeg(&app, "draft.jpg", jpeg_with_gps(500, 400, 1)).await;
    for id in [published, draft] {
        as_before_sizes(&app, id).await;
    }
    photo_showing("shown", published, (500, 400))
        .build(&app.db)
        .await;
    photo_showing("unfinished", draft, (500, 400))
        .draft()
        .build(&app.db)
        .await;

    let (anonymous, _) = new_client();
    let url = format!("/media/{}/w/400", draft.to_hex());
    let response = anonymous.get(app.url(&url)).send().await.expect("sent");
    assert_eq!(response.status(), StatusCode::NOT_FOUND);
    assert_eq!(
        bazaar::media::sizes::recorded(&file_entry(&app, draft).await),
        None,
        "nothing is made for a visitor who may not see it"
    );

    // The published one: `/media/{id}` (a Markdown link) makes them and sends the largest.
    let (cache_control, bytes) =
        fetch_public(&app, &format!("/media/{}", published.to_hex())).await;
    assert_eq!(cache_control, "public, max-age=31536000, immutable");
    assert_no_metadata(&bytes, "the older photo's largest copy");
    let largest = image::load_from_memory(&bytes).expect("an image");
    assert_eq!((largest.width(), largest.height()), (500, 400));
    let sizes = bazaar::media::sizes::recorded(&file_entry(&app, published).await).expect("made");
    assert_eq!(
        sizes.iter().map(|s| s.width).collect::<Vec<_>>(),
        [400, 500]
    );
    app.stop().await;
}

#[tokio::test]
async fn a_photo_stored_before_sizes_existed_gets_them_on_first_need_and_a_stand_in_meanwhile() {
    let app = spawn_app().await;
    // Stored as before this change: no sizes recorded (the copies made at upload removed from
    // the list), and another instance busy making them.
    let id = store_jpeg(&app, "old.jpg", jpeg_with_gps(1600, 1200, 1)).await;
    let files = app.db.collection::<Document>("assets.files");
    as_before_sizes(&app, id).await;
    files
        .update_one(
            doc! { "_id": id },
            doc! { "$set": { "metadata.sizing": DateTime::now() } },
        )
        .await
        .expect("updated");
    photo_showing("old-photo", id, (1600, 1200))
        .build(&app.db)
        .await;
    let before = file_entry(&app, id).await;
    let display = before
        .get_document("metadata")
        .and_then(|m| m.get_object_id("display"))
        .expect("a display copy");

    // While another instance holds the work: the display copy stands in, cached a minute.
    let url = format!("/media/{}/w/800", id.to_hex());
    let (cache_control, bytes) = fetch_public(&app, &url).await;
    assert_eq!(cache_control, "public, max-age=60");
    assert_eq!(bytes, stored_bytes(&app, display).await);
    assert_no_metadata(&bytes, &url);

    // Its lease run out (a crashed instance): the next request makes them, once.
    files
        .update_one(
            doc! { "_id": id },
            doc! { "$set": { "metadata.sizing": DateTime::from_millis(0) } },
        )
        .await
        .expect("updated");
    let (cache_control, bytes) = fetch_public(&app, &url).await;
    assert_eq!(cache_control, "public, max-age=31536000, immutable");
    assert_no_metadata(&bytes, &url);
    let copy = image::load_from_memory(&bytes).expect("an image");
    assert_eq!((copy.width(), copy.height()), (800, 600));
    let after = file_entry(&app, id).await;
    let sizes = bazaar::media::sizes::recorded(&after).expect("recorded");
    assert_eq!(
        sizes.iter().map(|s| s.width).collect::<Vec<_>>(),
        [400, 800, 1200, 1600]
    );
    // The same original, made twice, would show as extra files: there are exactly these.
    let count = files
        .count_documents(doc! { "metadata.size_of": id })
        .await
        .expect("count");
    assert_eq!(count, 4);
    // Deleting the original deletes the sized copies with it.
    bazaar::media::delete_file(&app.db, id)
        .await
        .expect("deleted");
    assert_eq!(
        files
            .count_documents(doc! { "metadata.size_of": id })
            .await
            .expect("count"),
        0
    );
    app.stop().await;
}
