//! The storefront's catalog pages: the product list with filters, a product, the category tree
//! and a category with its breadcrumbs, child categories and products.

use std::collections::HashMap;
use std::sync::Arc;

use actix_session::SessionExt;
use actix_web::{web, HttpRequest, HttpResponse};
use askama::Template;

use crate::catalog::cache;
use crate::catalog::categories::{self, Breadcrumbs, Category, TreeEntry};
use crate::catalog::listing::{self, ActiveFilter, ListingQuery, Page, Sort};
use crate::catalog::product_cache::{self, Shown};
use crate::catalog::product_view::{category_trail, ProductView};
use crate::catalog::products::{self, Product, ProductType};
use crate::catalog::seek::{BadToken, Seek};
use crate::comments::pages::{self as comment_pages, CommentInput, Submitted};
use crate::comments::rate_limit::CommentRateLimit;
use crate::comments::thread::{self, PageAt, ThreadView};
use crate::domain::Slug;
use crate::state::AppState;
use crate::web::errors::AppError;
use crate::web::layout::{html_response, render, Layout};
use crate::web::meta::breadcrumb_list;
use crate::web::see_other;
use crate::web::traffic::{self, CommerceEvent};

/// A listing with its filter form and page links (the product list and category pages).
/// A catalog refusal is shown as a conflict (or 404); a database failure as its page.
impl From<crate::catalog::CatalogError> for AppError {
    fn from(e: crate::catalog::CatalogError) -> Self {
        use crate::catalog::CatalogError;
        match e {
            CatalogError::Db(db) => db.into(),
            CatalogError::NotFound => AppError::NotFound,
            other => AppError::Conflict(other.to_string()),
        }
    }
}

/// A mangled keyset page link is a bad request, explained on the error page.
impl From<BadToken> for AppError {
    fn from(e: BadToken) -> Self {
        AppError::BadRequest(e.to_string())
    }
}

pub(crate) struct Listing {
    /// Shared with the catalog cache (`listing::shown_page`).
    pub(crate) page: Arc<Page>,
    pub(crate) query: ListingQuery,
    /// Where the filter form and page links point.
    pub(crate) path: String,
}

impl Listing {
    /// The Previous link: before this page's first product (keyset), or page 1 by number.
    pub(crate) fn prev_url(&self) -> String {
        match &self.page.prev {
            Some(cursor) => self.seek_url(&Seek::Before(cursor.clone())),
            None => self.page_url(&self.page.page.saturating_sub(1).max(1)),
        }
    }

    /// The Next link: after this page's last product (keyset), or by number when that product
    /// has no sort key to seek from.
    pub(crate) fn next_url(&self) -> String {
        match &self.page.next {
            Some(cursor) => self.seek_url(&Seek::After(cursor.clone())),
            None => self.page_url(&(self.page.page + 1)),
        }
    }

    fn seek_url(&self, seek: &Seek) -> String {
        let qs = self.query.query_string();
        if qs.is_empty() {
            format!("{}?{}", self.path, seek.param())
        } else {
            format!("{}?{qs}&{}", self.path, seek.param())
        }
    }

    /// A numbered page's address; for this page when reached by a keyset link, that link
    /// (a deep page by number would cost a skip), except the first page's plain address.
    pub(crate) fn page_url(&self, n: &u64) -> String {
        if let (true, Some(seek)) = (*n == self.page.page && *n > 1, &self.page.seek) {
            return self.seek_url(seek);
        }
        let qs = self.query.query_string();
        if qs.is_empty() {
            format!("{}?page={n}", self.path)
        } else {
            format!("{}?{qs}&page={n}", self.path)
        }
    }

    pub(crate) fn is_current(&self, n: &u64) -> bool {
        *n == self.page.page
    }

    /// Where a chip's "remove" link goes: this listing without that filter.
    pub(crate) fn without_url(&self, filter: &ActiveFilter) -> String {
        if filter.query_without.is_empty() {
            self.path.clone()
        } else {
            format!("{}?{}", self.path, filter.query_without)
        }
    }

    /// "Clear all": the listing without any filter (the sort is kept).
    pub(crate) fn clear_all_url(&self) -> String {
        if self.query.sort == Sort::default() {
            self.path.clone()
        } else {
            format!("{}?sort={}", self.path, self.query.sort.as_str())
        }
    }

