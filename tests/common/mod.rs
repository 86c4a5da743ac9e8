//! Test harness: the whole app on a random port with a fresh in-memory docstore per test, an
//! HTTP client that keeps cookies, and helpers to read pages with CSS selectors.

pub mod builders;
pub mod process;
pub mod shop;
pub mod smtp;

use std::path::PathBuf;
use std::sync::{Arc, OnceLock};

use bazaar::config::Settings;
use bazaar::startup::Application;
use bson::{doc, Bson, Document};
use reqwest::cookie::{CookieStore, Jar};
use reqwest::header::HeaderMap;
use reqwest::redirect::Policy;
use scraper::{Html, Selector};

pub const ADMIN_USER: &str = "admin";
pub const ADMIN_PASSWORD: &str = "correct horse battery staple";

/// The argon2 hash of [`ADMIN_PASSWORD`], computed once per test binary.
pub fn admin_password_hash() -> &'static str {
    static HASH: OnceLock<String> = OnceLock::new();
    HASH.get_or_init(|| {
        bazaar::web::basic_auth::hash_password(ADMIN_PASSWORD).expect("hashing works")
    })
}

pub fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Settings as a deployment would load them: the repository's config.toml overlaid with
/// environment-style overrides. The base overrides give every test its own in-memory store,
/// a random port and a known admin password; `env` comes last and wins. The demo data is
/// seeded unless `env` holds [`NO_DEMO`].
pub fn test_settings(env: &[(&str, &str)]) -> Settings {
    let mut vars: Vec<(String, String)> = vec![
        ("BAZAAR_DATABASE__URI".into(), "memory".into()),
        ("BAZAAR_SERVER__HOST".into(), "127.0.0.1".into()),
        ("BAZAAR_SERVER__PORT".into(), "0".into()),
        ("BAZAAR_SERVER__WORKERS".into(), "1".into()),
        (
            "BAZAAR_ADMIN__PASSWORD_HASH".into(),
            admin_password_hash().into(),
        ),
        ("BAZAAR_LOG__LEVEL".into(), "warn".into()),
        // Tests run cart expiry and cleanup themselves, at the moment they choose.
        ("BAZAAR_CART__JOBS_EVERY_SECS".into(), "0".into()),
        // Emails wait in the outbox unless a test starts the sender (tests/email.rs), and
        // never land in the repository's ./mail.
        ("BAZAAR_EMAIL__SEND_EVERY_MS".into(), "0".into()),
        (
            "BAZAAR_EMAIL__FOLDER".into(),
            std::env::temp_dir()
                .join("bazaar-test-mail")
                .display()
                .to_string(),
        ),
    ];
    vars.extend(env.iter().map(|(k, v)| (k.to_string(), v.to_string())));
    Settings::load(Some(&repo_root().join("config.toml")), vars).expect("test settings load")
}

pub struct TestApp {
    /// `http://127.0.0.1:<port>` without a trailing slash.
    pub address: String,
    pub port: u16,
    /// Keeps cookies (in `jar`), does not follow redirects (tests look at them).
    pub client: reqwest::Client,
    pub jar: Arc<Jar>,
    /// The app's database, for checking what pages did.
    pub db: bazaar::db::Db,
    /// The clock the app reads (through `db`): tests step it instead of sleeping.
    pub clock: Arc<bazaar::clock::SteppedClock>,
    /// The built-in test payment gateway (counts charges).
    pub gateway: Arc<bazaar::checkout::gateway::TestGateway>,
    /// Where the embedded store listens (it requires the app's generated credentials).
    pub store_address: Option<std::net::SocketAddr>,
    /// The page-view counter (`None` when `analytics.enabled` is off); tests flush it.
    pub page_views: Option<bazaar::analytics::PageViewCounter>,
    /// The traffic log (`None` when `analytics.events` is off); tests flush it.
    pub events: Option<bazaar::analytics::events::EventLog>,
    handle: actix_web::dev::ServerHandle,
    task: tokio::task::JoinHandle<anyhow::Result<()>>,
}

/// The setting that starts the app on an empty database (only the default site settings):
/// `config.toml` seeds the demo data into a new database, as a first start should.
pub const NO_DEMO: (&str, &str) = ("BAZAAR_SEED__DEMO", "false");

/// The app on an empty database; a test builds the data it needs (`common::builders`).
pub async fn spawn_app() -> TestApp {
    spawn_app_with(&[]).await
}

