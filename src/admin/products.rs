//! Admin products: create and edit forms with each type's own fields (on `admin::form`: a lost
//! race is merged field by field, true conflicts get the 409 page), photos and stock
//! adjustment.

use std::collections::HashMap;

use actix_session::SessionExt;
use actix_web::http::StatusCode;
use actix_web::{web, HttpRequest, HttpResponse};
use askama::Template;
use bson::doc;
use bson::oid::ObjectId;
use futures::StreamExt;

use crate::admin::form::{self, field_views, FieldSpec, Submitted, Values};
use crate::admin::product_form::{
    parse_product, tags_of, type_fields, COMMON_FIELDS, PICKED_FIELDS, QTY_FIELD, SHIPPING_FIELDS,
};
use crate::catalog::categories::{self, TreeEntry};
use crate::catalog::lifecycle::ProductStatus;
use crate::catalog::products::{self, Details, Product, ProductType};
use crate::catalog::CatalogError;
use crate::domain::EditVersion;
use crate::media;
use crate::state::AppState;
use crate::web::conflict::Conflict;
use crate::web::errors::AppError;
use crate::web::field_errors::FieldErrors;
use crate::web::flash::{self, Level};
use crate::web::layout::{render, render_status, Layout};
use crate::web::see_other;

pub(crate) use crate::admin::form::FieldView;

/// A category the product can be filed under, for the picker.
pub(crate) struct CategoryOption {
    pub(crate) id: String,
    /// The full path, e.g. `Music › Jazz › Bop`.
    pub(crate) label: String,
    /// The category's own name, indented by `depth` in the checkbox tree.
    pub(crate) name: String,
    pub(crate) depth: usize,
    pub(crate) selected: bool,
}

#[derive(Template)]
#[template(path = "admin/products/form.html")]
pub(crate) struct ProductFormPage {
    pub(crate) layout: Layout,
    pub(crate) kind: ProductType,
    /// `None` when creating.
    pub(crate) product: Option<Product>,
    pub(crate) action: String,
    pub(crate) fields: Vec<FieldView>,
    /// Weight and dimensions, in their own group.
    pub(crate) shipping: Vec<FieldView>,
    pub(crate) categories: Vec<CategoryOption>,
    pub(crate) categories_error: Option<String>,
    pub(crate) form_error: Option<String>,
    featured: bool,
    /// The lifecycle status the form shows (`draft`, `active`, `archived`).
    pub(crate) status: String,
    pub(crate) status_error: Option<String>,
    /// The version this form saves under (empty when creating, or for a product stored before
    /// versions existed).
    pub(crate) edit_version: String,
    /// What the form showed when it was loaded (hidden `base_*` fields), so a conflict can
    /// tell which fields the editor changed.
    pub(crate) base: Vec<(String, String)>,
}

impl ProductFormPage {
    pub(crate) fn featured(&self) -> bool {
        self.featured
    }

    pub(crate) fn statuses(&self) -> [ProductStatus; 3] {
        ProductStatus::ALL
    }

    /// Units held in shoppers' carts right now.
    pub(crate) fn in_carts(&self) -> i64 {
        self.product.as_ref().map_or(0, |p| p.reserved)
    }
}

/// The form's lifecycle status; a form without one (an older page) keeps products active.
fn status_of(form: &Submitted) -> Option<ProductStatus> {
    match form.get("status") {
        "" => Some(ProductStatus::Active),
        s => ProductStatus::parse(s),
    }
}

fn bad_status() -> FieldErrors {
    let mut errors = FieldErrors::default();
    errors.add("status", "Choose draft, active or archived.");
    errors
}

