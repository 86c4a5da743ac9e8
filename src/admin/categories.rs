//! Admin categories: the tree with product counts and an add form; one edit page per category
//! (rename, move) and a delete confirmation page saying what happens to its subcategories and
//! products. Refusals (a cycle, a slug in use, a category that still has children or products)
//! come back as messages, never a 500. Rename and move carry the category's edit token
//! (`admin::form::EDIT_TOKEN`) and are refused (409) when the tree changed since.

use std::collections::HashMap;

use actix_session::SessionExt;
use actix_web::http::StatusCode;
use actix_web::{web, HttpRequest, HttpResponse};
use askama::Template;
use bson::oid::ObjectId;

use crate::admin::form::Submitted;
use crate::catalog::categories::{self, Category, TreeEntry};
use crate::catalog::{typed_slug, CatalogError};
use crate::domain::{EditVersion, Slug};
use crate::state::AppState;
use crate::web::errors::AppError;
use crate::web::field_errors::FieldErrors;
use crate::web::flash::{self, Level};
use crate::web::layout::{render, render_status, Layout};
use crate::web::see_other;

const MAX_NAME: usize = 100;

/// A possible new parent in the move picker.
pub(crate) struct ParentOption {
    pub(crate) id: String,
    pub(crate) label: String,
    /// What the move picker posts: `id:version`, so a move is checked against the parent as
    /// it was when the page was loaded.
    pub(crate) value: String,
}

#[derive(Template)]
#[template(path = "admin/categories.html")]
pub(crate) struct CategoriesPage {
    pub(crate) layout: Layout,
    pub(crate) tree: Vec<TreeEntry>,
    pub(crate) parents: Vec<ParentOption>,
    /// The add form's values and errors.
    pub(crate) name: String,
    pub(crate) slug: String,
    pub(crate) parent: String,
    pub(crate) errors: FieldErrors,
    /// Why a rename or move was not applied because the tree changed after it was loaded.
    pub(crate) conflict: Option<String>,
    /// Products filed under each category or anything below it.
    pub(crate) counts: HashMap<ObjectId, u64>,
}

impl CategoriesPage {
    pub(crate) fn error(&self, field: &str) -> Option<&String> {
        self.errors.get(field)
    }

    /// Products in `entry` and its subcategories (what its shop page lists).
    pub(crate) fn product_count(&self, entry: &TreeEntry) -> u64 {
        self.counts.get(&entry.category.id).copied().unwrap_or(0)
    }
}

/// One category's edit page: rename and move, with what it holds.
#[derive(Template)]
#[template(path = "admin/category.html")]
pub(crate) struct CategoryPage {
    pub(crate) layout: Layout,
    pub(crate) category: Category,
    /// Where it may move: anywhere but itself and its own subtree.
    pub(crate) targets: Vec<ParentOption>,
    pub(crate) children: Vec<Category>,
    /// Products filed directly under it, and under it or below.
    pub(crate) direct_products: u64,
    pub(crate) all_products: u64,
}

impl CategoryPage {
    pub(crate) fn parent_id(&self) -> String {
        self.category.parent.map(|p| p.to_hex()).unwrap_or_default()
    }
}

/// The delete confirmation: what happens to the subcategories and products.
#[derive(Template)]
#[template(path = "admin/category_delete.html")]
pub(crate) struct CategoryDeletePage {
    pub(crate) layout: Layout,
    pub(crate) category: Category,
    pub(crate) parent: Option<Category>,
    pub(crate) children: Vec<Category>,
    /// Products filed directly under it.
    pub(crate) direct_products: u64,
}

impl CategoryDeletePage {
    /// Whether deleting must hand children or products to the parent.
    pub(crate) fn reparents(&self) -> bool {
        !self.children.is_empty() || self.direct_products > 0
    }

    /// A top-level category's products have no parent to go to: refused.
    pub(crate) fn refused(&self) -> bool {
        self.parent.is_none() && self.direct_products > 0
    }

    pub(crate) fn parent_name(&self) -> String {
        self.parent.as_ref().map_or_else(
            || "the top level".to_string(),
            |p| format!("“{}”", p.path_label()),
        )
    }
}

