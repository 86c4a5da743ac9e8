//! Where stored files are named: `/media/{id}` links inside text. A Markdown body shows a
//! stored image by linking it (`![alt](/media/{id})`, or one of its copies' URLs), so the
//! places that need to know which files a text uses (the orphan clean-up, a node's
//! `metadata.media`, the media library's "used by") read the ids out of it here, one way.

use bson::oid::ObjectId;

/// The prefix every stored file's URL starts with (public and admin URLs alike end in it).
const PREFIX: &str = "/media/";

/// The file ids `text` links to (`/media/{24 hex digits}`, whatever follows), in order of
/// appearance, each once.
pub(crate) fn linked_ids(text: &str) -> Vec<ObjectId> {
    let mut ids: Vec<ObjectId> = Vec::new();
    for (at, _) in text.match_indices(PREFIX) {
        let start = at + PREFIX.len();
        let Some(hex) = text.get(start..start + 24) else {
            continue;
        };
        if let Ok(id) = ObjectId::parse_str(hex) {
            if !ids.contains(&id) {
                ids.push(id);
            }
        }
    }
    ids
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn links_to_files_and_their_copies_name_the_file_once() {
        let a = ObjectId::new();
        let b = ObjectId::new();
        let text = format!(
            "![cover](/media/{a}) and [the copy](/admin/media/{a}/display)\n![b](/media/{b}/w/800)"
        );
        assert_eq!(linked_ids(&text), vec![a, b]);
    }

    #[test]
    fn text_that_only_looks_like_a_link_names_nothing() {
        assert!(linked_ids("see /media/ or /media/xyz or /media/0123").is_empty());
        assert!(linked_ids("").is_empty());
        // A multi-byte character where the id would end is not a panic.
        assert!(linked_ids("/media/0123456789abcdef0123456é").is_empty());
    }
}
