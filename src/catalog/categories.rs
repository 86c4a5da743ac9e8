//! The `categories` collection: a tree kept as parent links plus a root-first copy of each
//! category's ancestors (for breadcrumbs in one query), and the operations that keep both right.

use std::collections::HashMap;

use bson::oid::ObjectId;
use bson::{doc, Document};
use futures::TryStreamExt;
use mongodb::options::IndexOptions;
use mongodb::IndexModel;
use serde::{Deserialize, Serialize};

use crate::catalog::{model, CatalogError};
use crate::db::{Db, DbError};
use crate::domain::{EditVersion, Slug};

pub const COLLECTION: &str = "categories";

/// A deeper tree than this can only come from a corrupted parent chain; walking stops there.
const MAX_DEPTH: usize = 64;

/// One step of a breadcrumb: an ancestor as copied into its descendants.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AncestorRef {
    #[serde(rename = "_id")]
    pub id: ObjectId,
    pub slug: Slug,
    pub name: String,
}

impl AncestorRef {
    pub(crate) fn url(&self) -> String {
        url_of(self.slug.as_str())
    }
}

/// The shop page of the category at `slug`, the slug percent-encoded.
pub fn url_of(slug: &str) -> String {
    format!("/categories/{}", crate::web::meta::path_segment(slug))
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Category {
    #[serde(rename = "_id")]
    pub id: ObjectId,
    pub name: String,
    pub slug: Slug,
    pub parent: Option<ObjectId>,
    /// Root first, parent last: the breadcrumb order.
    pub ancestors: Vec<AncestorRef>,
    /// Replaced whenever the category's name, slug or place in the tree changes, including a
    /// rename or move of any of its ancestors (which rewrites its `ancestors`). Admin rename
    /// and move forms carry it, so one computed from an older tree is refused. Categories
    /// stored before it existed have none until their first change.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) edit_version: Option<EditVersion>,
}

impl Category {
    /// The version as a form carries it (empty: none yet).
    pub(crate) fn version_input(&self) -> String {
        self.edit_version.map(|v| v.to_hex()).unwrap_or_default()
    }
}

/// What an admin form saw when it was loaded: the category's version and, for a move, the new
/// parent's (`None` for either: it had none yet).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Expected {
    pub(crate) category: Option<EditVersion>,
    pub parent: Option<EditVersion>,
}

/// `{_id: id}` narrowed to the version a form expects.
fn versioned(id: ObjectId, expected: Option<EditVersion>) -> Document {
    match expected {
        Some(v) => doc! { "_id": id, "edit_version": v },
        None => doc! { "_id": id, "edit_version": { "$exists": false } },
    }
}

impl Category {
    pub(crate) fn url(&self) -> String {
        url_of(self.slug.as_str())
    }

    fn as_ancestor(&self) -> AncestorRef {
        AncestorRef {
            id: self.id,
            slug: self.slug.clone(),
            name: self.name.clone(),
        }
    }

    /// The full path of names, e.g. "Music › Jazz › Swing" (for pickers in forms).
    pub(crate) fn path_label(&self) -> String {
        let mut names: Vec<&str> = self.ancestors.iter().map(|a| a.name.as_str()).collect();
        names.push(&self.name);
        names.join(" › ")
    }
}

/// One step of a breadcrumb trail as the breadcrumb query projects it.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct Crumb {
    pub slug: Slug,
    pub name: String,
}

impl Crumb {
    pub(crate) fn url(&self) -> String {
        url_of(self.slug.as_str())
    }
}

/// What a page needs to show where a category sits: its id (always returned), its name and its
/// ancestors' slugs and names, root first.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct Breadcrumbs {
    #[serde(rename = "_id")]
    pub id: ObjectId,
    pub name: String,
    pub ancestors: Vec<Crumb>,
}

impl Breadcrumbs {
    /// The breadcrumbs of a category already loaded whole.
    pub(crate) fn of(category: &Category) -> Breadcrumbs {
        Breadcrumbs {
            id: category.id,
            name: category.name.clone(),
            ancestors: category
                .ancestors
                .iter()
                .map(|a| Crumb {
                    slug: a.slug.clone(),
                    name: a.name.clone(),
                })
                .collect(),
        }
    }
}

/// The fields the breadcrumb query returns (`name`, `ancestors.slug`, `ancestors.name`; see `docs/data-model.md`).
pub fn breadcrumbs_projection() -> Document {
    doc! { "name": 1, "ancestors.slug": 1, "ancestors.name": 1 }
}

pub(crate) fn indexes() -> Vec<IndexModel> {
    vec![
        IndexModel::builder()
            .keys(doc! { "slug": 1 })
            .options(IndexOptions::builder().unique(true).build())
            .build(),
        IndexModel::builder()
            .keys(doc! { "ancestors._id": 1 })
            .build(),
        IndexModel::builder().keys(doc! { "parent": 1 }).build(),
    ]
}