/// Products filed under each category or below it, in one aggregation over `category_path`.
async fn product_counts(state: &AppState) -> Result<HashMap<ObjectId, u64>, AppError> {
    let pipeline = vec![
        bson::doc! { "$unwind": "$category_path" },
        bson::doc! { "$group": { "_id": "$category_path", "n": { "$sum": 1 } } },
    ];
    let mut cursor = state
        .db
        .collection::<bson::Document>(crate::catalog::products::COLLECTION)
        .aggregate(pipeline)
        .await
        .map_err(crate::db::DbError::from)?;
    let mut counts = HashMap::new();
    while let Some(row) = futures::TryStreamExt::try_next(&mut cursor)
        .await
        .map_err(crate::db::DbError::from)?
    {
        if let Ok(id) = row.get_object_id("_id") {
            let n = match row.get("n") {
                Some(bson::Bson::Int32(n)) => u64::try_from(*n).unwrap_or(0),
                Some(bson::Bson::Int64(n)) => u64::try_from(*n).unwrap_or(0),
                _ => 0,
            };
            counts.insert(id, n);
        }
    }
    Ok(counts)
}

/// The tree page, its add form holding `form`'s values with `errors` next to them.
async fn page(
    req: &HttpRequest,
    state: &AppState,
    form: &Submitted,
    errors: FieldErrors,
) -> Result<CategoriesPage, AppError> {
    let tree = categories::tree_order(categories::all(&state.db).await?);
    let parents = tree
        .iter()
        .map(|e| ParentOption {
            id: e.category.id.to_hex(),
            label: e.category.path_label(),
            value: format!("{}:{}", e.category.id.to_hex(), e.category.version_input()),
        })
        .collect();
    Ok(CategoriesPage {
        layout: Layout::admin(req),
        tree,
        parents,
        name: form.raw("name").unwrap_or_default().to_string(),
        slug: form.raw("slug").unwrap_or_default().to_string(),
        parent: form.raw("parent").unwrap_or_default().to_string(),
        errors,
        conflict: None,
        counts: product_counts(state).await?,
    })
}

fn back() -> HttpResponse {
    see_other("/admin/categories")
}

/// An id from the URL; one that is not an ObjectId is a 404.
use crate::web::parse_object_id as parse_id;

/// An optional parent from a form: empty means the top level.
fn parse_parent(value: &str) -> Result<Option<ObjectId>, ()> {
    match value.trim() {
        "" => Ok(None),
        v => ObjectId::parse_str(v).map(Some).map_err(|_| ()),
    }
}

/// Check a name and slug (an empty slug is made from the name).
/// The form's name and slug, parsed; `None` (with the errors next to their fields) when
/// either is refused.
fn name_and_slug(form: &Submitted, errors: &mut FieldErrors) -> Option<(String, Slug)> {
    let name = form.get("name").to_string();
    let name_ok = !name.is_empty() && name.chars().count() <= MAX_NAME;
    if !name_ok {
        errors.add(
            "name",
            format!("Enter a name of at most {MAX_NAME} characters."),
        );
    }
    let slug = Slug::parse(&typed_slug(form.raw("slug").unwrap_or_default(), &name));
    if slug.is_err() {
        errors.add(
            "slug",
            "Use lowercase letters and digits (of any alphabet) and single dashes, e.g. modal-jazz.",
        );
    }
    match slug {
        Ok(slug) if name_ok => Some((name, slug)),
        _ => None,
    }
}

fn refusal(e: CatalogError) -> Result<String, AppError> {
    Ok(match e {
        CatalogError::SlugTaken => "Another category already uses that slug.".to_string(),
        CatalogError::Cycle => {
            "A category cannot be moved under itself or one of its own subcategories.".to_string()
        }
        CatalogError::HasChildren(n) => {
            format!(
                "This category still has {n} subcategories: move or delete them first, or delete \
                 it handing its contents to its parent."
            )
        }
        CatalogError::HasProducts(n) => {
            format!("{n} products are filed under this category: file them elsewhere first.")
        }
        CatalogError::NotFound => "That category no longer exists.".to_string(),
        other => return Err(other.into()),
    })
}

/// Flash the outcome of a tree operation (a refusal explained, other errors as error pages)
/// and go back to the tree.
fn report(
    session: &actix_session::Session,
    outcome: Result<(), CatalogError>,
    done: &str,
    refused: &str,
) -> Result<HttpResponse, AppError> {
    match outcome {
        Ok(()) => flash::push(session, Level::Success, done),
        Err(e) => flash::push(session, Level::Error, format!("{refused}: {}", refusal(e)?)),
    }
    Ok(back())
}

