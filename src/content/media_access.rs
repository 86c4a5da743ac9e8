//! Who may fetch a stored image at the public `/media/{id}` URLs. A draft's page is hidden, so
//! its photo must be too (file ids are ObjectIds, made in sequence and easy to guess): a file
//! that only unpublished nodes show is served to the admin alone (Basic credentials on the
//! request; the admin's own pages link `/admin/media/…`) and to a browser that opened a valid
//! preview link of one of those nodes (`content::preview::granted`), never cached, and is a 404
//! for everyone else. Everything else (published photos, product photos, files only Markdown links
//! to) stays public and cacheable for a year.
//!
//! None of these URLs sends an original as uploaded (it may carry the uploader's EXIF: GPS
//! position, camera): `media::resolve_public` picks a re-encoded copy, so `/media/{id}` links
//! already written in Markdown keep working and show the largest sized copy. The original is
//! the admin's, at `/admin/media/{id}`.

use actix_session::SessionExt;
use actix_web::{web, HttpRequest, HttpResponse};
use bson::doc;
use bson::oid::ObjectId;
use futures::TryStreamExt;

use crate::content::{model, preview, store};
use crate::db::{Db, DbError};
use crate::media::{self, Audience, Variant};
use crate::state::AppState;
use crate::web::basic_auth::carries_admin_credentials;
use crate::web::errors::AppError;
use crate::web::parse_object_id;

/// The nodes that show original `file` when only nodes the public cannot see show it: at least
/// one node shows it, none of them is published yet (a draft, or scheduled for a later date:
/// checked against the clock at each request), and no product shows it. `None` when the file
/// is public. Both finds use an index (`photo_file` on nodes, `photos` on products).
pub(crate) async fn drafts_only_showing(
    db: &Db,
    file: ObjectId,
) -> Result<Option<Vec<ObjectId>>, DbError> {
    let nodes: Vec<model::Node> = store::collection(db)
        .find(doc! { "metadata.detail.file_id": file })
        .limit(20)
        .await?
        .try_collect()
        .await?;
    let now = db.now();
    if nodes.is_empty() || nodes.iter().any(|n| n.is_published(now)) {
        return Ok(None);
    }
    let on_a_product = db
        .collection::<bson::Document>(crate::catalog::products::COLLECTION)
        .find_one(doc! { "photos": file })
        .projection(doc! { "_id": 1 })
        .await?
        .is_some();
    Ok((!on_a_product).then(|| nodes.iter().map(|n| n.id).collect()))
}

/// `GET /media/{file_id}`
pub(crate) async fn serve(
    req: HttpRequest,
    state: web::Data<AppState>,
    id: web::Path<String>,
) -> Result<HttpResponse, AppError> {
    serve_variant(&req, &state, &id, Variant::Original).await
}

/// `GET /media/{file_id}/thumb`: the image's thumbnail (the image itself when it has none).
pub(crate) async fn serve_thumbnail(
    req: HttpRequest,
    state: web::Data<AppState>,
    id: web::Path<String>,
) -> Result<HttpResponse, AppError> {
    serve_variant(&req, &state, &id, Variant::Thumbnail).await
}

/// `GET /media/{file_id}/display`: the copy scaled for pages (the image itself when it is small
/// enough already).
pub(crate) async fn serve_display(
    req: HttpRequest,
    state: web::Data<AppState>,
    id: web::Path<String>,
) -> Result<HttpResponse, AppError> {
    serve_variant(&req, &state, &id, Variant::Display).await
}

/// `GET /media/{file_id}/social`: the 1200×630 card link previews show (OpenGraph, Twitter).
pub(crate) async fn serve_social(
    req: HttpRequest,
    state: web::Data<AppState>,
    id: web::Path<String>,
) -> Result<HttpResponse, AppError> {
    serve_variant(&req, &state, &id, Variant::Social).await
}

/// `GET /media/{file_id}/w/{width}`: the sized copy for a `srcset` candidate that wide (the
/// nearest one the image has; see `media::sizes`).
pub(crate) async fn serve_width(
    req: HttpRequest,
    state: web::Data<AppState>,
    path: web::Path<(String, String)>,
) -> Result<HttpResponse, AppError> {
    let (id, width) = path.into_inner();
    let width: u32 = width.parse().map_err(|_| AppError::NotFound)?;
    serve_variant(&req, &state, &id, Variant::Width(width)).await
}

async fn serve_variant(
    req: &HttpRequest,
    state: &AppState,
    id: &str,
    variant: Variant,
) -> Result<HttpResponse, AppError> {
    let db = &state.db;
    let id = parse_object_id(id)?;
    // Who may see it is decided before anything is made: a guesser must not get a draft's
    // sized copies made (nor tell it exists by how long the answer takes).
    let original = media::resolve(db, id, Variant::Original)
        .await?
        .ok_or(AppError::NotFound)?
        .original;
    let drafts = drafts_only_showing(db, original).await?;
    let private = drafts.is_some();
    if let Some(drafts) = drafts {
        // A reviewer who opened a valid preview link of one of those drafts sees its photo;
        // anyone else gets the same answer as for a file that does not exist: nothing tells a
        // guesser it is there.
        let previewing = preview::granted(&req.get_session(), &drafts, db.now());
        if !previewing && !carries_admin_credentials(req).await {
            return Err(AppError::NotFound);
        }
    }
    let resolved = media::resolve_public(db, id, variant, state.max_image_pixels)
        .await?
        .ok_or(AppError::NotFound)?;
    let audience = if private {
        Audience::Private
    } else if resolved.lasting {
        Audience::Public
    } else {
        Audience::PublicForNow
    };
    media::send(req, db, resolved.file, audience).await
}
