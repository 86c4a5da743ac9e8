//! Preview links: a draft or scheduled node shown exactly as readers will see it, to anyone
//! holding the link until it expires, so an editor can check a post and share it with a
//! reviewer who has no admin account. A link is `/preview/{id}?expires=…&sig=…`: the node's id
//! and the expiry (Unix seconds) signed with HMAC-SHA256 under the site's link key
//! (`mail::signing`, kept in the database so every instance signs and checks alike; the message
//! names its purpose, so an unsubscribe link's signature is no preview's).
//!
//! The page is marked `noindex` and `private, no-store`; it has no comment form and no links to
//! neighbouring posts. Opening a valid link also records it in the browser's session (signed
//! and encrypted, so it cannot be forged), which lets that browser fetch the draft's photo
//! until the link expires (`content::media_access`); nobody else can.

use actix_session::Session;
use bson::oid::ObjectId;

use crate::db::{Db, DbError};
use crate::mail::signing;

/// How long a preview link works.
pub(crate) const PREVIEW_DAYS: i64 = 7;

/// What a preview link's signature covers.
fn message(id: ObjectId, expires: i64) -> String {
    format!("preview:{}:{expires}", id.to_hex())
}

/// A preview link for node `id`, valid for [`PREVIEW_DAYS`] from now.
pub(crate) async fn link(db: &Db, id: ObjectId) -> Result<String, DbError> {
    let key = signing::key(db).await?;
    let expires = db.now().timestamp_millis() / 1000 + PREVIEW_DAYS * 24 * 3600;
    let sig = signing::sign(&key, &message(id, expires));
    Ok(format!(
        "/preview/{}?expires={expires}&sig={sig}",
        id.to_hex()
    ))
}

/// What a presented link is worth.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Checked {
    Valid,
    /// Made by the site, but its time is up.
    Expired,
    /// Not made by the site (or altered).
    Forged,
}

/// Check a link's `expires` and `sig` for node `id`.
pub(crate) async fn check(
    db: &Db,
    id: ObjectId,
    expires: i64,
    sig: &str,
) -> Result<Checked, DbError> {
    let key = signing::key(db).await?;
    if !signing::verify(&key, &message(id, expires), sig) {
        return Ok(Checked::Forged);
    }
    if db.now().timestamp_millis() / 1000 > expires {
        return Ok(Checked::Expired);
    }
    Ok(Checked::Valid)
}

/// The session key under which a browser keeps the previews it opened: `(node id, expiry in
/// Unix seconds)`.
const GRANTS_KEY: &str = "preview_grants";
/// Previews one browser keeps at most (the newest).
const MAX_GRANTS: usize = 8;

fn grants(session: &Session) -> Vec<(String, i64)> {
    session
        .get::<Vec<(String, i64)>>(GRANTS_KEY)
        .ok()
        .flatten()
        .unwrap_or_default()
}

/// Remember in `session` that it opened a valid preview link of node `id` expiring at
/// `expires` (Unix seconds).
pub(crate) fn grant(session: &Session, id: ObjectId, expires: i64) {
    let hex = id.to_hex();
    let mut kept: Vec<(String, i64)> = grants(session)
        .into_iter()
        .filter(|(node, _)| *node != hex)
        .collect();
    kept.push((hex, expires));
    let excess = kept.len().saturating_sub(MAX_GRANTS);
    kept.drain(..excess);
    if let Err(e) = session.insert(GRANTS_KEY, kept) {
        tracing::warn!(error = %e, "remembering a preview in the session failed");
    }
}

/// Whether `session` opened a preview of one of `nodes` whose link has not expired at `now`.
pub(crate) fn granted(session: &Session, nodes: &[ObjectId], now: bson::DateTime) -> bool {
    let now = now.timestamp_millis() / 1000;
    grants(session)
        .iter()
        .any(|(node, expires)| *expires > now && nodes.iter().any(|n| n.to_hex() == *node))
}
