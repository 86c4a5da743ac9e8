//! Regression tests for the findings of a hostile-input sweep: password checks under a flood,
//! NUL bytes in searches, cart hoarding, image bombs, integer overflow in forms, email syntax,
//! slow request bodies, flash messages in the session cookie, session age and HSTS.

use std::io::Cursor;
use std::time::Duration;

use crate::common::builders::{CategoryBuilder, ProductBuilder};
use crate::common::shop::*;
use crate::common::*;
use bazaar::config::Settings;
use bazaar::startup::Application;
use bazaar::web::basic_auth::AdminCredentials;
use bson::doc;
use reqwest::StatusCode;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// The app with a handle on its admin credentials' counters.
async fn spawn_counted(env: &[(&str, &str)]) -> (String, actix_web::web::Data<AdminCredentials>) {
    let mut vars = vec![NO_DEMO];
    vars.extend_from_slice(env);
    let settings: Settings = test_settings(&vars);
    let app = Application::build(settings).await.expect("the app starts");
    let address = format!("http://127.0.0.1:{}", app.port());
    let credentials = app.admin_credentials();
    tokio::spawn(app.run_until_stopped());
    (address, credentials)
}

fn plain_client() -> reqwest::Client {
    new_client().0
}

fn location_of(response: &reqwest::Response) -> String {
    location(response)
}

// ---------------------------------------------------------------------------------------------
// 1. Basic auth: bounded argon2, per-address delay, public pages unaffected.

#[tokio::test]
async fn wrong_admin_passwords_from_one_address_are_delayed_longer_each_time_while_a_signed_in_admin_carries_on(
) {
    let (address, credentials) =
        spawn_counted(&[("BAZAAR_ADMIN__FAILURES_BEFORE_DELAY", "3")]).await;
    let client = plain_client();
    let admin = |password: &str| {
        client
            .get(format!("{address}/admin"))
            .basic_auth(ADMIN_USER, Some(password.to_string()))
            .send()
    };
    // The admin signs in first.
    assert_eq!(
        admin(ADMIN_PASSWORD).await.expect("sent").status(),
        StatusCode::OK
    );
    for attempt in 1..=3 {
        let response = admin("guess").await.expect("sent");
        assert_eq!(
            response.status(),
            StatusCode::UNAUTHORIZED,
            "attempt {attempt}"
        );
    }
    let runs_before = credentials.stats().runs;
    let throttled = admin("guess again").await.expect("sent");
    assert_eq!(throttled.status(), StatusCode::TOO_MANY_REQUESTS);
    let retry: u64 = throttled
        .headers()
        .get("retry-after")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse().ok())
        .expect("a Retry-After");
    assert_eq!(retry, 1);
    assert_eq!(
        credentials.stats().runs,
        runs_before,
        "no argon2 while throttled"
    );
    // The signed-in admin is recognised without a new check and is not held up.
    assert_eq!(
        admin(ADMIN_PASSWORD).await.expect("sent").status(),
        StatusCode::OK
    );

    // After the delay one more guess is checked, and the next delay is twice as long.
    tokio::time::sleep(Duration::from_millis(1100)).await;
    assert_eq!(
        admin("fourth guess").await.expect("sent").status(),
        StatusCode::UNAUTHORIZED
    );
    let throttled = admin("fifth guess").await.expect("sent");
    assert_eq!(throttled.status(), StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(
        throttled
            .headers()
            .get("retry-after")
            .and_then(|v| v.to_str().ok()),
        Some("2")
    );
}

#[tokio::test]
async fn public_pages_ignore_basic_credentials_and_an_admin_can_still_open_any_order_with_them() {
    let (address, credentials) = spawn_counted(&[]).await;
    let client = plain_client();
    for path in ["/", "/products", "/cart", "/categories"] {
        let response = client
            .get(format!("{address}{path}"))
            .basic_auth(ADMIN_USER, Some("not the password"))
            .send()
            .await
            .expect("sent");
        assert_eq!(response.status(), StatusCode::OK, "{path}");
    }
    assert_eq!(credentials.stats().runs, 0, "no password was checked");

    // A shopper's order, opened by the admin from another browser with Basic credentials.
    let app = spawn_app().await;
    product_with_stock(&app.db, "seen", 5).await;
    let shopper = Shopper::new(&app).await;
    shopper.add("seen", "1").await;
    let placed = shopper.checkout("4242424242424242").await;
    let order_url = location_of(&placed);
    assert!(order_url.starts_with("/orders/"), "{order_url}");
    let stranger = plain_client();
    let response = stranger
        .get(app.url(&order_url))
        .send()
        .await
        .expect("sent");
    assert_eq!(response.status(), StatusCode::NOT_FOUND);
    let response = stranger
        .get(app.url(&order_url))
        .basic_auth(ADMIN_USER, Some("wrong"))
        .send()
        .await
        .expect("sent");
    assert_eq!(response.status(), StatusCode::NOT_FOUND);
    let response = stranger
        .get(app.url(&order_url))
        .basic_auth(ADMIN_USER, Some(ADMIN_PASSWORD))
        .send()
        .await
        .expect("sent");
    assert_eq!(response.status(), StatusCode::OK);
}

