//! What every page's layout needs: navigation to the areas that exist, flash messages, the CSRF
//! token for forms, cache-busted asset URLs and, on public pages, the `<head>` metadata
//! ([`PageMeta`]: canonical address, social cards, feeds, structured data). Page structs carry a `Layout` as `layout`.

use actix_session::{Session, SessionExt};
use actix_web::http::header;
use actix_web::{HttpRequest, HttpResponse};
use askama::Template;

use crate::web::errors::{AppError, Rendered};
use crate::web::flash::{self, Flash};
use crate::web::meta::{site_url, PageMeta};
use crate::web::{assets, csrf};

/// The public site's areas, in header order. Feature issues add theirs (shop, categories, blog,
/// gallery) as they arrive.
const PUBLIC_AREAS: &[(&str, &str)] = &[
    ("/", "Home"),
    ("/products", "Shop"),
    ("/categories", "Categories"),
    ("/blog", "Blog"),
    ("/gallery", "Gallery"),
];

/// The admin section's screens.
const ADMIN_AREAS: &[(&str, &str)] = &[
    ("/admin", "Dashboard"),
    ("/admin/products", "Products"),
    ("/admin/categories", "Categories"),
    ("/admin/orders", "Orders"),
    ("/admin/customers", "Customers"),
    ("/admin/carts", "Carts"),
    ("/admin/stock", "Stock"),
    ("/admin/content", "Content"),
    ("/admin/comments", "Comments"),
    ("/admin/analytics", "Analytics"),
    ("/admin/system", "System"),
    ("/admin/settings", "Settings"),
];

/// The session key under which the cart area keeps how many units the visitor's cart holds, so
/// the header can show it on every page without a database read (and without the layout knowing
/// about carts).
pub const CART_COUNT_KEY: &str = "cart_count";

/// Units in the visitor's cart as last seen (0 without a cart).
fn cart_count(session: &Session) -> i64 {
    session
        .get::<i64>(CART_COUNT_KEY)
        .ok()
        .flatten()
        .unwrap_or(0)
}

pub struct NavLink {
    pub href: &'static str,
    pub label: &'static str,
    pub current: bool,
}

pub struct Layout {
    pub nav: Vec<NavLink>,
    pub flashes: Vec<Flash>,
    /// True in the admin section (its own header and navigation).
    pub admin: bool,
    /// Units in the visitor's cart, for the header.
    pub cart_count: i64,
    /// The cart page marks the header's cart link as current.
    pub on_cart_page: bool,
    /// The shop's name from the site settings (Admin → Settings), for the header.
    pub shop_name: String,
    /// What the page tells search engines and link previews; empty (nothing emitted) in the
    /// admin and on error pages.
    pub meta: PageMeta,
    /// `None` on error pages rendered without a request.
    session: Option<Session>,
}

impl Layout {
    /// The public site's layout for this request; takes (and so clears) pending flash messages.
    pub fn public(req: &HttpRequest) -> Layout {
        Layout::for_request(req, PUBLIC_AREAS, false)
    }

    pub fn admin(req: &HttpRequest) -> Layout {
        Layout::for_request(req, ADMIN_AREAS, true)
    }

    fn for_request(
        req: &HttpRequest,
        areas: &[(&'static str, &'static str)],
        admin: bool,
    ) -> Layout {
        let session = req.get_session();
        let settings = crate::db::site::current();
        let meta = if admin {
            PageMeta::default()
        } else {
            PageMeta::for_page(&site_url(req), req.path(), &settings)
        };
        Layout {
            nav: nav_links(areas, req.path()),
            flashes: flash::take(&session),
            admin,
            cart_count: cart_count(&session),
            on_cart_page: req.path() == "/cart",
            shop_name: settings.name.clone(),
            meta,
            session: Some(session),
        }
    }

    /// The admin's layout for an error page: its navigation, no flash messages taken (they
    /// wait for the next real page).
    pub fn admin_error(req: &HttpRequest) -> Layout {
        Layout {
            nav: nav_links(ADMIN_AREAS, req.path()),
            flashes: Vec::new(),
            admin: true,
            cart_count: 0,
            on_cart_page: false,
            shop_name: crate::db::site::current().name.clone(),
            meta: PageMeta::default(),
            session: Some(req.get_session()),
        }
    }

    /// For an error page: the public layout with the visitor's cart count, leaving pending
    /// flash messages for the next real page.
    pub fn error(req: &HttpRequest) -> Layout {
        let session = req.get_session();
        Layout {
            nav: nav_links(PUBLIC_AREAS, req.path()),
            flashes: Vec::new(),
            admin: false,
            cart_count: cart_count(&session),
            on_cart_page: false,
            shop_name: crate::db::site::current().name.clone(),
            meta: PageMeta::default(),
            session: Some(session),
        }
    }

    /// For error pages built where no request is at hand: navigation, no flashes, no forms.
    pub fn bare() -> Layout {
        Layout {
            nav: nav_links(PUBLIC_AREAS, ""),
            flashes: Vec::new(),
            admin: false,
            cart_count: 0,
            on_cart_page: false,
            shop_name: crate::db::site::current().name.clone(),
            meta: PageMeta::default(),
            session: None,
        }
    }

    /// Cache-busting URL of a static file (`css/site.css` → `/static/css/site.css?v=…`).
    pub fn asset(&self, path: &str) -> String {
        assets::url(path)
    }

    /// Whether a customer is signed in: the header links to "Account" instead of "Sign in".
    pub fn signed_in(&self) -> bool {
        self.session
            .as_ref()
            .is_some_and(crate::web::session::signed_in)
    }

    /// The session's CSRF token, created on first use; every state-changing form embeds it as
    /// the hidden field `csrf_token` (see the `csrf_field` macro).
    pub fn csrf_token(&self) -> String {
        match &self.session {
            Some(session) => csrf::token(session),
            None => String::new(),
        }
    }
}

fn nav_links(areas: &[(&'static str, &'static str)], path: &str) -> Vec<NavLink> {
    // "/" is current only on the home page; other areas also own their sub-paths, and the
    // longest matching area wins (/admin/products is Products, not Dashboard).
    let owns = |href: &str| path == href || (href != "/" && path.starts_with(&format!("{href}/")));
    let current = areas
        .iter()
        .map(|(href, _)| *href)
        .filter(|href| owns(href))
        .max_by_key(|href| href.len());
    areas
        .iter()
        .map(|(href, label)| NavLink {
            href,
            label,
            current: current == Some(*href),
        })
        .collect()
}

/// Render a page as a 200 HTML response.
pub fn render<T: Template>(page: &T) -> Result<HttpResponse, AppError> {
    let html = page
        .render()
        .map_err(|e| AppError::Internal(anyhow::anyhow!("rendering a template failed: {e}")))?;
    Ok(html_response(actix_web::http::StatusCode::OK, html))
}

/// An HTML response marked as a finished page (the error-page middleware leaves it alone).
pub fn html_response(status: actix_web::http::StatusCode, html: String) -> HttpResponse {
    let mut response = HttpResponse::build(status)
        .insert_header((header::CONTENT_TYPE, "text/html; charset=utf-8"))
        .body(html);
    response.extensions_mut().insert(Rendered);
    response
}
