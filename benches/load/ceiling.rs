//! The ceiling: the least a page can cost on this framework. A minimal actix-web server, no
//! database and no middleware, that renders a 20-row HTML table through askama. Every Bazaar
//! page is reported as a share of its requests/s, measured side by side with the same client.
//!
//! It runs in a child process (this benchmark binary started again with [`CHILD_ENV`] set), so
//! it has its own worker threads like Bazaar's server process, and prints its port on stdout.

use actix_web::{web, App, HttpResponse, HttpServer};
use askama::Template;

/// Set in the environment of the child process that serves the ceiling page.
pub const CHILD_ENV: &str = "BAZAAR_BENCH_CEILING";

#[derive(Template)]
#[template(
    source = "<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>{{ title }}</title></head>\
<body><h1>{{ title }}</h1><table><thead><tr><th>#</th><th>Title</th><th>Price</th></tr></thead><tbody>\
{% for row in rows %}<tr><td>{{ row.0 }}</td><td><a href=\"/products/{{ row.1 }}\">{{ row.1 }}</a></td><td>{{ row.2 }}</td></tr>{% endfor %}\
</tbody></table></body></html>",
    ext = "html"
)]
struct Table {
    title: &'static str,
    rows: Vec<(u32, String, String)>,
}

async fn page() -> HttpResponse {
    let rows = (1..=20)
        .map(|i| {
            (
                i,
                format!("product-{i}"),
                format!("${}.{:02}", 10 + i, i * 3 % 100),
            )
        })
        .collect();
    match (Table {
        title: "Ceiling",
        rows,
    })
    .render()
    {
        Ok(html) => HttpResponse::Ok()
            .content_type("text/html; charset=utf-8")
            .body(html),
        Err(_) => HttpResponse::InternalServerError().finish(),
    }
}

/// Serve the ceiling page on a free loopback port until killed; prints `port N` first.
pub fn serve() -> std::io::Result<()> {
    actix_web::rt::System::new().block_on(async {
        let server = HttpServer::new(|| App::new().route("/", web::get().to(page)))
            .bind(("127.0.0.1", 0))?;
        let port = server.addrs()[0].port();
        println!("port {port}");
        server.run().await
    })
}