// ---------------------------------------------------------------------------------------------
// 2. NUL and other control characters in search text.

#[tokio::test]
async fn a_nul_byte_in_search_text_shows_a_normal_page_on_listings_categories_and_admin() {
    let app = spawn_app().await;
    let jazz = CategoryBuilder::new("jazz").build(&app.db).await;
    ProductBuilder::new("kob")
        .title("Kind of Blue")
        .category(&jazz)
        .build(&app.db)
        .await;
    let tree = html(&body(app.get("/categories").await).await);
    let category = attr(&tree, "main a[href^='/categories/']", "href").expect("a category");
    for path in [
        "/products?q=%00".to_string(),
        "/products?q=kind%00of".to_string(),
        "/products?q=%01%1F%7F&genre=%00&person=%00".to_string(),
        format!("{category}?q=%00"),
    ] {
        let response = app.get(&path).await;
        assert_eq!(response.status(), StatusCode::OK, "{path}");
    }
    let doc = html(&body(app.get("/products?q=kind%00%20of").await).await);
    assert!(
        texts(&doc, ".product-card h2, .product-card h3, .product-card a")
            .iter()
            .any(|t| t.contains("Kind of Blue")),
        "the NUL is dropped and the rest is searched"
    );
    let response = app.get_admin("/admin/products?q=%00").await;
    assert_eq!(response.status(), StatusCode::OK);
}

// ---------------------------------------------------------------------------------------------
// 3. Carts: none before a line, shares of stock, unit limit, rate of new carts, retention.

async fn cart_documents(app: &TestApp) -> u64 {
    app.db
        .collection::<bson::Document>("carts")
        .count_documents(doc! {})
        .await
        .expect("count")
}

#[tokio::test]
async fn adding_an_unknown_sku_or_more_than_is_available_creates_no_cart() {
    let app = spawn_app().await;
    product_with_stock(&app.db, "scarce", 3).await;
    let shopper = Shopper::new(&app).await;
    for _ in 0..5 {
        let flashes = shopper.add("no-such-sku", "1").await;
        assert_eq!(flashes, ["That product does not exist."]);
    }
    let flashes = shopper.add("scarce", "5").await;
    assert!(
        flashes.iter().any(|f| f.contains("only 3 left")),
        "{flashes:?}"
    );
    assert_eq!(
        cart_documents(&app).await,
        0,
        "nothing was added, so no cart"
    );
    assert_eq!(product(&app.db, "scarce").await.qty, 3);

    shopper.add("scarce", "1").await;
    assert_eq!(cart_documents(&app).await, 1);
    assert_eq!(shopper.cart_lines().await, [("scarce".to_string(), 1)]);
}

#[tokio::test]
async fn one_cart_line_holds_at_most_half_of_a_products_stock_so_it_stays_on_sale() {
    let app = spawn_app().await;
    product_with_stock(&app.db, "popular", 60).await;
    let hoarder = Shopper::new(&app).await;
    let flashes = hoarder.add("popular", "99").await;
    assert!(
        flashes
            .iter()
            .any(|f| f == "You can have at most 30 of Test album popular in your cart"),
        "{flashes:?}"
    );
    assert_eq!(cart_documents(&app).await, 0);
    hoarder.add("popular", "30").await;
    let flashes = hoarder.add("popular", "1").await;
    assert!(
        flashes.iter().any(|f| f.contains("at most 30")),
        "{flashes:?}"
    );
    let flashes = hoarder.set_qty("popular", "31").await;
    assert!(
        flashes.iter().any(|f| f.contains("at most 30")),
        "{flashes:?}"
    );
    assert_eq!(hoarder.cart_lines().await, [("popular".to_string(), 30)]);
    assert_eq!(
        product(&app.db, "popular").await.qty,
        30,
        "half stays on sale"
    );
    // A small product may still be bought whole.
    product_with_stock(&app.db, "rare", 4).await;
    let buyer = Shopper::new(&app).await;
    buyer.add("rare", "4").await;
    assert_eq!(buyer.cart_lines().await, [("rare".to_string(), 4)]);
}