pub(crate) fn collection(db: &Db) -> mongodb::Collection<Category> {
    db.collection(COLLECTION)
}

/// Every write here is an admin save the admin is shown as done (seeding reuses them).
fn durable(db: &Db) -> mongodb::Collection<Category> {
    db.durable(COLLECTION)
}

pub(crate) async fn by_id(db: &Db, id: ObjectId) -> Result<Option<Category>, DbError> {
    Ok(collection(db).find_one(doc! { "_id": id }).await?)
}

pub async fn by_slug(db: &Db, slug: &Slug) -> Result<Option<Category>, DbError> {
    Ok(collection(db)
        .find_one(doc! { "slug": slug.as_str() })
        .await?)
}

/// A category's breadcrumbs in one query by slug on the unique `slug` index, projected to
/// what the trail shows.
pub async fn breadcrumbs(db: &Db, slug: &Slug) -> Result<Option<Breadcrumbs>, DbError> {
    Ok(db
        .collection::<Breadcrumbs>(COLLECTION)
        .find_one(doc! { "slug": slug.as_str() })
        .projection(breadcrumbs_projection())
        .await?)
}

/// Direct children of a category (or the roots for `None`), by name.
pub async fn children(db: &Db, parent: Option<ObjectId>) -> Result<Vec<Category>, DbError> {
    let parent = parent.map_or(bson::Bson::Null, bson::Bson::ObjectId);
    Ok(collection(db)
        .find(doc! { "parent": parent })
        .sort(doc! { "name": 1 })
        .await?
        .try_collect()
        .await?)
}

/// Every category, for the tree views and pickers.
pub async fn all(db: &Db) -> Result<Vec<Category>, DbError> {
    Ok(collection(db).find(doc! {}).await?.try_collect().await?)
}

/// A category with its depth, in tree order (parents before children, siblings by name).
pub(crate) struct TreeEntry {
    pub(crate) category: Category,
    pub(crate) depth: usize,
}

/// The whole tree flattened depth-first, for an indented list.
pub(crate) fn tree_order(mut categories: Vec<Category>) -> Vec<TreeEntry> {
    categories.sort_by(|a, b| a.name.cmp(&b.name));
    let mut by_parent: HashMap<Option<ObjectId>, Vec<Category>> = HashMap::new();
    for c in categories {
        by_parent.entry(c.parent).or_default().push(c);
    }
    let mut out = Vec::new();
    let mut stack: Vec<(Category, usize)> = by_parent
        .remove(&None)
        .unwrap_or_default()
        .into_iter()
        .rev()
        .map(|c| (c, 0))
        .collect();
    while let Some((category, depth)) = stack.pop() {
        if let Some(kids) = by_parent.remove(&Some(category.id)) {
            stack.extend(kids.into_iter().rev().map(|c| (c, depth + 1)));
        }
        out.push(TreeEntry { category, depth });
    }
    out
}

/// Add a category under `parent` (or as a root): its ancestors are the parent's plus the parent.
pub async fn add(
    db: &Db,
    name: &str,
    slug: &Slug,
    parent: Option<ObjectId>,
) -> Result<Category, CatalogError> {
    let ancestors = match parent {
        Some(parent_id) => {
            let parent = by_id(db, parent_id).await?.ok_or(CatalogError::NotFound)?;
            let mut ancestors = parent.ancestors.clone();
            ancestors.push(parent.as_ancestor());
            ancestors
        }
        None => Vec::new(),
    };
    let category = Category {
        id: ObjectId::new(),
        name: name.to_string(),
        slug: slug.clone(),
        parent,
        ancestors,
        edit_version: Some(EditVersion::new()),
    };
    durable(db).insert_one(&category).await?;
    super::changes::categories_changed(db);
    Ok(category)
}

/// Ancestors of a category worked out from parent links in the database (never from the stored
/// copies, which are what is being repaired), root first. `memo` caches lookups within one
/// operation.
async fn ancestors_from_parents(
    db: &Db,
    parent: Option<ObjectId>,
    memo: &mut HashMap<ObjectId, Category>,
) -> Result<Vec<AncestorRef>, CatalogError> {
    let mut chain = Vec::new();
    let mut next = parent;
    while let Some(id) = next {
        if chain.len() >= MAX_DEPTH {
            return Err(CatalogError::Cycle);
        }
        let category = match memo.get(&id) {
            Some(c) => c.clone(),
            None => {
                let c = by_id(db, id).await?.ok_or(CatalogError::NotFound)?;
                memo.insert(id, c.clone());
                c
            }
        };
        chain.push(category.as_ancestor());
        next = category.parent;
    }
    chain.reverse();
    Ok(chain)
}