/// [`spawn_app`] with settings overridden by `env` (environment-style, as in [`test_settings`]).
pub async fn spawn_app_with(env: &[(&str, &str)]) -> TestApp {
    let mut vars = vec![NO_DEMO];
    vars.extend_from_slice(env);
    spawn_with_settings(test_settings(&vars)).await
}

/// The app with the demo catalog, pages, posts and comments seeded, for tests about that data.
pub async fn spawn_app_with_demo() -> TestApp {
    spawn_app_with_demo_and(&[]).await
}

/// [`spawn_app_with_demo`] with settings overridden by `env`.
pub async fn spawn_app_with_demo_and(env: &[(&str, &str)]) -> TestApp {
    spawn_with_settings(test_settings(env)).await
}

pub async fn spawn_with_settings(settings: Settings) -> TestApp {
    if std::env::var_os("TEST_LOG").is_some() {
        bazaar::telemetry::init("info", bazaar::telemetry::LogFormat::Text);
    }
    let clock = Arc::new(bazaar::clock::SteppedClock::default());
    let mut database = bazaar::startup::OpenDatabase::open(&settings)
        .await
        .expect("the store opens");
    database.db = database.db.with_clock(clock.clone());
    let app = Application::build_with_database(settings, database)
        .await
        .map_err(|(e, _)| e)
        .expect("the app starts");
    let port = app.port();
    let handle = app.server_handle();
    let db = app.db().clone();
    let store_address = app.embedded_store_address();
    let gateway = app.test_gateway().expect("tests run with the test gateway");
    let page_views = app.page_views();
    let events = app.event_log();
    let task = tokio::spawn(app.run_until_stopped());
    let (client, jar) = new_client();
    TestApp {
        address: format!("http://127.0.0.1:{port}"),
        port,
        client,
        jar,
        db,
        clock,
        gateway,
        store_address,
        page_views,
        events,
        handle,
        task,
    }
}

/// A fresh visitor: a client with its own, empty cookie jar.
pub fn new_client() -> (reqwest::Client, Arc<Jar>) {
    let jar = Arc::new(Jar::default());
    let client = reqwest::Client::builder()
        .cookie_provider(Arc::clone(&jar))
        .redirect(Policy::none())
        .build()
        .expect("client builds");
    (client, jar)
}

impl TestApp {
    pub fn url(&self, path: &str) -> String {
        format!("{}{}", self.address, path)
    }

    pub async fn get(&self, path: &str) -> reqwest::Response {
        self.client
            .get(self.url(path))
            .send()
            .await
            .expect("request sent")
    }

    pub async fn get_admin(&self, path: &str) -> reqwest::Response {
        self.client
            .get(self.url(path))
            .basic_auth(ADMIN_USER, Some(ADMIN_PASSWORD))
            .send()
            .await
            .expect("request sent")
    }

    pub async fn post_form(&self, path: &str, fields: &[(&str, &str)]) -> reqwest::Response {
        self.client
            .post(self.url(path))
            .form(fields)
            .send()
            .await
            .expect("request sent")
    }

    pub async fn post_admin_form(&self, path: &str, fields: &[(&str, &str)]) -> reqwest::Response {
        self.client
            .post(self.url(path))
            .basic_auth(ADMIN_USER, Some(ADMIN_PASSWORD))
            .form(fields)
            .send()
            .await
            .expect("request sent")
    }

    /// The `Cookie` header the client would send to this app (e.g. `bazaar_session=…`).
    pub fn cookie_header(&self) -> Option<String> {
        let url = self.url("/").parse().expect("valid url");
        self.jar
            .cookies(&url)
            .and_then(|v| v.to_str().ok().map(str::to_string))
    }

    /// POST a multipart body (parts separated by `boundary`) with the admin's credentials.
    pub async fn post_admin_multipart(
        &self,
        path: &str,
        boundary: &str,
        body: impl Into<reqwest::Body>,
    ) -> reqwest::Response {
        self.client
            .post(self.url(path))
            .basic_auth(ADMIN_USER, Some(ADMIN_PASSWORD))
            .header(
                "content-type",
                format!("multipart/form-data; boundary={boundary}"),
            )
            .body(body)
            .send()
            .await
            .expect("sent")
    }