#[tokio::test]
async fn a_cart_holds_at_most_the_configured_number_of_units() {
    let app = spawn_app_with(&[("BAZAAR_CART__MAX_UNITS", "15")]).await;
    product_with_stock(&app.db, "unit-a", 50).await;
    product_with_stock(&app.db, "unit-b", 50).await;
    let shopper = Shopper::new(&app).await;
    shopper.add("unit-a", "10").await;
    let flashes = shopper.add("unit-b", "6").await;
    assert!(
        flashes
            .iter()
            .any(|f| f == "A cart holds at most 15 items in all"),
        "{flashes:?}"
    );
    shopper.add("unit-b", "5").await;
    assert_eq!(
        shopper.cart_lines().await,
        [("unit-a".to_string(), 10), ("unit-b".to_string(), 5)]
    );
    assert_eq!(product(&app.db, "unit-b").await.qty, 45);
}

#[tokio::test]
async fn new_carts_from_one_address_are_rate_limited() {
    let app = spawn_app_with(&[("BAZAAR_CART__NEW_CARTS_PER_HOUR", "3")]).await;
    product_with_stock(&app.db, "limited", 50).await;
    for n in 0..3 {
        let shopper = Shopper::new(&app).await;
        let flashes = shopper.add("limited", "1").await;
        assert!(
            flashes.iter().any(|f| f.starts_with("Added")),
            "cart {n}: {flashes:?}"
        );
    }
    let fourth = Shopper::new(&app).await;
    let flashes = fourth.add("limited", "1").await;
    assert!(
        flashes
            .iter()
            .any(|f| f.contains("Too many carts were started from your network")),
        "{flashes:?}"
    );
    assert_eq!(cart_documents(&app).await, 3);
    assert_eq!(product(&app.db, "limited").await.qty, 47);
}

#[tokio::test]
async fn expired_carts_are_deleted_by_the_jobs_after_the_retention_period() {
    use bazaar::jobs;
    let app = spawn_app().await;
    product_with_stock(&app.db, "kept", 10).await;
    let old = Shopper::new(&app).await;
    old.add("kept", "2").await;
    let live = Shopper::new(&app).await;
    live.add("kept", "1").await;
    let carts = app.db.collection::<bson::Document>("carts");
    // The first cart went idle and expired.
    carts
        .update_one(
            doc! { "items.qty": 2 },
            doc! { "$set": { "last_modified": bson::DateTime::from_millis(0) } },
        )
        .await
        .expect("aged");
    let report = jobs::expire_idle_carts(&app.db, Duration::from_secs(600))
        .await
        .expect("expiry");
    assert_eq!(report.carts_expired, 1);
    // Just expired: kept for the retention period.
    assert_eq!(
        jobs::delete_expired_carts(&app.db, Duration::from_secs(3600))
            .await
            .expect("retention"),
        0
    );
    carts
        .update_one(
            doc! { "status": "expired" },
            doc! { "$set": { "last_modified": bson::DateTime::from_millis(0) } },
        )
        .await
        .expect("aged");
    assert_eq!(
        jobs::delete_expired_carts(&app.db, Duration::from_secs(3600))
            .await
            .expect("retention"),
        1
    );
    assert_eq!(carts.count_documents(doc! {}).await.expect("count"), 1);
    assert_eq!(
        carts
            .count_documents(doc! { "status": "active" })
            .await
            .expect("count"),
        1,
        "the live cart stays"
    );
    assert_eq!(
        product(&app.db, "kept").await.qty,
        9,
        "stock came back at expiry"
    );
    assert_uses_index(
        &app.db,
        "deleting long-expired carts",
        "carts",
        jobs::expired_before_query(bson::DateTime::now()),
        doc! {},
    )
    .await;
}

// ---------------------------------------------------------------------------------------------
// 4. Image bombs.

fn crc32(bytes: &[u8]) -> u32 {
    let mut crc = 0xFFFF_FFFFu32;
    for &b in bytes {
        crc ^= u32::from(b);
        for _ in 0..8 {
            crc = if crc & 1 == 1 {
                (crc >> 1) ^ 0xEDB8_8320
            } else {
                crc >> 1
            };
        }
    }
    !crc
}

fn png_chunk(out: &mut Vec<u8>, kind: &[u8; 4], data: &[u8]) {
    out.extend_from_slice(&(data.len() as u32).to_be_bytes());
    let mut typed = kind.to_vec();
    typed.extend_from_slice(data);
    out.extend_from_slice(&typed);
    out.extend_from_slice(&crc32(&typed).to_be_bytes());
}

/// A PNG whose header declares `width` × `height` 8-bit grey pixels, with a token of data.
fn png_declaring(width: u32, height: u32) -> Vec<u8> {
    let mut out = b"\x89PNG\r\n\x1a\n".to_vec();
    let mut ihdr = Vec::new();
    ihdr.extend_from_slice(&width.to_be_bytes());
    ihdr.extend_from_slice(&height.to_be_bytes());
    ihdr.extend_from_slice(&[8, 0, 0, 0, 0]);
    png_chunk(&mut out, b"IHDR", &ihdr);
    // A zlib stream of one stored empty block.
    png_chunk(
        &mut out,
        b"IDAT",
        &[0x78, 0x01, 0x01, 0x00, 0x00, 0xFF, 0xFF, 0, 0, 0, 1],
    );
    png_chunk(&mut out, b"IEND", &[]);
    out
}

