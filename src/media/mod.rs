//! Images in the GridFS bucket `assets`: uploads streamed in chunk by chunk with the type
//! sniffed from the bytes, thumbnails and display copies, generated demo covers, and sending a
//! stored file with validators and caching (a stored file never changes: a new image is a new
//! id). Who may fetch which file is decided above this module: the public routes
//! (`content::media_access`) hide files only drafts show, the admin's (`/admin/media/…`,
//! [`serve_private`]) serve any.
//!
//! A thumbnail, display copy, social card or sized copy ([`sizes`]) belongs to its original: its
//! metadata names it (`thumbnail_of`, `display_of`, `social_of`, `size_of`) and the original's
//! names the copies (`thumbnail`, `display`, `social`, `sizes`); [`delete_file`] deletes them
//! together. Every copy is re-encoded from the decoded pixels (EXIF orientation applied), so
//! none carries the uploader's metadata; the public routes send copies only ([`resolve_public`]),
//! the original itself goes to the admin alone.

pub(crate) mod refs;
pub mod sizes;

use std::io::Cursor;

use actix_web::body::SizedStream;
use actix_web::http::header;
use actix_web::web::Bytes;
use actix_web::{web, HttpRequest, HttpResponse};
use bson::oid::ObjectId;
use bson::{doc, Bson, Document};
use futures::io::{AsyncReadExt, AsyncWriteExt};
use futures::{Stream, StreamExt};
use mongodb::gridfs::{GridFsBucket, GridFsUploadStream};
use mongodb::options::GridFsBucketOptions;

use crate::db::{Db, DbError};
use crate::state::AppState;
use crate::web::errors::AppError;

pub const BUCKET: &str = "assets";
/// Limit for images the application generates itself (demo covers); uploads use the
/// configured `media.max_upload_mb`.
pub(crate) const MAX_GENERATED_BYTES: usize = 10 * 1024 * 1024;
/// Thumbnails fit in this square.
pub(crate) const THUMBNAIL_SIZE: u32 = 240;
/// Pages show images scaled to fit this square (the original is kept for the admin).
pub(crate) const DISPLAY_SIZE: u32 = 1200;
/// A link preview's picture (OpenGraph, Twitter cards): the image cover-cropped to exactly this
/// width and height, as a JPEG.
pub(crate) const SOCIAL_SIZE: (u32, u32) = crate::web::meta::SOCIAL_IMAGE_SIZE;
/// Largest image decoded when no limit is passed (`media.max_image_megapixels` otherwise).
pub(crate) const DEFAULT_MAX_PIXELS: u64 = 40_000_000;
/// Decoding takes memory in proportion to the pixels (4 bytes each, and more for the scaled
/// copies), so only this many images are decoded at once, each on the blocking pool.
const MAX_CONCURRENT_DECODES: usize = 2;
static DECODES: tokio::sync::Semaphore = tokio::sync::Semaphore::const_new(MAX_CONCURRENT_DECODES);
/// Images are immutable under their id, so caches may keep them for a year.
const CACHE_CONTROL: &str = "public, max-age=31536000, immutable";
/// A file only the admin may see (the photo of a draft): no cache keeps it.
const PRIVATE_CACHE_CONTROL: &str = "private, no-store";
/// A stand-in sent while an original's sized copies are being made.
const STAND_IN_CACHE_CONTROL: &str = "public, max-age=60";
/// The files collection of the bucket.
pub const FILES: &str = "assets.files";

/// The image types the shop accepts, told apart by their first bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ImageKind {
    Jpeg,
    Png,
    Gif,
    WebP,
}

impl ImageKind {
    pub fn mime(&self) -> &'static str {
        match self {
            ImageKind::Jpeg => "image/jpeg",
            ImageKind::Png => "image/png",
            ImageKind::Gif => "image/gif",
            ImageKind::WebP => "image/webp",
        }
    }

    /// The decoder that measures the image and makes its thumbnail.
    fn decoder_format(&self) -> image::ImageFormat {
        match self {
            ImageKind::Jpeg => image::ImageFormat::Jpeg,
            ImageKind::Png => image::ImageFormat::Png,
            ImageKind::Gif => image::ImageFormat::Gif,
            ImageKind::WebP => image::ImageFormat::WebP,
        }
    }
}