    /// The filter form starts open when a value in it needs correcting; otherwise it stays
    /// folded on narrow screens (the chips show what is in force).
    pub(crate) fn filters_open(&self) -> bool {
        !self.query.problems.is_empty()
    }

    pub(crate) fn types(&self) -> [ProductType; 3] {
        ProductType::ALL
    }

    pub(crate) fn sorts(&self) -> [Sort; 5] {
        Sort::ALL
    }
}

#[derive(Template)]
#[template(path = "catalog/products.html")]
pub(crate) struct ProductsPage {
    pub(crate) layout: Layout,
    pub(crate) listing: Listing,
}

#[derive(Template)]
#[template(path = "catalog/product.html")]
pub(crate) struct ProductPage {
    pub(crate) layout: Layout,
    /// Shared with the product cache (`product_cache`), without its `details` document.
    pub(crate) product: Arc<Product>,
    /// What the page shows of the product alone, made once per product read.
    pub(crate) view: Arc<ProductView>,
    /// The product's comments (first page, or the one asked for) and the comment form.
    pub(crate) thread: ThreadView,
    /// Units other shoppers' carts hold (not this visitor's): they may come back on sale.
    pub(crate) held_by_others: i64,
}

impl ProductPage {
    /// Whether to say "Only N left" (the site-wide low-stock threshold).
    pub(crate) fn low_stock(&self) -> bool {
        self.product.is_low_stock()
    }

    /// "2 more are in shoppers' carts and may come back", when that matters: the product is
    /// sold out or nearly so and other carts hold some.
    pub(crate) fn held_note(&self) -> Option<String> {
        let held = self.held_by_others;
        if held <= 0 || !crate::catalog::products::is_low_stock(self.product.qty) {
            return None;
        }
        Some(if held == 1 {
            "1 more is in a shopper's cart and may come back.".to_string()
        } else {
            format!("{held} more are in shoppers' carts and may come back.")
        })
    }

    /// The most the add-to-cart quantity box offers (one cart line's maximum).
    pub(crate) fn max_line_qty(&self) -> i64 {
        crate::catalog::products::MAX_LINE_QTY
    }
}

#[derive(Template)]
#[template(path = "catalog/categories.html")]
pub(crate) struct CategoriesPage {
    pub(crate) layout: Layout,
    pub(crate) tree: Vec<TreeEntry>,
}

#[derive(Template)]
#[template(path = "catalog/category.html")]
pub(crate) struct CategoryPage {
    pub(crate) layout: Layout,
    /// The page needs only the category's id, name and trail: the projected breadcrumb query.
    pub(crate) category: Breadcrumbs,
    pub(crate) children: Vec<Category>,
    pub(crate) listing: Listing,
}

impl From<listing::ListingError> for AppError {
    fn from(e: listing::ListingError) -> Self {
        match e {
            listing::ListingError::Db(e) => e.into(),
            listing::ListingError::Preparing => AppError::Busy(
                "Page numbers this far into the list are being prepared. Try again in a \
                 moment, or use the Next and Previous links.",
            ),
        }
    }
}

/// `GET /products` (routed through `search::listing::products`), with the search box's words
/// sent to `$text` as `text` when there are any (see [`ListingQuery::text`]).
pub(crate) async fn list_searched(
    req: HttpRequest,
    state: web::Data<AppState>,
    params: web::Query<HashMap<String, String>>,
    text: Option<String>,
) -> Result<HttpResponse, AppError> {
    let mut query = ListingQuery::from_address(&params)?;
    query.text = text;
    let page = listing::shown_page(&state.db, bson::doc! {}, &query).await?;
    let mut layout = Layout::public(&req);
    layout.meta.listing("/products", &params);
    layout.meta.title = "Shop".to_string();
    render(&ProductsPage {
        layout,
        listing: Listing {
            page,
            query,
            path: "/products".to_string(),
        },
    })
}

