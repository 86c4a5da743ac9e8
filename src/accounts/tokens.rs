//! Sign-in tokens: what a sign-in request issues and a sign-in consumes. Each request makes one
//! document in `sign_in_tokens` and sends one email holding a link with a 256-bit random token
//! and a 6-digit code; both die after [`LIFETIME`], on first use, or after
//! [`MAX_CODE_ATTEMPTS`] wrong codes.
//!
//! Nothing stored lets anyone sign in: the document's `_id` is the SHA-256 of the link's token
//! (a link is looked up by hashing what it carries), and the code is kept only as an HMAC keyed
//! with a random *binding* secret that lives in the requesting browser's encrypted session
//! cookie and nowhere else. So a copy of the database cannot be searched for the code offline
//! (the 10⁶ codes are worthless without the binding), and the code works only in the browser
//! that asked for it; the link works in any browser, as magic links do.
//!
//! Consuming is one `findOneAndDelete` (link) or a counted `findOneAndUpdate` then a
//! `findOneAndDelete` (code), so two instances can never both sign in with one token. Expiry is
//! checked against [`Db::now`] in every filter; the TTL index on `expires` only clears the
//! leftovers.

use std::time::Duration;

use bson::{doc, DateTime};
use mongodb::options::{IndexOptions, ReturnDocument};
use mongodb::IndexModel;
use rand::{Rng, RngCore};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::db::{Db, DbError};
use crate::domain::EmailAddress;
use crate::mail::signing;

pub(crate) const COLLECTION: &str = "sign_in_tokens";

/// How long a link and its code work.
pub(crate) const LIFETIME: Duration = Duration::from_secs(15 * 60);

/// Wrong codes a token survives; the last one deletes it.
pub(crate) const MAX_CODE_ATTEMPTS: i32 = 5;

/// A pending sign-in as stored.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct SignInToken {
    /// SHA-256 (hex) of the link's token.
    #[serde(rename = "_id")]
    pub(crate) id: String,
    pub(crate) email: EmailAddress,
    /// HMAC-SHA256 of `"<id>:<code>"` under the requesting session's binding secret.
    pub(crate) code_hash: String,
    pub(crate) created: DateTime,
    pub(crate) expires: DateTime,
    /// Codes tried so far.
    #[serde(default)]
    pub(crate) attempts: i32,
}

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

fn collection(db: &Db) -> mongodb::Collection<SignInToken> {
    db.durable(COLLECTION)
}

/// What a request hands out: the secrets go into the email and the session, never the database.
#[derive(Debug, Clone)]
pub(crate) struct Issued {
    /// The token's id (its SHA-256): kept in the requesting session to find it for the code.
    pub(crate) id: String,
    /// 64 hex digits, the last part of the link.
    pub(crate) link_token: String,
    /// Six digits.
    pub(crate) code: String,
    /// 64 hex digits, kept in the requesting session only.
    pub(crate) binding: String,
}

fn digest(text: &str) -> String {
    hex::encode(Sha256::digest(text.as_bytes()))
}

fn random_hex() -> String {
    let mut bytes = [0u8; 32];
    rand::rngs::OsRng.fill_bytes(&mut bytes);
    hex::encode(bytes)
}

fn code_hash(binding: &str, id: &str, code: &str) -> String {
    signing::sign(binding.as_bytes(), &format!("{id}:{code}"))
}

/// Issue a token for `email`, valid for [`LIFETIME`].
pub(crate) async fn issue(db: &Db, email: &EmailAddress) -> Result<Issued, DbError> {
    let link_token = random_hex();
    let binding = random_hex();
    let code = format!("{:06}", rand::rngs::OsRng.gen_range(0..1_000_000u32));
    let id = digest(&link_token);
    let now = db.now();
    let expires = DateTime::from_millis(
        now.timestamp_millis()
            .saturating_add(i64::try_from(LIFETIME.as_millis()).unwrap_or(i64::MAX)),
    );
    let token = SignInToken {
        id: id.clone(),
        email: email.clone(),
        code_hash: code_hash(&binding, &id, &code),
        created: now,
        expires,
        attempts: 0,
    };
    collection(db).insert_one(&token).await?;
    Ok(Issued {
        id,
        link_token,
        code,
        binding,
    })
}

