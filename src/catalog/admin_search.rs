//! The admin product list's search: products whose SKU is the search text exactly, or whose
//! title starts with it (case-insensitively, through `search_title`), in title order. An empty
//! search lists every product in title order.

use bson::{doc, Document};
use futures::TryStreamExt;

use crate::catalog::listing::title_prefix;
use crate::catalog::products::{self, Product};
use crate::db::{Db, DbError};

/// The filter and sort of [`search`], for `explain` in tests. The sort is served by the
/// `search_title, _id` index, so a search walks that index in order and stops at the limit.
pub fn query(search: &str) -> (Document, Document) {
    let filter = if search.is_empty() {
        doc! {}
    } else {
        doc! { "$or": [ { "sku": search }, { "search_title": title_prefix(search) } ] }
    };
    (filter, doc! { "search_title": 1, "_id": 1 })
}

/// The first `limit` products matching `search`, with how many match in all.
pub async fn search(db: &Db, search: &str, limit: i64) -> Result<(Vec<Product>, u64), DbError> {
    let (filter, sort) = query(search);
    let collection = products::collection(db);
    let total = collection.count_documents(filter.clone()).await?;
    let found = collection
        .find(filter)
        .sort(sort)
        .limit(limit)
        .await?
        .try_collect()
        .await?;
    Ok((found, total))
}