/// Move a category under `new_parent` (or to the root). Refuses a cycle. Rebuilds the moved
/// category's ancestors, every descendant's, and the `category_path` of every product filed
/// anywhere below it. Running the same move again changes nothing further.
pub async fn move_to(
    db: &Db,
    id: ObjectId,
    new_parent: Option<ObjectId>,
) -> Result<(), CatalogError> {
    move_category(db, id, new_parent, None).await
}

/// [`move_to`] for an admin form: refused with [`CatalogError::Stale`], changing nothing, when
/// the moved category or the new parent no longer carries the version the form was loaded
/// with (one of them, or one of their ancestors, was renamed or moved meanwhile).
pub(crate) async fn move_checked(
    db: &Db,
    id: ObjectId,
    new_parent: Option<ObjectId>,
    expected: Expected,
) -> Result<(), CatalogError> {
    move_category(db, id, new_parent, Some(expected)).await
}

async fn move_category(
    db: &Db,
    id: ObjectId,
    new_parent: Option<ObjectId>,
    expected: Option<Expected>,
) -> Result<(), CatalogError> {
    let moved = by_id(db, id).await?.ok_or(CatalogError::NotFound)?;
    let mut memo: HashMap<ObjectId, Category> = HashMap::new();
    if let Some(parent_id) = new_parent {
        if parent_id == id {
            return Err(CatalogError::Cycle);
        }
        // Walk up from the new parent by parent links: meeting the moved category is a cycle.
        let chain = ancestors_from_parents(db, Some(parent_id), &mut memo).await?;
        if chain.iter().any(|a| a.id == id) {
            return Err(CatalogError::Cycle);
        }
        if let Some(expected) = expected {
            let parent = by_id(db, parent_id).await?.ok_or(CatalogError::NotFound)?;
            if parent.edit_version != expected.parent {
                return Err(CatalogError::Stale);
            }
        }
    }
    let parent_value = new_parent.map_or(bson::Bson::Null, bson::Bson::ObjectId);
    // The claim: with a form's expectation, only a category still at the version the form saw
    // moves (two stale moves cannot both pass here).
    let filter = match expected {
        Some(expected) => versioned(id, expected.category),
        None => doc! { "_id": id },
    };
    let claimed = durable(db)
        .update_one(
            filter,
            doc! { "$set": { "parent": parent_value, "edit_version": EditVersion::new() } },
        )
        .await?;
    if claimed.matched_count == 0 {
        return Err(if by_id(db, id).await?.is_none() {
            CatalogError::NotFound
        } else {
            CatalogError::Stale
        });
    }
    memo.clear();
    let mut updated = moved.clone();
    updated.parent = new_parent;
    memo.insert(id, updated);

    // The moved category and its descendants (found by the old ancestor copies, which still
    // name the moved category), each rebuilt from parent links.
    let mut affected = vec![moved];
    affected.extend(
        collection(db)
            .find(doc! { "ancestors._id": id })
            .await?
            .try_collect::<Vec<_>>()
            .await?,
    );
    for category in &affected {
        let parent = memo.get(&category.id).map_or(category.parent, |c| c.parent);
        let ancestors = ancestors_from_parents(db, parent, &mut memo).await?;
        let ancestors_bson =
            bson::to_bson(&ancestors).map_err(|e| CatalogError::Db(DbError::Other(e.into())))?;
        durable(db)
            .update_one(
                doc! { "_id": category.id },
                doc! { "$set": { "ancestors": ancestors_bson, "edit_version": EditVersion::new() } },
            )
            .await?;
    }
    super::changes::categories_changed(db);
    let rebuilt = rebuild_product_paths(db, id).await;
    super::changes::categories_changed(db);
    rebuilt
}

/// Recompute `category_path` for every product whose path runs through `category`.
async fn rebuild_product_paths(db: &Db, category: ObjectId) -> Result<(), CatalogError> {
    let affected: Vec<Document> = db
        .collection::<Document>(model::COLLECTION)
        .find(doc! { "category_path": category })
        .projection(doc! { "categories": 1 })
        .await?
        .try_collect()
        .await?;
    for product in affected {
        let Ok(id) = product.get_object_id("_id") else {
            continue;
        };
        let filed: Vec<ObjectId> = product
            .get_array("categories")
            .map(|a| a.iter().filter_map(|v| v.as_object_id()).collect())
            .unwrap_or_default();
        let path = category_path_for(db, &filed).await?;
        db.durable::<Document>(model::COLLECTION)
            .update_one(
                doc! { "_id": id },
                doc! { "$set": { "category_path": path } },
            )
            .await?;
    }
    Ok(())
}

