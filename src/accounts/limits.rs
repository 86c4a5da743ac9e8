//! Sign-in requests counted in the database, so the limits hold across any number of instances:
//! a fixed window per key (one client address, or one email address), one upsert with `$inc`
//! per request on the document of the key's current window. The documents expire by a TTL
//! index once their window is over. Keys are SHA-256 digests, so the collection holds no
//! address a customer typed.

use std::time::Duration;

use bson::{doc, DateTime, Document};
use mongodb::options::{IndexOptions, ReturnDocument};
use mongodb::IndexModel;
use sha2::{Digest, Sha256};

use crate::db::{is_duplicate_key, Db, DbError};

pub(crate) const COLLECTION: &str = "sign_in_limits";

pub(crate) fn indexes() -> Vec<IndexModel> {
    vec![IndexModel::builder()
        .keys(doc! { "expires": 1 })
        .options(
            IndexOptions::builder()
                .expire_after(Duration::from_secs(0))
                .build(),
        )
        .build()]
}

/// Count one event for `key` in the window of length `window` that holds now; true while at
/// most `allowed` events were counted in it (this one included).
pub(crate) async fn allow(
    db: &Db,
    kind: &str,
    key: &str,
    allowed: u32,
    window: Duration,
) -> Result<bool, DbError> {
    let now = db.now().timestamp_millis();
    let window_ms = i64::try_from(window.as_millis()).unwrap_or(i64::MAX).max(1);
    let slot = now.div_euclid(window_ms);
    let id = format!(
        "{kind}/{}/{slot}",
        hex::encode(Sha256::digest(key.as_bytes()))
    );
    let expires = DateTime::from_millis(slot.saturating_add(1).saturating_mul(window_ms));
    let limits = db.collection::<Document>(COLLECTION);
    for attempt in 0..3 {
        let counted = limits
            .find_one_and_update(
                doc! { "_id": &id },
                doc! { "$inc": { "count": 1_i64 }, "$setOnInsert": { "expires": expires } },
            )
            .upsert(true)
            .return_document(ReturnDocument::After)
            .await;
        match counted {
            Ok(found) => {
                let count = found
                    .and_then(|d| d.get_i64("count").ok())
                    .unwrap_or(i64::MAX);
                return Ok(count <= i64::from(allowed));
            }
            // Two first requests of a window raced to create its document: count again.
            Err(e) if attempt < 2 && is_duplicate_key(&e) => continue,
            Err(e) => return Err(e.into()),
        }
    }
    Ok(false)
}
