//! Sized copies of an original for pages' `srcset`: [`WIDTHS`] pixels wide (never wider than
//! the original, whose own width up to the largest of them is made too), re-encoded from the
//! decoded pixels with the EXIF orientation applied. The encoders write no EXIF, XMP or comment
//! segment, so nothing the uploader's camera or phone wrote (GPS position, camera serial) is in
//! a copy; the public `/media/…` URLs send only such copies, never an original (see
//! docs/architecture.md, "Images").
//!
//! The copies are JPEG (PNG for an image with transparency): `image`'s WebP encoder is lossless
//! only, which makes a photo larger than the JPEG, and the AVIF encoders are either a C library
//! or a slow build of rav1e; JPEG at [`QUALITY`] is what every browser reads.
//!
//! Made once per original: by the upload, from the same decode as its thumbnail (one decode slot,
//! held as before; the upload waits for the scaling and encoding too, but a background job would
//! have to decode the photo a second time), or, for an image stored before sizes existed, by the
//! first request that needs them ([`ensure`]). Several requests or instances may want those at
//! once: the maker takes `metadata.sizing` on the original (free, or older than
//! [`SIZING_TIMEOUT_MS`]), and the list is recorded only where none is yet (`metadata.sizes`
//! absent), so a second maker's copies are deleted, never recorded twice.

use bson::oid::ObjectId;
use bson::{doc, Bson, DateTime, Document};
use futures::io::AsyncReadExt;
use image::DynamicImage;

use super::{
    bucket, decode_oriented, encode_jpeg, encode_png, header_dimensions, io_error, sniff,
    store_bytes, ImageKind, UploadError, DECODES, FILES,
};
use crate::db::{Db, DbError};

/// The widths of the copies, smallest first.
pub(crate) const WIDTHS: [u32; 4] = [400, 800, 1200, 2000];
/// JPEG quality of the copies: a 800 px photo stays well under 150 KB.
pub(crate) const QUALITY: u8 = 80;
/// A maker that has not recorded its copies after this long is taken to have crashed.
pub(crate) const SIZING_TIMEOUT_MS: i64 = 2 * 60 * 1000;
/// The metadata field of a copy naming its original.
pub(crate) const SIZE_OF: &str = "size_of";

/// The widths made of an original `width` pixels wide: those of [`WIDTHS`] below it, then its
/// own width capped at the largest; none for an unknown width (0).
pub(crate) fn widths_for(width: u32) -> Vec<u32> {
    let largest = width.min(WIDTHS[WIDTHS.len() - 1]);
    let mut widths: Vec<u32> = WIDTHS.iter().copied().filter(|w| *w < largest).collect();
    if largest > 0 {
        widths.push(largest);
    }
    widths
}

/// One sized copy, as the original's `metadata.sizes` lists it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Size {
    pub file: ObjectId,
    pub width: u32,
    pub(crate) height: u32,
}

impl Size {
    fn to_document(self) -> Document {
        doc! { "file": self.file, "width": i64::from(self.width), "height": i64::from(self.height) }
    }

    fn from_document(d: &Document) -> Option<Size> {
        let number = |field: &str| match d.get(field)? {
            Bson::Int32(n) => u32::try_from(*n).ok(),
            Bson::Int64(n) => u32::try_from(*n).ok(),
            _ => None,
        };
        Some(Size {
            file: d.get_object_id("file").ok()?,
            width: number("width")?,
            height: number("height")?,
        })
    }
}

/// `sizes` as the original's `metadata.sizes` stores them.
pub(crate) fn to_list(sizes: &[Size]) -> Vec<Document> {
    sizes.iter().map(|s| s.to_document()).collect()
}

/// The copies an original's entry records, smallest first; `None` when none were made yet (an
/// empty list: the image could not be decoded when they were made, so none will be).
pub fn recorded(entry: &Document) -> Option<Vec<Size>> {
    let list = entry
        .get_document("metadata")
        .ok()?
        .get_array("sizes")
        .ok()?;
    let mut sizes: Vec<Size> = list
        .iter()
        .filter_map(|item| Size::from_document(item.as_document()?))
        .collect();
    sizes.sort_by_key(|s| s.width);
    Some(sizes)
}

/// The copy to send for a request of `width` pixels: the smallest at least that wide, else the
/// largest (a photo narrower than asked).
pub(crate) fn pick(sizes: &[Size], width: u32) -> Option<Size> {
    sizes
        .iter()
        .find(|s| s.width >= width)
        .or(sizes.last())
        .copied()
}

/// Whether an original's copies exist, or are being made by someone else.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Sizes {
    Made(Vec<Size>),
    /// Another request or instance holds `metadata.sizing`.
    Busy,
}