/// The token id a link's last part stands for, or `None` when it cannot be one of ours (not
/// 64 lowercase hex digits: truncated, padded, made up).
pub(crate) fn id_of_link(link_token: &str) -> Option<String> {
    let well_formed = link_token.len() == 64
        && link_token
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b));
    well_formed.then(|| digest(link_token))
}

fn live(db: &Db, id: &str) -> bson::Document {
    doc! {
        "_id": id,
        "expires": { "$gt": db.now() },
        "attempts": { "$lt": MAX_CODE_ATTEMPTS },
    }
}

/// The live token with `id`, without using it (the link's confirmation page).
pub(crate) async fn peek(db: &Db, id: &str) -> Result<Option<SignInToken>, DbError> {
    Ok(collection(db).find_one(live(db, id)).await?)
}

/// Use the live token with `id` through its link: its email, or `None` when it is unknown,
/// expired, used or dead.
pub(crate) async fn consume_link(db: &Db, id: &str) -> Result<Option<EmailAddress>, DbError> {
    Ok(collection(db)
        .find_one_and_delete(live(db, id))
        .await?
        .map(|t| t.email))
}

/// What entering a code did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum CodeOutcome {
    /// Right code: the token is used up; sign this email in.
    SignedIn(EmailAddress),
    /// Wrong code; this many tries are left.
    Wrong { left: i32 },
    /// No live token: expired, used, or killed by wrong codes (this one may have been the last).
    Dead,
}

/// Try `code` against the token `id` with the requesting session's `binding`. Every try is
/// counted before it is compared, so at most [`MAX_CODE_ATTEMPTS`] guesses are ever compared,
/// however many instances receive them at once.
pub(crate) async fn try_code(
    db: &Db,
    id: &str,
    binding: &str,
    code: &str,
) -> Result<CodeOutcome, DbError> {
    let counted = collection(db)
        .find_one_and_update(live(db, id), doc! { "$inc": { "attempts": 1 } })
        .return_document(ReturnDocument::After)
        .await?;
    let Some(token) = counted else {
        return Ok(CodeOutcome::Dead);
    };
    let code: String = code.chars().filter(|c| !c.is_whitespace()).collect();
    let right = code.len() == 6
        && code.bytes().all(|b| b.is_ascii_digit())
        && signing::verify(
            binding.as_bytes(),
            &format!("{id}:{code}"),
            &token.code_hash,
        );
    if right {
        let used = collection(db)
            .find_one_and_delete(doc! { "_id": id, "expires": { "$gt": db.now() } })
            .await?;
        return Ok(match used {
            Some(t) => CodeOutcome::SignedIn(t.email),
            // Used through its link (or by another tab) a moment ago.
            None => CodeOutcome::Dead,
        });
    }
    if token.attempts >= MAX_CODE_ATTEMPTS {
        collection(db).delete_one(doc! { "_id": id }).await?;
        return Ok(CodeOutcome::Dead);
    }
    Ok(CodeOutcome::Wrong {
        left: MAX_CODE_ATTEMPTS - token.attempts,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_whole_lowercase_hex_token_names_a_token() {
        let token = "a".repeat(64);
        assert_eq!(id_of_link(&token), Some(digest(&token)));
        assert_eq!(id_of_link(&token[..63]), None);
        assert_eq!(id_of_link(&"A".repeat(64)), None);
        assert_eq!(id_of_link(&format!("{}g", &token[..63])), None);
        assert_eq!(id_of_link(""), None);
    }

    #[test]
    fn the_code_hash_depends_on_the_binding_the_token_and_the_code() {
        let h = code_hash("b1", "id", "123456");
        assert_ne!(h, code_hash("b2", "id", "123456"));
        assert_ne!(h, code_hash("b1", "id2", "123456"));
        assert_ne!(h, code_hash("b1", "id", "123457"));
    }
}