/// `GET /admin/categories`
pub(crate) async fn index(
    req: HttpRequest,
    state: web::Data<AppState>,
) -> Result<HttpResponse, AppError> {
    let page = page(&req, &state, &Submitted::default(), FieldErrors::new()).await?;
    render(&page)
}

/// `POST /admin/categories`: add a category.
pub(crate) async fn add(
    req: HttpRequest,
    state: web::Data<AppState>,
    form: web::Form<Vec<(String, String)>>,
) -> Result<HttpResponse, AppError> {
    let form = Submitted::from_pairs(form.into_inner());
    let mut errors = FieldErrors::new();
    let named = name_and_slug(&form, &mut errors);
    let parent = parse_parent(form.get("parent")).unwrap_or_else(|()| {
        errors.add("parent", "Choose a parent from the list.");
        None
    });
    if let (Some((name, slug)), true) = (named, errors.is_empty()) {
        match categories::add(&state.db, &name, &slug, parent).await {
            Ok(c) => {
                flash::push(
                    &req.get_session(),
                    Level::Success,
                    format!("Added “{}”.", c.name),
                );
                return Ok(back());
            }
            Err(CatalogError::SlugTaken) => {
                errors.add("slug", "Another category already uses this slug.");
            }
            Err(CatalogError::NotFound) => {
                errors.add("parent", "That parent no longer exists.");
            }
            Err(e) => return Err(e.into()),
        }
    }
    let page = page(&req, &state, &form, errors).await?;
    render_status(StatusCode::UNPROCESSABLE_ENTITY, &page)
}

/// The form's edit token: none means the category had none when the page was loaded.
fn form_version(form: &Submitted) -> Result<Option<EditVersion>, AppError> {
    form.edit_version().map_err(|_| damaged_version())
}

fn damaged_version() -> AppError {
    AppError::BadRequest("The form's version is damaged; reload the categories.".into())
}

/// The 409 answer to a rename or move computed from an older tree: the current tree, with
/// what was asked and why it was not applied.
async fn stale(
    req: &HttpRequest,
    state: &AppState,
    id: ObjectId,
    asked: String,
) -> Result<HttpResponse, AppError> {
    let now = categories::by_id(&state.db, id)
        .await?
        .map(|c| format!(" It is now “{}” ({}).", c.path_label(), c.slug))
        .unwrap_or_default();
    let mut page = page(req, state, &Submitted::default(), FieldErrors::new()).await?;
    page.conflict = Some(format!(
        "Not applied: you asked to {asked}, but the category or a category above it (or the \
         new parent) was renamed or moved by someone else after you loaded this page.{now} The \
         tree below is the current one; repeat your change on it if you still want it."
    ));
    render_status(StatusCode::CONFLICT, &page)
}

/// `POST /admin/categories/{id}/rename`: applied only if the category still carries the
/// version the form was loaded with.
pub(crate) async fn rename(
    req: HttpRequest,
    state: web::Data<AppState>,
    id: web::Path<String>,
    form: web::Form<Vec<(String, String)>>,
) -> Result<HttpResponse, AppError> {
    let id = parse_id(&id)?;
    let form = Submitted::from_pairs(form.into_inner());
    let version = form_version(&form)?;
    let mut errors = FieldErrors::new();
    let named = name_and_slug(&form, &mut errors);
    let session = req.get_session();
    let Some((name, slug)) = named else {
        let message = errors.fields().next().and_then(|f| errors.get(f));
        let message = message.map_or("the name or slug was refused", String::as_str);
        flash::push(&session, Level::Error, format!("Not renamed: {message}"));
        return Ok(back());
    };
    let outcome = categories::rename_checked(&state.db, id, &name, &slug, version).await;
    if let Err(CatalogError::Stale) = outcome {
        return stale(&req, &state, id, format!("rename it to “{name}” ({slug})")).await;
    }
    report(
        &session,
        outcome,
        &format!("Renamed to “{name}”."),
        "Not renamed",
    )
}

