//! Every index Bazaar's queries rely on, created idempotently at start-up (creating an index
//! that already exists with the same definition is a no-op in MongoDB and docstore).
//!
//! Each area declares its own indexes next to its queries (`catalog::products::indexes()` …);
//! this is the one place that collects them, above the areas, so `db` names none of them.

use mongodb::IndexModel;

use crate::db::{Db, DbError};
use crate::{accounts, analytics, cart, catalog, checkout, comments, content};

/// `(collection, indexes)`. Each feature adds the indexes backing its queries here, with a test
/// that `explain`s the query. `settings` is read by `_id`, which MongoDB always indexes.
pub(crate) fn index_plan() -> Vec<(&'static str, Vec<IndexModel>)> {
    let mut plan = vec![
        (catalog::products::COLLECTION, catalog::products::indexes()),
        // Case-insensitive genre and people filters (normalised keys written with the product).
        (catalog::products::COLLECTION, catalog::facets::indexes()),
        (
            catalog::categories::COLLECTION,
            catalog::categories::indexes(),
        ),
        // Page anchors kept between restarts: a TTL index clears the ones nobody walks.
        (catalog::anchors::COLLECTION, catalog::anchors::indexes()),
        (cart::COLLECTION, cart::indexes()),
        (crate::stock::COLLECTION, crate::stock::indexes()),
        (checkout::orders::COLLECTION, checkout::orders::indexes()),
        (content::store::COLLECTION, content::store::indexes()),
        // Each node's earlier versions, newest first.
        (
            content::revisions::COLLECTION,
            content::revisions::indexes(),
        ),
        // Old slugs of renamed nodes and products (`db::redirects`).
        (
            crate::db::redirects::COLLECTION,
            crate::db::redirects::indexes(),
        ),
        (comments::COLLECTION, comments::indexes()),
        (accounts::store::COLLECTION, accounts::store::indexes()),
        // Sign-in tokens and rate-limit windows: TTL indexes clear what expired.
        (accounts::tokens::COLLECTION, accounts::tokens::indexes()),
        (accounts::limits::COLLECTION, accounts::limits::indexes()),
        (accounts::privacy::COLLECTION, accounts::privacy::indexes()),
        (crate::mail::COLLECTION, crate::mail::indexes()),
        (
            checkout::payments::COLLECTION,
            checkout::payments::indexes(),
        ),
        (analytics::DAILY, analytics::indexes()),
        (analytics::MONTHLY, analytics::monthly_indexes()),
        // The traffic log (its TTL index is made with the configured retention:
        // `analytics::events::ensure_retention`) and its roll-ups.
        (analytics::events::EVENTS, analytics::events::indexes()),
        // The built-in test gateway's own charges (a real gateway keeps them elsewhere).
        (
            checkout::gateway::TEST_GATEWAY_CHARGES,
            checkout::gateway::TestGateway::indexes(),
        ),
    ];
    // The traffic roll-ups, one collection per level.
    plan.extend(analytics::rollup::indexes());
    // Site search: one weighted text index on products and one on content nodes.
    plan.extend(crate::search::indexes());
    plan
}

/// The name of every index in [`index_plan`], by collection: what `/readyz` checks exists. An
/// index without a given name gets the server's default, its keys as `field_direction` joined
/// by `_`.
pub(crate) fn index_names() -> Vec<(String, Vec<String>)> {
    let mut names: Vec<(String, Vec<String>)> = Vec::new();
    for (collection, models) in index_plan() {
        let of_collection = models.iter().map(|model| {
            model
                .options
                .as_ref()
                .and_then(|o| o.name.clone())
                .unwrap_or_else(|| {
                    model
                        .keys
                        .iter()
                        .map(|(field, direction)| match direction {
                            bson::Bson::String(s) => format!("{field}_{s}"),
                            bson::Bson::Int32(n) => format!("{field}_{n}"),
                            bson::Bson::Int64(n) => format!("{field}_{n}"),
                            other => format!("{field}_{other}"),
                        })
                        .collect::<Vec<_>>()
                        .join("_")
                })
        });
        match names.iter_mut().find(|(c, _)| c == collection) {
            Some((_, list)) => list.extend(of_collection),
            None => names.push((collection.to_string(), of_collection.collect())),
        }
    }
    names
}

/// Indexes no query uses any more: `(collection, index name)`, dropped by [`ensure_indexes`].
pub(crate) fn retired_indexes() -> Vec<(&'static str, &'static str)> {
    let products = catalog::products::RETIRED_INDEXES
        .iter()
        .map(|name| (catalog::products::COLLECTION, *name));
    let orders = crate::checkout::orders::RETIRED_INDEXES
        .iter()
        .map(|name| (crate::checkout::orders::COLLECTION, *name));
    let nodes = crate::content::store::RETIRED_INDEXES
        .iter()
        .map(|name| (crate::content::store::COLLECTION, *name));
    products
        .chain(orders)
        .chain(nodes)
        .chain(crate::search::RETIRED_INDEXES)
        .chain(analytics::events::RETIRED_INDEXES)
        .collect()
}

/// Create every index in [`index_plan`] and drop the [`retired_indexes`] still there; safe to
/// run on every start.
pub async fn ensure_indexes(db: &Db) -> Result<(), DbError> {
    for (collection, name) in retired_indexes() {
        let coll = db.collection::<bson::Document>(collection);
        let names = coll.list_index_names().await;
        // A collection that does not exist yet has no indexes to drop.
        if names.is_ok_and(|names| names.iter().any(|n| n == name)) {
            coll.drop_index(name).await?;
            tracing::info!(
                collection,
                index = name,
                "dropped an index no query uses any more"
            );
        }
    }
    for (collection, models) in index_plan() {
        if models.is_empty() {
            continue;
        }
        db.collection::<bson::Document>(collection)
            .create_indexes(models)
            .await?;
        tracing::debug!(collection, "indexes ensured");
    }
    Ok(())
}