/// Bytes needed to recognise every accepted type.
const SNIFF_BYTES: usize = 12;

/// The type of an image from its first bytes; `None` for anything else, whatever it is named.
pub(crate) fn sniff(head: &[u8]) -> Option<ImageKind> {
    if head.starts_with(&[0xFF, 0xD8, 0xFF]) {
        Some(ImageKind::Jpeg)
    } else if head.starts_with(b"\x89PNG\r\n\x1a\n") {
        Some(ImageKind::Png)
    } else if head.starts_with(b"GIF87a") || head.starts_with(b"GIF89a") {
        Some(ImageKind::Gif)
    } else if head.len() >= 12 && &head[..4] == b"RIFF" && &head[8..12] == b"WEBP" {
        Some(ImageKind::WebP)
    } else {
        None
    }
}

#[derive(Debug, thiserror::Error)]
pub enum UploadError {
    #[error("the file is not a JPEG, PNG, GIF or WebP image")]
    NotAnImage,
    #[error("the file is larger than {} MiB", .0 / (1024 * 1024))]
    TooLarge(usize),
    #[error("no file was chosen")]
    Empty,
    #[error("the upload was interrupted")]
    Interrupted,
    #[error(
        "the image is {width}×{height} pixels; at most {} megapixels are accepted",
        .max_pixels / 1_000_000
    )]
    TooManyPixels {
        width: u32,
        height: u32,
        max_pixels: u64,
    },
    #[error(transparent)]
    Db(#[from] DbError),
}

impl From<mongodb::error::Error> for UploadError {
    fn from(e: mongodb::error::Error) -> Self {
        UploadError::Db(e.into())
    }
}

/// A stored image, its PNG thumbnail and its size in pixels.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredImage {
    pub id: ObjectId,
    pub thumbnail: ObjectId,
    pub kind: ImageKind,
    pub width: u32,
    pub height: u32,
}

pub fn bucket(db: &Db) -> GridFsBucket {
    // An uploaded photo is shown to the admin as stored.
    db.database().gridfs_bucket(
        GridFsBucketOptions::builder()
            .bucket_name(BUCKET.to_string())
            .write_concern(db.durable_write_concern())
            .build(),
    )
}

/// The copies made of an original (its thumbnail, display copy and social card), as its
/// metadata names them; the sized copies are listed in `sizes` ([`sizes::recorded`]).
pub(crate) const DERIVATIVE_FIELDS: [&str; 3] = ["thumbnail", "display", "social"];
/// The metadata fields of a copy that name its original.
pub(crate) const ORIGINAL_FIELDS: [&str; 4] =
    ["thumbnail_of", "display_of", "social_of", sizes::SIZE_OF];

/// The original a stored file was made from, when it is a copy (a thumbnail or display copy).
pub fn original_named_in(file: &Document) -> Option<ObjectId> {
    let metadata = file.get_document("metadata").ok()?;
    ORIGINAL_FIELDS
        .iter()
        .find_map(|field| metadata.get_object_id(field).ok())
}

/// The copies a stored original names in its metadata, sized copies included.
pub(crate) fn derivatives_named_in(file: &Document) -> Vec<ObjectId> {
    let mut copies: Vec<ObjectId> = file.get_document("metadata").map_or(Vec::new(), |m| {
        DERIVATIVE_FIELDS
            .iter()
            .filter_map(|field| m.get_object_id(field).ok())
            .collect()
    });
    copies.extend(
        sizes::recorded(file)
            .unwrap_or_default()
            .iter()
            .map(|s| s.file),
    );
    copies
}

/// Delete a stored image with every copy made of it (thumbnail, display copy); a file already
/// gone is not an error. Returns how many files were deleted.
pub async fn delete_file(db: &Db, id: ObjectId) -> Result<u64, DbError> {
    let files = db.collection::<Document>(FILES);
    let derivatives = files
        .find_one(doc! { "_id": id })
        .await?
        .map_or(Vec::new(), |f| derivatives_named_in(&f));
    delete_files(db, std::iter::once(id).chain(derivatives)).await
}