    /// Stop gracefully and wait for the database to close.
    pub async fn stop(self) {
        self.handle.stop(true).await;
        self.task
            .await
            .expect("server task joins")
            .expect("server ran cleanly");
    }
}

/// A fresh in-memory docstore and a handle on database `name` in it, for tests of the domain
/// code without the web app. Keep the server handle alive as long as the handle is used.
pub async fn memory_db(name: &str) -> (docstore::ServerHandle, bazaar::db::Db) {
    let server = docstore::Server::start(docstore::Config {
        storage: docstore::StorageMode::InMemory,
        port: 0,
        ..Default::default()
    })
    .await
    .expect("docstore starts");
    let db = bazaar::db::Db::connect(
        &server.uri(),
        name,
        std::time::Duration::from_secs(5),
        bazaar::db::Store::EmbeddedMemory,
    )
    .await
    .expect("connects");
    (server, db)
}

/// A public page, which must answer 200, parsed.
pub async fn page(app: &TestApp, path: &str) -> Html {
    let response = app.get(path).await;
    assert_eq!(response.status(), reqwest::StatusCode::OK, "{path}");
    html(&body(response).await)
}

/// An admin page (with the admin's credentials), which must answer 200, parsed.
pub async fn admin_page(app: &TestApp, path: &str) -> Html {
    let response = app.get_admin(path).await;
    assert_eq!(response.status(), reqwest::StatusCode::OK, "{path}");
    html(&body(response).await)
}

/// The titles of a product grid (listings, search, the home page's shelves).
pub fn titles(doc: &Html) -> Vec<String> {
    texts(doc, ".product-grid .product-title")
}

/// Where a redirect points (empty without a `Location` header).
pub fn location(response: &reqwest::Response) -> String {
    response
        .headers()
        .get("location")
        .and_then(|l| l.to_str().ok())
        .unwrap_or_default()
        .to_string()
}

/// A free TCP port on the loopback address (for a `bazaar` process the test starts).
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}

/// A multipart body with one PNG file in field `field`, as a browser sends a photo upload.
pub fn png_upload_body(boundary: &str, field: &str, filename: &str, bytes: &[u8]) -> Vec<u8> {
    let mut body = format!(
        "--{boundary}\r\nContent-Disposition: form-data; name=\"{field}\"; filename=\"{filename}\"\r\nContent-Type: image/png\r\n\r\n"
    )
    .into_bytes();
    body.extend_from_slice(bytes);
    body.extend_from_slice(format!("\r\n--{boundary}--\r\n").as_bytes());
    body
}

pub async fn body(response: reqwest::Response) -> String {
    response.text().await.expect("body is text")
}

pub fn html(text: &str) -> Html {
    Html::parse_document(text)
}

/// Trimmed text of every element matching `selector`.
pub fn texts(doc: &Html, selector: &str) -> Vec<String> {
    let selector = Selector::parse(selector).expect("valid selector");
    doc.select(&selector)
        .map(|el| el.text().collect::<String>().trim().to_string())
        .collect()
}

pub fn count(doc: &Html, selector: &str) -> usize {
    let selector = Selector::parse(selector).expect("valid selector");
    doc.select(&selector).count()
}

pub fn attr(doc: &Html, selector: &str, name: &str) -> Option<String> {
    let selector = Selector::parse(selector).expect("valid selector");
    doc.select(&selector)
        .next()
        .and_then(|el| el.value().attr(name))
        .map(str::to_string)
}

/// The CSRF token of the first form on the page.
pub fn csrf_token(doc: &Html) -> Option<String> {
    attr(doc, "form input[name=csrf_token]", "value")
}

/// The page's main heading.
pub fn heading(doc: &Html) -> String {
    texts(doc, "main h1").into_iter().next().unwrap_or_default()
}

/// Asserts the security headers every response must carry.
pub fn assert_security_headers(headers: &HeaderMap, what: &str) {
    let get = |name: &str| {
        headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_else(|| panic!("{what}: missing {name}"))
            .to_string()
    };
    let csp = get("content-security-policy");
    for directive in [
        "default-src 'self'",
        "script-src 'self'",
        "style-src 'self'",
        "frame-ancestors 'none'",
    ] {
        assert!(
            csp.contains(directive),
            "{what}: CSP lacks {directive}: {csp}"
        );
    }
    assert!(
        !csp.contains("unsafe-inline"),
        "{what}: CSP allows inline code"
    );
    assert_eq!(get("x-content-type-options"), "nosniff", "{what}");
    assert_eq!(
        get("referrer-policy"),
        "strict-origin-when-cross-origin",
        "{what}"
    );
    assert_eq!(get("x-frame-options"), "DENY", "{what}");
}

