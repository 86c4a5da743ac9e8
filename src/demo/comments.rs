//! Demo discussions on a few demo products and blog posts: threads a few levels deep, with a
//! web address to show links. Each demo comment has a fixed slug, so seeding again adds nothing (the unique
//! slug index would refuse a copy anyway).

use bson::{doc, oid::ObjectId, DateTime};

use crate::catalog::products;
use crate::comments::slugs::{self, CommentPath};
use crate::comments::store::{self, collection};
use crate::comments::{Author, Comment, CommentStatus, DiscussionKind};
use crate::content::store as nodes;
use crate::db::{is_duplicate_key, Db, DbError};

/// `(comment slug, name, text)`.
type DemoComment = (&'static str, &'static str, &'static str);

/// What a demo discussion is about.
enum On {
    /// A demo product, by slug.
    Product(&'static str),
    /// A demo blog post, by slug.
    Post(&'static str),
}

/// `(discussion, comments)`, parents before their replies.
const DISCUSSIONS: &[(On, &[DemoComment])] = &[
    (
        On::Product("kind-of-blue"),
        &[
            ("d001", "Mingus fan", "Still the best place to start with jazz. \"So What\" never gets old."),
            ("d001/d002", "Ana", "Agreed, though I came to it through \"Blue in Green\" first."),
            ("d001/d002/d003", "Mingus fan", "Bill Evans wrote most of that one, by the way."),
            ("d001/d002/d003/d004", "Ana", "He did! The liner notes tell the story:\nhttps://en.wikipedia.org/wiki/Kind_of_Blue"),
            ("d005", "Tom", "Is this the stereo remaster or the original mix?"),
            ("d005/d006", "Bazaar staff", "The stereo remaster, with the corrected speed on side one."),
        ],
    ),
    (
        On::Product("a-love-supreme"),
        &[
            ("e001", "Lena", "Part one alone is worth the price."),
            ("e001/e002", "Jo", "And the chant at the end of it. Goosebumps every time."),
            ("e003", "Sam", "Arrived well packed, thank you."),
        ],
    ),
    (
        On::Post("miles-on-so-what"),
        &[
            ("m001", "Theo", "The silence between the notes is the whole point of \"So What\"."),
            ("m001/m002", "Ana", "Which is why it sounds so relaxed, even at that tempo."),
            ("m001/m002/m003", "Theo", "Relaxed, and nobody rushing to fill the space."),
            ("m004", "Rui", "Was it really Miles who said it? I have seen it credited to others."),
            ("m004/m005", "Bazaar staff", "Nobody is quite sure, hence \"attributed\". The quote is older than the record."),
        ],
    ),
    (
        On::Post("three-futures"),
        &[
            ("t001", "Kim", "Dune first, always. The film only makes sense after the book."),
            ("t001/t002", "Lee", "I would add The Left Hand of Darkness to the list."),
            ("t003", "Max", "2001 in a cinema is a different film from 2001 on a laptop."),
        ],
    ),
];

/// Add the demo discussions that are missing; returns how many comments were added.
pub(crate) async fn seed(db: &Db) -> Result<u64, DbError> {
    let mut added = 0;
    for (on, comments) in DISCUSSIONS {
        // A demo product or post deleted on purpose gets no discussion back.
        let found = match on {
            // A demo slug is always one; were it not, no product would have it.
            On::Product(slug) => match crate::domain::Slug::parse(slug) {
                Ok(slug) => products::by_slug(db, &slug)
                    .await?
                    .map(|p| (DiscussionKind::Product, p.id)),
                Err(_) => None,
            },
            On::Post(slug) => nodes::collection(db)
                .find_one(doc! { "metadata.section": "blog", "metadata.slug": *slug })
                .await?
                .map(|n| (DiscussionKind::Node, n.id)),
        };
        let Some((kind, discussion_id)) = found else {
            continue;
        };
        let mut added_here = 0i64;
        // Spread the demo comments over the last days, oldest first.
        let start = DateTime::now().timestamp_millis() - 3 * 24 * 3600 * 1000;
        for (i, (slug, name, text)) in comments.iter().enumerate() {
            let posted = DateTime::from_millis(start + i as i64 * 5 * 3600 * 1000);
            // Every demo slug parses (`every_demo_slug_has_the_shape_the_permalink_route_serves`).
            let Some(path) = CommentPath::parse(slug) else {
                continue;
            };
            let (parent_slug, part) = match slug.rsplit_once('/') {
                Some((parent, part)) => (Some(parent), part),
                None => (None, *slug),
            };
            let timed = format!("{}:{part}", slugs::stamp(posted));
            let (parent_id, full_slug) = match parent_slug {
                Some(parent) => {
                    let Some(parent) = CommentPath::parse(parent) else {
                        continue;
                    };
                    let Some(parent) = store::by_slug(db, discussion_id, &parent).await? else {
                        continue;
                    };
                    (Some(parent.id), format!("{}/{timed}", parent.full_slug))
                }
                None => (None, timed),
            };
            let comment = Comment {
                id: ObjectId::new(),
                discussion_id,
                parent_id,
                slug: path,
                full_slug,
                posted,
                author: Author {
                    name: name.to_string(),
                },
                text: text.to_string(),
                status: CommentStatus::Visible,
                // The demo's staff replies are signed with the staff name and badged as such.
                staff: *name == "Bazaar staff",
                email: None,
                notify: false,
                deleted_at: None,
                deleted_from: None,
                account_id: None,
                verified: false,
            };
            match collection(db).insert_one(&comment).await {
                Ok(_) => added_here += 1,
                Err(e) if is_duplicate_key(&e) => {}
                Err(e) => return Err(e.into()),
            }
        }
        if added_here > 0 {
            store::adjust_count(db, kind, discussion_id, added_here).await?;
        }
        added += added_here as u64;
    }
    Ok(added)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_demo_slug_has_the_shape_the_permalink_route_serves() {
        for (_, comments) in DISCUSSIONS {
            for (slug, _, _) in comments.iter() {
                assert!(CommentPath::parse(slug).is_some(), "{slug} would 404");
            }
        }
    }
}