/// The copies of original `id`, made now unless they exist or someone else is making them;
/// `None` when there is no such file. The work runs as its own task, so a request that is
/// abandoned meanwhile does not leave half of it undone; decoding takes one of the decode slots.
pub(crate) async fn ensure(
    db: &Db,
    id: ObjectId,
    max_pixels: u64,
) -> Result<Option<Sizes>, DbError> {
    let task = tokio::spawn(make(db.clone(), id, max_pixels));
    match task.await {
        Ok(outcome) => outcome,
        Err(e) => Err(DbError::Invalid(format!("making sized copies failed: {e}"))),
    }
}

async fn make(db: Db, id: ObjectId, max_pixels: u64) -> Result<Option<Sizes>, DbError> {
    let files = db.collection::<Document>(FILES);
    let now = db.now();
    let stale = DateTime::from_millis(now.timestamp_millis() - SIZING_TIMEOUT_MS);
    let taken = files
        .find_one_and_update(
            doc! {
                "_id": id,
                "metadata.sizes": { "$exists": false },
                "$or": [ { "metadata.sizing": Bson::Null }, { "metadata.sizing": { "$lt": stale } } ],
            },
            doc! { "$set": { "metadata.sizing": now } },
        )
        .await?;
    let Some(entry) = taken else {
        return Ok(files
            .find_one(doc! { "_id": id })
            .await?
            .map(|entry| recorded(&entry).map_or(Sizes::Busy, Sizes::Made)));
    };
    let filename = entry.get_str("filename").unwrap_or("image").to_string();
    let encoded = match encode_sizes(&db, id, max_pixels).await {
        Ok(encoded) => encoded,
        Err(UploadError::Db(e)) => return Err(e),
        Err(e) => {
            // Recorded as none, so no request decodes it again: pages fall back to the copies
            // made at upload.
            tracing::warn!(error = %e, file = %id, "a stored image could not be sized");
            Vec::new()
        }
    };
    let mut sizes = Vec::with_capacity(encoded.len());
    for (bytes, kind, width, height) in encoded {
        let file = store_bytes(
            &db,
            &format!("w{width}-{filename}"),
            &bytes,
            doc! { "content_type": kind.mime(), SIZE_OF: id,
            "width": i64::from(width), "height": i64::from(height) },
        )
        .await
        .map_err(|e| match e {
            UploadError::Db(e) => e,
            other => DbError::Invalid(other.to_string()),
        })?;
        sizes.push(Size {
            file,
            width,
            height,
        });
    }
    let list = to_list(&sizes);
    let recorded_now = db
        .durable::<Document>(FILES)
        .update_one(
            doc! { "_id": id, "metadata.sizes": { "$exists": false } },
            doc! { "$set": { "metadata.sizes": list }, "$unset": { "metadata.sizing": "" } },
        )
        .await?;
    if recorded_now.matched_count == 0 {
        // Another maker (after this one's lease ran out) recorded its own, or the original was
        // deleted meanwhile: these copies are nobody's.
        let unrecorded: Vec<ObjectId> = sizes.iter().map(|s| s.file).collect();
        super::delete_files(&db, unrecorded).await?;
        return Ok(files
            .find_one(doc! { "_id": id })
            .await?
            .map(|entry| recorded(&entry).map_or(Sizes::Busy, Sizes::Made)));
    }
    Ok(Some(Sizes::Made(sizes)))
}

/// Read original `id`, decode it (under the decode bound, on the blocking pool) and encode
/// each width of [`widths_for`] its oriented width.
async fn encode_sizes(db: &Db, id: ObjectId, max_pixels: u64) -> Result<Vec<Encoded>, UploadError> {
    let mut bytes = Vec::new();
    let mut download = bucket(db).open_download_stream(Bson::ObjectId(id)).await?;
    download.read_to_end(&mut bytes).await.map_err(io_error)?;
    let kind = sniff(&bytes).ok_or(UploadError::NotAnImage)?;
    let format = kind.decoder_format();
    let dimensions = header_dimensions(&bytes, format, max_pixels)?;
    let slot = DECODES
        .acquire()
        .await
        .map_err(|e| UploadError::Db(DbError::Invalid(e.to_string())))?;
    tokio::task::spawn_blocking(move || {
        let _slot = slot;
        let decoded = decode_oriented(&bytes, format, dimensions)?;
        scale_all(&decoded)
    })
    .await
    .map_err(|e| UploadError::Db(DbError::Invalid(e.to_string())))?
    .map_err(|e| {
        tracing::info!(error = %e, "a stored image does not decode");
        UploadError::NotAnImage
    })
}

