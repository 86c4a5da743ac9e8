//! Signed links in emails (the one-click unsubscribe): HMAC-SHA256 over the link's subject with
//! a secret kept in the database, so every instance signs and checks alike and a link cannot be
//! made up for another comment.

use bson::doc;
use mongodb::options::ReturnDocument;
use rand::RngCore;
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

use crate::db::{Db, DbError};

/// The collection holding the secret (one document).
const COLLECTION: &str = "secrets";
const KEY_ID: &str = "mail-links";
const BLOCK: usize = 64;

/// The signing key of one [`Db`] handle once read (a [`Db::extension`]): the key never changes
/// after it is created, so every link signed or checked later needs no database command.
#[derive(Default)]
struct KnownKey(tokio::sync::OnceCell<Vec<u8>>);

/// The signing key: created once (an upsert with `$setOnInsert`, so instances racing at start
/// agree on one), read back, and kept with the handle.
pub(crate) async fn key(db: &Db) -> Result<Vec<u8>, DbError> {
    let known = db.extension::<KnownKey>();
    known.0.get_or_try_init(|| stored_key(db)).await.cloned()
}

async fn stored_key(db: &Db) -> Result<Vec<u8>, DbError> {
    let mut fresh = [0u8; 32];
    rand::thread_rng().fill_bytes(&mut fresh);
    let found = db
        .durable::<bson::Document>(COLLECTION)
        .find_one_and_update(
            doc! { "_id": KEY_ID },
            doc! { "$setOnInsert": { "key": hex::encode(fresh) } },
        )
        .upsert(true)
        .return_document(ReturnDocument::After)
        .await;
    let found = match found {
        Ok(found) => found,
        // Two instances inserted at once: the other's key won; read it.
        Err(e) if crate::db::is_duplicate_key(&e) => {
            db.collection::<bson::Document>(COLLECTION)
                .find_one(doc! { "_id": KEY_ID })
                .await?
        }
        Err(e) => return Err(e.into()),
    };
    let hex_key = found
        .as_ref()
        .and_then(|d| d.get_str("key").ok())
        .ok_or_else(|| DbError::Invalid("the mail link key is missing".into()))?;
    hex::decode(hex_key).map_err(|_| DbError::Invalid("the mail link key is not hex".into()))
}

/// HMAC-SHA256 (RFC 2104) of `message` under `key`, as hex.
pub(crate) fn sign(key: &[u8], message: &str) -> String {
    let mut block = [0u8; BLOCK];
    if key.len() > BLOCK {
        block[..32].copy_from_slice(&Sha256::digest(key));
    } else {
        block[..key.len()].copy_from_slice(key);
    }
    let pad = |byte: u8| block.iter().map(|b| b ^ byte).collect::<Vec<u8>>();
    let inner = Sha256::new()
        .chain_update(pad(0x36))
        .chain_update(message.as_bytes())
        .finalize();
    let outer = Sha256::new()
        .chain_update(pad(0x5c))
        .chain_update(inner)
        .finalize();
    hex::encode(outer)
}

/// Whether `signature` is [`sign`]`(key, message)`, compared in constant time.
pub(crate) fn verify(key: &[u8], message: &str, signature: &str) -> bool {
    let expected = sign(key, message);
    expected.len() == signature.len() && bool::from(expected.as_bytes().ct_eq(signature.as_bytes()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hmac_matches_the_rfc_4231_test_vector() {
        // RFC 4231, test case 2.
        assert_eq!(
            sign(b"Jefe", "what do ya want for nothing?"),
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
        );
    }

    #[test]
    fn a_signature_checks_only_for_its_own_message_and_key() {
        let s = sign(b"key", "comment/1");
        assert!(verify(b"key", "comment/1", &s));
        assert!(!verify(b"key", "comment/2", &s));
        assert!(!verify(b"other", "comment/1", &s));
        assert!(!verify(b"key", "comment/1", ""));
        assert!(!verify(b"key", "comment/1", &s[..10]));
    }
}