/// `POST /admin/categories/{id}/move`: `parent` is `id:version` of the new parent as the page
/// showed it (empty: the top level); applied only if neither it nor the moved category changed
/// since.
pub(crate) async fn move_category(
    req: HttpRequest,
    state: web::Data<AppState>,
    id: web::Path<String>,
    form: web::Form<Vec<(String, String)>>,
) -> Result<HttpResponse, AppError> {
    let id = parse_id(&id)?;
    let form = Submitted::from_pairs(form.into_inner());
    let version = form_version(&form)?;
    let session = req.get_session();
    let picked = form.get("parent");
    let (parent_id, parent_version) = picked.split_once(':').unwrap_or((picked, ""));
    // The parent's token rides in the picked value: a damaged one is a damaged form.
    let parent_version = match parent_version.trim() {
        "" => Ok(None),
        v => EditVersion::parse(v)
            .map(Some)
            .map_err(|_| damaged_version()),
    };
    let (Ok(parent), Ok(parent_version)) = (parse_parent(parent_id), parent_version) else {
        flash::push(
            &session,
            Level::Error,
            "Not moved: choose a parent from the list.",
        );
        return Ok(back());
    };
    let expected = categories::Expected {
        category: version,
        parent: parent_version,
    };
    let outcome = categories::move_checked(&state.db, id, parent, expected).await;
    if let Err(CatalogError::Stale) = outcome {
        let target = match parent {
            Some(p) => categories::by_id(&state.db, p).await?.map_or_else(
                || "another category".to_string(),
                |c| format!("“{}”", c.path_label()),
            ),
            None => "the top level".to_string(),
        };
        return stale(&req, &state, id, format!("move it under {target}")).await;
    }
    report(&session, outcome, "Moved.", "Not moved")
}

async fn existing(state: &AppState, id: &str) -> Result<Category, AppError> {
    categories::by_id(&state.db, parse_id(id)?)
        .await?
        .ok_or(AppError::NotFound)
}

async fn direct_product_count(state: &AppState, id: ObjectId) -> Result<u64, AppError> {
    Ok(state
        .db
        .collection::<bson::Document>(crate::catalog::products::COLLECTION)
        .count_documents(bson::doc! { "categories": id })
        .await
        .map_err(crate::db::DbError::from)?)
}

/// `GET /admin/categories/{id}`: the category's edit page.
pub(crate) async fn edit(
    req: HttpRequest,
    state: web::Data<AppState>,
    id: web::Path<String>,
) -> Result<HttpResponse, AppError> {
    let category = existing(&state, &id).await?;
    let tree = categories::tree_order(categories::all(&state.db).await?);
    let targets = tree
        .iter()
        .filter(|e| {
            e.category.id != category.id
                && !e.category.ancestors.iter().any(|a| a.id == category.id)
        })
        .map(|e| ParentOption {
            id: e.category.id.to_hex(),
            label: e.category.path_label(),
            value: format!("{}:{}", e.category.id.to_hex(), e.category.version_input()),
        })
        .collect();
    let children = categories::children(&state.db, Some(category.id)).await?;
    let direct_products = direct_product_count(&state, category.id).await?;
    let all_products = state
        .db
        .collection::<bson::Document>(crate::catalog::products::COLLECTION)
        .count_documents(bson::doc! { "category_path": category.id })
        .await
        .map_err(crate::db::DbError::from)?;
    render(&CategoryPage {
        layout: Layout::admin(&req),
        category,
        targets,
        children,
        direct_products,
        all_products,
    })
}

/// `GET /admin/categories/{id}/delete`: what deleting would do to its subcategories and
/// products, with the confirming form.
pub(crate) async fn confirm_delete(
    req: HttpRequest,
    state: web::Data<AppState>,
    id: web::Path<String>,
) -> Result<HttpResponse, AppError> {
    let category = existing(&state, &id).await?;
    let parent = match category.parent {
        Some(p) => categories::by_id(&state.db, p).await?,
        None => None,
    };
    let children = categories::children(&state.db, Some(category.id)).await?;
    let direct_products = direct_product_count(&state, category.id).await?;
    render(&CategoryDeletePage {
        layout: Layout::admin(&req),
        category,
        parent,
        children,
        direct_products,
    })
}

/// `POST /admin/categories/{id}/delete`
pub(crate) async fn delete(
    req: HttpRequest,
    state: web::Data<AppState>,
    id: web::Path<String>,
    form: web::Form<Vec<(String, String)>>,
) -> Result<HttpResponse, AppError> {
    let id = parse_id(&id)?;
    let session = req.get_session();
    // A plain delete, or one that first hands children and products to the parent category.
    let outcome = if Submitted::from_pairs(form.into_inner()).has("reparent") {
        categories::delete_reparenting(&state.db, id).await
    } else {
        categories::delete(&state.db, id).await
    };
    report(&session, outcome, "Deleted.", "Not deleted")
}