/// Delete exactly these stored files (no copies looked up); one already gone is not an error.
/// Returns how many were deleted.
pub async fn delete_files(
    db: &Db,
    ids: impl IntoIterator<Item = ObjectId>,
) -> Result<u64, DbError> {
    let mut deleted = 0;
    for file in ids {
        match bucket(db).delete(Bson::ObjectId(file)).await {
            Ok(()) => deleted += 1,
            Err(e)
                if matches!(
                    e.kind.as_ref(),
                    mongodb::error::ErrorKind::GridFs(
                        mongodb::error::GridFsErrorKind::FileNotFound { .. }
                    )
                ) => {}
            Err(e) => return Err(e.into()),
        }
    }
    Ok(deleted)
}

fn io_error(e: std::io::Error) -> UploadError {
    UploadError::Db(DbError::Other(e.into()))
}

async fn discard(upload: &mut GridFsUploadStream) {
    if let Err(e) = upload.abort().await {
        tracing::warn!(error = %e, "discarding a refused upload failed");
    }
}

/// Stream `body` into the bucket: the first bytes decide the type (nothing is stored for a
/// non-image), then each chunk goes to GridFS as it arrives; an upload over the limit is
/// discarded once it passes `max_bytes`. The thumbnail is made afterwards.
pub async fn store_upload<S, E>(
    db: &Db,
    filename: &str,
    body: S,
    max_bytes: usize,
) -> Result<StoredImage, UploadError>
where
    S: Stream<Item = Result<Bytes, E>> + Unpin,
    E: std::fmt::Display,
{
    store_upload_limited(db, filename, body, max_bytes, DEFAULT_MAX_PIXELS).await
}

/// [`store_upload`] refusing images of more than `max_pixels` (read from the file's header,
/// before anything is decoded).
pub(crate) async fn store_upload_limited<S, E>(
    db: &Db,
    filename: &str,
    mut body: S,
    max_bytes: usize,
    max_pixels: u64,
) -> Result<StoredImage, UploadError>
where
    S: Stream<Item = Result<Bytes, E>> + Unpin,
    E: std::fmt::Display,
{
    let bucket = bucket(db);
    let mut head: Vec<u8> = Vec::with_capacity(SNIFF_BYTES);
    let mut upload: Option<(GridFsUploadStream, ImageKind)> = None;
    let mut total = 0usize;
    while let Some(chunk) = body.next().await {
        let chunk = match chunk {
            Ok(chunk) => chunk,
            Err(e) => {
                tracing::info!(error = %e, "an upload was interrupted");
                if let Some((up, _)) = upload.as_mut() {
                    discard(up).await;
                }
                return Err(UploadError::Interrupted);
            }
        };
        total += chunk.len();
        if total > max_bytes {
            if let Some((up, _)) = upload.as_mut() {
                discard(up).await;
            }
            return Err(UploadError::TooLarge(max_bytes));
        }
        match upload.as_mut() {
            Some((up, _)) => {
                if let Err(e) = up.write_all(&chunk).await {
                    discard(up).await;
                    return Err(io_error(e));
                }
            }
            None => {
                head.extend_from_slice(&chunk);
                if head.len() < SNIFF_BYTES {
                    continue;
                }
                let kind = sniff(&head).ok_or(UploadError::NotAnImage)?;
                let mut up = bucket
                    .open_upload_stream(filename)
                    .metadata(doc! { "content_type": kind.mime() })
                    .await?;
                if let Err(e) = up.write_all(&head).await {
                    discard(&mut up).await;
                    return Err(io_error(e));
                }
                head = Vec::new();
                upload = Some((up, kind));
            }
        }
    }
    let Some((mut up, kind)) = upload else {
        return Err(if head.is_empty() {
            UploadError::Empty
        } else {
            UploadError::NotAnImage
        });
    };
    up.close().await.map_err(io_error)?;
    let id = up.id().as_object_id().ok_or_else(|| {
        UploadError::Db(DbError::Invalid(
            "GridFS returned a file id that is not an ObjectId".into(),
        ))
    })?;
    finish_image(db, id, kind, filename, max_pixels).await
}

/// The scaled copies made of an upload, encoded.
struct Derived {
    width: u32,
    height: u32,
    thumbnail: (Vec<u8>, u32, u32),
    /// `None` when the original already fits [`DISPLAY_SIZE`].
    display: Option<(Vec<u8>, ImageKind, u32, u32)>,
    /// The [`SOCIAL_SIZE`] JPEG, made whatever the original's size.
    social: Vec<u8>,
    /// The copies for pages' `srcset`, smallest first ([`sizes`]).
    sizes: Vec<sizes::Encoded>,
}