/// A 1×1 GIF frame on a logical screen of `width` × `height`.
fn gif_declaring(width: u16, height: u16) -> Vec<u8> {
    let mut out = b"GIF89a".to_vec();
    out.extend_from_slice(&width.to_le_bytes());
    out.extend_from_slice(&height.to_le_bytes());
    out.extend_from_slice(&[0x00, 0x00, 0x00]);
    out.extend_from_slice(&[0x2C, 0, 0, 0, 0, 1, 0, 1, 0, 0x00]);
    out.extend_from_slice(&[0x02, 0x02, 0x44, 0x01, 0x00, 0x3B]);
    out
}

fn real_png(width: u32, height: u32) -> Vec<u8> {
    let img = image::RgbImage::from_fn(width, height, |x, y| image::Rgb([x as u8, y as u8, 7]));
    let mut out = Cursor::new(Vec::new());
    image::DynamicImage::ImageRgb8(img)
        .write_to(&mut out, image::ImageFormat::Png)
        .expect("encodes");
    out.into_inner()
}

async fn upload_photo(app: &TestApp, action: &str, bytes: &[u8]) -> reqwest::Response {
    let boundary = "----bazaar-security-boundary";
    let body = png_upload_body(boundary, "photo", "p.png", bytes);
    app.post_admin_multipart(action, boundary, body).await
}

/// A product "Dune", found through the admin's search: its edit page and its upload form's
/// action.
async fn dune_upload_form(app: &TestApp) -> (String, String) {
    ProductBuilder::new("dune")
        .title("Dune")
        .stock(4)
        .build(&app.db)
        .await;
    let doc = html(&body(app.get_admin("/admin/products?q=dune").await).await);
    let edit = attr(&doc, "table.admin-products tbody a", "href").expect("edit link");
    let doc = html(&body(app.get_admin(&edit).await).await);
    let action = attr(&doc, ".photos-panel form", "action").expect("upload form");
    (edit, action)
}

#[tokio::test]
async fn images_declaring_more_pixels_than_the_limit_are_refused_before_decoding() {
    let app = spawn_app().await;
    let (edit, action) = dune_upload_form(&app).await;
    let before = stored_files(&app).await;
    let gif = gif_declaring(11_500, 11_500);
    assert!(gif.len() < 40, "a tiny file: {} bytes", gif.len());
    for (what, bytes) in [("gif", gif), ("png", png_declaring(20_000, 20_000))] {
        let response = upload_photo(&app, &action, &bytes).await;
        assert_eq!(response.status(), StatusCode::SEE_OTHER, "{what}");
        let doc = html(&body(app.get_admin(&edit).await).await);
        let errors = texts(&doc, ".flash-error");
        assert!(
            errors
                .iter()
                .any(|e| e.contains("at most 40 megapixels are accepted")),
            "{what}: {errors:?}"
        );
        assert_eq!(stored_files(&app).await, before, "{what}: nothing kept");
    }
}

#[tokio::test]
async fn the_pixel_limit_is_configurable_and_pages_show_a_scaled_copy_of_a_large_photo() {
    let app = spawn_app_with(&[("BAZAAR_MEDIA__MAX_IMAGE_MEGAPIXELS", "3")]).await;
    let (edit, action) = dune_upload_form(&app).await;
    // A first, small photo, so the large one is the second the page shows.
    let response = upload_photo(&app, &action, &real_png(300, 200)).await;
    assert_eq!(response.status(), StatusCode::SEE_OTHER);
    let response = upload_photo(&app, &action, &real_png(2000, 1600)).await;
    assert_eq!(response.status(), StatusCode::SEE_OTHER);
    let doc = html(&body(app.get_admin(&edit).await).await);
    assert!(texts(&doc, ".flash-error")[0].contains("2000×1600 pixels; at most 3 megapixels"));

    let response = upload_photo(&app, &action, &real_png(2400, 1200)).await;
    assert_eq!(response.status(), StatusCode::SEE_OTHER);
    let doc = html(&body(app.get_admin(&edit).await).await);
    assert_eq!(texts(&doc, ".flash-success"), ["Photo added."]);

    let listing = html(&body(app.get("/products?q=dune").await).await);
    let product_url = attr(&listing, ".product-card a", "href").expect("product link");
    let page = html(&body(app.get(&product_url).await).await);
    let sel = scraper::Selector::parse("img.product-photo").expect("selector");
    let srcs: Vec<String> = page
        .select(&sel)
        .filter_map(|i| i.value().attr("src").map(str::to_string))
        .collect();
    assert_eq!(srcs.len(), 2, "{srcs:?}");
    assert!(srcs.iter().all(|s| s.ends_with("/display")), "{srcs:?}");
    let shown = app.get(&srcs[1]).await;
    assert_eq!(shown.status(), StatusCode::OK);
    let shown = image::load_from_memory(&shown.bytes().await.expect("body")).expect("an image");
    assert_eq!((shown.width(), shown.height()), (1200, 600));
    // The public URL of the original sends its largest sized copy; the original is the admin's.
    let largest = app.get(srcs[1].trim_end_matches("/display")).await;
    let largest = image::load_from_memory(&largest.bytes().await.expect("body")).expect("image");
    assert_eq!((largest.width(), largest.height()), (2000, 1000));
    let original = app
        .get_admin(&format!("/admin{}", srcs[1].trim_end_matches("/display")))
        .await;
    let original = image::load_from_memory(&original.bytes().await.expect("body")).expect("image");
    assert_eq!((original.width(), original.height()), (2400, 1200));
}

