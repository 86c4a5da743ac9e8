//! Builders for the data a test needs on an empty database (`spawn_app()`): each test states
//! only what it cares about (`ProductBuilder::new("sku").stock(3)`) and the builder fills in
//! the rest with valid defaults. They go through the app's own store functions, so what they
//! build is what the admin would have created (indexes, caches and derived fields included).

use bazaar::catalog::categories::{self, Category};
use bazaar::catalog::lifecycle::ProductStatus;
use bazaar::catalog::products::{self, AlbumDetails, Details, NewProduct, Product, Shipping};
use bazaar::content::model::{self, Detail, Node, NodeInput, PhotoDetail, TextDetail};
use bazaar::db::Db;
use bson::oid::ObjectId;

/// A product: by default an album "Test album {sku}" at $12.00 (list $15.00), slug
/// `test-{sku}`, no stock, in no category, untagged, without photos, active (on the storefront).
pub struct ProductBuilder {
    sku: String,
    slug: String,
    title: String,
    retail_cents: i64,
    list_cents: i64,
    stock: i64,
    categories: Vec<ObjectId>,
    status: ProductStatus,
    tags: Vec<String>,
    cover: bool,
}

impl ProductBuilder {
    pub fn new(sku: &str) -> ProductBuilder {
        ProductBuilder {
            sku: sku.to_string(),
            slug: format!("test-{sku}"),
            title: format!("Test album {sku}"),
            retail_cents: 1200,
            list_cents: 1500,
            stock: 0,
            categories: Vec::new(),
            status: ProductStatus::Active,
            tags: Vec::new(),
            cover: false,
        }
    }

    /// The product page's address is `/products/{slug}`.
    pub fn slug(mut self, slug: &str) -> ProductBuilder {
        self.slug = slug.to_string();
        self
    }

    pub fn title(mut self, title: &str) -> ProductBuilder {
        self.title = title.to_string();
        self
    }

    /// Units received and not yet sold.
    pub fn stock(mut self, units: i64) -> ProductBuilder {
        self.stock = units;
        self
    }

    /// Filed in `category` (call again for more than one).
    pub fn category(mut self, category: &Category) -> ProductBuilder {
        self.categories.push(category.id);
        self
    }

    /// Draft or archived instead of on the storefront.
    pub fn status(mut self, status: ProductStatus) -> ProductBuilder {
        self.status = status;
        self
    }

    pub fn tags(mut self, tags: &[&str]) -> ProductBuilder {
        self.tags = tags.iter().map(|t| t.to_string()).collect();
        self
    }

    /// A generated cover (320×320 PNG) as its first photo, as every demo product has.
    pub fn cover(mut self) -> ProductBuilder {
        self.cover = true;
        self
    }

    pub async fn build(self, db: &Db) -> Product {
        let (tags, cover) = (self.tags, self.cover);
        let new = NewProduct {
            slug: super::slug(&self.slug),
            description: "For testing the cart.".to_string(),
            list_price: bazaar::domain::Money::from_cents(self.list_cents),
            retail_price: bazaar::domain::Money::from_cents(self.retail_cents),
            categories: self.categories,
            details: Details::Album(AlbumDetails {
                title: self.title.clone(),
                artist: "The Testers".to_string(),
                genre: vec!["Jazz".to_string()],
                tracks: vec!["One".to_string()],
                issue_date: bson::DateTime::from_millis(0),
                label: "Test".to_string(),
            }),
            qty: self.stock,
            featured: false,
            shipping: Shipping {
                weight: 300,
                ..Shipping::default()
            },
            title: self.title,
            sku: super::sku(&self.sku),
        };
        let mut product = products::create_as(db, new, self.status)
            .await
            .expect("product created");
        if !tags.is_empty() {
            // Tags are not part of a new product; the admin form saves them next.
            products::set_tags(db, product.id, &tags)
                .await
                .expect("tags set");
            product.tags = tags;
        }
        if cover {
            let image =
                bazaar::media::store_generated_cover(db, &product.title, product.slug.as_str())
                    .await
                    .expect("cover stored");
            products::add_photo(db, product.id, image.id)
                .await
                .expect("cover added");
            product.photos.push(image.id);
        }
        product
    }
}

/// A category: by default a root named after its slug.
pub struct CategoryBuilder {
    slug: String,
    name: String,
    parent: Option<ObjectId>,
}

impl CategoryBuilder {
    pub fn new(slug: &str) -> CategoryBuilder {
        CategoryBuilder {
            slug: slug.to_string(),
            name: slug.to_string(),
            parent: None,
        }
    }