/// The image's size from its header alone, refusing more than `max_pixels`.
fn header_dimensions(
    bytes: &[u8],
    format: image::ImageFormat,
    max_pixels: u64,
) -> Result<(u32, u32), UploadError> {
    let (width, height) = image::ImageReader::with_format(Cursor::new(bytes), format)
        .into_dimensions()
        .map_err(|e| {
            tracing::info!(error = %e, "an uploaded image has no readable header");
            UploadError::NotAnImage
        })?;
    if u64::from(width) * u64::from(height) > max_pixels {
        return Err(UploadError::TooManyPixels {
            width,
            height,
            max_pixels,
        });
    }
    Ok((width, height))
}

/// Decode the first frame (with the decoder's own limits set to the measured size, in case the
/// header lied) and turn it upright as its EXIF orientation says (a phone's portrait photo is
/// stored sideways with a tag saying so, and the copies carry no tag). Runs on the blocking
/// pool.
fn decode_oriented(
    bytes: &[u8],
    format: image::ImageFormat,
    (width, height): (u32, u32),
) -> Result<image::DynamicImage, image::ImageError> {
    use image::ImageDecoder;
    let mut reader = image::ImageReader::with_format(Cursor::new(bytes), format);
    let mut limits = image::Limits::default();
    limits.max_image_width = Some(width.max(1));
    limits.max_image_height = Some(height.max(1));
    // Room for the decoded frame at up to 8 bytes a pixel (16-bit RGBA) plus the decoder's own.
    let max_alloc = (u64::from(width) * u64::from(height)).saturating_mul(8) + (64 << 20);
    limits.max_alloc = Some(max_alloc);
    reader.limits(limits);
    let mut decoder = reader.into_decoder()?;
    if decoder.total_bytes() > max_alloc {
        return Err(image::ImageError::Limits(
            image::error::LimitError::from_kind(image::error::LimitErrorKind::InsufficientMemory),
        ));
    }
    // An unreadable orientation is no reason to refuse the picture: it is shown as stored.
    let orientation = decoder
        .orientation()
        .unwrap_or(image::metadata::Orientation::NoTransforms);
    let mut decoded = image::DynamicImage::from_decoder(decoder)?;
    decoded.apply_orientation(orientation);
    Ok(decoded)
}

/// Decode (see [`decode_oriented`]) and make the thumbnail and display copies. Runs on the
/// blocking pool.
fn derive(
    bytes: &[u8],
    format: image::ImageFormat,
    dimensions: (u32, u32),
) -> Result<Derived, image::ImageError> {
    let decoded = decode_oriented(bytes, format, dimensions)?;
    let thumb = decoded.thumbnail(THUMBNAIL_SIZE, THUMBNAIL_SIZE);
    let thumbnail = (encode_png(&thumb)?, thumb.width(), thumb.height());
    let display = if decoded.width() > DISPLAY_SIZE || decoded.height() > DISPLAY_SIZE {
        let scaled = decoded.resize(
            DISPLAY_SIZE,
            DISPLAY_SIZE,
            image::imageops::FilterType::Triangle,
        );
        let (w, h) = (scaled.width(), scaled.height());
        Some(if scaled.color().has_alpha() {
            (encode_png(&scaled)?, ImageKind::Png, w, h)
        } else {
            (encode_jpeg(&scaled, 85)?, ImageKind::Jpeg, w, h)
        })
    } else {
        None
    };
    Ok(Derived {
        width: decoded.width(),
        height: decoded.height(),
        thumbnail,
        display,
        social: social_card(&decoded)?,
        sizes: sizes::scale_all(&decoded)?,
    })
}

