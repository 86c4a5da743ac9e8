//! Admin categories: the tree with add, move, rename and delete. Refusals (a cycle, a slug in
//! use, a category that still has children or products) come back as messages, never a 500.

use std::collections::HashMap;

use actix_session::SessionExt;
use actix_web::http::StatusCode;
use actix_web::{web, HttpRequest, HttpResponse};
use askama::Template;
use bson::oid::ObjectId;

use crate::catalog::categories::{self, TreeEntry};
use crate::catalog::{is_valid_slug, slugify, CatalogError};
use crate::state::AppState;
use crate::web::errors::AppError;
use crate::web::flash::{self, Level};
use crate::web::layout::{html_response, Layout};
use crate::web::see_other;

const MAX_NAME: usize = 100;

/// A possible new parent in the move picker.
pub struct ParentOption {
    pub id: String,
    pub label: String,
    /// What the move picker posts: `id:version`, so a move is checked against the parent as
    /// it was when the page was loaded.
    pub value: String,
}

#[derive(Template)]
#[template(path = "admin/categories.html")]
pub struct CategoriesPage {
    pub layout: Layout,
    pub tree: Vec<TreeEntry>,
    pub parents: Vec<ParentOption>,
    /// The add form's values and errors.
    pub name: String,
    pub slug: String,
    pub parent: String,
    pub errors: HashMap<&'static str, String>,
    /// Why a rename or move was not applied because the tree changed after it was loaded.
    pub conflict: Option<String>,
}

impl CategoriesPage {
    pub fn error(&self, field: &str) -> Option<&String> {
        self.errors.get(field)
    }

    /// Where `entry` may move: anywhere but itself and its own descendants.
    pub fn move_targets(&self, entry: &TreeEntry) -> Vec<&ParentOption> {
        let id = entry.category.id;
        let below: Vec<String> = self
            .tree
            .iter()
            .filter(|e| e.category.id == id || e.category.ancestors.iter().any(|a| a.id == id))
            .map(|e| e.category.id.to_hex())
            .collect();
        self.parents
            .iter()
            .filter(|p| !below.contains(&p.id))
            .collect()
    }

    pub fn parent_of(&self, entry: &TreeEntry) -> String {
        entry
            .category
            .parent
            .map(|p| p.to_hex())
            .unwrap_or_default()
    }
}

#[derive(serde::Deserialize)]
pub struct CategoryForm {
    #[serde(default)]
    pub name: String,
    #[serde(default)]
    pub slug: String,
    #[serde(default)]
    pub parent: String,
    /// The category's version when the rename or move form was loaded.
    #[serde(default)]
    pub version: String,
}

async fn page(
    req: &HttpRequest,
    state: &AppState,
    form: CategoryForm,
    errors: HashMap<&'static str, String>,
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
        name: form.name,
        slug: form.slug,
        parent: form.parent,
        errors,
        conflict: None,
    })
}

fn respond(status: StatusCode, page: &CategoriesPage) -> Result<HttpResponse, AppError> {
    let html = page
        .render()
        .map_err(|e| AppError::Internal(anyhow::anyhow!("rendering a template failed: {e}")))?;
    Ok(html_response(status, html))
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
fn name_and_slug(
    form: &CategoryForm,
    errors: &mut HashMap<&'static str, String>,
) -> (String, String) {
    let name = form.name.trim().to_string();
    if name.is_empty() || name.chars().count() > MAX_NAME {
        errors.insert(
            "name",
            format!("Enter a name of at most {MAX_NAME} characters."),
        );
    }
    let slug = match form.slug.trim() {
        "" => slugify(&name),
        s => s.to_string(),
    };
    if !is_valid_slug(&slug) {
        errors.insert(
            "slug",
            "Use lowercase letters, digits and single dashes, e.g. modal-jazz.".to_string(),
        );
    }
    (name, slug)
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
pub async fn index(req: HttpRequest, state: web::Data<AppState>) -> Result<HttpResponse, AppError> {
    let form = CategoryForm {
        name: String::new(),
        slug: String::new(),
        parent: String::new(),
        version: String::new(),
    };
    let page = page(&req, &state, form, HashMap::new()).await?;
    respond(StatusCode::OK, &page)
}

/// `POST /admin/categories`: add a category.
pub async fn add(
    req: HttpRequest,
    state: web::Data<AppState>,
    form: web::Form<CategoryForm>,
) -> Result<HttpResponse, AppError> {
    let form = form.into_inner();
    let mut errors = HashMap::new();
    let (name, slug) = name_and_slug(&form, &mut errors);
    let parent = parse_parent(&form.parent).unwrap_or_else(|()| {
        errors.insert("parent", "Choose a parent from the list.".to_string());
        None
    });
    if errors.is_empty() {
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
                errors.insert(
                    "slug",
                    "Another category already uses this slug.".to_string(),
                );
            }
            Err(CatalogError::NotFound) => {
                errors.insert("parent", "That parent no longer exists.".to_string());
            }
            Err(e) => return Err(e.into()),
        }
    }
    let page = page(&req, &state, form, errors).await?;
    respond(StatusCode::UNPROCESSABLE_ENTITY, &page)
}

