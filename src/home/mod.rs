//! The home page: the site's name and tagline, and shelves of featured, discounted and newest
//! products.

use actix_web::{web, HttpRequest, HttpResponse};
use askama::Template;

use crate::catalog::listing;
use crate::catalog::products::Product;
use crate::db::site::{self, SiteSettings};
use crate::state::AppState;
use crate::web::errors::AppError;
use crate::web::layout::{render, Layout};

/// Products on each home page shelf.
const SHELF_SIZE: i64 = 4;

/// A row of products on the home page.
pub struct Shelf {
    pub id: &'static str,
    pub title: &'static str,
    /// The full listing this shelf previews.
    pub more: &'static str,
    pub products: Vec<Product>,
}

#[derive(Template)]
#[template(path = "home/index.html")]
pub struct HomePage {
    pub layout: Layout,
    pub site: SiteSettings,
    pub shelves: Vec<Shelf>,
}

pub async fn index(req: HttpRequest, state: web::Data<AppState>) -> Result<HttpResponse, AppError> {
    let site = site::load(&state.db).await?;
    let mut shelves = Vec::new();
    for (id, title, more, (filter, sort)) in [
        (
            "featured",
            "Featured",
            "/products",
            listing::featured_filter(),
        ),
        (
            "discounts",
            "Biggest discounts",
            "/products?sort=discount",
            listing::discounts_filter(),
        ),
        (
            "newest",
            "Newest releases",
            "/products",
            listing::newest_filter(),
        ),
    ] {
        let products = listing::shelf(&state.db, filter, sort, SHELF_SIZE).await?;
        shelves.push(Shelf {
            id,
            title,
            more,
            products,
        });
    }
    render(&HomePage {
        layout: Layout::public(&req),
        site,
        shelves,
    })
}

/// The default service: anything no route matched.
pub async fn not_found() -> Result<HttpResponse, AppError> {
    Err(AppError::NotFound)
}