// ---------------------------------------------------------------------------------------------
// 5. Integers from forms and query strings.

#[tokio::test]
async fn a_stock_change_of_i64_min_or_out_of_range_is_a_form_error_and_changes_nothing() {
    let app = spawn_app().await;
    let (edit, _) = dune_upload_form(&app).await;
    let doc = html(&body(app.get_admin(&edit).await).await);
    let token = csrf_token(&doc).expect("token");
    let stock_url = edit.replace("/edit", "/stock");
    let qty_before = app
        .db
        .collection::<bson::Document>("products")
        .find_one(doc! { "search_title": { "$regex": "^dune" } })
        .await
        .expect("query")
        .expect("dune")
        .get_i64("qty")
        .expect("qty");
    for delta in [
        "-9223372036854775808",
        "9223372036854775807",
        "99999999999999999999",
        "+1000001",
        "-1000001",
    ] {
        let response = app
            .post_admin_form(
                &stock_url,
                &[("csrf_token", token.as_str()), ("delta", delta)],
            )
            .await;
        assert_eq!(response.status(), StatusCode::SEE_OTHER, "{delta}");
        let doc = html(&body(app.get_admin(&edit).await).await);
        assert!(
            texts(&doc, ".flash-error")
                .iter()
                .any(|e| e.contains("Enter a whole number of units")),
            "{delta}"
        );
    }
    let qty_after = app
        .db
        .collection::<bson::Document>("products")
        .find_one(doc! { "search_title": { "$regex": "^dune" } })
        .await
        .expect("query")
        .expect("dune")
        .get_i64("qty")
        .expect("qty");
    assert_eq!(qty_before, qty_after);
    assert!(
        !bazaar::stock::adjust_available(&app.db, bson::oid::ObjectId::new(), i64::MIN)
            .await
            .expect("no panic, no write")
    );
}

#[tokio::test]
async fn huge_or_negative_numbers_in_listing_queries_show_a_normal_page() {
    let app = spawn_app().await;
    for query in [
        "page=18446744073709551616",
        "page=-1",
        "page=99999999999",
        "min_price=92233720368547758.08",
        "max_price=-5",
        "min_discount=2147483648",
        "min_discount=-2147483649",
    ] {
        let response = app.get(&format!("/products?{query}")).await;
        assert_eq!(response.status(), StatusCode::OK, "{query}");
    }
    let shopper = Shopper::new(&app).await;
    product_with_stock(&app.db, "num", 5).await;
    for qty in [
        "9223372036854775807",
        "-9223372036854775808",
        "1e3",
        "99999999999999999999",
    ] {
        let flashes = shopper.add("num", qty).await;
        assert!(
            flashes
                .iter()
                .any(|f| f.contains("whole number from 1 to 99")),
            "{qty}: {flashes:?}"
        );
    }
    assert_eq!(product(&app.db, "num").await.qty, 5);
}

// ---------------------------------------------------------------------------------------------
// 6. Email addresses.

#[tokio::test]
async fn checkout_refuses_an_email_that_could_add_mailto_headers_and_admin_links_the_valid_one() {
    let app = spawn_app().await;
    product_with_stock(&app.db, "mail", 5).await;
    let shopper = Shopper::new(&app).await;
    shopper.add("mail", "1").await;
    for email in [
        "a@example.com?bcc=x@evil.example&subject=hi",
        "a@example.com?subject=hi",
        "a?cc=b@example.com",
        "a%0d%0abcc@example.com",
    ] {
        let mut form = checkout_form("4242424242424242");
        form[0].1 = email.to_string();
        let fields: Vec<(&str, &str)> = form.iter().map(|(k, v)| (*k, v.as_str())).collect();
        let response = shopper.post("/checkout", &fields).await;
        assert!(
            response.status().is_client_error(),
            "{email}: {}",
            response.status()
        );
        let text = body(response).await;
        assert!(
            text.contains("Enter an email address like name@example.com."),
            "{email}"
        );
    }
    assert_eq!(app.gateway.charge_count().await, 0);
    let placed = shopper.checkout("4242424242424242").await;
    let number = location_of(&placed)
        .trim_start_matches("/orders/")
        .to_string();
    let doc = html(&body(app.get_admin(&format!("/admin/orders/{number}")).await).await);
    assert_eq!(
        attr(&doc, "a[href^='mailto:']", "href").as_deref(),
        Some("mailto:ada@example.com")
    );
}

