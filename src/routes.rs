//! The route table: every URL the site answers, and the handler behind it. Admin routes live
//! in [`crate::admin::scope`]; middleware is assembled in [`crate::startup`].

use actix_web::web;

use crate::web::{assets, read};
use crate::{
    accounts, admin, cart, catalog, checkout, comments, content, discovery, health, home, search,
};

/// Every route of the site.
pub(crate) fn routes(cfg: &mut web::ServiceConfig) {
    cfg.route("/", read().to(home::index))
        .route("/healthz", read().to(health::healthz))
        .route("/readyz", read().to(health::ready::readyz))
        .route("/metrics", read().to(health::scrape::metrics))
        .route("/static/{path:.*}", read().to(assets::serve))
        .route("/products", read().to(search::listing::products))
        .route("/products/{slug}", read().to(catalog::pages::show))
        .route(
            "/products/{slug}/comments",
            read().to(catalog::pages::comments_anchor),
        )
        .route(
            "/products/{slug}/comments",
            web::post().to(catalog::pages::post_comment),
        )
        .route(
            "/products/{slug}/comments/{comment:.+}",
            read().to(catalog::pages::comment_permalink),
        )
        .route(
            "/products/{slug}/comments/{comment:.+}",
            web::post().to(catalog::pages::post_reply),
        );
    // Content sections (`/pages/`, `/blog/`, `/gallery/`): only the known names match, so
    // these never shadow another area's routes, nor do other routes match these paths. They
    // come early because the router tries every pattern in order (each dynamic one a regex
    // match) until one fits: a post behind the account and media routes paid ~40 failed
    // matches per view.
    let names: Vec<&str> = content::model::SECTIONS.iter().map(|s| s.name).collect();
    let section = format!("/{{section:(?:{})}}", names.join("|"));
    cfg.route(&section, read().to(content::pages::list))
        .route(&format!("{section}/"), read().to(content::pages::list))
        .route(
            &format!("{section}/feed.atom"),
            read().to(content::feed::serve),
        )
        .route(
            &format!("{section}/{{slug}}"),
            read().to(content::pages::show),
        )
        .route(
            &format!("{section}/{{slug}}/comments"),
            read().to(content::pages::comments_anchor),
        )
        .route(
            &format!("{section}/{{slug}}/comments"),
            web::post().to(content::pages::post_comment),
        )
        .route(
            &format!("{section}/{{slug}}/comments/{{comment:.+}}"),
            read().to(content::pages::comment_permalink),
        )
        .route(
            &format!("{section}/{{slug}}/comments/{{comment:.+}}"),
            web::post().to(content::pages::post_reply),
        );
    cfg.route("/categories", read().to(catalog::pages::tree))
        .route("/categories/{slug}", read().to(search::listing::category))
        .route("/cart", read().to(cart::pages::show))
        .route("/cart/items", web::post().to(cart::pages::add))
        .route("/cart/items/{sku}", web::post().to(cart::pages::change))
        .route(
            "/cart/items/{sku}/remove",
            web::post().to(cart::pages::remove),
        )
        .route("/checkout", read().to(checkout::pages::show))
        .route("/checkout", web::post().to(checkout::pages::submit))
        // Before `/orders/{number}`, which would otherwise take "lookup" for a number.
        .route(
            "/comments/unsubscribe/{id}/{signature}",
            read().to(comments::notify::confirm),
        )
        .route(
            "/comments/unsubscribe/{id}/{signature}",
            web::post().to(comments::notify::unsubscribe),
        )
        .route("/orders/lookup", read().to(checkout::lookup::show))
        .route("/orders/lookup", web::post().to(checkout::lookup::submit))
        .route("/orders/{number}", read().to(checkout::pages::order))
        .route("/account", read().to(accounts::pages::overview))
        .route("/account/sign-in", read().to(accounts::sign_in::show))
        .route(
            "/account/sign-in",
            web::post().to(accounts::sign_in::request),
        )
        .route(
            "/account/sign-in/code",
            read().to(accounts::sign_in::code_form),
        )
        .route(
            "/account/sign-in/code",
            web::post().to(accounts::sign_in::enter_code),
        )
        .route(
            "/account/sign-in/link/{token}",
            read().to(accounts::sign_in::open_link),
        )
        .route(
            "/account/sign-in/link/{token}",
            web::post().to(accounts::sign_in::follow_link),
        )
        .route(
            "/account/sign-out",
            web::post().to(accounts::sign_in::sign_out),
        )
        .route(
            "/account/sign-out-everywhere",
            web::post().to(accounts::sign_in::sign_out_everywhere),
        )
        .route(
            "/account/orders/{number}",
            read().to(accounts::pages::order),
        )
        .route("/account/settings", read().to(accounts::pages::settings))
        .route(
            "/account/settings",
            web::post().to(accounts::pages::save_settings),
        )
        .route("/account/comments", read().to(accounts::comments::list))
        .route(
            "/account/comments/{id}",
            read().to(accounts::comments::edit_form),
        )
        .route(
            "/account/comments/{id}",
            web::post().to(accounts::comments::save),
        )
        .route(
            "/account/comments/{id}/delete",
            web::post().to(accounts::comments::delete),
        )
        .route("/account/privacy", read().to(accounts::privacy_pages::show))
        .route(
            "/account/privacy/export",
            web::post().to(accounts::privacy_pages::ask_export),
        )
        .route(
            "/account/privacy/delete",
            web::post().to(accounts::privacy_pages::ask_delete),
        )
        .route(
            "/account/privacy/confirm/{token}",
            read().to(accounts::privacy_pages::open),
        )
        .route(
            "/account/privacy/confirm/{token}",
            web::post().to(accounts::privacy_pages::confirm),
        )
        .route("/account/addresses", read().to(accounts::addresses::list))
        .route(
            "/account/addresses",
            web::post().to(accounts::addresses::add),
        )
        // Before `/account/addresses/{id}`, which would otherwise take "new" for an id.
        .route(
            "/account/addresses/new",
            read().to(accounts::addresses::new_form),
        )
        .route(
            "/account/addresses/{id}",
            read().to(accounts::addresses::edit_form),
        )
        .route(
            "/account/addresses/{id}",
            web::post().to(accounts::addresses::update),
        )
        .route(
            "/account/addresses/{id}/delete",
            web::post().to(accounts::addresses::delete),
        )
        .route(
            "/account/addresses/{id}/default",
            web::post().to(accounts::addresses::make_default),
        )
        // Stored images; a draft's photo only for the admin (see `content::media_access`).
        .route("/media/{file_id}", read().to(content::media_access::serve))
        .route(
            "/media/{file_id}/thumb",
            read().to(content::media_access::serve_thumbnail),
        )
        .route(
            "/media/{file_id}/display",
            read().to(content::media_access::serve_display),
        )
        .route(
            "/media/{file_id}/social",
            read().to(content::media_access::serve_social),
        )
        .route(
            "/media/{file_id}/w/{width}",
            read().to(content::media_access::serve_width),
        )
        // A draft or scheduled node through a signed, expiring link (`content::preview`).
        .route("/preview/{id}", read().to(content::pages::preview))
        .route("/tags", read().to(content::tag_index::index))
        .route("/tags/", read().to(content::tag_index::index))
        .route("/tags/{tag}", read().to(content::pages::tag))
        .route("/tags/{tag}/", read().to(content::pages::tag))
        .route("/tags/{tag}/feed.atom", read().to(content::feed::serve_tag))
        .route("/robots.txt", read().to(discovery::robots::serve))
        .route("/sitemap.xml", read().to(discovery::sitemap::index))
        .route("/sitemaps/{name}", read().to(discovery::sitemap::serve))
        .route("/search", read().to(search::pages::results));
    cfg.service(admin::scope());
}
