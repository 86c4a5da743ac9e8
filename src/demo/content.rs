//! Demo content: the About and Shipping pages, a tumblelog with every post type, a gallery of
//! generated photos, and tags shared with some demo products. Each node is added only when
//! its section and slug are free, so seeding again never duplicates.

use bson::{doc, DateTime};

use crate::catalog::products;
use crate::content::model::{
    self, Detail, LinkDetail, NodeInput, PhotoDetail, QuoteDetail, TextDetail, VideoDetail,
};
use crate::content::store;
use crate::content::ContentError;
use crate::db::{Db, DbError};
use crate::domain::Slug;
use crate::media;

struct Demo {
    section: &'static str,
    slug: &'static str,
    title: &'static str,
    tags: &'static [&'static str],
    /// Published this many days ago.
    days_ago: i64,
    detail: fn() -> Detail,
}

const ABOUT: &str = "Bazaar is a small shop for **records, films and books**, run by people \
who would rather talk about them than sell them.\n\n\
## What we do\n\n\
- We pick every title ourselves.\n\
- We write about what we listen to, watch and read on the [blog](/blog/).\n\
- We post photos from the shop floor in the [gallery](/gallery/).\n\n\
Questions? Write to us at [hello@example.com](mailto:hello@example.com).";

const SHIPPING: &str = "We ship everywhere within **2 working days**.\n\n\
Shipping is a flat charge per order plus a little for every started 500 g:\n\n\
{shipping-rates}\n\n\
Returns are free within 30 days: send the item back *unopened* and we refund the full price.";

const JAZZ_ENTRY: &str = "Some records never leave the turntable. *Kind of Blue* is one: \
five musicians, a few sketches, and almost no rehearsal.\n\n\
> So what?\n\n\
If you only buy one jazz record this year, make it this one — and then \
[A Love Supreme](/products/a-love-supreme).";

const SCIFI_ENTRY: &str = "Three books and films that built the future we live in:\n\n\
1. **Dune** — ecology as destiny.\n\
2. **2001: A Space Odyssey** — the slowest, most patient film ever made about speed.\n\
3. **Blade Runner** — rain, neon and the question of who counts as a person.\n\n\
All three are [in the shop](/tags/science-fiction).";

const NEWS_ENTRY: &str = "The shop now has a **gallery** and this very blog. Photos, \
videos, quotes and links will show up here as we find them.\n\n\
Comments are welcome; be kind.";

/// `(section, slug)` of every demo page, post and photo.
pub fn node_keys() -> Vec<(&'static str, &'static str)> {
    demos().iter().map(|d| (d.section, d.slug)).collect()
}

