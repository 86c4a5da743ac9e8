//! What a product page shows of its product alone, worked out once per product read rather
//! than once per view: its breadcrumbs and details sections as HTML, its prices, release date
//! and shipping figures as text, and its `<head>` metadata (title, description, picture and the
//! `Product` and `BreadcrumbList` structured data). The page adds only what depends on the
//! visitor (header, CSRF token, the units other carts hold, the comments).
//!
//! A [`ProductView`] is kept in the product cache's entry (a `web::rendered::Part` in
//! `product_cache::Shown`), so it lives exactly as long as the product it was made from (at
//! most `product_cache::MAX_AGE`) and is dropped with it by every change report. It also
//! depends on the site settings (currency, shop name, default picture) and the site's address:
//! the part remembers the ones it was made with and is made again when the request's differ. Its
//! categories come from the category tree as it was when it was made (the product cache is
//! emptied by every category change this instance reports; another instance's shows within
//! the tree's own refresh plus `MAX_AGE`).
//!
//! Under load this turns the page's per-view work on the product (serializing its structured
//! data, formatting prices and measurements, rendering the details section) into one per
//! product per second: about a fifth of a product page's time (issue 37).
use askama::Template;

use crate::catalog::categories::Category;
use crate::catalog::products::{AlbumDetails, BookDetails, Details, FilmDetails, Product};
use crate::db::site::SiteSettings;
use crate::domain::Money;
use crate::web::meta::{breadcrumb_list, PageMeta, ScriptJson, SocialImage};

/// A product's part of its page (see the module documentation).
pub(crate) struct ProductView {
    pub(crate) album: Option<AlbumDetails>,
    pub(crate) book: Option<BookDetails>,
    /// The `<nav class="breadcrumbs">` of every category the product is filed under.
    pub(crate) breadcrumbs: String,
    /// The album's, film's or book's details section.
    pub(crate) details: String,
    pub(crate) retail_price: String,
    pub(crate) list_price: String,
    pub(crate) savings: String,
    /// `350 g`, or `1.25 kg` from a kilogram up; `None` while the weight is not entered.
    pub(crate) shipping_weight: Option<String>,
    /// `14.2 × 12.5 × 1 cm` (width × height × depth); `None` while no side is entered.
    pub(crate) shipping_dimensions: Option<String>,
    meta: ProductMeta,
}

/// What the product sets in its page's [`PageMeta`].
struct ProductMeta {
    title: String,
    description: String,
    image: Option<SocialImage>,
    json_ld: Vec<ScriptJson>,
}

impl ProductView {
    /// The view of `product` with its parsed `details`, filed under `filed_under` (from the
    /// category tree), for pages with these settings at this site address.
    pub(crate) fn new(
        product: &Product,
        details: Option<&Details>,
        filed_under: &[Category],
        settings: &SiteSettings,
        site_url: &str,
    ) -> ProductView {
        let (mut album, mut film, mut book) = (None, None, None);
        match details {
            Some(Details::Album(d)) => album = Some(d.clone()),
            Some(Details::Film(d)) => film = Some(d.clone()),
            Some(Details::Book(d)) => book = Some(d.clone()),
            None => tracing::warn!(slug = %product.slug, "product details do not fit its type"),
        }
        let issued = details
            .map(|d| long_date(&d.issue_date()))
            .unwrap_or_default();
        let currency = settings.currency();
        // The defaults of a public page, then what the product changes: only the fields this
        // view keeps are read back (the canonical address is the request's).
        let mut meta = PageMeta::for_page(site_url, "", settings);
        product_meta(&mut meta, product, filed_under, settings);
        let details = DetailsSection {
            album: album.as_ref(),
            film: film.as_ref(),
            book: book.as_ref(),
            issued: &issued,
        };
        ProductView {
            breadcrumbs: render_part(&Breadcrumbs { filed_under }),
            details: render_part(&details),
            retail_price: product.pricing.retail.display(&currency),
            list_price: product.pricing.list.display(&currency),
            savings: product.pricing.savings.display(&currency),
            shipping_weight: shipping_weight(product.shipping.weight),
            shipping_dimensions: shipping_dimensions(product),
            meta: ProductMeta {
                json_ld: meta.take_json_ld(),
                title: meta.title,
                description: meta.description,
                image: meta.image,
            },
            album,
            book,
        }
    }

    /// Sets the product's title, description, picture and structured data in `meta` (the
    /// layout's defaults for the page).
    pub(crate) fn fill_meta(&self, meta: &mut PageMeta) {
        meta.title.clone_from(&self.meta.title);
        meta.og_type = "product";
        meta.description.clone_from(&self.meta.description);
        meta.image.clone_from(&self.meta.image);
        for json in &self.meta.json_ld {
            meta.push_script_json(json.clone());
        }
    }
}

/// `1959-08-17` → `17 August 1959`.
pub(crate) fn long_date(date: &bson::DateTime) -> String {
    date.to_chrono().format("%-d %B %Y").to_string()
}