/// The form's values for an existing product.
fn values_of(product: &Product) -> Values {
    let mut v = Values::new();
    v.insert("title".into(), product.title.clone());
    v.insert("slug".into(), product.slug.to_string());
    v.insert("sku".into(), product.sku.to_string());
    v.insert("description".into(), product.description.clone());
    v.insert("tags".into(), product.tags.join(", "));
    v.insert("list_price".into(), product.pricing.list.amount());
    v.insert("retail_price".into(), product.pricing.retail.amount());
    if product.featured {
        v.insert("featured".into(), "1".into());
    }
    v.insert("status".into(), product.status.as_str().into());
    let shipping = &product.shipping;
    v.insert("shipping_weight".into(), shipping.weight.to_string());
    v.insert(
        "shipping_width".into(),
        shipping.dimensions.width.to_string(),
    );
    v.insert(
        "shipping_height".into(),
        shipping.dimensions.height.to_string(),
    );
    v.insert(
        "shipping_depth".into(),
        shipping.dimensions.depth.to_string(),
    );
    let day = |d: &bson::DateTime| d.to_chrono().format("%Y-%m-%d").to_string();
    match product.details() {
        Some(Details::Album(d)) => {
            v.insert("artist".into(), d.artist);
            v.insert("label".into(), d.label);
            v.insert("issue_date".into(), day(&d.issue_date));
            v.insert("genre".into(), d.genre.join(", "));
            v.insert("tracks".into(), d.tracks.join("\n"));
        }
        Some(Details::Film(d)) => {
            v.insert("director".into(), d.director.join(", "));
            v.insert("writer".into(), d.writer.join(", "));
            v.insert("actor".into(), d.actor.join(", "));
            v.insert("genre".into(), d.genre.join(", "));
            v.insert("issue_date".into(), day(&d.issue_date));
            v.insert("rating".into(), d.rating);
            v.insert("aspect_ratio".into(), d.aspect_ratio);
            v.insert("runtime".into(), d.runtime.to_string());
        }
        Some(Details::Book(d)) => {
            v.insert("author".into(), d.author.join(", "));
            v.insert("publisher".into(), d.publisher);
            v.insert("pages".into(), d.pages.to_string());
            v.insert("isbn".into(), d.isbn);
            v.insert("issue_date".into(), day(&d.issue_date));
            v.insert("genre".into(), d.genre.join(", "));
        }
        None => {}
    }
    v
}

struct FormInput<'a> {
    kind: ProductType,
    product: Option<Product>,
    values: &'a Values,
    selected: &'a [String],
    errors: &'a FieldErrors,
    form_error: Option<String>,
    edit_version: String,
    base: Vec<(String, String)>,
}

async fn form_page(
    req: &HttpRequest,
    state: &AppState,
    input: FormInput<'_>,
) -> Result<ProductFormPage, AppError> {
    let mut specs: Vec<&FieldSpec> = COMMON_FIELDS.iter().collect();
    if input.product.is_none() {
        specs.push(&QTY_FIELD);
    }
    specs.extend(type_fields(input.kind));
    let fields = field_views(specs, input.values, input.errors);
    let shipping = field_views(SHIPPING_FIELDS, input.values, input.errors);
    let tree: Vec<TreeEntry> = categories::tree_order(categories::all(&state.db).await?);
    let categories = tree
        .into_iter()
        .map(|e| {
            let id = e.category.id.to_hex();
            CategoryOption {
                selected: input.selected.contains(&id),
                label: e.category.path_label(),
                name: e.category.name.clone(),
                depth: e.depth,
                id,
            }
        })
        .collect();
    let action = match &input.product {
        Some(p) => format!("/admin/products/{}/edit", p.id.to_hex()),
        None => format!("/admin/products/new?type={}", input.kind.as_str()),
    };
    Ok(ProductFormPage {
        layout: Layout::admin(req),
        kind: input.kind,
        product: input.product,
        action,
        fields,
        shipping,
        categories,
        categories_error: input.errors.get("categories").cloned(),
        featured: input.values.get("featured").is_some_and(|v| v == "1"),
        status: input
            .values
            .get("status")
            .filter(|s| ProductStatus::parse(s).is_some())
            .cloned()
            .unwrap_or_else(|| ProductStatus::Active.as_str().to_string()),
        status_error: input.errors.get("status").cloned(),
        form_error: input.form_error,
        edit_version: input.edit_version,
        base: input.base,
    })
}