/// A version as a form carries it: empty means the category had none when loaded.
fn parse_version(value: &str) -> Result<Option<ObjectId>, AppError> {
    match value.trim() {
        "" => Ok(None),
        v => ObjectId::parse_str(v).map(Some).map_err(|_| {
            AppError::BadRequest("The form's version is damaged; reload the categories.".into())
        }),
    }
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
    let form = CategoryForm {
        name: String::new(),
        slug: String::new(),
        parent: String::new(),
        version: String::new(),
    };
    let mut page = page(req, state, form, HashMap::new()).await?;
    page.conflict = Some(format!(
        "Not applied: you asked to {asked}, but the category or a category above it (or the \
         new parent) was renamed or moved by someone else after you loaded this page.{now} The \
         tree below is the current one; repeat your change on it if you still want it."
    ));
    respond(StatusCode::CONFLICT, &page)
}

/// `POST /admin/categories/{id}/rename`: applied only if the category still carries the
/// version the form was loaded with.
pub async fn rename(
    req: HttpRequest,
    state: web::Data<AppState>,
    id: web::Path<String>,
    form: web::Form<CategoryForm>,
) -> Result<HttpResponse, AppError> {
    let id = parse_id(&id)?;
    let version = parse_version(&form.version)?;
    let mut errors = HashMap::new();
    let (name, slug) = name_and_slug(&form, &mut errors);
    let session = req.get_session();
    if let Some(message) = errors.values().next() {
        flash::push(&session, Level::Error, format!("Not renamed: {message}"));
        return Ok(back());
    }
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
pub async fn move_category(
    req: HttpRequest,
    state: web::Data<AppState>,
    id: web::Path<String>,
    form: web::Form<CategoryForm>,
) -> Result<HttpResponse, AppError> {
    let id = parse_id(&id)?;
    let version = parse_version(&form.version)?;
    let session = req.get_session();
    let (parent_id, parent_version) = form
        .parent
        .split_once(':')
        .unwrap_or((form.parent.as_str(), ""));
    let (Ok(parent), Ok(parent_version)) = (parse_parent(parent_id), parse_version(parent_version))
    else {
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

/// The delete form: a plain delete, or one that first hands children and products to the
/// parent category.
#[derive(serde::Deserialize)]
pub struct DeleteForm {
    #[serde(default)]
    reparent: Option<String>,
}

/// `POST /admin/categories/{id}/delete`
pub async fn delete(
    req: HttpRequest,
    state: web::Data<AppState>,
    id: web::Path<String>,
    form: web::Form<DeleteForm>,
) -> Result<HttpResponse, AppError> {
    let id = parse_id(&id)?;
    let session = req.get_session();
    let outcome = if form.reparent.is_some() {
        categories::delete_reparenting(&state.db, id).await
    } else {
        categories::delete(&state.db, id).await
    };
    report(&session, outcome, "Deleted.", "Not deleted")
}
