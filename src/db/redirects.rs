//! The `redirects` collection: the slugs things used to have, so that a link to an old address
//! keeps working after a rename (`GET /blog/old-slug` answers 301 to the node's address now).
//!
//! One document per old address, `{ section, slug, target, renamed }`: `section` is the URL's
//! first segment (`blog`, `pages`, `gallery`, `products`), `target` the `_id` of the node or
//! product that had the slug. Unique on `{section, slug}`, so an address names one thing: the
//! last one renamed away from it (a later rename overwrites the record). The target is an id,
//! not a slug, so a thing renamed twice redirects in one hop from both of its old addresses.
//!
//! Readers look here only when no live node or product has the address: whatever holds a slug
//! now wins over a record of whatever held it before. A node or product that takes a slug
//! ([`forget`]) and one that is deleted ([`forget_target`]) drop the records that would send its
//! address elsewhere, so a deleted page's address is "not found" rather than someone else's.

use bson::oid::ObjectId;
use bson::{doc, Document};
use mongodb::options::IndexOptions;
use mongodb::IndexModel;

use crate::db::{is_duplicate_key, Db, DbError};

pub const COLLECTION: &str = "redirects";

/// The section of product slugs (`/products/{slug}`); content sections are named by their URL
/// segment too, and none is called `products`.
pub(crate) const PRODUCTS: &str = "products";

pub fn indexes() -> Vec<IndexModel> {
    vec![
        // The lookup of an old address; unique so an address redirects to one place.
        IndexModel::builder()
            .keys(doc! { "section": 1, "slug": 1 })
            .options(
                IndexOptions::builder()
                    .unique(true)
                    .name("section_slug".to_string())
                    .build(),
            )
            .build(),
        // Dropping a deleted node's or product's old addresses.
        IndexModel::builder()
            .keys(doc! { "target": 1 })
            .options(IndexOptions::builder().name("target".to_string()).build())
            .build(),
    ]
}

/// The filter of the record for `/{section}/{slug}` (served by the `section_slug` index).
pub fn address_filter(section: &str, slug: &str) -> Document {
    doc! { "section": section, "slug": slug }
}

/// The filter of every record sending to `target` (served by the `target` index).
pub fn target_filter(target: ObjectId) -> Document {
    doc! { "target": target }
}

/// Remember that `/{section}/{old_slug}` now means `target`. Durable: the editor is told the
/// rename is saved, and the old links working is part of it.
pub(crate) async fn remember(
    db: &Db,
    section: &str,
    old_slug: &str,
    target: ObjectId,
) -> Result<(), DbError> {
    let update = doc! { "$set": { "target": target, "renamed": db.now() } };
    let records = db.durable::<Document>(COLLECTION);
    let upsert = records
        .update_one(address_filter(section, old_slug), update.clone())
        .upsert(true)
        .await;
    match upsert {
        Ok(_) => Ok(()),
        // Two renames away from the same address raced to insert its record: the loser's
        // update now finds it and overwrites it.
        Err(e) if is_duplicate_key(&e) => {
            records
                .update_one(address_filter(section, old_slug), update)
                .await?;
            Ok(())
        }
        Err(e) => Err(e.into()),
    }
}

/// Where `/{section}/{slug}` used to lead, if something was renamed away from it.
pub(crate) async fn target(
    db: &Db,
    section: &str,
    slug: &str,
) -> Result<Option<ObjectId>, DbError> {
    let record = db
        .collection::<Document>(COLLECTION)
        .find_one(address_filter(section, slug))
        .projection(doc! { "_id": 0, "target": 1 })
        .await?;
    Ok(record.and_then(|r| r.get_object_id("target").ok()))
}

/// Something took `/{section}/{slug}`: its old record would only ever be shadowed, and would
/// send the address elsewhere once that thing is renamed or deleted.
pub(crate) async fn forget(db: &Db, section: &str, slug: &str) -> Result<(), DbError> {
    db.collection::<Document>(COLLECTION)
        .delete_one(address_filter(section, slug))
        .await?;
    Ok(())
}

/// `target` was deleted: its old addresses lead nowhere now.
pub(crate) async fn forget_target(db: &Db, target: ObjectId) -> Result<(), DbError> {
    db.collection::<Document>(COLLECTION)
        .delete_many(target_filter(target))
        .await?;
    Ok(())
}