/// An id from the URL; one that is not an ObjectId is a 404.
use crate::web::parse_object_id as parse_id;

pub(crate) fn kind_param(params: &HashMap<String, String>) -> Result<ProductType, AppError> {
    params
        .get("type")
        .and_then(|t| ProductType::parse(t))
        .ok_or_else(|| AppError::BadRequest("Choose a product type: album, film or book.".into()))
}

/// `GET /admin/products/new?type=album`
pub(crate) async fn new(
    req: HttpRequest,
    state: web::Data<AppState>,
    params: web::Query<HashMap<String, String>>,
) -> Result<HttpResponse, AppError> {
    let kind = kind_param(&params)?;
    let mut values = Values::new();
    values.insert("qty".to_string(), "0".to_string());
    let page = form_page(
        &req,
        &state,
        FormInput {
            kind,
            product: None,
            values: &values,
            selected: &[],
            errors: &FieldErrors::default(),
            form_error: None,
            edit_version: String::new(),
            base: Vec::new(),
        },
    )
    .await?;
    render(&page)
}

/// Re-show a form with its errors (422).
async fn invalid(
    req: &HttpRequest,
    state: &AppState,
    input: FormInput<'_>,
) -> Result<HttpResponse, AppError> {
    render_status(
        StatusCode::UNPROCESSABLE_ENTITY,
        &form_page(req, state, input).await?,
    )
}

/// A duplicate slug or SKU becomes an error next to that field.
fn duplicate_error(e: CatalogError) -> Result<FieldErrors, AppError> {
    let mut errors = FieldErrors::default();
    match e {
        CatalogError::SlugTaken => errors.add("slug", "Another product already uses this slug."),
        CatalogError::SkuTaken => errors.add("sku", "Another product already uses this SKU."),
        other => return Err(other.into()),
    }
    Ok(errors)
}

/// `POST /admin/products/new?type=album`
pub(crate) async fn create(
    req: HttpRequest,
    state: web::Data<AppState>,
    params: web::Query<HashMap<String, String>>,
    form: web::Form<Vec<(String, String)>>,
) -> Result<HttpResponse, AppError> {
    let kind = kind_param(&params)?;
    create_product(&req, &state, kind, form.into_inner(), NewPhotos::default()).await
}

/// Photos that arrived with a create form (see `product_lifecycle::create_with_photos`):
/// already stored, in the order chosen, and why any others were refused.
#[derive(Default)]
pub(crate) struct NewPhotos {
    pub(crate) stored: Vec<ObjectId>,
    pub(crate) refused: Vec<String>,
}

/// Create a product of `kind` from the submitted fields. The photos are attached when it is
/// saved; when it is not (a field error, or a photo refused), the stored photos are deleted
/// and the form comes back saying to choose them again.
pub(crate) async fn create_product(
    req: &HttpRequest,
    state: &AppState,
    kind: ProductType,
    pairs: Vec<(String, String)>,
    photos: NewPhotos,
) -> Result<HttpResponse, AppError> {
    let form = Submitted::from_pairs(pairs);
    let parsed = parse_product(kind, &form, true).and_then(|new| match status_of(&form) {
        Some(status) => Ok((new, status)),
        None => Err(bad_status()),
    });
    let errors = match parsed {
        Ok(_) if !photos.refused.is_empty() => FieldErrors::default(),
        Ok((new, status)) => match products::create_as(&state.db, new, status).await {
            Ok(product) => {
                products::set_tags(&state.db, product.id, &tags_of(&form)).await?;
                for photo in &photos.stored {
                    products::add_photo(&state.db, product.id, *photo).await?;
                }
                flash::push(
                    &req.get_session(),
                    Level::Success,
                    format!("Added “{}”.", product.title),
                );
                return Ok(see_other(&format!(
                    "/admin/products/{}/edit",
                    product.id.to_hex()
                )));
            }
            Err(e) => duplicate_error(e)?,
        },
        Err(errors) => errors,
    };
    for photo in &photos.stored {
        crate::media::delete_file(&state.db, *photo).await?;
    }
    let mut form_error = if errors.is_empty() {
        "The product was not saved.".to_string()
    } else {
        "The product was not saved: correct the fields marked below.".to_string()
    };
    if !photos.refused.is_empty() {
        form_error.push_str(&format!(" Photos refused: {}.", photos.refused.join("; ")));
    }
    if !photos.stored.is_empty() || !photos.refused.is_empty() {
        form_error.push_str(" Choose the photos again.");
    }
    invalid(
        req,
        state,
        FormInput {
            kind,
            product: None,
            values: &form.values(),
            selected: form.all("categories"),
            errors: &errors,
            form_error: Some(form_error),
            edit_version: String::new(),
            base: Vec::new(),
        },
    )
    .await
}

