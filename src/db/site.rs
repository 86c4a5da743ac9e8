//! The `settings` collection: site-wide settings kept in the database (name, tagline), so
//! every instance behind a load balancer shows the same.

use bson::doc;
use serde::{Deserialize, Serialize};

use crate::db::{Db, DbError};

pub const COLLECTION: &str = "settings";
const SITE_ID: &str = "site";

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct SiteSettings {
    pub name: String,
    pub tagline: String,
}

impl Default for SiteSettings {
    fn default() -> Self {
        SiteSettings {
            name: "Bazaar".to_string(),
            tagline: "Records, films and books, with notes from the shop floor.".to_string(),
        }
    }
}

/// The site settings, or the defaults when none are stored yet.
pub async fn load(db: &Db) -> Result<SiteSettings, DbError> {
    let stored = db
        .collection::<SiteSettings>(COLLECTION)
        .find_one(doc! { "_id": SITE_ID })
        .projection(doc! { "_id": 0, "name": 1, "tagline": 1 })
        .await?;
    Ok(stored.unwrap_or_default())
}

/// Store the defaults unless settings exist; returns whether a document was added. An existing
/// document is never touched, so an edited tagline survives re-seeding.
pub async fn insert_defaults(db: &Db) -> Result<bool, DbError> {
    let defaults = SiteSettings::default();
    let result = db
        .collection::<bson::Document>(COLLECTION)
        .update_one(
            doc! { "_id": SITE_ID },
            doc! { "$setOnInsert": { "name": &defaults.name, "tagline": &defaults.tagline } },
        )
        .upsert(true)
        .await?;
    db.catalog_cache().site_changed();
    Ok(result.upserted_id.is_some())
}