/// `GET /products/{slug}` (`?after=` / `?before=` page through its comments)
pub(crate) async fn show(
    req: HttpRequest,
    state: web::Data<AppState>,
    slug: web::Path<String>,
    params: web::Query<HashMap<String, String>>,
) -> Result<HttpResponse, AppError> {
    // From the product cache (at most a second old, and never older than a write through this
    // instance: see `product_cache`); adding to the cart and the checkout read the stock and
    // price a shopper pays themselves.
    let shown = match shown_product(&state, &slug).await {
        Err(AppError::NotFound) => return moved(&req, &state, &slug).await,
        found => found?,
    };
    let product = &shown.product;
    let at = PageAt::from_params(
        params.get("after").map(String::as_str),
        params.get("before").map(String::as_str),
    );
    let mut thread = thread::page(
        &state.db,
        product.discussion(),
        product.comment_count,
        at,
        &state.comments,
    )
    .await?;
    thread.prefill_remembered(&req);
    let viewed = CommerceEvent::ProductViewed {
        sku: product.sku.to_string(),
    };
    let page = product_page(&req, &state, shown, thread).await?;
    Ok(traffic::tag(render(&page)?, viewed))
}

/// No product on sale at `/products/{slug}`: when one was renamed away from that slug, `301`
/// to its address now (the query kept); otherwise not found. A product holding the slug now is
/// always found first.
async fn moved(req: &HttpRequest, state: &AppState, slug: &str) -> Result<HttpResponse, AppError> {
    let Some(mut location) = products::moved_to(&state.db, slug).await? else {
        return Err(AppError::NotFound);
    };
    if !req.query_string().is_empty() {
        location.push('?');
        location.push_str(req.query_string());
    }
    Ok(crate::web::moved_permanently(&location))
}

/// The product on sale at `slug` as its page shows it, from the product cache.
async fn shown_product(state: &AppState, slug: &str) -> Result<Shown, AppError> {
    // No product has an address that is not a slug.
    let slug = Slug::parse(slug).map_err(|_| AppError::NotFound)?;
    // Drafts and archived products are not on the storefront.
    product_cache::by_slug(&state.db, &slug)
        .await?
        .filter(|shown| shown.product.is_on_sale())
        .ok_or(AppError::NotFound)
}

/// The product on sale at `slug`, read fresh: for posting comments, which check the
/// discussion's state as it is now.
async fn existing_product(state: &AppState, slug: &str) -> Result<Product, AppError> {
    // No product has an address that is not a slug.
    let slug = Slug::parse(slug).map_err(|_| AppError::NotFound)?;
    // Drafts and archived products are not on the storefront.
    products::by_slug(&state.db, &slug)
        .await?
        .filter(Product::is_on_sale)
        .ok_or(AppError::NotFound)
}

async fn product_page(
    req: &HttpRequest,
    state: &AppState,
    shown: Shown,
    thread: ThreadView,
) -> Result<ProductPage, AppError> {
    let product = shown.product;
    let own_cart = crate::web::session::cart_id(&req.get_session())
        .and_then(|id| crate::domain::CartId::parse(&id).ok());
    // The visitor's own share is read fresh; the product's reservations may be a second old,
    // so the difference is clamped at 0 (`held_by_others`).
    let own = match &own_cart {
        Some(id) => products::held_by_cart(&state.db, &product.sku, id).await?,
        None => 0,
    };
    let held_by_others = product.held_by_others(own);
    let mut layout = Layout::public(req);
    let settings = crate::db::site::current();
    let view = match shown.view.kept(&settings, &layout.meta.site_url) {
        Some(view) => view,
        None => {
            // From the cached category tree: no query per filing category.
            let filed_under = cache::filed_under(&state.db, &product.categories).await?;
            let view = Arc::new(ProductView::new(
                &product,
                shown.details.as_ref().as_ref(),
                &filed_under,
                &settings,
                &layout.meta.site_url,
            ));
            shown
                .view
                .keep(&settings, &layout.meta.site_url, Arc::clone(&view));
            view
        }
    };
    view.fill_meta(&mut layout.meta);
    Ok(ProductPage {
        layout,
        held_by_others,
        product,
        view,
        thread,
    })
}

/// `GET /products/{slug}/comments`: the comments are on the product page.
pub(crate) async fn comments_anchor(
    state: web::Data<AppState>,
    slug: web::Path<String>,
) -> Result<HttpResponse, AppError> {
    let product = existing_product(&state, &slug).await?;
    Ok(see_other(&format!("{}#comments", product.url())))
}