/// `GET /admin/products/{id}/edit`
pub(crate) async fn edit(
    req: HttpRequest,
    state: web::Data<AppState>,
    id: web::Path<String>,
) -> Result<HttpResponse, AppError> {
    let product = products::by_id(&state.db, parse_id(&id)?)
        .await?
        .ok_or(AppError::NotFound)?;
    let values = values_of(&product);
    let selected: Vec<String> = product.categories.iter().map(|c| c.to_hex()).collect();
    let page = form_page(
        &req,
        &state,
        FormInput {
            kind: product.kind,
            edit_version: version_input(&product),
            base: form::base_fields(&snapshot_of(&product)),
            product: Some(product),
            values: &values,
            selected: &selected,
            errors: &FieldErrors::default(),
            form_error: None,
        },
    )
    .await?;
    render(&page)
}

fn version_input(product: &Product) -> String {
    product.edit_version.map(|v| v.to_hex()).unwrap_or_default()
}

/// Every field the edit form of `kind` shows, in form order.
fn edit_fields(kind: ProductType) -> impl Iterator<Item = &'static FieldSpec> + Clone {
    COMMON_FIELDS
        .iter()
        .chain(type_fields(kind))
        .chain(SHIPPING_FIELDS)
        .chain(PICKED_FIELDS)
}

/// A form value as compared between versions: trimmed, with the browser's CRLF line ends as LF.
fn normalise(value: &str) -> String {
    value.trim().replace("\r\n", "\n")
}

/// Every field of the edit form as one string each: categories as sorted ids joined by
/// commas, featured as `1` or empty.
type Snapshot = Values;

fn snapshot_of(product: &Product) -> Snapshot {
    let values = values_of(product);
    let mut snap: Snapshot = edit_fields(product.kind)
        .map(|spec| {
            let v = values.get(spec.name).map_or("", String::as_str);
            (spec.name.to_string(), normalise(v))
        })
        .collect();
    let mut categories: Vec<String> = product.categories.iter().map(|c| c.to_hex()).collect();
    categories.sort();
    snap.insert("categories".into(), categories.join(","));
    snap
}

fn snapshot_of_form(kind: ProductType, form: &Submitted) -> Snapshot {
    let mut snap: Snapshot = edit_fields(kind)
        .map(|spec| (spec.name.to_string(), normalise(form.get(spec.name))))
        .collect();
    let mut categories = form.all("categories").to_vec();
    categories.sort();
    categories.dedup();
    snap.insert("categories".into(), categories.join(","));
    snap.insert(
        "featured".into(),
        if form.get("featured") == "1" { "1" } else { "" }.into(),
    );
    snap
}

/// The form's edit token: none means the product had none when the form was loaded.
fn form_version(form: &Submitted) -> Result<Option<EditVersion>, AppError> {
    form.edit_version().map_err(|_| {
        AppError::BadRequest("The form's version is damaged; open the editor again.".into())
    })
}

