//! Admin product lifecycle actions beyond the form: creating a product with its photos in one
//! go, deleting a never-ordered product through a confirmation page, and removing or
//! reordering its photos.

use std::collections::HashMap;

use actix_session::SessionExt;
use actix_web::{web, HttpRequest, HttpResponse};
use askama::Template;
use bson::oid::ObjectId;

use crate::admin::products::{create_product, kind_param, NewPhotos};
use crate::catalog::lifecycle::{self, DeleteRefused, Move};
use crate::catalog::products::{self, Product};
use crate::checkout::orders;
use crate::state::AppState;
use crate::web::errors::AppError;
use crate::web::flash::{self, Level};
use crate::web::layout::{render, Layout};
use crate::web::see_other;

#[derive(Template)]
#[template(path = "admin/products/delete.html")]
pub(crate) struct DeleteProductPage {
    pub(crate) layout: Layout,
    pub(crate) product: Product,
    /// Why it may not be deleted; `None`: it may.
    pub(crate) refusal: Option<String>,
}

fn parse_id(id: &str) -> Result<ObjectId, AppError> {
    ObjectId::parse_str(id).map_err(|_| AppError::NotFound)
}

async fn existing(state: &AppState, id: &str) -> Result<Product, AppError> {
    products::by_id(&state.db, parse_id(id)?)
        .await?
        .ok_or(AppError::NotFound)
}

fn edit_url(product: &Product) -> String {
    format!("/admin/products/{}/edit", product.id.to_hex())
}

/// A refusal in words, or the database error as an error page.
fn refusal_text(e: DeleteRefused) -> Result<String, AppError> {
    match e {
        DeleteRefused::Db(e) => Err(e.into()),
        other => Ok(other.to_string()),
    }
}

/// `GET /admin/products/{id}/delete`: what deleting would do, or why it cannot be done.
pub(crate) async fn confirm_delete(
    req: HttpRequest,
    state: web::Data<AppState>,
    id: web::Path<String>,
) -> Result<HttpResponse, AppError> {
    let product = existing(&state, &id).await?;
    let orders = orders::count_listing(&state.db, &product.sku).await?;
    let refusal = match lifecycle::check_deletable(&product, orders) {
        Ok(()) => None,
        Err(e) => Some(refusal_text(e)?),
    };
    render(&DeleteProductPage {
        layout: Layout::admin(&req),
        product,
        refusal,
    })
}

/// `POST /admin/products/{id}/delete`: delete a product never ordered and not in any cart.
pub(crate) async fn delete(
    req: HttpRequest,
    state: web::Data<AppState>,
    id: web::Path<String>,
) -> Result<HttpResponse, AppError> {
    let product = existing(&state, &id).await?;
    let session = req.get_session();
    let orders = orders::count_listing(&state.db, &product.sku).await?;
    match lifecycle::delete_unordered(&state.db, &product, orders).await {
        Ok(()) => {
            flash::push(
                &session,
                Level::Success,
                format!("Deleted “{}” ({}).", product.title, product.sku),
            );
            Ok(see_other("/admin/products"))
        }
        Err(DeleteRefused::Gone) => Err(AppError::NotFound),
        Err(e) => {
            let why = refusal_text(e)?;
            flash::push(
                &session,
                Level::Error,
                format!("“{}” was not deleted: {why}.", product.title),
            );
            Ok(see_other(&edit_url(&product)))
        }
    }
}

#[derive(serde::Deserialize)]
pub(crate) struct MoveForm {
    #[serde(default)]
    direction: String,
}

/// `POST /admin/products/{id}/photos/{file}/remove`
pub(crate) async fn remove_photo(
    req: HttpRequest,
    state: web::Data<AppState>,
    path: web::Path<(String, String)>,
) -> Result<HttpResponse, AppError> {
    let (id, file) = path.into_inner();
    let product = existing(&state, &id).await?;
    let file = parse_id(&file)?;
    let session = req.get_session();
    if lifecycle::remove_photo(&state.db, product.id, file).await? {
        flash::push(&session, Level::Success, "Photo removed.");
    } else {
        flash::push(
            &session,
            Level::Error,
            "That photo is no longer on this product; nothing was changed.",
        );
    }
    Ok(see_other(&edit_url(&product)))
}

/// `POST /admin/products/{id}/photos/{file}/move` with `direction` = `earlier` or `later`
/// (the first photo is the cover).
pub(crate) async fn move_photo(
    req: HttpRequest,
    state: web::Data<AppState>,
    path: web::Path<(String, String)>,
    form: web::Form<MoveForm>,
) -> Result<HttpResponse, AppError> {
    let (id, file) = path.into_inner();
    let product = existing(&state, &id).await?;
    let file = parse_id(&file)?;
    let direction = match form.direction.as_str() {
        "earlier" => Move::Earlier,
        "later" => Move::Later,
        _ => {
            return Err(AppError::BadRequest(
                "Move a photo earlier or later.".into(),
            ))
        }
    };
    let session = req.get_session();
    if lifecycle::move_photo(&state.db, product.id, file, direction).await? {
        flash::push(&session, Level::Success, "Photo moved.");
    } else {
        flash::push(
            &session,
            Level::Error,
            "The photo was not moved: it is already at that end, or the photos changed \
             meanwhile. Check the order below.",
        );
    }
    Ok(see_other(&edit_url(&product)))
}

/// Photos accepted with one create form.
const MAX_NEW_PHOTOS: usize = 10;

/// Whether a request carries a multipart body (the create form with its photo picker).
pub(crate) fn is_multipart(ctx: &actix_web::guard::GuardContext<'_>) -> bool {
    ctx.head()
        .headers()
        .get(actix_web::http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("multipart/form-data"))
}

/// `POST /admin/products/new?type=album&csrf_token=…` as `multipart/form-data`: the create
/// form with photos (field `photos`, any number up to ten). Each photo streams into storage as
/// it arrives, checked like an edit-page upload; the text fields are then saved as a plain
/// create form would be.
pub(crate) async fn create_with_photos(
    req: HttpRequest,
    state: web::Data<AppState>,
    params: web::Query<HashMap<String, String>>,
    payload: actix_multipart::Multipart,
) -> Result<HttpResponse, AppError> {
    let kind = kind_param(&params)?;
    let form = crate::admin::upload_form::read(&state, payload, "photos", MAX_NEW_PHOTOS).await?;
    let photos = NewPhotos {
        stored: form.stored.iter().map(|(image, _)| image.id).collect(),
        refused: form.refused,
    };
    create_product(&req, &state, kind, form.pairs, photos).await
}
