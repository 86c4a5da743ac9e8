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
    ("/admin/media", "Media"),
    ("/admin/menus", "Menus"),
    ("/admin/comments", "Comments"),
    ("/admin/analytics", "Analytics"),
    ("/admin/system", "System"),
    ("/admin/settings", "Settings"),
];

/// The session key under which the cart area keeps how many units the visitor's cart holds, so
/// the header can show it on every page without a database read (and without the layout knowing
/// about carts).
pub(crate) const CART_COUNT_KEY: &str = "cart_count";

/// Units in the visitor's cart as last seen (0 without a cart).
fn cart_count(session: &Session) -> i64 {
    session
        .get::<i64>(CART_COUNT_KEY)
        .ok()
        .flatten()
        .unwrap_or(0)
}

pub(crate) struct NavLink {
    pub(crate) href: String,
    pub(crate) label: String,
    pub(crate) current: bool,
}

pub struct Layout {
    pub(crate) nav: Vec<NavLink>,
    /// The footer's links (the public site's footer menu; empty in the admin).
    pub(crate) footer: Vec<NavLink>,
    pub(crate) flashes: Vec<Flash>,
    /// True in the admin section (its own header and navigation).
    pub(crate) admin: bool,
    /// Units in the visitor's cart, for the header.
    pub(crate) cart_count: i64,
    /// The cart page marks the header's cart link as current.
    pub(crate) on_cart_page: bool,
    /// The shop's name from the site settings (Admin → Settings), for the header.
    pub(crate) shop_name: String,
    /// What the page tells search engines and link previews; empty (nothing emitted) in the
    /// admin and on error pages.
    pub(crate) meta: PageMeta,
    /// `None` on error pages rendered without a request.
    session: Option<Session>,
}

impl Layout {
    /// The public site's layout for this request; takes (and so clears) pending flash messages.
    pub(crate) fn public(req: &HttpRequest) -> Layout {
        Layout::for_request(req, false)
    }

    pub(crate) fn admin(req: &HttpRequest) -> Layout {
        Layout::for_request(req, true)
    }

    fn for_request(req: &HttpRequest, admin: bool) -> Layout {
        let session = req.get_session();
        let settings = crate::db::site::current();
        let meta = if admin {
            PageMeta::default()
        } else {
            PageMeta::for_page(&site_url(req), req.path(), &settings)
        };
        let (nav, footer) = if admin {
            (admin_links(req.path()), Vec::new())
        } else {
            public_links(req.path())
        };
        Layout {
            nav,
            footer,
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
    pub(crate) fn admin_error(req: &HttpRequest) -> Layout {
        Layout {
            nav: admin_links(req.path()),
            footer: Vec::new(),
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
    pub(crate) fn error(req: &HttpRequest) -> Layout {
        let session = req.get_session();
        let (nav, footer) = public_links(req.path());
        Layout {
            nav,
            footer,
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
    pub(crate) fn bare() -> Layout {
        let (nav, footer) = public_links("");
        Layout {
            nav,
            footer,
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
    pub(crate) fn asset(&self, path: &str) -> std::borrow::Cow<'static, str> {
        assets::url(path)
    }

    /// Whether a customer is signed in: the header links to "Account" instead of "Sign in".
    pub(crate) fn signed_in(&self) -> bool {
        self.session
            .as_ref()
            .is_some_and(crate::web::session::signed_in)
    }

    /// The session's CSRF token, created on first use; every state-changing form embeds it as
    /// the hidden field `csrf_token` (see the `csrf_field` macro).
    pub(crate) fn csrf_token(&self) -> String {
        match &self.session {
            Some(session) => csrf::token(session),
            None => String::new(),
        }
    }
}

/// The admin's navigation, `path`'s screen marked current.
fn admin_links(path: &str) -> Vec<NavLink> {
    nav_links(
        ADMIN_AREAS.iter().map(|(href, label)| (*href, *label)),
        path,
    )
}

/// The public header's and footer's menus (Admin → Menus, read with the site settings), the
/// links to `path`'s area marked current.
fn public_links(path: &str) -> (Vec<NavLink>, Vec<NavLink>) {
    let settings = crate::db::site::current();
    let menu = |items: &[crate::db::site::MenuItem]| {
        nav_links(
            items.iter().map(|i| (i.href.as_str(), i.label.as_str())),
            path,
        )
    };
    (menu(&settings.menus.header), menu(&settings.menus.footer))
}

fn nav_links<'a>(
    links: impl Iterator<Item = (&'a str, &'a str)> + Clone,
    path: &str,
) -> Vec<NavLink> {
    // "/" is current only on the home page; other areas also own their sub-paths, and the
    // longest matching area wins (/admin/products is Products, not Dashboard). A link written
    // with a trailing slash (`/blog/`) owns the same paths as without.
    let owns = |href: &str| {
        let href = if href.len() > 1 {
            href.trim_end_matches('/')
        } else {
            href
        };
        path == href || (href != "/" && crate::web::links::is_within(path, href))
    };
    let current = links
        .clone()
        .map(|(href, _)| href)
        .filter(|href| owns(href))
        .max_by_key(|href| href.len());
    links
        .map(|(href, label)| NavLink {
            href: href.to_string(),
            label: label.to_string(),
            current: current == Some(href),
        })
        .collect()
}

/// Render a page as a 200 HTML response.
pub(crate) fn render<T: Template>(page: &T) -> Result<HttpResponse, AppError> {
    render_status(actix_web::http::StatusCode::OK, page)
}

/// Render a page as an HTML response with `status` (a form sent back with its errors, a
/// refused action explained).
pub(crate) fn render_status<T: Template>(
    status: actix_web::http::StatusCode,
    page: &T,
) -> Result<HttpResponse, AppError> {
    // Into a buffer sized for a whole page: askama's own guess is the template's fixed text,
    // which a page with rows and menus outgrows two or three times, copying itself each time.
    let mut html = String::with_capacity(T::SIZE_HINT.max(PAGE_BUFFER_BYTES));
    page.render_into(&mut html)
        .map_err(|e| AppError::Internal(anyhow::anyhow!("rendering a template failed: {e}")))?;
    Ok(html_response(status, html))
}

/// The buffer a page is rendered into starts this large: more than the storefront's pages
/// (a home, product or listing page is 8–13 KB), so they render without growing it. It lives
/// only until the response is written out.
const PAGE_BUFFER_BYTES: usize = 16 * 1024;

/// An HTML response marked as a finished page (the error-page middleware leaves it alone).
pub(crate) fn html_response(status: actix_web::http::StatusCode, html: String) -> HttpResponse {
    let mut response = HttpResponse::build(status)
        .insert_header((header::CONTENT_TYPE, "text/html; charset=utf-8"))
        .body(html);
    response.extensions_mut().insert(Rendered);
    response
}