/// `POST /admin/products/{id}/edit`: saves only if the product still carries the version the
/// form was loaded with; otherwise the conflict page.
pub(crate) async fn update(
    req: HttpRequest,
    state: web::Data<AppState>,
    id: web::Path<String>,
    form: web::Form<Vec<(String, String)>>,
) -> Result<HttpResponse, AppError> {
    let product = products::by_id(&state.db, parse_id(&id)?)
        .await?
        .ok_or(AppError::NotFound)?;
    let mut submitted = Submitted::from_pairs(form.into_inner());
    // The conflict page's choices: "stored" takes the carried `stored_{name}`.
    submitted.apply_choices(&["stored"], &["categories"]);
    let mut version = form_version(&submitted)?;
    // What is saved: the submission, or after a lost race its merge with the stored version.
    let mut form = submitted.clone();
    let mut notice = String::new();
    for _ in 0..3 {
        let parsed =
            parse_product(product.kind, &form, false).and_then(|edit| match status_of(&form) {
                Some(status) => Ok((edit, status)),
                None => Err(bad_status()),
            });
        let errors = match parsed {
            Ok((edit, status)) => {
                let tags = tags_of(&form);
                match products::update_with_status(
                    &state.db,
                    product.id,
                    version,
                    edit,
                    &tags,
                    Some(status),
                    crate::admin::admin_name(&req).as_deref(),
                )
                .await
                {
                    Ok(products::Saved::Saved(_)) => {
                        flash::push(
                            &req.get_session(),
                            Level::Success,
                            format!("Saved.{notice}"),
                        );
                        return Ok(see_other(&format!(
                            "/admin/products/{}/edit",
                            product.id.to_hex()
                        )));
                    }
                    Ok(products::Saved::Stale) => {
                        match conflict(&req, &state, product.id, product.kind, &submitted).await? {
                            Resolution::Page(page) => return Ok(page),
                            Resolution::Merged {
                                form: merged,
                                version: stored_version,
                                notice: merged_notice,
                            } => {
                                form = merged;
                                version = stored_version;
                                notice = merged_notice;
                                continue;
                            }
                        }
                    }
                    Err(CatalogError::NotFound) => return Err(AppError::NotFound),
                    Err(e) => duplicate_error(e)?,
                }
            }
            Err(errors) => errors,
        };
        return invalid(
            &req,
            &state,
            FormInput {
                kind: product.kind,
                product: Some(product),
                values: &form.values(),
                selected: form.all("categories"),
                errors: &errors,
                form_error: Some(
                    "The changes were not saved: correct the fields marked below.".into(),
                ),
                // Keep what the editor loaded (or, merged, the stored version): the next save
                // must still be checked against it.
                edit_version: form.get(form::EDIT_TOKEN).to_string(),
                base: form.prefixed(form::BASE_PREFIX),
            },
        )
        .await;
    }
    Err(AppError::Conflict(
        "This product keeps changing while you save it; open the editor again.".into(),
    ))
}

/// What a save that lost a race becomes: merged (nothing conflicts), or the conflict page.
enum Resolution {
    /// The stored version with the editor's changes, to save under the stored `version`.
    Merged {
        form: Submitted,
        version: Option<EditVersion>,
        /// What the flash adds: when the other version was saved and what of it was merged.
        notice: String,
    },
    Page(HttpResponse),
}