fn demos() -> Vec<Demo> {
    vec![
        Demo {
            section: "pages",
            slug: "about",
            title: "About Bazaar",
            tags: &[],
            days_ago: 60,
            detail: || {
                Detail::Page(TextDetail {
                    text: ABOUT.into(),
                    ..Default::default()
                })
            },
        },
        Demo {
            section: "pages",
            slug: "shipping",
            title: "Shipping and returns",
            tags: &[],
            days_ago: 60,
            detail: || {
                Detail::Page(TextDetail {
                    text: SHIPPING.into(),
                    ..Default::default()
                })
            },
        },
        Demo {
            section: "blog",
            slug: "welcome-to-the-blog",
            title: "Welcome to the blog",
            tags: &["news"],
            days_ago: 20,
            detail: || {
                Detail::Entry(TextDetail {
                    text: NEWS_ENTRY.into(),
                    ..Default::default()
                })
            },
        },
        Demo {
            section: "blog",
            slug: "the-record-that-never-leaves-the-turntable",
            title: "The record that never leaves the turntable",
            tags: &["jazz", "staff-picks"],
            days_ago: 14,
            detail: || {
                Detail::Entry(TextDetail {
                    text: JAZZ_ENTRY.into(),
                    ..Default::default()
                })
            },
        },
        Demo {
            section: "blog",
            slug: "three-futures",
            title: "Three futures",
            tags: &["science-fiction", "staff-picks"],
            days_ago: 9,
            detail: || {
                Detail::Entry(TextDetail {
                    text: SCIFI_ENTRY.into(),
                    ..Default::default()
                })
            },
        },
        Demo {
            section: "blog",
            slug: "miles-on-so-what",
            title: "Miles on modal jazz",
            tags: &["jazz"],
            days_ago: 7,
            detail: || {
                Detail::Quote(QuoteDetail {
                    text: "It's not the notes you play, it's the notes you don't play.".into(),
                    source: "Attributed to Miles Davis".into(),
                    ..Default::default()
                })
            },
        },
        Demo {
            section: "blog",
            slug: "a-session-worth-watching",
            title: "A session worth watching",
            tags: &["jazz"],
            days_ago: 5,
            detail: || {
                Detail::Video(VideoDetail {
                    url: "https://www.youtube.com/watch?v=zqNTltOGh5c".into(),
                    provider: "youtube".into(),
                    ..Default::default()
                })
            },
        },
        Demo {
            section: "blog",
            slug: "liner-notes-archive",
            title: "Liner notes, archived",
            tags: &["jazz", "reading"],
            days_ago: 3,
            detail: || {
                Detail::Link(LinkDetail {
                    url: "https://en.wikipedia.org/wiki/Liner_notes".into(),
                    text: "What liner notes are, and why we still read them".into(),
                    ..Default::default()
                })
            },
        },
        Demo {
            section: "blog",
            slug: "new-shelves",
            title: "New shelves",
            tags: &["shop"],
            days_ago: 2,
            detail: || {
                Detail::Photo(PhotoDetail {
                    caption: "The new record shelves, before the records arrived.".into(),
                    ..PhotoDetail::default()
                })
            },
        },
        Demo {
            section: "gallery",
            slug: "shop-window",
            title: "Shop window",
            tags: &["shop"],
            days_ago: 30,
            detail: || {
                Detail::Photo(PhotoDetail {
                    caption: "The shop window in autumn.".into(),
                    ..PhotoDetail::default()
                })
            },
        },
        Demo {
            section: "gallery",
            slug: "listening-corner",
            title: "Listening corner",
            tags: &["shop", "jazz"],
            days_ago: 25,
            detail: || {
                Detail::Photo(PhotoDetail {
                    caption: "Two chairs, one turntable, no hurry.".into(),
                    ..PhotoDetail::default()
                })
            },
        },
        Demo {
            section: "gallery",
            slug: "paperback-wall",
            title: "Paperback wall",
            tags: &["shop", "science-fiction"],
            days_ago: 18,
            detail: || {
                Detail::Photo(PhotoDetail {
                    caption: "Every science-fiction paperback we own, spine out.".into(),
                    ..PhotoDetail::default()
                })
            },
        },
        Demo {
            section: "gallery",
            slug: "film-night",
            title: "Film night",
            tags: &["shop"],
            days_ago: 11,
            detail: || {
                Detail::Photo(PhotoDetail {
                    caption: "Casablanca on the back wall, twenty folding chairs.".into(),
                    ..PhotoDetail::default()
                })
            },
        },
    ]
}

/// Demo products that share a tag with the demo content, by slug.
const PRODUCT_TAGS: &[(&str, &str)] = &[
    ("kind-of-blue", "jazz"),
    ("a-love-supreme", "jazz"),
    ("maiden-voyage", "jazz"),
    ("dune", "science-fiction"),
    ("blade-runner", "science-fiction"),
    ("2001-a-space-odyssey", "science-fiction"),
    ("the-left-hand-of-darkness", "science-fiction"),
];

/// Add the demo nodes that are missing; returns how many were added.
pub async fn seed(db: &Db) -> Result<u64, DbError> {
    let mut added = 0;
    let now = DateTime::now().timestamp_millis();
    for demo in demos() {
        let exists = store::collection(db)
            .find_one(doc! { "metadata.section": demo.section, "metadata.slug": demo.slug })
            .await?
            .is_some();
        if exists {
            continue;
        }
        let mut detail = (demo.detail)();
        let mut generated = None;
        if let Detail::Photo(photo) = &mut detail {
            let image =
                media::store_generated_cover(db, demo.title, &crate::catalog::slugify(demo.title))
                    .await
                    .map_err(|e| match e {
                        media::UploadError::Db(db) => db,
                        other => DbError::Invalid(other.to_string()),
                    })?;
            photo.file_id = Some(image.id);
            photo.filename = format!("{}.png", demo.slug);
            photo.content_type = image.kind.mime().to_string();
            photo.width = i64::from(image.width);
            photo.height = i64::from(image.height);
            generated = Some(image.id);
        }
        let published = DateTime::from_millis(now - demo.days_ago * 24 * 3600 * 1000);
        let input = NodeInput {
            section: demo.section.to_string(),
            slug: Slug::parse(demo.slug).expect("the demo's slugs are valid (tested)"),
            title: demo.title.to_string(),
            author: "The Bazaar team".to_string(),
            detail,
        };
        let tags = demo.tags.iter().map(|t| t.to_string()).collect();
        match store::create(db, input, Some(published), tags).await {
            Ok(_) => added += 1,
            // Another seeding run added it meanwhile; its photo is the one kept.
            Err(ContentError::SlugTaken) => {
                if let Some(file) = generated {
                    crate::media::delete_file(db, file).await?;
                }
            }
            Err(ContentError::Db(e)) => return Err(e),
        }
    }
    // Demo products get their tags in the run that adds the demo content, and only when they
    // have none, so tags an admin changed later are left as they are.
    if added == 0 {
        return Ok(0);
    }
    for (slug, tag) in PRODUCT_TAGS {
        products::collection(db)
            .update_one(
                doc! { "slug": slug, "tags": { "$size": 0 } },
                doc! { "$set": { "tags": [tag] } },
            )
            .await?;
    }
    Ok(added)
}