/// `img` scaled to cover [`SOCIAL_SIZE`] and cropped to it around its centre, as a JPEG
/// (transparent parts on white).
fn social_card(img: &image::DynamicImage) -> Result<Vec<u8>, image::ImageError> {
    let (width, height) = SOCIAL_SIZE;
    let filled = img.resize_to_fill(width, height, image::imageops::FilterType::Triangle);
    let flat = if filled.color().has_alpha() {
        let rgba = filled.to_rgba8();
        let on_white = image::RgbImage::from_fn(width, height, |x, y| {
            let p = rgba.get_pixel(x, y).0;
            let a = u32::from(p[3]);
            let blend = |c: u8| ((u32::from(c) * a + 255 * (255 - a)) / 255) as u8;
            image::Rgb([blend(p[0]), blend(p[1]), blend(p[2])])
        });
        image::DynamicImage::ImageRgb8(on_white)
    } else {
        filled
    };
    encode_jpeg(&flat, 85)
}

/// `img` as a JPEG of `quality` (1–100). The encoder writes a JFIF header and the pixels: no
/// EXIF, XMP or ICC segment.
fn encode_jpeg(img: &image::DynamicImage, quality: u8) -> Result<Vec<u8>, image::ImageError> {
    let mut out = Cursor::new(Vec::new());
    let rgb = image::DynamicImage::ImageRgb8(img.to_rgb8());
    rgb.write_with_encoder(image::codecs::jpeg::JpegEncoder::new_with_quality(
        &mut out, quality,
    ))?;
    Ok(out.into_inner())
}

/// Measure a stored image and make its thumbnail, display copy, social card and sized copies
/// (from the first frame of an animation, turned upright as its EXIF orientation says). The
/// size is read from the header first: an image over `max_pixels` is refused without being
/// decoded, however small the file (a few bytes can declare billions of pixels).
/// A file whose first bytes claim an image type but that does not decode is deleted and
/// refused.
async fn finish_image(
    db: &Db,
    id: ObjectId,
    kind: ImageKind,
    filename: &str,
    max_pixels: u64,
) -> Result<StoredImage, UploadError> {
    let format = kind.decoder_format();
    let mut bytes = Vec::new();
    let mut download = bucket(db).open_download_stream(Bson::ObjectId(id)).await?;
    download.read_to_end(&mut bytes).await.map_err(io_error)?;
    let refuse = |e: UploadError| async move {
        bucket(db).delete(Bson::ObjectId(id)).await?;
        Err::<StoredImage, UploadError>(e)
    };
    let dimensions = match header_dimensions(&bytes, format, max_pixels) {
        Ok(d) => d,
        Err(e) => return refuse(e).await,
    };
    let slot = DECODES
        .acquire()
        .await
        .map_err(|e| UploadError::Db(DbError::Invalid(e.to_string())))?;
    // The slot moves into the decoding task: if this request is abandoned, the decode still
    // counts against the bound until it really ends.
    let derived = tokio::task::spawn_blocking(move || {
        let _slot = slot;
        derive(&bytes, format, dimensions)
    })
    .await;
    let derived = match derived {
        Ok(Ok(d)) => d,
        Ok(Err(e)) => {
            tracing::info!(error = %e, "an uploaded image does not decode");
            return refuse(UploadError::NotAnImage).await;
        }
        Err(e) => {
            tracing::error!(error = %e, "decoding an upload failed");
            return refuse(UploadError::NotAnImage).await;
        }
    };
    let (thumb_png, thumb_w, thumb_h) = derived.thumbnail;
    let thumbnail = store_bytes(
        db,
        &format!("thumb-{filename}"),
        &thumb_png,
        doc! { "content_type": ImageKind::Png.mime(), "thumbnail_of": id,
        "width": thumb_w, "height": thumb_h },
    )
    .await?;
    let mut set = doc! { "metadata.width": derived.width, "metadata.height": derived.height,
    "metadata.thumbnail": thumbnail };
    if let Some((encoded, display_kind, w, h)) = derived.display {
        let display = store_bytes(
            db,
            &format!("display-{filename}"),
            &encoded,
            doc! { "content_type": display_kind.mime(), "display_of": id,
            "width": w, "height": h },
        )
        .await?;
        set.insert("metadata.display", display);
    }
    let (social_w, social_h) = SOCIAL_SIZE;
    let social = store_bytes(
        db,
        &format!("social-{filename}"),
        &derived.social,
        doc! { "content_type": ImageKind::Jpeg.mime(), "social_of": id,
        "width": social_w, "height": social_h },
    )
    .await?;
    set.insert("metadata.social", social);
    let mut made = Vec::with_capacity(derived.sizes.len());
    for (encoded, size_kind, width, height) in derived.sizes {
        let file = store_bytes(
            db,
            &format!("w{width}-{filename}"),
            &encoded,
            doc! { "content_type": size_kind.mime(), sizes::SIZE_OF: id,
            "width": width, "height": height },
        )
        .await?;
        made.push(sizes::Size {
            file,
            width,
            height,
        });
    }
    set.insert("metadata.sizes", sizes::to_list(&made));
    db.durable::<Document>(&format!("{BUCKET}.files"))
        .update_one(doc! { "_id": id }, doc! { "$set": set })
        .await?;
    Ok(StoredImage {
        id,
        thumbnail,
        kind,
        width: derived.width,
        height: derived.height,
    })
}