/// The 409 page of a product save that lost a race: both versions field by field, and a form
/// holding the stored version with the editor's changes applied over it.
#[derive(Template)]
#[template(path = "admin/products/conflict.html")]
pub(crate) struct ProductConflictPage {
    pub(crate) layout: Layout,
    pub(crate) kind: ProductType,
    pub(crate) product: Option<Product>,
    pub(crate) conflict: Conflict,
    /// Labels of the fields the editor changed relative to what they loaded.
    pub(crate) changed: Vec<String>,
    /// When the stored version was saved, UTC.
    pub(crate) stored_updated: String,
    /// Whether the editor's form said what it was loaded with (else every field they submitted
    /// that differs from the stored version counts as theirs).
    pub(crate) knew_loaded: bool,
    pub(crate) action: String,
    pub(crate) fields: Vec<FieldView>,
    pub(crate) shipping: Vec<FieldView>,
    pub(crate) categories: Vec<CategoryOption>,
    pub(crate) categories_error: Option<String>,
    pub(crate) edit_version: String,
    pub(crate) base: Vec<(String, String)>,
    featured: bool,
    pub(crate) status: String,
    pub(crate) status_error: Option<String>,
}

impl ProductConflictPage {
    pub(crate) fn featured(&self) -> bool {
        self.featured
    }

    pub(crate) fn statuses(&self) -> [ProductStatus; 3] {
        ProductStatus::ALL
    }
}

/// Merge a save that lost a race three ways: what the editor's form loaded (its hidden
/// `base_*` fields), the stored version and their submission. A field changed on one side
/// only takes that side's value; tags merge as sets and the description line by line. With
/// no true conflict the merge is saved (under the stored version, so it too loses if someone
/// saves again meanwhile). Otherwise the 409 page shows only the fields both changed
/// differently, with a form holding the stored version and all of the editor's changes. A
/// form that did not say what it loaded counts every field differing from the stored version
/// as a conflict.
async fn conflict(
    req: &HttpRequest,
    state: &AppState,
    id: ObjectId,
    kind: ProductType,
    form: &Submitted,
) -> Result<Resolution, AppError> {
    let stored = products::by_id(&state.db, id).await?.ok_or_else(|| {
        AppError::Conflict("This product was deleted while you were editing it.".into())
    })?;
    let stored_snap = snapshot_of(&stored);
    let mine = snapshot_of_form(kind, form);
    let loaded = form.base();
    let knew_loaded = loaded.is_some();
    let all_categories = categories::all(&state.db).await?;
    let category_label = |ids: &str| -> String {
        ids.split(',')
            .filter(|s| !s.is_empty())
            .map(|hex| {
                all_categories
                    .iter()
                    .find(|c| c.id.to_hex() == hex)
                    .map_or_else(|| format!("(unknown category {hex})"), |c| c.path_label())
            })
            .collect::<Vec<_>>()
            .join("\n")
    };
    let merge = form::merge_fields(edit_fields(kind), loaded.as_ref(), &mine, &stored_snap);
    // Each version written for people: categories by name, featured as yes or no.
    let conflict = form::choice_view(&merge.conflicts, |name, value| match name {
        "categories" => category_label(value),
        "featured" => if value == "1" { "yes" } else { "no" }.to_string(),
        _ => value.to_string(),
    });
    let (changed, theirs_merged, merged) = (merge.changed, merge.merged, merge.values);
    let stored_updated = crate::db::site::time_zone().minute_label(stored.updated);
    // The snapshot holds the categories as ids joined by commas; the form, one by one.
    let selected = form::split_list(merged.get("categories").map_or("", String::as_str), ',');
    if knew_loaded && conflict.fields.is_empty() {
        let mut form = Submitted::from_pairs(merged);
        form.set_all("categories", selected);
        form.set(form::EDIT_TOKEN, version_input(&stored));
        for (name, value) in form::base_fields(&stored_snap) {
            form.set(name, value);
        }
        let notice = if theirs_merged.is_empty() {
            String::new()
        } else {
            format!(
                " Merged with the changes saved at {stored_updated}: {}.",
                theirs_merged.join(", ")
            )
        };
        return Ok(Resolution::Merged {
            form,
            version: stored.edit_version,
            notice,
        });
    }
    let page = form_page(
        req,
        state,
        FormInput {
            kind,
            edit_version: version_input(&stored),
            base: form::base_fields(&stored_snap),
            product: Some(stored.clone()),
            values: &merged,
            selected: &selected,
            errors: &FieldErrors::default(),
            form_error: None,
        },
    )
    .await?;
    let page = ProductConflictPage {
        layout: page.layout,
        kind,
        stored_updated,
        product: Some(stored),
        conflict,
        changed,
        knew_loaded,
        action: page.action,
        fields: page.fields,
        shipping: page.shipping,
        categories: page.categories,
        categories_error: None,
        edit_version: page.edit_version,
        base: page.base,
        featured: page.featured,
        status: page.status,
        status_error: None,
    };
    Ok(Resolution::Page(render_status(
        StatusCode::CONFLICT,
        &page,
    )?))
}