/// `POST /products/{slug}/comments`: a new comment. A refused one shows the product page again
/// with the form filled in and what to fix.
pub(crate) async fn post_comment(
    req: HttpRequest,
    state: web::Data<AppState>,
    comment_rate: web::Data<CommentRateLimit>,
    slug: web::Path<String>,
    input: web::Form<CommentInput>,
) -> Result<HttpResponse, AppError> {
    let product = existing_product(&state, &slug).await?;
    let discussion = product.discussion();
    match comment_pages::submit(
        &req,
        &state,
        &comment_rate,
        &discussion,
        None,
        input.into_inner(),
    )
    .await?
    {
        Submitted::Posted(redirect) => Ok(redirect),
        Submitted::Refused(form, status) => {
            let mut thread = thread::first_page(
                &state.db,
                discussion,
                product.comment_count,
                &state.comments,
            )
            .await?;
            thread.form = form;
            let page = product_page(&req, &state, Shown::new(product), thread).await?;
            let html = askama::Template::render(&page).map_err(|e| {
                AppError::Internal(anyhow::anyhow!("rendering a template failed: {e}"))
            })?;
            Ok(html_response(status, html))
        }
    }
}

/// `GET /products/{slug}/comments/{comment}`: a comment's permalink.
pub(crate) async fn comment_permalink(
    req: HttpRequest,
    state: web::Data<AppState>,
    path: web::Path<(String, String)>,
    params: web::Query<HashMap<String, String>>,
) -> Result<HttpResponse, AppError> {
    let (slug, comment) = path.into_inner();
    let product = existing_product(&state, &slug).await?;
    comment_pages::permalink(
        &req,
        &state,
        product.discussion(),
        product.comment_count,
        &crate::comments::CommentPath::parse(&comment).ok_or(AppError::NotFound)?,
        params.get("after").map(String::as_str),
    )
    .await
}

/// `POST /products/{slug}/comments/{comment}`: a reply to that comment.
pub(crate) async fn post_reply(
    req: HttpRequest,
    state: web::Data<AppState>,
    comment_rate: web::Data<CommentRateLimit>,
    path: web::Path<(String, String)>,
    input: web::Form<CommentInput>,
) -> Result<HttpResponse, AppError> {
    let (slug, comment) = path.into_inner();
    let product = existing_product(&state, &slug).await?;
    comment_pages::reply(
        &req,
        &state,
        &comment_rate,
        product.discussion(),
        product.comment_count,
        &crate::comments::CommentPath::parse(&comment).ok_or(AppError::NotFound)?,
        input.into_inner(),
    )
    .await
}

/// `GET /categories`
pub(crate) async fn tree(
    req: HttpRequest,
    state: web::Data<AppState>,
) -> Result<HttpResponse, AppError> {
    let all = categories::all(&state.db).await?;
    let mut layout = Layout::public(&req);
    layout.meta.title = "Categories".to_string();
    render(&CategoriesPage {
        layout,
        tree: categories::tree_order(all),
    })
}

/// `GET /categories/{slug}` (routed through `search::listing::category`), with the search
/// box's words sent to `$text` as `text` when there are any (see [`ListingQuery::text`]).
pub(crate) async fn category_searched(
    req: HttpRequest,
    state: web::Data<AppState>,
    slug: web::Path<String>,
    params: web::Query<HashMap<String, String>>,
    text: Option<String>,
) -> Result<HttpResponse, AppError> {
    // Breadcrumbs and children from the cached category tree.
    let tree = cache::categories(&state.db).await?;
    let found = tree.by_slug(&slug).ok_or(AppError::NotFound)?;
    let category = Breadcrumbs::of(found);
    let children = tree.children(found.id);
    let mut query = ListingQuery::from_address(&params)?;
    query.text = text;
    let page = listing::shown_page(&state.db, listing::in_category(category.id), &query).await?;
    // The query matched the slug exactly, so it is the category's own (percent-encoded).
    let path = found.url();
    let mut layout = Layout::public(&req);
    layout.meta.listing(&path, &params);
    layout.meta.title = found.name.clone();
    let trail = category_trail(&layout.meta, found);
    layout.meta.push_json_ld(&breadcrumb_list(&trail));
    render(&CategoryPage {
        layout,
        category,
        children,
        listing: Listing { page, query, path },
    })
}