fn encode_png(img: &image::DynamicImage) -> Result<Vec<u8>, image::ImageError> {
    let mut out = Cursor::new(Vec::new());
    img.write_to(&mut out, image::ImageFormat::Png)?;
    Ok(out.into_inner())
}

/// Store bytes made by the app itself (thumbnails, demo covers).
async fn store_bytes(
    db: &Db,
    filename: &str,
    bytes: &[u8],
    metadata: Document,
) -> Result<ObjectId, UploadError> {
    let mut up = bucket(db)
        .open_upload_stream(filename)
        .metadata(metadata)
        .await?;
    if let Err(e) = up.write_all(bytes).await {
        discard(&mut up).await;
        return Err(io_error(e));
    }
    up.close().await.map_err(io_error)?;
    up.id().as_object_id().ok_or_else(|| {
        UploadError::Db(DbError::Invalid(
            "GridFS returned a file id that is not an ObjectId".into(),
        ))
    })
}

/// A demo cover: a colour field with bands, its colours taken from the title so every product
/// looks different, stored with its thumbnail as `{name}.png` (callers pass the title's slug).
pub async fn store_generated_cover(
    db: &Db,
    title: &str,
    name: &str,
) -> Result<StoredImage, UploadError> {
    let hash = title.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3)
    });
    let channel = |shift: u32| ((hash >> shift) & 0xff) as u8;
    let base = [channel(0), channel(8), channel(16)];
    let band = [255 - base[0], 255 - base[1], 255 - base[2]];
    let stripes = 3 + (hash >> 24) as u32 % 5;
    let size = 320u32;
    let img = image::RgbImage::from_fn(size, size, |x, y| {
        let diagonal = (x + y) * stripes / (2 * size);
        let in_band = diagonal % 2 == 1 && y > size / 5;
        let shade = |c: u8| (u32::from(c) * (2 * size - y / 2) / (2 * size)) as u8;
        let rgb = if in_band { band } else { base };
        image::Rgb([shade(rgb[0]), shade(rgb[1]), shade(rgb[2])])
    });
    let img = image::DynamicImage::ImageRgb8(img);
    let png = encode_png(&img).map_err(|e| UploadError::Db(DbError::Invalid(e.to_string())))?;
    let filename = format!("{name}.png");
    let body = futures::stream::iter([Ok::<Bytes, std::io::Error>(Bytes::from(png))]);
    store_upload(db, &filename, body, MAX_GENERATED_BYTES).await
}

/// An id from the URL; one that is not an ObjectId is a 404.
use crate::web::parse_object_id as parse_id;

/// Which copy of an image a URL asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Variant {
    /// `/media/{id}`: the file itself.
    Original,
    /// `/media/{id}/thumb`: its thumbnail (the file itself when it has none).
    Thumbnail,
    /// `/media/{id}/display`: the copy scaled for pages (the file itself when small enough).
    Display,
    /// `/media/{id}/social`: the [`SOCIAL_SIZE`] card for link previews (the file itself for
    /// an image stored before cards were made).
    Social,
    /// `/media/{id}/w/{width}`: the sized copy for a `srcset` candidate of that width
    /// ([`sizes`]); public only.
    Width(u32),
}