/// A part of the page rendered on its own, inserted into the page as it is.
fn render_part(part: &impl Template) -> String {
    part.render().unwrap_or_else(|e| {
        tracing::error!(error = %e, "rendering a product page part failed");
        String::new()
    })
}

#[derive(Template)]
#[template(path = "catalog/_product_breadcrumbs.html")]
struct Breadcrumbs<'a> {
    filed_under: &'a [Category],
}

#[derive(Template)]
#[template(path = "catalog/_product_details.html")]
struct DetailsSection<'a> {
    album: Option<&'a AlbumDetails>,
    film: Option<&'a FilmDetails>,
    book: Option<&'a BookDetails>,
    /// The release date, written out.
    issued: &'a str,
}

impl DetailsSection<'_> {
    /// The list of films with this actor.
    fn actor_url(&self, actor: &str) -> String {
        let qs = form_urlencoded::Serializer::new(String::new())
            .append_pair("type", "film")
            .append_pair("person", actor)
            .finish();
        format!("/products?{qs}")
    }
}

fn shipping_weight(grams: i64) -> Option<String> {
    match grams {
        ..=0 => None,
        1..=999 => Some(format!("{grams} g")),
        _ => Some(format!("{} kg", trim_decimals(grams as f64 / 1000.0))),
    }
}

fn shipping_dimensions(product: &Product) -> Option<String> {
    let d = &product.shipping.dimensions;
    (d.width > 0.0 || d.height > 0.0 || d.depth > 0.0).then(|| {
        format!(
            "{} × {} × {} cm",
            trim_decimals(d.width),
            trim_decimals(d.height),
            trim_decimals(d.depth)
        )
    })
}

/// A measurement with at most two decimals and no trailing zeros: `1.50` → `1.5`, `1.00` → `1`.
fn trim_decimals(value: f64) -> String {
    let text = format!("{value:.2}");
    text.trim_end_matches('0').trim_end_matches('.').to_string()
}

/// schema.org's availability for a product's units on sale.
fn availability(product: &Product) -> &'static str {
    if !product.in_stock() {
        "https://schema.org/OutOfStock"
    } else if product.is_low_stock() {
        "https://schema.org/LimitedAvailability"
    } else {
        "https://schema.org/InStock"
    }
}

/// `(name, absolute url)` from the home page down to `category`.
pub(crate) fn category_trail(meta: &PageMeta, category: &Category) -> Vec<(String, String)> {
    let mut steps = vec![(meta.site_name.clone(), meta.absolute("/"))];
    steps.extend(
        category
            .ancestors
            .iter()
            .map(|a| (a.name.clone(), meta.absolute(&a.url()))),
    );
    steps.push((category.name.clone(), meta.absolute(&category.url())));
    steps
}

/// schema.org's `Product` with its `Offer`, serialized in this key order (the picture last).
#[derive(serde::Serialize)]
struct ProductData<'a> {
    #[serde(rename = "@context")]
    context: &'static str,
    #[serde(rename = "@type")]
    kind: &'static str,
    name: &'a str,
    sku: &'a str,
    url: &'a str,
    description: &'a str,
    offers: OfferData<'a>,
    #[serde(skip_serializing_if = "Option::is_none")]
    image: Option<[&'a str; 1]>,
}

#[derive(serde::Serialize)]
struct OfferData<'a> {
    #[serde(rename = "@type")]
    kind: &'static str,
    url: &'a str,
    price: String,
    #[serde(rename = "priceCurrency")]
    price_currency: &'a str,
    availability: &'static str,
}

/// The product page's card and structured data: `Product` with its `Offer` (price in the
/// settings' currency, availability from the units on sale) and the `BreadcrumbList` of its
/// first category. Written from typed values: building them as `serde_json` maps cost a
/// product page about 5% of its time.
fn product_meta(
    meta: &mut PageMeta,
    product: &Product,
    filed_under: &[Category],
    settings: &SiteSettings,
) {
    let url = meta.absolute(&product.url());
    meta.title = product.title.clone();
    meta.og_type = "product";
    meta.describe(&product.description);
    if let Some(photo) = product.photos.first() {
        meta.picture(*photo, &product.title);
    }
    let price = product.pricing.retail.max(Money::ZERO);
    let data = ProductData {
        context: "https://schema.org",
        kind: "Product",
        name: &product.title,
        sku: product.sku.as_str(),
        url: &url,
        description: &meta.description,
        offers: OfferData {
            kind: "Offer",
            url: &url,
            price: price.amount(),
            price_currency: &settings.currency_code,
            availability: availability(product),
        },
        image: meta.image.as_ref().map(|image| [image.url.as_str()]),
    };
    let data = crate::web::meta::json_for_script(&data);
    meta.push_script_json(data);
    if let Some(category) = filed_under.first() {
        let mut steps = category_trail(meta, category);
        steps.push((product.title.clone(), url));
        meta.push_json_ld(&breadcrumb_list(&steps));
    }
}
