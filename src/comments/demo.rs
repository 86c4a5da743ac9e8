//! Demo discussions on a few demo products: threads a few levels deep, with a web address to
//! show links. Each demo comment has a fixed slug, so seeding again adds nothing (the unique
//! slug index would refuse a copy anyway).

use bson::{oid::ObjectId, DateTime};

use crate::catalog::products;
use crate::checkout::orders::is_duplicate_key;
use crate::comments::store::{self, collection};
use crate::comments::{slugs, Author, Comment, CommentStatus, DiscussionKind};
use crate::db::{Db, DbError};

/// `(comment slug, name, text)`.
type DemoComment = (&'static str, &'static str, &'static str);

/// `(product slug, comments)`, parents before their replies.
const DISCUSSIONS: &[(&str, &[DemoComment])] = &[
    (
        "kind-of-blue",
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
        "a-love-supreme",
        &[
            ("e001", "Lena", "Part one alone is worth the price."),
            ("e001/e002", "Jo", "And the chant at the end of it. Goosebumps every time."),
            ("e003", "Sam", "Arrived well packed, thank you."),
        ],
    ),
];

/// Add the demo discussions that are missing; returns how many comments were added.
pub async fn seed(db: &Db) -> Result<u64, DbError> {
    let mut added = 0;
    for (product_slug, comments) in DISCUSSIONS {
        let Some(product) = products::by_slug(db, product_slug).await? else {
            continue;
        };
        let mut added_here = 0i64;
        // Spread the demo comments over the last days, oldest first.
        let start = DateTime::now().timestamp_millis() - 3 * 24 * 3600 * 1000;
        for (i, (slug, name, text)) in comments.iter().enumerate() {
            let posted = DateTime::from_millis(start + i as i64 * 5 * 3600 * 1000);
            let (parent_slug, part) = match slug.rsplit_once('/') {
                Some((parent, part)) => (Some(parent), part),
                None => (None, *slug),
            };
            let timed = format!("{}:{part}", slugs::stamp(posted));
            let (parent_id, full_slug) = match parent_slug {
                Some(parent) => {
                    let Some(parent) = store::by_slug(db, product.id, parent).await? else {
                        continue;
                    };
                    (Some(parent.id), format!("{}/{timed}", parent.full_slug))
                }
                None => (None, timed),
            };
            let comment = Comment {
                id: ObjectId::new(),
                discussion_id: product.id,
                parent_id,
                slug: slug.to_string(),
                full_slug,
                posted,
                author: Author {
                    name: name.to_string(),
                },
                text: text.to_string(),
                status: CommentStatus::Visible,
            };
            match collection(db).insert_one(&comment).await {
                Ok(_) => added_here += 1,
                Err(e) if is_duplicate_key(&e) => {}
                Err(e) => return Err(e.into()),
            }
        }
        if added_here > 0 {
            store::adjust_count(db, DiscussionKind::Product, product.id, added_here).await?;
        }
        added += added_here as u64;
    }
    Ok(added)
}
