//! The admin section under `/admin`, behind HTTP Basic auth (see `web::basic_auth`).

pub(crate) mod analytics;
pub(crate) mod carts;
pub(crate) mod categories;
pub(crate) mod changelist;
pub(crate) mod comments;
pub(crate) mod content;
pub(crate) mod customers;
pub(crate) mod dashboard;
pub(crate) mod demo_data;
pub(crate) mod form;
pub(crate) mod media;
pub(crate) mod menus;
pub(crate) mod orders;
pub(crate) mod page_titles;
pub(crate) mod preview;
pub(crate) mod product_form;
pub(crate) mod product_lifecycle;
pub(crate) mod product_list;
pub(crate) mod products;
pub(crate) mod settings;
pub(crate) mod stock;
pub(crate) mod system;
pub(crate) mod traffic;
pub(crate) mod upload_form;

use actix_web::middleware::from_fn;
use actix_web::{web, Scope};

use crate::web::{basic_auth, read};

pub(crate) fn scope() -> Scope<
    impl actix_web::dev::ServiceFactory<
        actix_web::dev::ServiceRequest,
        Config = (),
        Response = actix_web::dev::ServiceResponse<actix_web::body::BoxBody>,
        Error = actix_web::Error,
        InitError = (),
    >,
> {
    web::scope("/admin")
        // The app-wide gate already checks credentials for every /admin path before CSRF; this
        // second check guards exactly what the scope routes, whatever the path spelling.
        .wrap(from_fn(basic_auth::require_admin))
        .route("", read().to(dashboard::show))
        .route("/", read().to(dashboard::show))
        // A resource (not `.route`) so a GET here is 405 rather than 404.
        .service(web::resource("/seed").post(system::seed_demo_data))
        .route("/system", read().to(system::show))
        .route("/mail/retry", web::post().to(system::retry_mail))
        .route("/analytics", read().to(analytics::day))
        .route("/analytics/month", read().to(analytics::month))
        .route("/analytics/traffic", read().to(traffic::show))
        .route("/analytics/traffic.csv", read().to(traffic::csv))
        .route("/products", read().to(product_list::index))
        .service(
            web::resource("/products/new")
                .route(read().to(products::new))
                // The create form with its photo picker is multipart; a plain form also works.
                .route(
                    web::post()
                        .guard(actix_web::guard::fn_guard(product_lifecycle::is_multipart))
                        .to(product_lifecycle::create_with_photos),
                )
                .post(products::create),
        )
        .service(
            web::resource("/products/{id}/edit")
                .route(read().to(products::edit))
                .post(products::update),
        )
        .service(web::resource("/products/{id}/stock").post(products::adjust_stock))
        .service(web::resource("/products/{id}/photos").post(products::upload_photo))
        .service(
            web::resource("/products/{id}/delete")
                .route(read().to(product_lifecycle::confirm_delete))
                .post(product_lifecycle::delete),
        )
        .service(
            web::resource("/products/{id}/photos/{file}/remove")
                .post(product_lifecycle::remove_photo),
        )
        .service(
            web::resource("/products/{id}/photos/{file}/move").post(product_lifecycle::move_photo),
        )
        .service(
            web::resource("/categories")
                .route(read().to(categories::index))
                .post(categories::add),
        )
        .service(web::resource("/categories/{id}/rename").post(categories::rename))
        .service(web::resource("/categories/{id}/move").post(categories::move_category))
        .route("/categories/{id}", read().to(categories::edit))
        .service(
            web::resource("/categories/{id}/delete")
                .route(read().to(categories::confirm_delete))
                .post(categories::delete),
        )
        .route("/orders", read().to(orders::index))
        .route("/orders/{number}", read().to(orders::show))
        .service(web::resource("/orders/{number}/ship").post(orders::mark_shipped))
        .service(
            web::resource("/orders/{number}/cancel")
                .route(read().to(orders::confirm_cancel))
                .post(orders::cancel),
        )
        .route("/customers", read().to(customers::index))
        .route("/customers/{id}", read().to(customers::show))
        .service(web::resource("/customers/{id}/export").post(customers::export))
        .service(
            web::resource("/customers/{id}/anonymise")
                .route(read().to(customers::confirm_anonymise))
                .post(customers::anonymise),
        )
        .route("/carts", read().to(carts::index))
        .service(web::resource("/carts/expire").post(carts::expire_now))
        .service(web::resource("/carts/cleanup").post(carts::clean_up_now))
        .route("/stock", read().to(stock::index))
        .route("/content", read().to(content::index))
        .service(
            web::resource("/content/new")
                .route(read().to(content::new))
                .post(content::create),
        )
        .service(
            web::resource("/content/orphans")
                .route(read().to(content::review_orphans))
                .post(content::clean_orphans),
        )
        .service(
            web::resource("/menus")
                .route(read().to(menus::show))
                .post(menus::save),
        )
        // The media library; the upload is multipart with its token in the query.
        .service(
            web::resource("/media")
                .route(read().to(media::index))
                .post(media::upload),
        )
        .service(
            web::resource("/media/{file_id}/edit")
                .route(read().to(media::edit))
                .post(media::describe),
        )
        .service(web::resource("/media/{file_id}/delete").post(media::delete))
        // Any stored image, drafts' photos included, for the admin's own pages.
        .route("/media/{file_id}", read().to(crate::media::serve_private))
        .route(
            "/media/{file_id}/thumb",
            read().to(crate::media::serve_private_thumbnail),
        )
        .route(
            "/media/{file_id}/display",
            read().to(crate::media::serve_private_display),
        )
        .service(
            web::resource("/content/{id}/edit")
                .route(read().to(content::edit))
                // A photo node's form carries its photo picker (multipart, token in the query).
                .route(
                    web::post()
                        .guard(actix_web::guard::fn_guard(product_lifecycle::is_multipart))
                        .to(content::update_with_photo),
                )
                .post(content::update),
        )
        .route(
            "/content/{id}/revisions/{rev}",
            read().to(content::revision),
        )
        .service(
            web::resource("/content/{id}/revisions/{rev}/restore").post(content::restore_revision),
        )
        .route("/content/{id}/preview", read().to(preview::open))
        .service(web::resource("/content/{id}/photo").post(content::upload_photo))
        .service(
            web::resource("/content/{id}/delete")
                .route(read().to(content::confirm_delete))
                .post(content::delete),
        )
        .service(
            web::resource("/demo-data/remove")
                .route(read().to(demo_data::confirm_remove))
                .post(demo_data::remove),
        )
        .service(
            web::resource("/settings")
                .route(read().to(settings::show))
                .post(settings::save),
        )
        .route("/comments", read().to(comments::index))
        .service(web::resource("/comments/{id}/hide").post(comments::hide))
        .service(web::resource("/comments/{id}/unhide").post(comments::unhide))
        .service(web::resource("/comments/{id}/delete").post(comments::delete))
        .service(web::resource("/comments/{id}/restore").post(comments::restore))
        .service(web::resource("/comments/discussions/{id}/closed").post(comments::set_closed))
        .service(web::resource("/comments/{id}/approve").post(comments::approve))
        .service(web::resource("/comments/{id}/spam").post(comments::spam))
        .service(web::resource("/comments/bulk").post(comments::bulk))
        .route("/comments/{id}/reply", read().to(comments::reply_form))
        .route("/comments/{id}/reply", web::post().to(comments::reply))
}

/// The name of the admin making a request (their Basic user name), recorded as who saved an
/// edit (`metadata.updated_by` on nodes, `updated_by` on products) and shown on conflict pages.
pub(crate) fn admin_name(req: &actix_web::HttpRequest) -> Option<String> {
    req.app_data::<web::Data<crate::web::basic_auth::AdminCredentials>>()
        .map(|c| c.username().to_string())
}
