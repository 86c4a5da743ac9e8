//! Case-insensitive genre and people filters. Shoppers type `jazz` or "miles davis"; products
//! store `Jazz` and `Miles Davis`. Each product therefore also stores its genres and people in
//! a normalised form (`genre_keys`, `people_keys`), written with the product and indexed, so
//! the filters are exact matches on an index rather than regular expressions over every
//! document. Products stored before these fields existed get them at start-up ([`backfill`]).

use bson::{doc, Document};
use futures::TryStreamExt;
use mongodb::IndexModel;

use crate::catalog::model::Product;
pub(crate) use crate::catalog::model::{keys, normalise};
use crate::catalog::products;
use crate::db::{Db, DbError};

/// The indexes behind the two filters, newest first like the listing's default sort; the
/// type filter, when present, narrows the scan (it is not needed to use them).
pub(crate) fn indexes() -> Vec<IndexModel> {
    let plain = |keys: Document| IndexModel::builder().keys(keys).build();
    vec![
        plain(doc! { "genre_keys": 1, "details.issue_date": -1 }),
        plain(doc! { "people_keys": 1, "details.issue_date": -1 }),
    ]
}

/// Products stored before the normalised fields existed: they have no `people_keys` at all (a
/// product without people has an empty array, which this does not match). Equality with null
/// finds missing fields through the `people_keys` index, so the check at every start-up is an
/// index lookup, not a scan of the catalog.
pub fn missing_keys_filter() -> Document {
    doc! { "people_keys": null }
}

/// Give every product stored without the normalised fields its keys. Runs at start-up (safe to
/// run on several instances at once: each write re-checks that the fields are still missing).
pub async fn backfill(db: &Db) -> Result<u64, DbError> {
    let stale: Vec<Product> = products::collection(db)
        .find(missing_keys_filter())
        .await?
        .try_collect()
        .await?;
    let mut updated = 0;
    for product in stale {
        let Some(details) = product.details() else {
            continue;
        };
        let result = db
            .durable::<Document>(products::COLLECTION)
            .update_one(
                doc! { "_id": product.id, "people_keys": null },
                doc! { "$set": {
                    "genre_keys": keys(details.genres()),
                    "people_keys": keys(&details.people()),
                } },
            )
            .await?;
        updated += result.modified_count;
    }
    if updated > 0 {
        tracing::info!(
            products = updated,
            "normalised genre and people filter keys"
        );
    }
    Ok(updated)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normalised_keys_ignore_case_and_spacing() {
        assert_eq!(normalise("  Miles   DAVIS "), "miles davis");
        assert_eq!(
            keys(&["Jazz".into(), "jazz ".into(), " ".into(), "Bop".into()]),
            ["jazz", "bop"]
        );
    }
}