// ---------------------------------------------------------------------------------------------
// 7. Slow request bodies.

/// Open a connection and send a form POST's headers promising `length` bytes of body.
async fn slow_post(port: u16, length: usize) -> tokio::net::TcpStream {
    let mut stream = tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .expect("connects");
    let head = format!(
        "POST /cart/items HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: \
         application/x-www-form-urlencoded\r\nContent-Length: {length}\r\n\r\n"
    );
    stream.write_all(head.as_bytes()).await.expect("head sent");
    stream
}

/// Trickle a byte every 200 ms until the server answers and closes; the answer's status line
/// and how long it took.
async fn trickle_until_closed(mut stream: tokio::net::TcpStream) -> (String, Duration) {
    let started = std::time::Instant::now();
    let mut answer = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        tokio::select! {
            read = stream.read(&mut buf) => match read {
                Ok(0) | Err(_) => break,
                Ok(n) => answer.extend_from_slice(&buf[..n]),
            },
            _ = tokio::time::sleep(Duration::from_millis(200)) => {
                // The server may have closed its side: a failed write ends the trickle too.
                if stream.write_all(b"a").await.is_err() {
                    break;
                }
            }
        }
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "the server kept a trickling body open for 20 s"
        );
    }
    let text = String::from_utf8_lossy(&answer);
    (
        text.lines().next().unwrap_or_default().to_string(),
        started.elapsed(),
    )
}

#[tokio::test]
async fn a_trickling_request_body_is_cut_off_after_the_body_timeout_and_its_connection_closed() {
    let app = spawn_app_with(&[("BAZAAR_SERVER__BODY_TIMEOUT_SECS", "1")]).await;
    let streams = futures::future::join_all((0..20).map(|_| slow_post(app.port, 10_000))).await;
    let answers = futures::future::join_all(streams.into_iter().map(trickle_until_closed)).await;
    for (status, took) in answers {
        assert!(status.starts_with("HTTP/1.1 4"), "answered {status:?}");
        assert!(took < Duration::from_secs(10), "closed after {took:?}");
    }
    // A normal visitor is still served.
    assert_eq!(app.get("/healthz").await.status(), StatusCode::OK);
}

#[tokio::test]
async fn bodies_beyond_the_concurrent_limit_are_refused_at_once() {
    let app = spawn_app_with(&[
        ("BAZAAR_SERVER__MAX_CONCURRENT_BODIES", "2"),
        ("BAZAAR_SERVER__BODY_TIMEOUT_SECS", "30"),
    ])
    .await;
    let _first = slow_post(app.port, 1000).await;
    let _second = slow_post(app.port, 1000).await;
    // Long enough for the server to have read both heads and started both bodies.
    tokio::time::sleep(Duration::from_millis(1000)).await;
    let shopper = Shopper::new(&app).await;
    let response = shopper
        .post("/cart/items", &[("sku", "x"), ("qty", "1")])
        .await;
    assert_eq!(response.status(), StatusCode::SERVICE_UNAVAILABLE);
    assert!(response.headers().contains_key("retry-after"));
    // Pages without a body are unaffected.
    assert_eq!(app.get("/products").await.status(), StatusCode::OK);
}

// ---------------------------------------------------------------------------------------------
// 8. Flash messages and the session cookie.

#[tokio::test]
async fn many_adds_of_long_titled_products_keep_the_session_cookie_small_and_never_fail() {
    use bazaar::catalog::products::{self, AlbumDetails, Details, NewProduct, Shipping};
    let app = spawn_app().await;
    let title = format!("A very long title {}", "and so on ".repeat(70));
    for n in 0..8 {
        products::create(
            &app.db,
            NewProduct {
                sku: bazaar::domain::Sku::parse(&format!("long-{n}")).expect("a valid SKU"),
                slug: bazaar::domain::Slug::parse(&format!("long-{n}")).expect("a valid slug"),
                title: format!("{title}{n}"),
                description: "Long.".into(),
                list_price: bazaar::domain::Money::from_cents(1000),
                retail_price: bazaar::domain::Money::from_cents(900),
                categories: Vec::new(),
                details: Details::Album(AlbumDetails {
                    title: title.clone(),
                    artist: "X".into(),
                    genre: vec!["Jazz".into()],
                    tracks: vec!["One".into()],
                    issue_date: bson::DateTime::from_millis(0),
                    label: "L".into(),
                }),
                qty: 10,
                featured: false,
                shipping: Shipping::default(),
            },
        )
        .await
        .expect("created");
    }
    let shopper = Shopper::new(&app).await;
    let url: reqwest::Url = app.address.parse().expect("url");
    for n in 0..8 {
        let sku = format!("long-{n}");
        let response = shopper
            .post("/cart/items", &[("sku", sku.as_str()), ("qty", "1")])
            .await;
        assert_eq!(response.status(), StatusCode::SEE_OTHER, "add {n}");
        use reqwest::cookie::CookieStore;
        let cookie = shopper
            .jar
            .cookies(&url)
            .map(|v| v.len())
            .unwrap_or_default();
        assert!(cookie < 4000, "add {n}: the cookie is {cookie} bytes");
    }
    let lines = shopper.cart_lines().await;
    assert_eq!(lines.len(), 8, "every add was kept: {lines:?}");
}