/// The first plan stage named `name` anywhere in an `explain` answer.
pub fn find_stage(v: &Bson, name: &str) -> Option<Document> {
    match v {
        Bson::Document(d) => {
            if d.get_str("stage") == Ok(name) {
                return Some(d.clone());
            }
            d.values().find_map(|x| find_stage(x, name))
        }
        Bson::Array(items) => items.iter().find_map(|x| find_stage(x, name)),
        _ => None,
    }
}

pub async fn assert_uses_index(
    db: &bazaar::db::Db,
    what: &str,
    collection: &str,
    filter: Document,
    sort: Document,
) {
    assert_projected_query_uses_index(db, what, collection, filter, sort, doc! {}).await;
}

/// Like [`assert_uses_index`] for a query that also projects.
pub async fn assert_projected_query_uses_index(
    db: &bazaar::db::Db,
    what: &str,
    collection: &str,
    filter: Document,
    sort: Document,
    projection: Document,
) {
    let mut find = doc! { "find": collection, "filter": filter, "sort": sort, "limit": 12 };
    if !projection.is_empty() {
        find.insert("projection", projection);
    }
    let explain = db
        .database()
        .run_command(doc! { "explain": find, "verbosity": "queryPlanner" })
        .await
        .expect("explain runs");
    let plan = Bson::Document(explain.clone());
    assert!(
        find_stage(&plan, "IXSCAN").is_some() && find_stage(&plan, "COLLSCAN").is_none(),
        "{what} does not use an index: {explain}"
    );
}

/// Every field of the product form in `doc` (the first `form.product-form`) as a browser would
/// submit it: inputs, textareas, selects' chosen options, and ticked boxes (categories,
/// featured).
pub fn product_form(doc: &scraper::Html) -> Vec<(String, String)> {
    let sel = scraper::Selector::parse(
        "form.product-form input, form.product-form textarea, form.product-form option[selected]",
    )
    .expect("selector");
    doc.select(&sel)
        .filter_map(|el| {
            let v = el.value();
            match v.name() {
                "textarea" => Some((v.attr("name")?.to_string(), el.text().collect())),
                "option" => {
                    let select = el
                        .ancestors()
                        .filter_map(scraper::ElementRef::wrap)
                        .find(|a| a.value().name() == "select")?;
                    Some((
                        select.value().attr("name")?.to_string(),
                        v.attr("value")?.to_string(),
                    ))
                }
                _ => {
                    if v.attr("type") == Some("checkbox") && v.attr("checked").is_none() {
                        return None;
                    }
                    Some((
                        v.attr("name")?.to_string(),
                        v.attr("value").unwrap_or_default().to_string(),
                    ))
                }
            }
        })
        .collect()
}

/// Files stored in the photos' GridFS bucket.
pub async fn stored_files(app: &TestApp) -> u64 {
    app.db
        .collection::<bson::Document>("assets.files")
        .count_documents(doc! {})
        .await
        .expect("count")
}

/// A content node as an editor would create it (author "Tester"); `published: None` is a draft.
/// The [`builders::NodeBuilder`] with every field given.
pub async fn add_node(
    app: &TestApp,
    section: &str,
    slug: &str,
    title: &str,
    detail: bazaar::content::model::Detail,
    published: Option<bson::DateTime>,
    tags: &[&str],
) -> bazaar::content::model::Node {
    builders::NodeBuilder::new(section, slug, detail)
        .title(title)
        .published(published)
        .tags(tags)
        .build(&app.db)
        .await
}

/// A SKU for a test (panics on one no product could have: a mistake in the test itself).
pub fn sku(text: &str) -> bazaar::domain::Sku {
    bazaar::domain::Sku::parse(text).expect("a test's SKU follows the SKU rules")
}

/// A slug for a test.
pub fn slug(text: &str) -> bazaar::domain::Slug {
    bazaar::domain::Slug::parse(text).expect("a test's slug follows the slug rules")
}

/// A cart id for a test.
pub fn cart_id(text: &str) -> bazaar::domain::CartId {
    bazaar::domain::CartId::parse(text).expect("a test's cart id follows the cart id rules")
}