/// Slugs of generated posts (`bazaar seed --posts N`) start with this.
pub const GENERATED_PREFIX: &str = "generated-post-";
/// Generated posts are inserted this many at a time.
const POST_BATCH: u64 = 1_000;

/// A paragraph of generated prose (about 60 words), different for each `i`.
fn generated_paragraph(i: u64, n: u64) -> String {
    format!(
        "Paragraph {n} of post {i}: the record opens quietly, a brushed snare and a bass line \
         that takes its time. By the second chorus the piano has found the tune again, and the \
         horns answer each other as if the room were half empty. *Nobody hurries.* Read more \
         about [the session](/products/kind-of-blue) and what came after it; the liner notes \
         tell the rest of the story better than we could."
    )
}

/// Generate blog posts until there are `n` generated ones (for load tests): entries of five
/// paragraphs, quotes, links, videos and photos (all photos show one generated picture), one
/// hour apart going back from now, each tagged `jazz` and one of `generated-0` … `generated-6`.
/// Inserted in batches; `progress(done, total)` after each. Returns how many were added.
pub async fn seed_generated_posts(
    db: &Db,
    n: u64,
    mut progress: impl FnMut(u64, u64),
) -> Result<u64, DbError> {
    let prefix = doc! { "$regex": format!("^{GENERATED_PREFIX}") };
    let existing = store::collection(db)
        .count_documents(doc! { "metadata.section": "blog", "metadata.slug": prefix })
        .await?;
    if existing >= n {
        return Ok(0);
    }
    let picture = media::store_generated_cover(db, "Generated posts", "generated-posts")
        .await
        .map_err(|e| match e {
            media::UploadError::Db(db) => db,
            other => DbError::Invalid(other.to_string()),
        })?;
    let photo = PhotoDetail {
        file_id: Some(picture.id),
        filename: "generated-posts.png".into(),
        content_type: picture.kind.mime().to_string(),
        width: i64::from(picture.width),
        height: i64::from(picture.height),
        caption: "From the shop floor.".into(),
        alt: "Generated cover of the sample posts".into(),
    };
    let now = db.now().timestamp_millis();
    let mut i = existing;
    while i < n {
        let end = (i + POST_BATCH).min(n);
        let batch: Vec<model::Node> = (i..end)
            .map(|i| {
                let detail = match i % 5 {
                    0 => Detail::Entry(TextDetail {
                        text: (1..=5)
                            .map(|p| generated_paragraph(i, p))
                            .collect::<Vec<_>>()
                            .join("\n\n"),
                        ..Default::default()
                    }),
                    1 => Detail::Quote(QuoteDetail {
                        text: format!("Quote number {i}: play what you hear, not what you know."),
                        source: "A reader".into(),
                        ..Default::default()
                    }),
                    2 => Detail::Link(LinkDetail {
                        url: format!("https://example.com/reading/{i}"),
                        text: format!("Further reading {i}"),
                        ..Default::default()
                    }),
                    3 => Detail::Video(VideoDetail {
                        url: "https://www.youtube.com/watch?v=zqNTltOGh5c".into(),
                        provider: "youtube".into(),
                        ..Default::default()
                    }),
                    _ => Detail::Photo(photo.clone()),
                };
                let published = DateTime::from_millis(now - (i as i64 + 1) * 3_600_000);
                model::Node {
                    id: bson::oid::ObjectId::new(),
                    metadata: model::Metadata {
                        kind: detail.kind(),
                        section: "blog".into(),
                        slug: Slug::parse(&format!("{GENERATED_PREFIX}{i}"))
                            .expect("a generated post's slug is a valid slug"),
                        title: format!("Generated post {i}"),
                        created: published,
                        updated: published,
                        updated_by: None,
                        published: Some(published),
                        live: true,
                        author: model::Author {
                            name: "The Bazaar team".into(),
                        },
                        tags: vec!["jazz".into(), format!("generated-{}", i % 7)],
                        nonce: crate::domain::EditVersion::new(),
                        locked: None,
                        comment_count: 0,
                        comments_closed: false,
                        summary: Some(detail.summary()),
                        media: Some(detail.media()),
                        detail: detail.to_document().unwrap_or_default(),
                    },
                }
            })
            .collect();
        let inserted = store::collection(db).insert_many(batch).await;
        crate::content::changes::nodes_changed(db);
        inserted?;
        i = end;
        progress(i - existing, n - existing);
    }
    Ok(n - existing)
}
