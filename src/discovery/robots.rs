//! `/robots.txt`: the rules from the site settings (Admin → Settings; by default the admin, the
//! cart, checkout, orders and search results are disallowed), followed by the sitemap's address
//! unless the rules name one themselves.

use actix_web::{web, HttpRequest, HttpResponse};

use crate::state::AppState;
use crate::web::conditional::{self, Document};

/// The file served for `rules` on a site at `public_url` (no trailing slash).
pub(crate) fn robots_txt(rules: &str, public_url: &str) -> String {
    let rules = rules.replace("\r\n", "\n");
    let rules = rules.trim();
    let names_sitemap = rules
        .lines()
        .any(|l| l.trim_start().to_ascii_lowercase().starts_with("sitemap:"));
    let mut out = rules.to_string();
    if !names_sitemap {
        if !out.is_empty() {
            out.push_str("\n\n");
        }
        out.push_str(&format!("Sitemap: {public_url}/sitemap.xml"));
    }
    out.push('\n');
    out
}

/// `GET /robots.txt`
pub(crate) async fn serve(req: HttpRequest, state: web::Data<AppState>) -> HttpResponse {
    let settings = crate::db::site::current();
    conditional::respond(
        &req,
        Document {
            content_type: "text/plain; charset=utf-8",
            cache_control: "public, max-age=300",
            body: robots_txt(&settings.robots_txt, &state.public_url),
            last_modified: None,
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_sitemap_line_is_added_once() {
        let served = robots_txt(crate::db::site::DEFAULT_ROBOTS_TXT, "https://shop.example");
        assert!(served.starts_with("User-agent: *\nDisallow: /admin\n"));
        assert!(served.ends_with("\n\nSitemap: https://shop.example/sitemap.xml\n"));
        let own = robots_txt(
            "User-agent: *\r\nSitemap: https://x.example/s.xml",
            "https://a",
        );
        assert_eq!(own, "User-agent: *\nSitemap: https://x.example/s.xml\n");
        assert_eq!(
            robots_txt("", "https://a"),
            "Sitemap: https://a/sitemap.xml\n"
        );
    }
}
