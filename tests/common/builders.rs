//! Builders for the data a test needs on an empty database (`spawn_app()`): each test states
//! only what it cares about (`ProductBuilder::new("sku").stock(3)`) and the builder fills in
//! the rest with valid defaults. They go through the app's own store functions, so what they
//! build is what the admin would have created (indexes, caches and derived fields included).

use bazaar::catalog::categories::{self, Category};
use bazaar::catalog::lifecycle::ProductStatus;
use bazaar::catalog::products::{
    self, AlbumDetails, BookDetails, Details, FilmDetails, NewProduct, Product, Shipping,
};
use bazaar::content::model::{Detail, Node, NodeInput, PhotoDetail, TextDetail};
use bazaar::content::store as nodes;
use bazaar::db::Db;
use bson::oid::ObjectId;

/// A product: by default an album "Test album {sku}" by The Testers (genre Jazz, one track)
/// issued on 1 January 1970, at $12.00 (list $15.00), slug `test-{sku}`, no stock, in no
/// category, untagged, not featured, without photos, active (on the storefront).
/// [`ProductBuilder::film`] and [`ProductBuilder::book`] make the other two types.
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
    featured: bool,
    details: Details,
    shipping: Shipping,
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
            featured: false,
            shipping: Shipping {
                weight: 300,
                ..Shipping::default()
            },
            details: Details::Album(AlbumDetails {
                title: String::new(),
                artist: "The Testers".to_string(),
                genre: vec!["Jazz".to_string()],
                tracks: vec!["One".to_string()],
                issue_date: bson::DateTime::from_millis(0),
                label: "Test".to_string(),
            }),
        }
    }

    /// A film (genre Drama, directed by Test Director, no writer or cast unless given): the
    /// admin's form takes no film without a director.
    pub fn film(mut self) -> ProductBuilder {
        self.details = Details::Film(FilmDetails {
            title: String::new(),
            director: vec!["Test Director".to_string()],
            writer: Vec::new(),
            actor: Vec::new(),
            genre: vec!["Drama".to_string()],
            issue_date: self.issue_date(),
            rating: "PG".to_string(),
            aspect_ratio: "1.85:1".to_string(),
            runtime: 100,
        });
        self
    }

    /// A book (genre Fiction, by Test Author unless given): the admin's form takes no book
    /// without an author.
    pub fn book(mut self) -> ProductBuilder {
        self.details = Details::Book(BookDetails {
            author: vec!["Test Author".to_string()],
            publisher: "Test Press".to_string(),
            pages: 200,
            isbn: "978-0-00-000000-0".to_string(),
            issue_date: self.issue_date(),
            genre: vec!["Fiction".to_string()],
        });
        self
    }

    fn issue_date(&self) -> bson::DateTime {
        match &self.details {
            Details::Album(d) => d.issue_date,
            Details::Film(d) => d.issue_date,
            Details::Book(d) => d.issue_date,
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

    /// The retail price and the list price, in cents.
    pub fn price(mut self, retail_cents: i64, list_cents: i64) -> ProductBuilder {
        self.retail_cents = retail_cents;
        self.list_cents = list_cents;
        self
    }

    /// Issued on `date` (`YYYY-MM-DD`): the newest-first order's key.
    pub fn issued(mut self, date: &str) -> ProductBuilder {
        let when = bson::DateTime::parse_rfc3339_str(format!("{date}T00:00:00Z"))
            .expect("a test's date is YYYY-MM-DD");
        match &mut self.details {
            Details::Album(d) => d.issue_date = when,
            Details::Film(d) => d.issue_date = when,
            Details::Book(d) => d.issue_date = when,
        }
        self
    }

    /// The genres of any type.
    pub fn genre(mut self, genres: &[&str]) -> ProductBuilder {
        let genres = genres.iter().map(|g| g.to_string()).collect();
        match &mut self.details {
            Details::Album(d) => d.genre = genres,
            Details::Film(d) => d.genre = genres,
            Details::Book(d) => d.genre = genres,
        }
        self
    }

    /// The people of the product: an album's artist (the first name), a film's cast, a book's
    /// authors.
    pub fn people(mut self, names: &[&str]) -> ProductBuilder {
        let names: Vec<String> = names.iter().map(|n| n.to_string()).collect();
        match &mut self.details {
            Details::Album(d) => d.artist = names.first().cloned().unwrap_or_default(),
            Details::Film(d) => d.actor = names,
            Details::Book(d) => d.author = names,
        }
        self
    }

    /// An album's tracks.
    pub fn tracks(mut self, tracks: &[&str]) -> ProductBuilder {
        if let Details::Album(d) = &mut self.details {
            d.tracks = tracks.iter().map(|t| t.to_string()).collect();
        }
        self
    }

    /// A film's directors.
    pub fn director(mut self, names: &[&str]) -> ProductBuilder {
        if let Details::Film(d) = &mut self.details {
            d.director = names.iter().map(|n| n.to_string()).collect();
        }
        self
    }

    /// A book's ISBN.
    pub fn isbn(mut self, isbn: &str) -> ProductBuilder {
        if let Details::Book(d) = &mut self.details {
            d.isbn = isbn.to_string();
        }
        self
    }

    /// Shipping weight in grams and size (width, height, depth) in centimetres (300 g and no
    /// size by default).
    pub fn shipping(
        mut self,
        grams: i64,
        (width, height, depth): (f64, f64, f64),
    ) -> ProductBuilder {
        self.shipping = Shipping {
            weight: grams,
            dimensions: bazaar::catalog::products::Dimensions {
                width,
                height,
                depth,
            },
        };
        self
    }

    /// On the home page's featured shelf.
    pub fn featured(mut self) -> ProductBuilder {
        self.featured = true;
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
        let mut details = self.details;
        match &mut details {
            Details::Album(d) => d.title = self.title.clone(),
            Details::Film(d) => d.title = self.title.clone(),
            Details::Book(_) => {}
        }
        let new = NewProduct {
            slug: super::slug(&self.slug),
            description: "For testing the cart.".to_string(),
            list_price: bazaar::domain::Money::from_cents(self.list_cents),
            retail_price: bazaar::domain::Money::from_cents(self.retail_cents),
            categories: self.categories,
            details,
            qty: self.stock,
            featured: self.featured,
            shipping: self.shipping,
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
        categories::add(
            db,
            &self.name,
            &crate::common::slug(&self.slug),
            self.parent,
        )
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
        nodes::create(
            db,
            NodeInput {
                section: self.section,
                slug: super::slug(&self.slug),
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

/// A comment on a product or a content node (its [`bazaar::comments::Discussion`]): by
/// default a visible top-level comment by "Reader" saying "A comment.", posted now.
pub struct CommentBuilder {
    discussion: bazaar::comments::Discussion,
    new: bazaar::comments::store::NewComment,
}

impl CommentBuilder {
    pub fn on_product(product: &Product) -> CommentBuilder {
        CommentBuilder::on(product.discussion())
    }

    pub fn on_node(node: &Node) -> CommentBuilder {
        CommentBuilder::on(node.discussion())
    }

    fn on(discussion: bazaar::comments::Discussion) -> CommentBuilder {
        CommentBuilder {
            discussion,
            new: bazaar::comments::store::NewComment {
                name: "Reader".to_string(),
                text: "A comment.".to_string(),
                ..Default::default()
            },
        }
    }

    pub fn name(mut self, name: &str) -> CommentBuilder {
        self.new.name = name.to_string();
        self
    }

    pub fn text(mut self, text: &str) -> CommentBuilder {
        self.new.text = text.to_string();
        self
    }

    /// Through the comment store, as the comment form posts (counted on its discussion).
    pub async fn build(self, db: &Db) -> bazaar::comments::Comment {
        bazaar::comments::store::post(db, &self.discussion, None, &self.new)
            .await
            .expect("comment posted")
    }
}
