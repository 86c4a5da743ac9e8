//! Demo data, all of it in this module: seeding an empty database (each feature adds its own
//! step in [`run`]; every step adds only what is missing, so `bazaar seed` can run any number of
//! times without duplicates), the generated bulk catalog and posts the benchmarks and
//! `bazaar seed --products/--posts` use, and taking the demo data off again ([`removal`]).
//!
//! - [`catalog`]: the demo category tree and products, their covers, the bulk generator;
//! - [`content`]: the demo pages, posts and photos, the generated posts;
//! - `comments`: the demo discussions;
//! - [`removal`]: what Admin → System → Remove demo data deletes or keeps.

pub mod catalog;
mod comments;
pub mod content;
pub mod removal;

use crate::catalog::{self as shop_catalog, CatalogError};
use std::time::Duration;

use crate::db::{lease, site, Db, DbError};

/// The lease an instance takes to seed an empty database.
pub(crate) const SEED_LEASE: &str = "seed";
/// Longer than seeding takes (seconds), so no second instance starts while the first works.
const SEED_LEASE_FOR: Duration = Duration::from_secs(600);

/// What one seeding run added, by collection.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct SeedReport {
    pub(crate) added: Vec<(&'static str, u64)>,
}

impl SeedReport {
    pub fn total(&self) -> u64 {
        self.added.iter().map(|(_, n)| n).sum()
    }

    /// One line for people: the CLI prints it, the admin shows it as a flash message.
    pub(crate) fn summary(&self) -> String {
        let added: Vec<String> = self
            .added
            .iter()
            .filter(|(_, n)| *n > 0)
            .map(|(collection, n)| format!("{n} in {collection}"))
            .collect();
        if added.is_empty() {
            "Demo data is already in place; nothing was added.".to_string()
        } else {
            format!("Demo data added: {}.", added.join(", "))
        }
    }
}

/// Store the default site settings unless some exist, and let the storefront's cache know.
async fn insert_default_site(db: &Db) -> Result<bool, DbError> {
    let added = site::insert_defaults(db).await?;
    shop_catalog::changes::site_changed(db);
    Ok(added)
}

/// Add whatever demo data is missing.
pub async fn run(db: &Db) -> Result<SeedReport, DbError> {
    let mut report = SeedReport::default();
    let added = u64::from(insert_default_site(db).await?);
    report.added.push((site::COLLECTION, added));
    let (categories, products) = catalog::seed(db).await.map_err(|e| match e {
        CatalogError::Db(db) => db,
        other => DbError::Invalid(other.to_string()),
    })?;
    report
        .added
        .push((shop_catalog::categories::COLLECTION, categories));
    report
        .added
        .push((shop_catalog::products::COLLECTION, products));
    let covers = catalog::seed_covers(db).await.map_err(|e| match e {
        CatalogError::Db(db) => db,
        other => DbError::Invalid(other.to_string()),
    })?;
    report.added.push(("product covers", covers));
    // After the catalog: the demo content tags some demo products.
    let nodes = content::seed(db).await?;
    report
        .added
        .push((crate::content::store::COLLECTION, nodes));
    let comments = comments::seed(db).await?;
    report.added.push((crate::comments::COLLECTION, comments));
    Ok(report)
}

/// Seed only a brand-new database, so demo data deleted on purpose does not come back at the
/// next start. Returns `None` when the database already had data. "Brand-new" means no
/// documents anywhere: start-up creates the indexes (and so empty collections) before this runs.
/// Without `demo` (`seed.demo = false`) only the default site settings are stored.
///
/// Several instances may start at once on an empty database: the first to take the `seed` lease
/// seeds, the others find it taken (or the database no longer empty) and skip. The lease is
/// never released, only left to expire: by then the database has documents. Each seeding write
/// is conditional too (see [`run`]), so even a seeder whose lease ran out adds nothing twice.
pub(crate) async fn run_if_empty(db: &Db, demo: bool) -> Result<Option<SeedReport>, DbError> {
    if db.has_documents().await? {
        return Ok(None);
    }
    if lease::try_take_here(db, SEED_LEASE, SEED_LEASE_FOR)
        .await?
        .is_none()
    {
        tracing::info!("another instance is seeding the empty database");
        return Ok(None);
    }
    if !demo {
        let mut report = SeedReport::default();
        let added = u64::from(insert_default_site(db).await?);
        report.added.push((site::COLLECTION, added));
        return Ok(Some(report));
    }
    run(db).await.map(Some)
}