    /// The name shown in the tree and breadcrumbs (the slug by default).
    pub fn name(mut self, name: &str) -> CategoryBuilder {
        self.name = name.to_string();
        self
    }

    /// Under `parent` (a root by default).
    pub fn parent(mut self, parent: &Category) -> CategoryBuilder {
        self.parent = Some(parent.id);
        self
    }

    pub async fn build(self, db: &Db) -> Category {
        categories::add(db, &self.name, &self.slug, self.parent)
            .await
            .expect("category created")
    }
}

/// A content node: a blog post ([`NodeBuilder::post`]), a page ([`NodeBuilder::page`]), a
/// gallery photo with its image ([`NodeBuilder::photo`]) or any other kind
/// ([`NodeBuilder::new`]); published a minute ago unless told otherwise, by author "Tester",
/// titled after its slug, untagged.
pub struct NodeBuilder {
    section: String,
    slug: String,
    title: String,
    detail: Detail,
    published: Option<bson::DateTime>,
    tags: Vec<String>,
    /// Store a generated image (320×320 PNG) as the photo's file when building.
    with_image: bool,
}

impl NodeBuilder {
    /// A blog entry (section `blog`).
    pub fn post(slug: &str) -> NodeBuilder {
        NodeBuilder::new("blog", slug, Detail::Entry(TextDetail::default()))
    }

    /// A page (section `pages`).
    pub fn page(slug: &str) -> NodeBuilder {
        NodeBuilder::new("pages", slug, Detail::Page(TextDetail::default()))
    }

    /// A photo in section `gallery`, with a generated image stored as its file.
    pub fn photo(slug: &str) -> NodeBuilder {
        let mut node = NodeBuilder::new("gallery", slug, Detail::Photo(PhotoDetail::default()));
        node.with_image = true;
        node
    }

    /// A node of `detail`'s kind in `section`.
    pub fn new(section: &str, slug: &str, detail: Detail) -> NodeBuilder {
        NodeBuilder {
            section: section.to_string(),
            slug: slug.to_string(),
            title: slug.to_string(),
            detail,
            // A minute ago, so the node is live now rather than the instant it is created.
            published: Some(bson::DateTime::from_millis(
                bson::DateTime::now().timestamp_millis() - 60_000,
            )),
            tags: Vec::new(),
            with_image: false,
        }
    }

    /// Move the node to `section` (e.g. a photo posted to the blog).
    pub fn section(mut self, section: &str) -> NodeBuilder {
        self.section = section.to_string();
        self
    }

    pub fn title(mut self, title: &str) -> NodeBuilder {
        self.title = title.to_string();
        self
    }

    /// The Markdown text of a post or page (other kinds keep their detail).
    pub fn text(mut self, text: &str) -> NodeBuilder {
        if let Detail::Entry(d) | Detail::Page(d) = &mut self.detail {
            d.text = text.to_string();
        }
        self
    }

    /// A photo's caption (other kinds keep their detail).
    pub fn caption(mut self, caption: &str) -> NodeBuilder {
        if let Detail::Photo(d) = &mut self.detail {
            d.caption = caption.to_string();
        }
        self
    }

    /// Published `days` days ago (negative: scheduled that far ahead).
    pub fn days_ago(self, days: i64) -> NodeBuilder {
        let now = bson::DateTime::now().timestamp_millis();
        self.published(Some(bson::DateTime::from_millis(
            now - days * 24 * 3600 * 1000,
        )))
    }

    /// Published at `when` (`None`: a draft).
    pub fn published(mut self, when: Option<bson::DateTime>) -> NodeBuilder {
        self.published = when;
        self
    }

    /// Not published: only editors see it.
    pub fn draft(self) -> NodeBuilder {
        self.published(None)
    }

    pub fn tags(mut self, tags: &[&str]) -> NodeBuilder {
        self.tags = tags.iter().map(|t| t.to_string()).collect();
        self
    }

    pub async fn build(mut self, db: &Db) -> Node {
        if let (true, Detail::Photo(photo)) = (self.with_image, &mut self.detail) {
            // The same generated cover the demo photos get: a real PNG the media routes serve.
            let image = bazaar::media::store_generated_cover(db, &self.title, &self.slug)
                .await
                .expect("image stored");
            photo.file_id = Some(image.id);
            photo.filename = format!("{}.png", self.slug);
            photo.content_type = image.kind.mime().to_string();
            photo.width = i64::from(image.width);
            photo.height = i64::from(image.height);
        }
        model::create(
            db,
            NodeInput {
                section: self.section,
                slug: self.slug,
                title: self.title,
                author: "Tester".to_string(),
                detail: self.detail,
            },
            self.published,
            self.tags,
        )
        .await
        .expect("node created")
    }
}
