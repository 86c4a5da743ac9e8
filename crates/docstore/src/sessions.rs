//! The logical sessions this server has seen (each command's `lsid`), for `$listLocalSessions`:
//! when each was last used and by whom, forgotten at `endSessions`/`killSessions` or after 30
//! minutes unused (mongod's `localLogicalSessionTimeoutMinutes`). Sessions carry nothing else
//! here: there are no transactions or retryable-write records to keep.
//!
//! Every command touches the registry, so it is split into shards by the session id's first
//! byte: connections using different sessions rarely wait on the same lock.

use bson::spec::BinarySubtype;
use bson::{doc, Binary, Bson, DateTime, Document};
use std::collections::HashMap;

const SHARDS: usize = 16;
/// Sessions unused this long are gone, as in mongod.
const TIMEOUT_MS: i64 = 30 * 60 * 1000;
/// The most sessions one shard remembers; the least recently used go first beyond it.
const PER_SHARD: usize = 4096;

/// A session as `$listLocalSessions` reports it.
#[derive(Debug, Clone)]
struct Seen {
    last_use: DateTime,
    /// The authenticated user (`name@admin`), or empty without authentication.
    user: String,
}

#[derive(Debug, Default)]
pub(crate) struct Sessions {
    shards: [parking_lot::Mutex<HashMap<[u8; 16], Seen>>; SHARDS],
}

/// The 16 bytes of a session id (`lsid: {id: UUID}`).
fn id_of(lsid: &Bson) -> Option<[u8; 16]> {
    let Bson::Document(d) = lsid else { return None };
    match d.get("id") {
        Some(Bson::Binary(b)) if b.subtype == BinarySubtype::Uuid => {
            b.bytes.as_slice().try_into().ok()
        }
        _ => None,
    }
}

impl Sessions {
    fn shard(&self, id: &[u8; 16]) -> &parking_lot::Mutex<HashMap<[u8; 16], Seen>> {
        &self.shards[usize::from(id[0]) % SHARDS]
    }

    /// Records a command's use of its session (`cmd.lsid`), if it names one.
    pub(crate) fn touch(&self, cmd: &Document, user: Option<&str>) {
        let Some(id) = cmd.get("lsid").and_then(id_of) else {
            return;
        };
        let now = DateTime::now();
        let mut shard = self.shard(&id).lock();
        if shard.len() >= PER_SHARD && !shard.contains_key(&id) {
            let oldest = shard
                .iter()
                .min_by_key(|(_, s)| s.last_use)
                .map(|(k, _)| *k);
            if let Some(oldest) = oldest {
                shard.remove(&oldest);
            }
        }
        shard.insert(
            id,
            Seen {
                last_use: now,
                user: user.map(|u| format!("{u}@admin")).unwrap_or_default(),
            },
        );
    }

    /// Forgets the sessions `endSessions`/`killSessions` name (`[{id: UUID}, ...]`).
    pub(crate) fn end(&self, ids: &[Bson]) {
        for id in ids.iter().filter_map(id_of) {
            self.shard(&id).lock().remove(&id);
        }
    }

    /// The live sessions, each as `$listLocalSessions` shows it, of the users `wanted` accepts
    /// (by `name@db`, empty without authentication).
    pub(crate) fn list(&self, wanted: impl Fn(&str) -> bool) -> Vec<Document> {
        let cutoff = DateTime::now().timestamp_millis() - TIMEOUT_MS;
        let mut out = Vec::new();
        for shard in &self.shards {
            let mut shard = shard.lock();
            shard.retain(|_, s| s.last_use.timestamp_millis() >= cutoff);
            for (id, seen) in shard.iter().filter(|(_, s)| wanted(&s.user)) {
                let mut entry = doc! {
                    "_id": {
                        "id": Binary { subtype: BinarySubtype::Uuid, bytes: id.to_vec() },
                        "uid": Binary { subtype: BinarySubtype::Generic, bytes: uid(&seen.user) },
                    },
                    "lastUse": seen.last_use,
                };
                if !seen.user.is_empty() {
                    entry.insert("user", doc! { "name": seen.user.clone() });
                }
                out.push(entry);
            }
        }
        out.sort_by_key(|d| std::cmp::Reverse(d.get_datetime("lastUse").ok().copied()));
        out
    }
}

/// mongod's user digest: SHA-256 of `name@db` (of the empty string without authentication).
fn uid(user: &str) -> Vec<u8> {
    use sha2::Digest;
    sha2::Sha256::digest(user.as_bytes()).to_vec()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lsid(byte: u8) -> Document {
        doc! { "ping": 1, "lsid": { "id": Binary { subtype: BinarySubtype::Uuid, bytes: vec![byte; 16] } } }
    }

    #[test]
    fn sessions_are_listed_once_each_until_ended() {
        let sessions = Sessions::default();
        sessions.touch(&lsid(1), None);
        sessions.touch(&lsid(1), None);
        sessions.touch(&lsid(2), Some("app"));
        sessions.touch(&doc! { "ping": 1 }, None);
        assert_eq!(sessions.list(|_| true).len(), 2);
        assert_eq!(sessions.list(|u| u == "app@admin").len(), 1);
        let ended = lsid(1).get("lsid").cloned().unwrap();
        sessions.end(&[ended]);
        assert_eq!(sessions.list(|_| true).len(), 1);
    }
}