/// A stock holder for a test, from the string stored for it (`cancelled:BZ-000001` or a cart id).
pub fn holder(stored: &str) -> bazaar::domain::StockHolder {
    bazaar::domain::StockHolder::from_stored(stored.to_string())
}

/// An order number for a test (`BZ-000001`, or anything the order lookup reads).
pub fn order_number(text: &str) -> bazaar::domain::OrderNumber {
    bazaar::domain::OrderNumber::parse(text).expect("a test's order number is one")
}

/// The inputs and textareas of form `selector` in `doc` as a browser would send them (unticked
/// boxes and radios, file pickers and nameless inputs left out).
pub fn form_fields(doc: &Html, selector: &str) -> Vec<(String, String)> {
    let sel = scraper::Selector::parse(&format!("{selector} input, {selector} textarea"))
        .expect("selector");
    doc.select(&sel)
        .filter_map(|el| {
            let v = el.value();
            let name = v.attr("name")?.to_string();
            if v.name() == "textarea" {
                return Some((name, el.text().collect()));
            }
            match v.attr("type") {
                Some("radio") | Some("checkbox") if v.attr("checked").is_none() => None,
                Some("file") => None,
                _ => Some((name, v.attr("value").unwrap_or_default().to_string())),
            }
        })
        .collect()
}

/// A multipart body of text `fields` and one file (`file_field`, `filename`, PNG `bytes`),
/// the file last, as a browser sends a form with a file picker.
pub fn multipart_form_body(
    boundary: &str,
    fields: &[(String, String)],
    file_field: &str,
    filename: &str,
    bytes: &[u8],
) -> Vec<u8> {
    let mut body = Vec::new();
    for (name, value) in fields {
        body.extend_from_slice(
            format!(
                "--{boundary}\r\nContent-Disposition: form-data; name=\"{name}\"\r\n\r\n{value}\r\n"
            )
            .as_bytes(),
        );
    }
    body.extend_from_slice(&png_upload_body(boundary, file_field, filename, bytes));
    body
}

/// Save a photo node's one edit form (as loaded, plus `changes`) with `bytes` as its new photo,
/// pressing `button`.
pub async fn save_photo_form(
    app: &TestApp,
    id: bson::oid::ObjectId,
    changes: &[(&str, &str)],
    filename: &str,
    bytes: &[u8],
    button: &str,
) -> reqwest::Response {
    let doc = admin_page(app, &format!("/admin/content/{}/edit", id.to_hex())).await;
    let action = attr(&doc, "form.edit-form", "action").expect("the edit form");
    let mut fields = form_fields(&doc, "form.edit-form");
    for (name, value) in changes {
        match fields.iter_mut().find(|(k, _)| k == name) {
            Some(field) => field.1 = value.to_string(),
            None => fields.push((name.to_string(), value.to_string())),
        }
    }
    fields.push(("action".into(), button.into()));
    let boundary = "----bazaar-edit-form-boundary";
    let body = multipart_form_body(boundary, &fields, "photo", filename, bytes);
    app.post_admin_multipart(&action, boundary, body).await
}

/// Save Admin → Settings as the admin's browser would, with `changes` made to the form as
/// loaded (panics on a field the form does not have, or a refused save).
pub async fn save_settings(app: &TestApp, changes: &[(&str, &str)]) {
    let page = admin_page(app, "/admin/settings").await;
    let inputs = scraper::Selector::parse("form.settings-form input, form.settings-form textarea")
        .expect("selector");
    let mut form: Vec<(String, String)> = page
        .select(&inputs)
        .filter_map(|el| {
            let name = el.value().attr("name")?.to_string();
            let value = match el.value().name() {
                "textarea" => el.text().collect(),
                _ => el.value().attr("value").unwrap_or_default().to_string(),
            };
            Some((name, value))
        })
        .collect();
    for (name, value) in changes {
        match form.iter_mut().find(|(n, _)| n == name) {
            Some(field) => field.1 = value.to_string(),
            None => panic!("the settings form has no field {name}"),
        }
    }
    let pairs: Vec<(&str, &str)> = form.iter().map(|(n, v)| (n.as_str(), v.as_str())).collect();
    let saved = app.post_admin_form("/admin/settings", &pairs).await;
    assert_eq!(
        saved.status(),
        reqwest::StatusCode::SEE_OTHER,
        "settings saved"
    );
}