impl Variant {
    fn field(self) -> Option<&'static str> {
        match self {
            Variant::Original | Variant::Width(_) => None,
            Variant::Thumbnail => Some("thumbnail"),
            Variant::Display => Some("display"),
            Variant::Social => Some("social"),
        }
    }

    /// The width of sized copy that stands in for this variant of an original that has no
    /// such copy of its own (public URLs never send the original itself).
    fn stand_in_width(self) -> u32 {
        match self {
            Variant::Original | Variant::Social => u32::MAX,
            Variant::Display => DISPLAY_SIZE,
            Variant::Thumbnail => THUMBNAIL_SIZE,
            Variant::Width(w) => w,
        }
    }
}

/// A URL's file, found: the file to send and the original it belongs to (the file itself when
/// it is an original), whose owner decides who may see it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Resolved {
    pub(crate) file: ObjectId,
    pub(crate) original: ObjectId,
    /// False when the file only stands in until the sized copies exist (they are being made):
    /// the answer may then be cached only briefly.
    pub(crate) lasting: bool,
}

/// The files-collection entry of stored file `id`, its `metadata` only.
async fn file_metadata(db: &Db, id: ObjectId) -> Result<Option<Document>, DbError> {
    Ok(db
        .collection::<Document>(FILES)
        .find_one(doc! { "_id": id })
        .projection(doc! { "metadata": 1 })
        .await?)
}

/// The file to send for `variant` of stored file `id`; `None` when there is no such file.
pub(crate) async fn resolve(
    db: &Db,
    id: ObjectId,
    variant: Variant,
) -> Result<Option<Resolved>, DbError> {
    let Some(entry) = file_metadata(db, id).await? else {
        return Ok(None);
    };
    let file = variant
        .field()
        .and_then(|field| {
            entry
                .get_document("metadata")
                .ok()?
                .get_object_id(field)
                .ok()
        })
        .unwrap_or(id);
    Ok(Some(Resolved {
        file,
        original: original_named_in(&entry).unwrap_or(id),
        lasting: true,
    }))
}

/// The file a public URL sends for `variant` of stored file `id`: a copy, never an original
/// (which may carry its uploader's EXIF: GPS position, camera). A copy's own id is the copy; an
/// original's thumbnail, display copy or social card when it has that one; otherwise one of its
/// sized copies (made now if it has none yet, under the decode bound), and while another request
/// or instance is making them, the display copy or thumbnail stands in. `None` when there is no
/// such file, or nothing re-encoded to send yet.
pub(crate) async fn resolve_public(
    db: &Db,
    id: ObjectId,
    variant: Variant,
    max_pixels: u64,
) -> Result<Option<Resolved>, DbError> {
    let Some(entry) = file_metadata(db, id).await? else {
        return Ok(None);
    };
    if let Some(original) = original_named_in(&entry) {
        return Ok(Some(Resolved {
            file: id,
            original,
            lasting: true,
        }));
    }
    let metadata = entry.get_document("metadata").ok();
    let copy = |field: &str| metadata.and_then(|m| m.get_object_id(field).ok());
    if let Some(file) = variant.field().and_then(copy) {
        return Ok(Some(Resolved {
            file,
            original: id,
            lasting: true,
        }));
    }
    let made = match sizes::recorded(&entry) {
        Some(made) => sizes::Sizes::Made(made),
        None => match sizes::ensure(db, id, max_pixels).await? {
            Some(sizes) => sizes,
            None => return Ok(None),
        },
    };
    let (file, lasting) = match made {
        sizes::Sizes::Made(made) => (
            sizes::pick(&made, variant.stand_in_width()).map(|s| s.file),
            true,
        ),
        sizes::Sizes::Busy => (None, false),
    };
    // No sized copy (being made, or the image would not decode): the copies made at upload.
    let Some(file) = file
        .or_else(|| copy("display"))
        .or_else(|| copy("thumbnail"))
    else {
        return Ok(None);
    };
    Ok(Some(Resolved {
        file,
        original: id,
        lasting,
    }))
}

/// Who a file is sent to, which decides how it may be cached.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Audience {
    /// Anyone: cached for a year by browsers and shared caches.
    Public,
    /// Only the admin: never kept by a cache.
    Private,
    /// Anyone, but a stand-in that a better file replaces soon: caches keep it a minute.
    PublicForNow,
}

/// `GET /admin/media/{file_id}` (behind the admin's sign-in): any stored file, drafts' photos
/// included, never cached.
pub(crate) async fn serve_private(
    req: HttpRequest,
    state: web::Data<AppState>,
    id: web::Path<String>,
) -> Result<HttpResponse, AppError> {
    serve_private_variant(&req, &state.db, &id, Variant::Original).await
}