/// Rename a category (name and slug), then fix the copies in every descendant with one
/// multi-document update through the positional operator.
pub async fn rename(db: &Db, id: ObjectId, name: &str, slug: &Slug) -> Result<(), CatalogError> {
    rename_category(db, id, name, slug, None).await
}

/// [`rename`] for an admin form: refused with [`CatalogError::Stale`], changing nothing, when
/// the category no longer carries the version the form was loaded with.
pub(crate) async fn rename_checked(
    db: &Db,
    id: ObjectId,
    name: &str,
    slug: &Slug,
    expected: Option<EditVersion>,
) -> Result<(), CatalogError> {
    rename_category(db, id, name, slug, Some(expected)).await
}

async fn rename_category(
    db: &Db,
    id: ObjectId,
    name: &str,
    slug: &Slug,
    expected: Option<Option<EditVersion>>,
) -> Result<(), CatalogError> {
    let filter = match expected {
        Some(expected) => versioned(id, expected),
        None => doc! { "_id": id },
    };
    let result = durable(db)
        .update_one(
            filter,
            doc! { "$set": { "name": name, "slug": slug, "edit_version": EditVersion::new() } },
        )
        .await?;
    if result.matched_count == 0 {
        return Err(if by_id(db, id).await?.is_none() {
            CatalogError::NotFound
        } else {
            CatalogError::Stale
        });
    }
    durable(db)
        .update_many(
            doc! { "ancestors._id": id },
            doc! { "$set": {
                "ancestors.$.name": name, "ancestors.$.slug": slug,
                "edit_version": EditVersion::new(),
            } },
        )
        .await?;
    super::changes::categories_changed(db);
    Ok(())
}

/// Delete a category that has no child categories and no products filed under it.
pub async fn delete(db: &Db, id: ObjectId) -> Result<(), CatalogError> {
    let children = collection(db)
        .count_documents(doc! { "parent": id })
        .await?;
    if children > 0 {
        return Err(CatalogError::HasChildren(children));
    }
    let filed = db
        .collection::<Document>(model::COLLECTION)
        .count_documents(doc! { "categories": id })
        .await?;
    if filed > 0 {
        return Err(CatalogError::HasProducts(filed));
    }
    let result = durable(db).delete_one(doc! { "_id": id }).await?;
    super::changes::categories_changed(db);
    if result.deleted_count == 0 {
        return Err(CatalogError::NotFound);
    }
    Ok(())
}

/// Delete a category after handing what it holds to its parent: each child category moves up
/// (with its whole subtree, through [`move_to`]), and each product filed under it is filed
/// under the parent instead. A top-level category's children become top-level; its products
/// have nowhere to go, so then products are refused as in [`delete`].
///
/// Every step is a single-document write that leaves the catalog consistent, so a crash
/// part-way leaves a category with less in it, never a product filed nowhere: products are
/// filed under the parent before they are unfiled from the category.
pub async fn delete_reparenting(db: &Db, id: ObjectId) -> Result<(), CatalogError> {
    let category = by_id(db, id).await?.ok_or(CatalogError::NotFound)?;
    // Durable: filing products under the parent is part of an admin save.
    let products = db.durable::<Document>(model::COLLECTION);
    if category.parent.is_none() {
        let filed = products.count_documents(doc! { "categories": id }).await?;
        if filed > 0 {
            return Err(CatalogError::HasProducts(filed));
        }
    }
    for child in children(db, Some(id)).await? {
        move_to(db, child.id, category.parent).await?;
    }
    if let Some(parent) = category.parent {
        let filed: Vec<Document> = products
            .find(doc! { "categories": id })
            .projection(doc! { "_id": 1 })
            .await?
            .try_collect()
            .await?;
        for product in filed {
            let Ok(product_id) = product.get_object_id("_id") else {
                continue;
            };
            products
                .update_one(
                    doc! { "_id": product_id },
                    doc! { "$addToSet": { "categories": parent } },
                )
                .await?;
            products
                .update_one(
                    doc! { "_id": product_id },
                    doc! { "$pull": { "categories": id } },
                )
                .await?;
        }
        rebuild_product_paths(db, id).await?;
    }
    delete(db, id).await
}

/// The category path of a product filed under `categories`: those categories and all their
/// ancestors, each once, in a stable order.
pub(crate) async fn category_path_for(
    db: &Db,
    categories: &[ObjectId],
) -> Result<Vec<ObjectId>, DbError> {
    let mut path: Vec<ObjectId> = Vec::new();
    for id in categories {
        if let Some(category) = by_id(db, *id).await? {
            for ancestor in &category.ancestors {
                if !path.contains(&ancestor.id) {
                    path.push(ancestor.id);
                }
            }
            if !path.contains(&category.id) {
                path.push(category.id);
            }
        }
    }
    Ok(path)
}