// ---------------------------------------------------------------------------------------------
// 9. Session age, CSRF rotation, HSTS.

#[tokio::test]
async fn a_session_older_than_the_maximum_age_starts_afresh_with_a_new_csrf_token() {
    let app = spawn_app_with(&[("BAZAAR_SESSION__MAX_AGE_SECS", "2")]).await;
    product_with_stock(&app.db, "aged", 5).await;
    let mut shopper = Shopper::new(&app).await;
    shopper.add("aged", "1").await;
    assert_eq!(shopper.cart_lines().await.len(), 1);
    let old_token = shopper.csrf.clone();
    // Sessions age by the database's clock: past the maximum age without waiting for it.
    app.clock.step_forward(Duration::from_secs(3));
    // The old token no longer works: the session it belonged to is gone.
    let response = shopper
        .post("/cart/items", &[("sku", "aged"), ("qty", "1")])
        .await;
    assert_eq!(response.status(), StatusCode::FORBIDDEN);
    assert!(
        shopper.cart_lines().await.is_empty(),
        "the cart link went with the session"
    );
    shopper.refresh_token().await;
    assert_ne!(shopper.csrf, old_token, "a new token");
    let flashes = shopper.add("aged", "1").await;
    assert!(
        flashes.iter().any(|f| f.starts_with("Added")),
        "{flashes:?}"
    );
}

#[tokio::test]
async fn hsts_is_sent_only_when_the_site_is_served_over_tls() {
    let plain = spawn_app().await;
    let response = plain.get("/").await;
    assert!(!response.headers().contains_key("strict-transport-security"));
    let tls = spawn_app_with(&[("BAZAAR_SERVER__TLS", "true")]).await;
    for path in ["/", "/no-such-page", "/healthz"] {
        let response = tls.get(path).await;
        assert_eq!(
            response
                .headers()
                .get("strict-transport-security")
                .and_then(|v| v.to_str().ok()),
            Some("max-age=31536000"),
            "{path}"
        );
    }
}

// ---------------------------------------------------------------------------------------------
// 10. Second sweep: simultaneous guesses, caching of personal pages, off-site links.

#[tokio::test]
async fn of_128_simultaneous_wrong_passwords_from_one_address_only_a_handful_reach_the_hash() {
    let (address, credentials) = spawn_counted(&[
        ("BAZAAR_ADMIN__FAILURES_BEFORE_DELAY", "5"),
        ("BAZAAR_SERVER__WORKERS", "2"),
    ])
    .await;
    let client = reqwest::Client::builder()
        .timeout(Duration::from_secs(60))
        .build()
        .expect("client");
    let guesses = (0..128).map(|i| {
        let (client, url) = (client.clone(), format!("{address}/admin"));
        tokio::spawn(async move {
            client
                .get(url)
                .basic_auth(ADMIN_USER, Some(format!("guess-{i}")))
                .send()
                .await
                .expect("every guess is answered")
                .status()
        })
    });
    let statuses = futures::future::join_all(guesses).await;
    for status in statuses {
        let status = status.expect("request task");
        assert!(
            status == StatusCode::UNAUTHORIZED || status == StatusCode::TOO_MANY_REQUESTS,
            "{status}"
        );
    }
    let stats = credentials.stats();
    // Five failures start the delay; at most two checks of the address run at once, so at most
    // 4 + 2 start before it, and a delay running out during the burst lets one more in each
    // time (1 s, 2 s, ...). Without the in-flight count, 73 to 128 reached argon2.
    assert!(
        stats.runs <= 5 + bazaar::web::basic_auth::MAX_IN_FLIGHT_PER_CLIENT as u64 + 3,
        "argon2 ran {} times for 128 simultaneous guesses: {stats:?}",
        stats.runs
    );
    assert!(stats.runs >= 1, "some guesses were checked: {stats:?}");
}

