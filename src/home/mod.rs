//! The home page: the site's name and tagline, and shelves of featured, discounted and newest
//! products; its structured data names the web site (with its search) and the organisation.

use actix_web::{web, HttpRequest, HttpResponse};
use askama::Template;

use crate::catalog::card::ProductCard;
use crate::catalog::{cache, listing};
use crate::db::site::SiteSettings;
use crate::state::AppState;
use crate::web::errors::AppError;
use crate::web::layout::{render, Layout};
use crate::web::meta::PageMeta;

/// Products on each home page shelf.
const SHELF_SIZE: i64 = 4;

/// A row of products on the home page.
pub(crate) struct Shelf {
    pub(crate) id: &'static str,
    pub(crate) title: &'static str,
    /// The full listing this shelf previews.
    pub(crate) more: &'static str,
    pub(crate) products: Vec<ProductCard>,
}

#[derive(Template)]
#[template(path = "home/index.html")]
pub(crate) struct HomePage {
    pub(crate) layout: Layout,
    pub(crate) site: SiteSettings,
    pub(crate) shelves: Vec<Shelf>,
}

pub(crate) async fn index(
    req: HttpRequest,
    state: web::Data<AppState>,
) -> Result<HttpResponse, AppError> {
    // Both from the catalog cache: a few seconds old at most (see `catalog::cache`).
    let site = cache::site(&state.db).await?;
    let loaded = cache::shelves(&state.db, |db| async move {
        let mut out = Vec::with_capacity(SHELVES.len());
        for (_, _, _, spec) in SHELVES {
            let (filter, sort) = spec();
            out.push(listing::shelf(&db, filter, sort, SHELF_SIZE).await?);
        }
        Ok(out)
    })
    .await?;
    let shelves = SHELVES
        .iter()
        .zip(loaded.iter())
        .map(|((id, title, more, _), products)| Shelf {
            id,
            title,
            more,
            products: products.clone(),
        })
        .collect();
    let mut layout = Layout::public(&req);
    site_meta(&mut layout.meta, &site);
    render(&HomePage {
        layout,
        site: (*site).clone(),
        shelves,
    })
}

/// The home page's structured data: the `WebSite` with its search (`/search?q=`) and the
/// `Organization` behind it, from the site settings.
fn site_meta(meta: &mut PageMeta, site: &SiteSettings) {
    let home = meta.absolute("/");
    meta.push_json_ld(&serde_json::json!({
        "@context": "https://schema.org",
        "@type": "WebSite",
        "name": site.name,
        "url": home,
        "description": meta.description,
        "potentialAction": {
            "@type": "SearchAction",
            "target": {
                "@type": "EntryPoint",
                "urlTemplate": format!("{}?q={{search_term_string}}", meta.absolute("/search")),
            },
            "query-input": "required name=search_term_string",
        },
    }));
    let mut organisation = serde_json::json!({
        "@context": "https://schema.org",
        "@type": "Organization",
        "name": site.organisation_name(),
        "url": home,
    });
    if let Some(image) = &meta.image {
        organisation["logo"] = serde_json::json!(image.url);
    }
    meta.push_json_ld(&organisation);
}

/// The shelves: id, title, the listing it previews, and its `(filter, sort)`.
type ShelfSpec = (
    &'static str,
    &'static str,
    &'static str,
    fn() -> (bson::Document, bson::Document),
);

const SHELVES: [ShelfSpec; 3] = [
    (
        "featured",
        "Featured",
        "/products",
        listing::featured_filter,
    ),
    (
        "discounts",
        "Biggest discounts",
        "/products?sort=discount",
        listing::discounts_filter,
    ),
    (
        "newest",
        "Newest releases",
        "/products",
        listing::newest_filter,
    ),
];

/// The default service: anything no route matched.
pub(crate) async fn not_found() -> Result<HttpResponse, AppError> {
    Err(AppError::NotFound)
}