#[derive(serde::Deserialize)]
pub(crate) struct StockForm {
    pub(crate) delta: String,
}

/// `POST /admin/products/{id}/stock`: add or remove available units.
pub(crate) async fn adjust_stock(
    req: HttpRequest,
    state: web::Data<AppState>,
    id: web::Path<String>,
    form: web::Form<StockForm>,
) -> Result<HttpResponse, AppError> {
    let id = parse_id(&id)?;
    let location = format!("/admin/products/{}/edit", id.to_hex());
    let session = req.get_session();
    match form.delta.trim().trim_start_matches('+').parse::<i64>() {
        // A range test rather than `abs()`, which overflows for i64::MIN.
        Ok(delta) if delta != 0 && (-1_000_000..=1_000_000).contains(&delta) => {
            if crate::stock::adjust_available(&state.db, id, delta).await? {
                flash::push(
                    &session,
                    Level::Success,
                    format!("Stock changed by {delta}."),
                );
            } else if products::by_id(&state.db, id).await?.is_none() {
                return Err(AppError::NotFound);
            } else {
                flash::push(
                    &session,
                    Level::Error,
                    "Not enough units available to remove that many.",
                );
            }
        }
        _ => flash::push(
            &session,
            Level::Error,
            "Enter a whole number of units to add (e.g. 5) or remove (e.g. -2).",
        ),
    }
    Ok(see_other(&location))
}

/// `POST /admin/products/{id}/photos?csrf_token=…` (multipart, field `photo`): the file streams
/// into GridFS as it arrives (the token is in the query so the body need not be buffered).
pub(crate) async fn upload_photo(
    req: HttpRequest,
    state: web::Data<AppState>,
    id: web::Path<String>,
    mut payload: actix_multipart::Multipart,
) -> Result<HttpResponse, AppError> {
    let id = parse_id(&id)?;
    if products::by_id(&state.db, id).await?.is_none() {
        return Err(AppError::NotFound);
    }
    let location = format!("/admin/products/{}/edit", id.to_hex());
    let session = req.get_session();
    let mut outcome = Err(media::UploadError::Empty);
    loop {
        match payload.next().await {
            None => break,
            Some(Err(e)) => {
                tracing::info!(error = %e, "a photo upload could not be read");
                outcome = Err(media::UploadError::Interrupted);
                break;
            }
            Some(Ok(field)) if field.name() == Some("photo") => {
                let filename = field
                    .content_disposition()
                    .and_then(|cd| cd.get_filename())
                    .map(|f| f.chars().filter(|c| !c.is_control()).take(100).collect())
                    .unwrap_or_else(|| "photo".to_string());
                outcome = media::store_upload_limited(
                    &state.db,
                    &filename,
                    field,
                    state.max_upload_bytes,
                    state.max_image_pixels,
                )
                .await;
                break;
            }
            Some(Ok(_)) => continue,
        }
    }
    match outcome {
        Ok(stored) => {
            products::add_photo(&state.db, id, stored.id).await?;
            flash::push(&session, Level::Success, "Photo added.");
        }
        Err(media::UploadError::Db(e)) => return Err(e.into()),
        Err(e) => flash::push(&session, Level::Error, format!("Photo not added: {e}.")),
    }
    Ok(see_other(&location))
}
