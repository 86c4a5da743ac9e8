//! Comment slugs: a short random part per level (`34db/8bda`), the timed form that orders a
//! thread (`2026.11.21.10.00.00.000:34db/…`), and the shape check a permalink must pass before any
//! query is built from it.

use std::collections::{HashMap, VecDeque};
use std::sync::{Mutex, OnceLock};

use bson::oid::ObjectId;
use bson::DateTime;
use rand::Rng;

/// Hex digits in one random part: 65 536 values per parent, so a collision is rare but real in
/// a busy discussion, and posting retries with a new part when the unique index refuses one.
const PART_LEN: usize = 4;

/// The deepest permalink accepted: far beyond any real thread, it only bounds the work a crafted
/// address can ask for.
pub const MAX_DEPTH: usize = 500;

/// A fresh random part, e.g. `8bda`.
pub fn random_part() -> String {
    let n: u16 = rand::thread_rng().gen();
    format!("{n:0width$x}", width = PART_LEN)
}

/// The next part for a comment in `discussion`: a scripted one when a test queued some, else
/// random.
pub fn next_part(discussion: ObjectId) -> String {
    scripted(discussion).unwrap_or_else(random_part)
}

/// The posting time as it leads each part of `full_slug`; it sorts like the time itself. The
/// milliseconds keep comments posted within the same second in posting order (the random part
/// only breaks ties within a millisecond).
pub fn stamp(posted: DateTime) -> String {
    posted
        .to_chrono()
        .format("%Y.%m.%d.%H.%M.%S%.3f")
        .to_string()
}

/// True when `slug` is a well-formed permalink: parts of four lowercase hex digits joined by
/// `/`. Anything else (regex metacharacters, `..`, empty parts) is no comment's slug.
pub fn is_valid(slug: &str) -> bool {
    let mut parts = 0;
    for part in slug.split('/') {
        parts += 1;
        if parts > MAX_DEPTH
            || part.len() != PART_LEN
            || !part.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
        {
            return false;
        }
    }
    true
}

type Script = Mutex<HashMap<ObjectId, VecDeque<String>>>;

fn script() -> &'static Script {
    static SCRIPT: OnceLock<Script> = OnceLock::new();
    SCRIPT.get_or_init(Default::default)
}

/// Test hook: the next comments posted in `discussion` take these parts, in order, before
/// random ones resume. Lets a test force two comments onto the same slug, which random parts
/// do only by chance. Keyed by discussion so tests running side by side do not interfere.
#[doc(hidden)]
pub fn script_parts(discussion: ObjectId, parts: &[&str]) {
    let mut script = script().lock().unwrap_or_else(|e| e.into_inner());
    script
        .entry(discussion)
        .or_default()
        .extend(parts.iter().map(|p| p.to_string()));
}

fn scripted(discussion: ObjectId) -> Option<String> {
    let mut script = script().lock().unwrap_or_else(|e| e.into_inner());
    if script.is_empty() {
        return None;
    }
    let queue = script.get_mut(&discussion)?;
    let part = queue.pop_front();
    if queue.is_empty() {
        script.remove(&discussion);
    }
    part
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn permalink_slugs_are_hex_parts_joined_by_slashes() {
        assert!(is_valid("34db"));
        assert!(is_valid("34db/8bda/0000"));
        for bad in [
            "",
            "34d",
            "34dbb",
            "34DB",
            "34db/",
            "/34db",
            "34db//8bda",
            "..",
            "34db/..",
            ".*",
            "34d.",
            "(a|b)",
            "34db%2F8bda",
            "34db\\",
        ] {
            assert!(!is_valid(bad), "{bad:?} accepted");
        }
        let deep = vec!["abcd"; MAX_DEPTH + 1].join("/");
        assert!(!is_valid(&deep));
    }

    #[test]
    fn random_parts_have_the_permalink_shape() {
        for _ in 0..100 {
            assert!(is_valid(&random_part()));
        }
    }

    #[test]
    fn stamps_sort_like_times() {
        let a = stamp(DateTime::from_millis(1_700_000_000_000));
        let b = stamp(DateTime::from_millis(1_700_000_000_007));
        let c = stamp(DateTime::from_millis(1_700_000_001_000));
        assert_eq!(a, "2023.11.14.22.13.20.000");
        assert!(a < b && b < c);
    }
}
