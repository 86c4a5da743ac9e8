//! The moderation policy (`comments.hold_first_time`, `comments.hold_over_links`,
//! `comments.blocklist`): which new comments wait for a moderator's approval instead of going
//! live. Held comments are stored as `pending`, uncounted and unseen until approved in
//! Admin → Comments. Comments written from the admin (staff) are never held.

use bson::{doc, Document};

use crate::comments::store::{NewComment, COLLECTION};
use crate::config::CommentSettings;
use crate::db::{Db, DbError};

/// Why a comment is held.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Hold {
    FirstTime,
    Links(usize),
    Blocklisted,
}

/// Web addresses in `text`: words holding `://` or starting with `www.`.
pub(crate) fn count_links(text: &str) -> usize {
    text.split_whitespace()
        .filter(|w| {
            let w = w.to_ascii_lowercase();
            w.contains("://")
                || w.trim_start_matches(['(', '<', '"', '\''])
                    .starts_with("www.")
        })
        .count()
}

/// The blocklist entries (comma- or line-separated, case-insensitive) found in the name, email or
/// text.
pub(crate) fn blocklisted(blocklist: &str, new: &NewComment) -> bool {
    let haystack = format!(
        "{}\n{}\n{}",
        new.name,
        new.email.as_deref().unwrap_or_default(),
        new.text
    )
    .to_lowercase();
    blocklist
        .split([',', '\n'])
        .map(|w| w.trim().to_lowercase())
        .filter(|w| !w.is_empty())
        .any(|w| haystack.contains(&w))
}

/// The filter finding an earlier approved comment by the same commenter: by email when one is
/// given (names are anyone's), else by name. For `explain` in tests.
pub fn known_commenter_query(new: &NewComment) -> Document {
    match &new.email {
        Some(email) => doc! { "email": email, "status": "visible" },
        None => doc! { "author.name": &new.name, "status": "visible" },
    }
}

/// Whether `new` must wait for approval, and why; `None` when it may go live.
pub(crate) async fn hold(
    db: &Db,
    settings: &CommentSettings,
    new: &NewComment,
) -> Result<Option<Hold>, DbError> {
    if new.staff {
        return Ok(None);
    }
    if !settings.blocklist.trim().is_empty() && blocklisted(&settings.blocklist, new) {
        return Ok(Some(Hold::Blocklisted));
    }
    let links = count_links(&new.text);
    if links > settings.hold_over_links {
        return Ok(Some(Hold::Links(links)));
    }
    if settings.hold_first_time {
        let known = db
            .collection::<Document>(COLLECTION)
            .find_one(known_commenter_query(new))
            .projection(doc! { "_id": 1 })
            .await?;
        if known.is_none() {
            return Ok(Some(Hold::FirstTime));
        }
    }
    Ok(None)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn links_are_counted_by_word() {
        assert_eq!(count_links("no links here"), 0);
        assert_eq!(
            count_links("see https://a.example and www.b.example, (http://c.example)"),
            3
        );
        assert_eq!(count_links("https://www.a.example"), 1);
    }

    #[test]
    fn the_blocklist_matches_any_entry_in_any_field_ignoring_case() {
        let new = NewComment {
            name: "Sam".into(),
            text: "Buy CHEAP watches".into(),
            email: Some("sam@spam.example".into()),
            ..NewComment::default()
        };
        assert!(blocklisted("viagra, cheap watches", &new));
        assert!(blocklisted("spam.example", &new));
        assert!(!blocklisted("viagra,\n casino", &new));
        assert!(!blocklisted(" , ", &new));
    }
}