fn cache_control(response: &reqwest::Response) -> String {
    response
        .headers()
        .get("cache-control")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("(none)")
        .to_string()
}

#[tokio::test]
async fn personal_pages_and_pages_with_a_session_are_never_stored_and_public_pages_are_briefly_cacheable(
) {
    let app = spawn_app().await;
    product_with_stock(&app.db, "cached", 5).await;
    let mut shopper = Shopper::new(&app).await;
    shopper.add("cached", "1").await;
    let placed = shopper.checkout("4242424242424242").await;
    let order_url = location_of(&placed);
    assert!(order_url.starts_with("/orders/"), "{order_url}");

    // The shopper's own pages, with their session.
    for path in [
        "/cart",
        "/checkout",
        order_url.as_str(),
        "/orders/lookup",
        "/products",
    ] {
        let response = shopper.get(path).await;
        assert_eq!(
            cache_control(&response),
            "no-store",
            "{path} ({})",
            response.status()
        );
    }
    // The admin's pages.
    for path in [
        "/admin",
        "/admin/orders",
        "/admin/content",
        "/admin/no-such-page",
    ] {
        let response = app.get_admin(path).await;
        assert_eq!(cache_control(&response), "no-store", "{path}");
    }
    // A form's POST answer (a redirect setting the session).
    shopper.refresh_token().await;
    let response = shopper
        .post("/cart/items", &[("sku", "cached"), ("qty", "1")])
        .await;
    assert_eq!(cache_control(&response), "no-store", "POST /cart/items");

    // A first visit: a page with a form carries a new session's CSRF token and sets its cookie.
    let (visitor, _) = new_client();
    let product = visitor
        .get(app.url("/products/test-cached"))
        .send()
        .await
        .expect("sent");
    assert!(product.headers().contains_key("set-cookie"));
    assert_eq!(cache_control(&product), "no-store");
    let page = body(product).await;
    assert!(page.contains("csrf_token"), "the product page has forms");

    // A page without forms, for a visitor without a session: the same for everyone.
    let (visitor, _) = new_client();
    let response = visitor
        .get(app.url("/categories"))
        .send()
        .await
        .expect("sent");
    assert_eq!(response.status(), StatusCode::OK);
    assert!(!response.headers().contains_key("set-cookie"));
    assert_eq!(cache_control(&response), "public, max-age=60");
    assert!(response
        .headers()
        .get_all("vary")
        .iter()
        .any(|v| v.to_str().is_ok_and(|v| v.contains("Cookie"))));
    assert!(!body(response).await.contains("csrf_token"));
    // The same page for a visitor with a session is theirs alone.
    let response = shopper.get("/categories").await;
    assert_eq!(cache_control(&response), "no-store");
    // Error pages are not cached either; files keep their own long caching.
    let (visitor, _) = new_client();
    let missing = visitor
        .get(app.url("/no-such-page"))
        .send()
        .await
        .expect("sent");
    assert_eq!(missing.status(), StatusCode::NOT_FOUND);
    assert_eq!(cache_control(&missing), "no-store");
    let css = visitor
        .get(app.url("/static/css/site.css"))
        .send()
        .await
        .expect("sent");
    assert!(
        cache_control(&css).starts_with("public"),
        "{}",
        cache_control(&css)
    );
}

#[tokio::test]
async fn the_analytics_page_links_only_paths_on_this_site() {
    let app = spawn_app().await;
    for path in [
        "/\\evil.example",
        "//evil.example",
        "/\\/evil.example",
        "/%09/evil.example",
    ] {
        let query = form_urlencoded::Serializer::new(String::new())
            .append_pair("path", &percent_decoded(path))
            .finish();
        for report in ["/admin/analytics", "/admin/analytics/month"] {
            let url = format!("{report}?{query}");
            let response = app.get_admin(&url).await;
            assert_eq!(response.status(), StatusCode::OK, "{url}");
            let doc = html(&body(response).await);
            let sel = scraper::Selector::parse("a[href]").expect("selector");
            for link in doc.select(&sel) {
                let href = link.value().attr("href").unwrap_or_default();
                assert!(
                    !href.contains("evil.example") || href.starts_with("/admin/"),
                    "{url}: a link off the site: {href:?}"
                );
            }
        }
    }
    // A real page is still linked.
    let doc = html(&body(app.get_admin("/admin/analytics?path=/products").await).await);
    let sel = scraper::Selector::parse("a").expect("selector");
    let open: Vec<String> = doc
        .select(&sel)
        .filter(|a| a.text().collect::<String>() == "Open the page")
        .filter_map(|a| a.value().attr("href").map(str::to_string))
        .collect();
    assert_eq!(open, ["/products"]);
}

/// `%09` as the tab it stands for (the query parameter carries the raw character).
fn percent_decoded(path: &str) -> String {
    path.replace("%09", "\t")
}
