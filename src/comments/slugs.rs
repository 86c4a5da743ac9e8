//! Comment slugs: a short random part per level (`34db/8bda`), the timed form that orders a
//! thread (`2026.11.21.10.00.00.000:34db/…`), and the shape check a permalink must pass before any
//! query is built from it.
//!
//! A stamp never goes backwards among siblings ([`next_stamp`]): it is the later of now and the
//! latest sibling's stamp plus a millisecond, so a thread stays in posting order when the clock
//! steps back or app instances' clocks disagree.

use std::collections::{HashMap, VecDeque};
use std::sync::{Mutex, OnceLock};

use bson::oid::ObjectId;
use bson::DateTime;
use rand::Rng;
use serde::{Deserialize, Serialize};

/// Hex digits in one random part: 65 536 values per parent, so a collision is rare but real in
/// a busy discussion, and posting retries with a new part when the unique index refuses one.
const PART_LEN: usize = 4;

/// The deepest permalink accepted: far beyond any real thread, it only bounds the work a crafted
/// address can ask for.
pub(crate) const MAX_DEPTH: usize = 500;

/// A fresh random part, e.g. `8bda`.
pub(crate) fn random_part() -> String {
    let n: u16 = rand::thread_rng().gen();
    format!("{n:0width$x}", width = PART_LEN)
}

/// The next part for a comment in `discussion`: a scripted one when a test queued some, else
/// random.
pub(crate) fn next_part(discussion: ObjectId) -> String {
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

/// The stamp format of [`stamp`], for reading one back.
const STAMP_FORMAT: &str = "%Y.%m.%d.%H.%M.%S%.3f";

/// The time a stamp written by [`stamp`] stands for; `None` for anything else.
pub(crate) fn parse_stamp(stamp: &str) -> Option<DateTime> {
    let naive = chrono::NaiveDateTime::parse_from_str(stamp, STAMP_FORMAT).ok()?;
    Some(DateTime::from_chrono(naive.and_utc()))
}

/// The stamp of the first level of `timed` (`stamp:part/stamp:part…`, a full slug or what
/// follows a parent's full slug): the time that orders that comment among its siblings.
pub(crate) fn leading_stamp(timed: &str) -> Option<DateTime> {
    let first = timed.split('/').next()?;
    let (stamp, _part) = first.split_once(':')?;
    parse_stamp(stamp)
}

/// The stamp for a comment posted at `now` whose latest sibling is stamped `latest`: `now`, or
/// a millisecond after the sibling when the clock reads earlier than that (a step back, or an
/// instance whose clock runs behind another's). Two posts reading the same sibling at once may
/// get the same stamp; their random parts then order them, as for any two posts in one
/// millisecond.
pub(crate) fn next_stamp(now: DateTime, latest: Option<DateTime>) -> DateTime {
    match latest {
        Some(latest) if latest.timestamp_millis() >= now.timestamp_millis() => {
            DateTime::from_millis(latest.timestamp_millis().saturating_add(1))
        }
        _ => now,
    }
}

/// A comment's permalink: parts of four lowercase letters or digits joined by `/`
/// (`34db/8bda`), at most [`MAX_DEPTH`] of them. Random parts are hex ([`random_part`]); fixed
/// ones (the demo comments' `m001`) use the rest of the alphabet, and the route must serve both.
/// Anything else (regex metacharacters, `..`, empty parts) is no comment's slug, so an address
/// segment is parsed into one before any query is built from it. Stored as the plain string.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct CommentPath(String);

impl CommentPath {
    /// The permalink `text` names, or `None` when it is not well-formed.
    pub fn parse(text: &str) -> Option<CommentPath> {
        let mut parts = 0;
        for part in text.split('/') {
            parts += 1;
            if parts > MAX_DEPTH
                || part.len() != PART_LEN
                || !part.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'z'))
            {
                return None;
            }
        }
        Some(CommentPath(text.to_string()))
    }

    /// The path one level below this one, ending in `part` (a fresh random or scripted part).
    pub(crate) fn child(&self, part: &str) -> CommentPath {
        CommentPath(format!("{}/{part}", self.0))
    }

    /// A top-level comment's path: just its own part.
    pub(crate) fn top_level(part: String) -> CommentPath {
        CommentPath(part)
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// Read as the text it is (`path.split('/')`, `&path` where a `&str` is wanted).
impl std::ops::Deref for CommentPath {
    type Target = str;
    fn deref(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Display for CommentPath {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl PartialEq<str> for CommentPath {
    fn eq(&self, other: &str) -> bool {
        self.0 == other
    }
}

impl From<CommentPath> for bson::Bson {
    fn from(path: CommentPath) -> bson::Bson {
        bson::Bson::String(path.0)
    }
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

    fn is_valid(text: &str) -> bool {
        CommentPath::parse(text).is_some()
    }

    #[test]
    fn permalink_slugs_are_lowercase_alphanumeric_parts_joined_by_slashes() {
        assert!(is_valid("34db"));
        assert!(is_valid("34db/8bda/0000"));
        assert!(is_valid("m001/m002"));
        assert!(is_valid("t001/zz9z"));
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
            "m0-1",
            "é001",
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
    fn a_stamp_reads_back_as_its_time_and_anything_else_as_none() {
        let t = DateTime::from_millis(1_700_000_000_007);
        assert_eq!(parse_stamp(&stamp(t)), Some(t));
        assert_eq!(
            leading_stamp(&format!("{}:34db/{}:8bda", stamp(t), stamp(DateTime::MIN))),
            Some(t)
        );
        for bad in [
            "",
            "34db",
            "2023.11.14:34db",
            "x:y",
            "2023.13.14.22.13.20.000:34db",
        ] {
            assert_eq!(leading_stamp(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn a_stamp_follows_its_latest_sibling_when_the_clock_reads_earlier() {
        let now = DateTime::from_millis(1_700_000_000_000);
        assert_eq!(next_stamp(now, None), now);
        let earlier = DateTime::from_millis(now.timestamp_millis() - 5);
        assert_eq!(next_stamp(now, Some(earlier)), now);
        // The clock stepped back an hour after the sibling was posted.
        let later = DateTime::from_millis(now.timestamp_millis() + 3_600_000);
        assert_eq!(
            next_stamp(now, Some(later)).timestamp_millis(),
            later.timestamp_millis() + 1
        );
        // Same millisecond as the sibling: still after it.
        assert_eq!(
            next_stamp(now, Some(now)).timestamp_millis(),
            now.timestamp_millis() + 1
        );
        assert!(stamp(next_stamp(now, Some(later))) > stamp(later));
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
