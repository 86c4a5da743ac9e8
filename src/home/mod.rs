//! The home page: the site's name and tagline, and shelves of featured, discounted and newest
//! products; its structured data names the web site (with its search) and the organisation.

use std::sync::Arc;

use actix_web::{web, HttpRequest, HttpResponse};
use askama::Template;

use crate::catalog::card::ProductCard;
use crate::catalog::{cache, listing};
use crate::db::site::SiteSettings;
use crate::state::AppState;
use crate::web::errors::AppError;
use crate::web::layout::{render, Layout};
use crate::web::meta::{json_for_script, PageMeta};

/// Products on each home page shelf.
const SHELF_SIZE: i64 = 4;

/// A row of products on the home page, borrowed from the cached shelves (a page view copies
/// no product).
pub(crate) struct Shelf<'a> {
    pub(crate) id: &'static str,
    pub(crate) title: &'static str,
    /// The full listing this shelf previews.
    pub(crate) more: &'static str,
    pub(crate) products: &'a [ProductCard],
}

#[derive(Template)]
#[template(path = "home/index.html")]
pub(crate) struct HomePage<'a> {
    pub(crate) layout: Layout,
    /// The cached settings themselves, not a copy.
    pub(crate) site: Arc<SiteSettings>,
    pub(crate) shelves: Vec<Shelf<'a>>,
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
            products,
        })
        .collect();
    let mut layout = Layout::public(&req);
    site_meta(&mut layout.meta, &site);
    render(&HomePage {
        layout,
        site,
        shelves,
    })
}

/// schema.org's `WebSite` with its site search, serialized in this key order.
#[derive(serde::Serialize)]
struct WebSite<'a> {
    #[serde(rename = "@context")]
    context: &'static str,
    #[serde(rename = "@type")]
    kind: &'static str,
    name: &'a str,
    url: &'a str,
    description: &'a str,
    #[serde(rename = "potentialAction")]
    potential_action: SearchAction,
}

/// The `WebSite`'s search: where a search for `{search_term_string}` goes.
#[derive(serde::Serialize)]
struct SearchAction {
    #[serde(rename = "@type")]
    kind: &'static str,
    target: EntryPoint,
    #[serde(rename = "query-input")]
    query_input: &'static str,
}

#[derive(serde::Serialize)]
struct EntryPoint {
    #[serde(rename = "@type")]
    kind: &'static str,
    #[serde(rename = "urlTemplate")]
    url_template: String,
}

/// schema.org's `Organization` behind the site.
#[derive(serde::Serialize)]
struct Organization<'a> {
    #[serde(rename = "@context")]
    context: &'static str,
    #[serde(rename = "@type")]
    kind: &'static str,
    name: &'a str,
    url: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    logo: Option<&'a str>,
}

/// The home page's structured data: the `WebSite` with its search (`/search?q=`) and the
/// `Organization` behind it, from the site settings. Written from typed values, straight to
/// text (no JSON maps built per key).
fn site_meta(meta: &mut PageMeta, site: &SiteSettings) {
    let home = meta.absolute("/");
    let website = json_for_script(&WebSite {
        context: "https://schema.org",
        kind: "WebSite",
        name: &site.name,
        url: &home,
        description: &meta.description,
        potential_action: SearchAction {
            kind: "SearchAction",
            target: EntryPoint {
                kind: "EntryPoint",
                url_template: meta.absolute("/search?q={search_term_string}"),
            },
            query_input: "required name=search_term_string",
        },
    });
    let organisation = json_for_script(&Organization {
        context: "https://schema.org",
        kind: "Organization",
        name: site.organisation_name(),
        url: &home,
        logo: meta.image.as_ref().map(|image| image.url.as_str()),
    });
    meta.push_script_json(website);
    meta.push_script_json(organisation);
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_site_and_its_organisation_are_described_in_schema_org_key_order() {
        let mut site = SiteSettings {
            name: "Tom & Jo's <Records>".to_string(),
            ..SiteSettings::default()
        };
        site.organisation = "Tom and Jo Ltd".to_string();
        site.social_image = "/static/images/card.png".to_string();
        let mut meta = PageMeta::for_page("https://shop.example", "/", &site);
        meta.description = "Records & books".to_string();
        site_meta(&mut meta, &site);
        let scripts: Vec<&str> = meta.json_ld_scripts().collect();
        assert_eq!(
            scripts,
            [
                r#"{"@context":"https://schema.org","@type":"WebSite","name":"Tom \u0026 Jo's \u003cRecords\u003e","url":"https://shop.example/","description":"Records \u0026 books","potentialAction":{"@type":"SearchAction","target":{"@type":"EntryPoint","urlTemplate":"https://shop.example/search?q={search_term_string}"},"query-input":"required name=search_term_string"}}"#,
                r#"{"@context":"https://schema.org","@type":"Organization","name":"Tom and Jo Ltd","url":"https://shop.example/","logo":"https://shop.example/static/images/card.png"}"#,
            ]
        );
        // Without a picture there is no logo.
        let mut bare = PageMeta::for_page("https://shop.example", "/", &SiteSettings::default());
        site_meta(&mut bare, &SiteSettings::default());
        let organisation = bare.json_ld_scripts().nth(1).expect("two objects");
        assert!(!organisation.contains("logo"), "{organisation}");
    }
}