/// `GET /admin/media/{file_id}/thumb`
pub(crate) async fn serve_private_thumbnail(
    req: HttpRequest,
    state: web::Data<AppState>,
    id: web::Path<String>,
) -> Result<HttpResponse, AppError> {
    serve_private_variant(&req, &state.db, &id, Variant::Thumbnail).await
}

/// `GET /admin/media/{file_id}/display`
pub(crate) async fn serve_private_display(
    req: HttpRequest,
    state: web::Data<AppState>,
    id: web::Path<String>,
) -> Result<HttpResponse, AppError> {
    serve_private_variant(&req, &state.db, &id, Variant::Display).await
}

async fn serve_private_variant(
    req: &HttpRequest,
    db: &Db,
    id: &str,
    variant: Variant,
) -> Result<HttpResponse, AppError> {
    let resolved = resolve(db, parse_id(id)?, variant)
        .await?
        .ok_or(AppError::NotFound)?;
    send(req, db, resolved.file, Audience::Private).await
}

/// Send stored file `id` with its type, length and ETag (304 when the client has it), cached as
/// `audience` allows.
pub(crate) async fn send(
    req: &HttpRequest,
    db: &Db,
    id: ObjectId,
    audience: Audience,
) -> Result<HttpResponse, AppError> {
    let cache_control = match audience {
        Audience::Public => CACHE_CONTROL,
        Audience::Private => PRIVATE_CACHE_CONTROL,
        Audience::PublicForNow => STAND_IN_CACHE_CONTROL,
    };
    let bucket = bucket(db);
    let file = bucket
        .find_one(doc! { "_id": id })
        .await
        .map_err(DbError::from)?
        .ok_or(AppError::NotFound)?;
    let etag = format!("\"{}\"", id.to_hex());
    if crate::web::conditional::matches_etag(req, &etag) {
        return Ok(HttpResponse::NotModified()
            .insert_header((header::ETAG, etag))
            .insert_header((header::CACHE_CONTROL, cache_control))
            .finish());
    }
    let content_type = file
        .metadata
        .as_ref()
        .and_then(|m| m.get_str("content_type").ok())
        .unwrap_or("application/octet-stream")
        .to_string();
    let download = bucket
        .open_download_stream(Bson::ObjectId(id))
        .await
        .map_err(DbError::from)?;
    // Read the file from GridFS chunk by chunk as the client receives it.
    let chunks = futures::stream::unfold(Some(download), |state| async move {
        let mut download = state?;
        let mut buf = vec![0u8; 64 * 1024];
        match download.read(&mut buf).await {
            Ok(0) => None,
            Ok(n) => {
                buf.truncate(n);
                Some((
                    Ok::<Bytes, std::io::Error>(Bytes::from(buf)),
                    Some(download),
                ))
            }
            Err(e) => Some((Err(e), None)),
        }
    });
    Ok(HttpResponse::Ok()
        .insert_header((header::CONTENT_TYPE, content_type))
        .insert_header((header::ETAG, etag))
        .insert_header((header::CACHE_CONTROL, cache_control))
        .body(SizedStream::new(file.length, Box::pin(chunks))))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn image_types_are_told_by_their_first_bytes() {
        assert_eq!(
            sniff(&[0xFF, 0xD8, 0xFF, 0xE0, 0, 0, 0, 0, 0, 0, 0, 0]),
            Some(ImageKind::Jpeg)
        );
        assert_eq!(sniff(b"\x89PNG\r\n\x1a\n\0\0\0\r"), Some(ImageKind::Png));
        assert_eq!(sniff(b"GIF89a\x01\0\x01\0\0\0"), Some(ImageKind::Gif));
        assert_eq!(sniff(b"RIFF\x24\0\0\0WEBPVP8 "), Some(ImageKind::WebP));
        assert_eq!(sniff(b"<svg xmlns=\"http://www.w3.org/2000/svg\">"), None);
        assert_eq!(sniff(b"%PDF-1.7\n%\xE2\xE3\xCF\xD3"), None);
        assert_eq!(sniff(b"RIFF\x24\0\0\0WAVEfmt "), None);
    }
}