/// An encoded copy: bytes, type, width, height.
pub(super) type Encoded = (Vec<u8>, ImageKind, u32, u32);

/// Every width of `img` ([`widths_for`]), smallest first; the largest is scaled from the image
/// and each smaller one from the one before (a fraction of the work, at the same quality for
/// these ratios). Runs on the blocking pool.
pub(super) fn scale_all(img: &DynamicImage) -> Result<Vec<Encoded>, image::ImageError> {
    let (width, height) = (img.width(), img.height());
    let alpha = img.color().has_alpha();
    let mut out = Vec::new();
    let mut source: Option<DynamicImage> = None;
    for w in widths_for(width).into_iter().rev() {
        // Height in proportion, rounded, at least one pixel.
        let h = ((u64::from(height) * u64::from(w) + u64::from(width) / 2) / u64::from(width))
            .max(1) as u32;
        let from = source.as_ref().unwrap_or(img);
        let scaled = if (w, h) == (from.width(), from.height()) {
            from.clone()
        } else {
            from.resize_exact(w, h, image::imageops::FilterType::Triangle)
        };
        let (bytes, kind) = if alpha {
            (encode_png(&scaled)?, ImageKind::Png)
        } else {
            (encode_jpeg(&scaled, QUALITY)?, ImageKind::Jpeg)
        };
        out.push((bytes, kind, w, h));
        source = Some(scaled);
    }
    out.reverse();
    Ok(out)
}

/// What an `<img>` of a stored original needs: `src` (a middle width, for browsers that read no
/// `srcset`), the `srcset` of every width the original gets, and its size in pixels (so the page
/// keeps its room before the image arrives).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Responsive {
    pub(crate) src: String,
    pub(crate) srcset: String,
    pub width: u32,
    pub(crate) height: u32,
}

/// The URL of the copy of original `id` that is `width` pixels wide.
pub(crate) fn url(id: ObjectId, width: u32) -> String {
    format!("/media/{}/w/{width}", id.to_hex())
}

/// The `<img>` attributes of original `id` of `width`×`height` pixels; `None` for an unknown
/// size (an image stored before sizes were recorded), which pages show by `/media/{id}`.
pub(crate) fn responsive(id: ObjectId, width: u32, height: u32) -> Option<Responsive> {
    if width == 0 || height == 0 {
        return None;
    }
    let widths = widths_for(width);
    let src_width = widths
        .iter()
        .copied()
        .rfind(|w| *w <= 800)
        .or(widths.first().copied())?;
    let srcset = widths
        .iter()
        .map(|w| format!("{} {w}w", url(id, *w)))
        .collect::<Vec<_>>()
        .join(", ");
    Some(Responsive {
        src: url(id, src_width),
        srcset,
        width,
        height,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn widths_stop_at_the_original_and_include_it_up_to_the_largest() {
        assert_eq!(widths_for(4032), vec![400, 800, 1200, 2000]);
        assert_eq!(widths_for(2000), vec![400, 800, 1200, 2000]);
        assert_eq!(widths_for(1000), vec![400, 800, 1000]);
        assert_eq!(widths_for(400), vec![400]);
        assert_eq!(widths_for(300), vec![300]);
        assert_eq!(widths_for(0), Vec::<u32>::new());
    }

    #[test]
    fn a_request_gets_the_smallest_copy_at_least_as_wide_or_the_largest() {
        let size = |width| Size {
            file: ObjectId::new(),
            width,
            height: width,
        };
        let sizes = [size(400), size(800), size(1000)];
        assert_eq!(pick(&sizes, 400).map(|s| s.width), Some(400));
        assert_eq!(pick(&sizes, 500).map(|s| s.width), Some(800));
        assert_eq!(pick(&sizes, 2000).map(|s| s.width), Some(1000));
        assert_eq!(pick(&[], 400), None);
    }

    #[test]
    fn the_img_attributes_list_every_width_and_fall_back_to_a_middle_one() {
        let id = ObjectId::parse_str("0123456789abcdef01234567").unwrap();
        let r = responsive(id, 4000, 3000).unwrap();
        assert_eq!(r.src, "/media/0123456789abcdef01234567/w/800");
        assert!(r
            .srcset
            .starts_with("/media/0123456789abcdef01234567/w/400 400w, "));
        assert!(r.srcset.ends_with("/w/2000 2000w"));
        assert_eq!((r.width, r.height), (4000, 3000));
        assert_eq!(responsive(id, 300, 200).unwrap().src, url(id, 300));
        assert_eq!(responsive(id, 0, 0), None);
    }
}
