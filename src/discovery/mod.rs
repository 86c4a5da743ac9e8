//! Being found: the sitemaps (`/sitemap.xml` and the per-kind `/sitemaps/…` it lists) and
//! `/robots.txt`. They read across the catalog and the content, so they sit above both; the
//! `<head>` metadata every page carries (canonical address, social cards, structured data, feed
//! links) is built by `web::meta` and filled in by each area's pages.

pub(crate) mod robots;
pub mod sitemap;
