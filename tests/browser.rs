//! Real-browser smoke test: headless Chromium (through chromedriver and WebDriver) loads the
//! home page, shops (the cart and checkout at 1280 and 390 px: no sideways scrolling, the
//! checkout's error summary taking focus, a sold-out product's disabled state), posts a comment and a reply and sees them threaded, loads the admin
//! dashboard, submits the admin form, cancels an order through its confirmation page; and the
//! content editor: every field typed and every button of its one form pressed with nothing
//! lost, two windows merged or sent to the conflict page; signs a customer in at 390 px by the
//! emailed code and link (read from a real SMTP exchange); and saves screenshots under
//! `<target>/screenshots/`. Without Chromium it is skipped with a printed reason, except in CI
//! (`CI` set), where it is required.

use crate::common;
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::common::*;
use fantoccini::{Client, ClientBuilder, Locator};
use hyper_util::client::legacy::connect::HttpConnector;
use serde_json::json;

/// Stops chromedriver (and with it the browser) however the test ends.
struct Driver(Child);

impl Drop for Driver {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn find_program(names: &[&str]) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .flat_map(|dir| names.iter().map(move |name| dir.join(name)))
        .find(|candidate| candidate.is_file())
}

fn screenshot_dir() -> PathBuf {
    // CARGO_TARGET_TMPDIR is <target>/tmp; screenshots go next to it.
    let tmp = Path::new(env!("CARGO_TARGET_TMPDIR"));
    tmp.parent().unwrap_or(tmp).join("screenshots")
}

/// chromedriver and Chromium, or why the test cannot run.
fn browser_programs() -> Result<(PathBuf, PathBuf), String> {
    let driver = find_program(&["chromedriver"])
        .ok_or("chromedriver is not installed (Debian: apt-get install chromium-driver)")?;
    let browser = find_program(&["chromium", "chromium-browser", "google-chrome"])
        .ok_or("Chromium is not installed (Debian: apt-get install chromium)")?;
    Ok((driver, browser))
}

fn start_driver(driver: &Path) -> (Driver, u16) {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port");
    let child = Command::new(driver)
        .arg(format!("--port={port}"))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("chromedriver starts");
    let guard = Driver(child);
    let deadline = Instant::now() + Duration::from_secs(20);
    while TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(
            Instant::now() < deadline,
            "chromedriver did not listen within 20 s"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    (guard, port)
}

async fn connect(driver_port: u16, browser: &Path, profile: &Path) -> Client {
    let capabilities = json!({
        "goog:chromeOptions": {
            "binary": browser,
            "args": [
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--disable-dev-shm-usage",
                "--disable-background-networking",
                "--window-size=1280,900",
                format!("--user-data-dir={}", profile.display()),
            ],
        }
    });
    let serde_json::Value::Object(capabilities) = capabilities else {
        unreachable!("a JSON object literal")
    };
    ClientBuilder::new(HttpConnector::new())
        .capabilities(capabilities)
        .connect(&format!("http://127.0.0.1:{driver_port}"))
        .await
        .expect("WebDriver session starts")
}

async fn text_of(client: &Client, css: &str) -> String {
    client
        .find(Locator::Css(css))
        .await
        .unwrap_or_else(|e| panic!("{css} not found: {e}"))
        .text()
        .await
        .expect("element text")
}

async fn computed(client: &Client, css: &str, property: &str) -> String {
    let value = client
        .execute(
            "return getComputedStyle(document.querySelector(arguments[0]))\
             .getPropertyValue(arguments[1]);",
            vec![json!(css), json!(property)],
        )
        .await
        .expect("script runs");
    value.as_str().unwrap_or_default().to_string()
}

/// Runs `body` as a function in the page and returns its result.
async fn script(client: &Client, body: &str) -> serde_json::Value {
    client.execute(body, vec![]).await.expect("script runs")
}

/// True when the page is no wider than the window.
const NO_SIDEWAYS_SCROLL: &str =
    "return document.documentElement.scrollWidth <= window.innerWidth;";

/// True when the checkout's order summary is to the right of the form (wide screens), false
/// when it is above it (phones).
const SUMMARY_BESIDE_FORM: &str = "const s = document.querySelector('.checkout-summary')\
    .getBoundingClientRect(); const f = document.querySelector('.checkout-form')\
    .getBoundingClientRect(); if (s.left >= f.right) { return true; } \
    if (s.bottom <= f.top) { return false; } return 'overlap';";

/// True when the listing's filter form is laid out and visible.
const FILTERS_SHOWN: &str = "const f = document.querySelector('form.filters'); \
    return f.checkVisibility() && f.getBoundingClientRect().height > 0;";

async fn save_screenshot(client: &Client, name: &str) -> PathBuf {
    let png = client.screenshot().await.expect("screenshot taken");
    assert!(png.starts_with(b"\x89PNG"), "the screenshot is a PNG");
    let dir = screenshot_dir();
    std::fs::create_dir_all(&dir).expect("screenshot directory");
    let path = dir.join(name);
    std::fs::write(&path, png).expect("screenshot written");
    println!("screenshot: {}", path.display());
    path
}

#[tokio::test]
async fn chromium_shows_the_home_page_and_the_admin_dashboard() {
    let (driver, browser) = match browser_programs() {
        Ok(programs) => programs,
        Err(reason) if std::env::var_os("CI").is_some() => {
            panic!("the browser test is required in CI: {reason}")
        }
        Err(reason) => {
            eprintln!("skipping the browser test: {reason}");
            return;
        }
    };
    // The screenshots show the demo shop, and the admin part posts the demo-data form, whose
    // "already in place" answer needs the demo seeded.
    let app = spawn_app_with_demo().await;
    let (_driver, driver_port) = start_driver(&driver);
    let profile = tempfile::tempdir().expect("profile directory");
    let client = connect(driver_port, &browser, profile.path()).await;

    // Home page: rendered in the layout, styled by the hashed stylesheet under the CSP.
    client.goto(&app.url("/")).await.expect("home loads");
    assert_eq!(client.title().await.expect("title"), "Bazaar");
    assert_eq!(text_of(&client, "main h1").await, "Bazaar");
    let nav = text_of(&client, "header nav").await;
    let nav: Vec<&str> = nav.split_whitespace().collect();
    assert_eq!(nav, ["Home", "Shop", "Categories", "Blog", "Gallery"]);
    assert_eq!(
        computed(&client, ".site-header", "background-color").await,
        "rgb(122, 46, 31)",
        "the stylesheet is applied"
    );
    save_screenshot(&client, "home.png").await;

    // Narrow screen: the same page still lays out (header wraps, no horizontal scroll).
    client
        .set_window_size(390, 844)
        .await
        .expect("window resized");
    let overflow = client
        .execute(
            "return document.documentElement.scrollWidth > window.innerWidth;",
            vec![],
        )
        .await
        .expect("script runs");
    assert_eq!(overflow, json!(false), "no horizontal scrolling on a phone");
    save_screenshot(&client, "home-mobile.png").await;
    client
        .set_window_size(1280, 900)
        .await
        .expect("window resized");

    // A 404 inside the layout.
    client
        .goto(&app.url("/no-such-page"))
        .await
        .expect("404 loads");
    assert_eq!(text_of(&client, "main h1").await, "Page not found");
    save_screenshot(&client, "not-found.png").await;

    // Shopping: add a product from its page, see it in the cart with the header count.
    client
        .goto(&app.url("/products/kind-of-blue"))
        .await
        .expect("product page loads");
    client
        .find(Locator::Css("form.add-to-cart button"))
        .await
        .expect("add-to-cart button")
        .click()
        .await
        .expect("clicked");
    client
        .wait()
        .for_element(Locator::Css(".cart-line"))
        .await
        .expect("the cart shows the line");
    assert_eq!(text_of(&client, "main h1").await, "Your cart");
    assert_eq!(text_of(&client, "header .cart-count").await, "1");
    assert!(text_of(&client, ".flash")
        .await
        .starts_with("Added Kind of Blue"));
    save_screenshot(&client, "cart.png").await;
    client
        .find(Locator::Css(".cart-actions a.button"))
        .await
        .expect("checkout link")
        .click()
        .await
        .expect("clicked");
    client
        .wait()
        .for_element(Locator::Css("form.checkout-form"))
        .await
        .expect("the checkout form shows");
    save_screenshot(&client, "checkout.png").await;

    // Checkout with every field empty: the error summary takes focus, sits above the form and
    // links to the fields; the order summary is beside the form on a wide screen.
    client
        .find(Locator::Css("form.checkout-form button[type=submit]"))
        .await
        .expect("pay button")
        .click()
        .await
        .expect("clicked");
    client
        .wait()
        .for_element(Locator::Css(".error-summary"))
        .await
        .expect("the error summary shows");
    assert_eq!(
        script(
            &client,
            "return document.activeElement.classList.contains('error-summary');"
        )
        .await,
        json!(true),
        "focus moves to the error summary"
    );
    assert_eq!(
        script(&client, SUMMARY_BESIDE_FORM).await,
        json!(true),
        "the order summary is beside the form at 1280 px"
    );
    save_screenshot(&client, "checkout-errors.png").await;
    client
        .find(Locator::Css(".error-summary a[href='#field-email']"))
        .await
        .expect("summary link to the email field")
        .click()
        .await
        .expect("clicked");
    assert_eq!(
        script(&client, "return document.activeElement.id;").await,
        json!("field-email"),
        "the summary link takes the shopper to the field"
    );
    assert_eq!(
        computed(&client, "#field-email", "border-top-color").await,
        "rgb(138, 36, 24)",
        "an invalid field has the error border"
    );
    assert_eq!(
        computed(&client, "#field-email", "border-top-width").await,
        "2px"
    );

    // A phone: the order summary comes above the form, nothing scrolls sideways, and the cart
    // lines become cards.
    client
        .set_window_size(390, 844)
        .await
        .expect("window resized");
    assert_eq!(
        script(&client, SUMMARY_BESIDE_FORM).await,
        json!(false),
        "the order summary is above the form at 390 px"
    );
    assert_eq!(script(&client, NO_SIDEWAYS_SCROLL).await, json!(true));
    save_screenshot(&client, "checkout-mobile.png").await;
    client.goto(&app.url("/cart")).await.expect("cart loads");
    assert_eq!(
        script(&client, NO_SIDEWAYS_SCROLL).await,
        json!(true),
        "the cart fits a 390 px screen"
    );
    assert_eq!(computed(&client, ".cart-line", "display").await, "grid");
    save_screenshot(&client, "cart-mobile.png").await;
    // Listing filters fold behind "Filter & sort" on a phone and open on a tap.
    client
        .goto(&app.url("/products"))
        .await
        .expect("shop loads");
    assert_eq!(script(&client, FILTERS_SHOWN).await, json!(false));
    assert_eq!(script(&client, NO_SIDEWAYS_SCROLL).await, json!(true));
    save_screenshot(&client, "products-mobile.png").await;
    client
        .find(Locator::Css("details.filter-disclosure summary"))
        .await
        .expect("the disclosure")
        .click()
        .await
        .expect("clicked");
    assert_eq!(script(&client, FILTERS_SHOWN).await, json!(true));
    save_screenshot(&client, "products-mobile-filters.png").await;
    client
        .set_window_size(1280, 900)
        .await
        .expect("window resized");
    client
        .goto(&app.url("/products"))
        .await
        .expect("shop loads");
    assert_eq!(
        script(&client, FILTERS_SHOWN).await,
        json!(true),
        "the filters are always shown on a wide screen"
    );

    // A sold-out product: the button says so, looks disabled and cannot be pressed; the
    // quantity box is disabled too.
    let sold_out = bazaar::catalog::products::collection(&app.db)
        .find_one(bson::doc! { "qty": 0 })
        .await
        .expect("query")
        .expect("a sold-out demo product");
    client
        .goto(&app.url(&sold_out.url()))
        .await
        .expect("product page loads");
    let button = client
        .find(Locator::Css("form.add-to-cart button"))
        .await
        .expect("the button");
    assert_eq!(button.text().await.expect("text"), "Sold out");
    assert!(!button.is_enabled().await.expect("state"), "disabled");
    assert!(!client
        .find(Locator::Css("#cart-qty"))
        .await
        .expect("quantity box")
        .is_enabled()
        .await
        .expect("state"));
    assert_eq!(
        computed(&client, "form.add-to-cart button", "background-color").await,
        "rgb(228, 221, 209)",
        "the disabled button is greyed"
    );
    assert_eq!(
        text_of(&client, ".product-summary .stock").await,
        "Sold out"
    );
    save_screenshot(&client, "product-sold-out.png").await;

    // Comments: post one on a product page, reply to it, and see the two threaded.
    client
        .goto(&app.url("/products/a-love-supreme"))
        .await
        .expect("product page loads");
    let fill = |css: &'static str, text: &'static str| {
        let client = client.clone();
        async move {
            client
                .find(Locator::Css(css))
                .await
                .unwrap_or_else(|e| panic!("{css} not found: {e}"))
                .send_keys(text)
                .await
                .expect("typed");
        }
    };
    fill("#new-comment-name", "Browser Tester").await;
    fill("#new-comment-text", "Posted from Chromium").await;
    client
        .find(Locator::Css("#new-comment button[type=submit]"))
        .await
        .expect("post button")
        .click()
        .await
        .expect("clicked");
    // Back on the product page, at the new comment, with the "posted" notice.
    client
        .wait()
        .for_element(Locator::Css("li.comment:target"))
        .await
        .expect("the page shows the new comment as its target");
    assert!(text_of(&client, ".flash").await.contains("posted"));
    client
        .find(Locator::Css(
            "li.comment:target details.comment-reply summary",
        ))
        .await
        .expect("reply toggle")
        .click()
        .await
        .expect("reply form opened");
    fill(
        "li.comment:target details.comment-reply input[name=name]",
        "Second Tester",
    )
    .await;
    fill(
        "li.comment:target details.comment-reply textarea",
        "A reply from Chromium",
    )
    .await;
    client
        .find(Locator::Css(
            "li.comment:target details.comment-reply button[type=submit]",
        ))
        .await
        .expect("reply button")
        .click()
        .await
        .expect("clicked");
    client
        .wait()
        .for_element(Locator::Css("li.comment[data-depth='1']:target"))
        .await
        .expect("the reply shows under the comment");
    // The demo comments stay around it: look at the reply (the page's target) and the item
    // holding it.
    assert_eq!(
        text_of(&client, "li.comment:target > article .comment-text").await,
        "A reply from Chromium"
    );
    let nesting = script(
        &client,
        "const reply = document.querySelector('li.comment:target'); \
         const list = reply.parentElement; const parent = list.closest('li.comment'); \
         return [list.tagName + '.' + list.className, parent.dataset.depth, \
         parent.querySelector(':scope > article .comment-text').textContent.trim(), \
         reply.getBoundingClientRect().left > parent.getBoundingClientRect().left];",
    )
    .await;
    assert_eq!(
        nesting,
        json!(["OL.replies", "0", "Posted from Chromium", true]),
        "the reply's item is nested, indented, in its parent's"
    );
    save_screenshot(&client, "comments.png").await;

    // Admin: Basic credentials in the URL, which Chromium turns into an Authorization header.
    let password = ADMIN_PASSWORD.replace(' ', "%20");
    let admin_url = format!(
        "http://{ADMIN_USER}:{password}@127.0.0.1:{}/admin",
        app.port
    );
    client.goto(&admin_url).await.expect("admin loads");
    assert_eq!(text_of(&client, "main h1").await, "Dashboard");
    assert_eq!(
        computed(&client, ".site-header", "background-color").await,
        "rgb(47, 58, 69)",
        "the admin header has its own colour"
    );
    save_screenshot(&client, "admin.png").await;

    // The System page's form posts with its CSRF token and the browser shows the flash message.
    client
        .goto(&format!("{admin_url}/system"))
        .await
        .expect("system page loads");
    client
        .find(Locator::Css("form[action='/admin/seed'] button"))
        .await
        .expect("seed button")
        .click()
        .await
        .expect("clicked");
    let flash = client
        .wait()
        .for_element(Locator::Css(".flash"))
        .await
        .expect("flash message appears")
        .text()
        .await
        .expect("flash text");
    assert_eq!(flash, "Demo data is already in place; nothing was added.");
    save_screenshot(&client, "admin-after-seed.png").await;

    // Moderation and the thread on a phone: no sideways scrolling, every action in reach.
    client
        .set_window_size(390, 844)
        .await
        .expect("window resized");
    client
        .goto(&format!("{admin_url}/comments"))
        .await
        .expect("comments page loads");
    assert_eq!(
        script(&client, NO_SIDEWAYS_SCROLL).await,
        json!(true),
        "the moderation list fits a phone"
    );
    let reach = script(
        &client,
        "const buttons = [...document.querySelectorAll('.comment-actions button')]; \
         return buttons.length > 0 && buttons.every(b => { const r = b.getBoundingClientRect(); \
         return r.left >= 0 && r.right <= window.innerWidth; });",
    )
    .await;
    assert_eq!(reach, json!(true), "every moderation button is on screen");
    save_screenshot(&client, "admin-comments-mobile.png").await;
    client
        .goto(&app.url("/products/a-love-supreme"))
        .await
        .expect("product page loads");
    assert_eq!(
        script(&client, NO_SIDEWAYS_SCROLL).await,
        json!(true),
        "the thread fits a phone"
    );
    client
        .set_window_size(1280, 900)
        .await
        .expect("window resized");

    // Cancelling an order asks first: the order page links to a confirmation page saying what
    // goes back on sale, and only its danger button cancels.
    let shopper = common::shop::Shopper::new(&app).await;
    shopper.add("demo0001", "1").await;
    let placed = shopper.checkout("4242424242424242").await;
    let number = common::location(&placed)
        .trim_start_matches("/orders/")
        .to_string();
    client
        .goto(&format!(
            "http://{ADMIN_USER}:{password}@127.0.0.1:{}/admin/orders/{number}",
            app.port
        ))
        .await
        .expect("order page loads");
    client
        .find(Locator::Css(".order-actions a.danger"))
        .await
        .expect("the cancel link")
        .click()
        .await
        .expect("clicked");
    client
        .wait()
        .for_element(Locator::Css(".restock-line"))
        .await
        .expect("the confirmation page says what goes back on sale");
    save_screenshot(&client, "admin-cancel-confirm.png").await;
    let status = |app: &TestApp| {
        let db = app.db.clone();
        let number = number.clone();
        async move {
            bazaar::checkout::orders::by_number(&db, &order_number(&number))
                .await
                .expect("query")
                .expect("the order")
                .status
        }
    };
    assert_eq!(
        status(&app).await,
        bazaar::checkout::orders::OrderStatus::Paid,
        "the confirmation page alone changes nothing"
    );
    client
        .find(Locator::Css("form button.danger"))
        .await
        .expect("the confirm button")
        .click()
        .await
        .expect("clicked");
    client
        .wait()
        .for_element(Locator::Css(".flash-success"))
        .await
        .expect("the cancel is confirmed");
    assert_eq!(
        status(&app).await,
        bazaar::checkout::orders::OrderStatus::Cancelled
    );

    client.close().await.expect("browser closes");
}

/// Skips (or in CI fails) without a browser; else the app, chromedriver and a session.
async fn browser_session() -> Option<(TestApp, Driver, tempfile::TempDir, Client)> {
    let (driver, browser) = match browser_programs() {
        Ok(programs) => programs,
        Err(reason) if std::env::var_os("CI").is_some() => {
            panic!("the browser test is required in CI: {reason}")
        }
        Err(reason) => {
            eprintln!("skipping the browser test: {reason}");
            return None;
        }
    };
    let app = spawn_app().await;
    let (guard, driver_port) = start_driver(&driver);
    let profile = tempfile::tempdir().expect("profile directory");
    let client = connect(driver_port, &browser, profile.path()).await;
    Some((app, guard, profile, client))
}

/// Replace what a field holds by typing `text` into it.
async fn type_into(client: &Client, css: &str, text: &str) {
    let field = client
        .find(Locator::Css(css))
        .await
        .unwrap_or_else(|e| panic!("{css} not found: {e}"));
    field.clear().await.expect("cleared");
    field.send_keys(text).await.expect("typed");
}

/// Press the edit form's button `action` and wait for the page that answers; returns its flash
/// text (empty without one, as on the conflict page).
async fn press(client: &Client, action: &str) -> String {
    client
        .execute("document.body.dataset.leaving = '1';", vec![])
        .await
        .expect("page marked");
    client
        .find(Locator::Css(&format!(
            "form.edit-form button[name=action][value={action}]"
        )))
        .await
        .unwrap_or_else(|e| panic!("the {action} button: {e}"))
        .click()
        .await
        .expect("clicked");
    wait_for_new_page(client).await;
    match client.find(Locator::Css(".flash")).await {
        Ok(flash) => flash.text().await.expect("flash text"),
        Err(_) => String::new(),
    }
}

/// Waits until the page marked before a click has been replaced.
async fn wait_for_new_page(client: &Client) {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let marked = client
            .execute(
                "return document.readyState === 'complete' && !document.body.dataset.leaving;",
                vec![],
            )
            .await
            .unwrap_or(json!(false));
        if marked == json!(true) {
            return;
        }
        assert!(Instant::now() < deadline, "no new page within 20 s");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

async fn stored_node(app: &TestApp, id: bson::oid::ObjectId) -> bazaar::content::model::Node {
    bazaar::content::store::by_id(&app.db, id)
        .await
        .expect("read")
        .expect("the node")
}

fn stored_text_of(node: &bazaar::content::model::Node) -> String {
    node.metadata
        .detail
        .get_str("text")
        .expect("a text node")
        .to_string()
}

#[tokio::test]
async fn chromium_edits_a_page_through_every_button_of_its_one_form_and_merges_two_windows() {
    let Some((app, _driver, _profile, client)) = browser_session().await else {
        return;
    };
    let about = common::builders::NodeBuilder::page("about")
        .title("About Bazaar")
        .text("Paragraph one.\n\nParagraph two.\n\nParagraph three.")
        .build(&app.db)
        .await;
    let password = ADMIN_PASSWORD.replace(' ', "%20");
    let edit_url = format!(
        "http://{ADMIN_USER}:{password}@127.0.0.1:{}/admin/content/{}/edit",
        app.port,
        about.id.to_hex()
    );
    client.goto(&edit_url).await.expect("editor loads");
    let rows = script(
        &client,
        "return document.querySelector('form.edit-form textarea[name=text]').rows;",
    )
    .await;
    assert!(rows.as_i64().unwrap_or(0) >= 20, "a big text box: {rows}");

    // Every button of the one form, each pressed after typing into every field: all of it is
    // stored with the button's publication change.
    let steps = [
        ("save", "Saved.", "published"),
        (
            "unpublish",
            "Saved and unpublished: it is a draft again.",
            "draft",
        ),
        ("save", "Saved.", "draft"),
        (
            "schedule",
            "Saved and scheduled for 2031-01-02 10:30 UTC.",
            "scheduled",
        ),
        ("publish", "Saved and published.", "published"),
    ];
    for (i, (action, flash, status)) in steps.iter().enumerate() {
        let title = format!("About, take {i}");
        let text = format!("Paragraph one.\n\nParagraph two, take {i}.\n\nParagraph three.");
        type_into(&client, "form.edit-form input[name=title]", &title).await;
        type_into(
            &client,
            "form.edit-form input[name=author]",
            &format!("Author {i}"),
        )
        .await;
        type_into(&client, "form.edit-form textarea[name=text]", &text).await;
        type_into(
            &client,
            "form.edit-form input[name=tags]",
            &format!("tag-{i}, common"),
        )
        .await;
        if *action == "schedule" {
            // A datetime-local input takes keys in the browser's locale order: set its value.
            script(
                &client,
                "document.querySelector('#field-published_at').value = '2031-01-02T10:30';",
            )
            .await;
        }
        assert_eq!(press(&client, action).await, *flash, "{action}");
        let node = stored_node(&app, about.id).await;
        assert_eq!(node.metadata.title, title, "{action}");
        assert_eq!(node.metadata.author.name, format!("Author {i}"), "{action}");
        assert_eq!(stored_text_of(&node), text, "{action}");
        assert_eq!(
            node.metadata.tags,
            [format!("tag-{i}"), "common".into()],
            "{action}"
        );
        assert_eq!(node.status(app.db.now()), *status, "{action}");
    }
    let published = stored_node(&app, about.id).await.metadata.published;
    // Updating the published page again keeps its date.
    type_into(&client, "form.edit-form input[name=title]", "About Bazaar").await;
    assert_eq!(press(&client, "save").await, "Saved.");
    assert_eq!(
        stored_node(&app, about.id).await.metadata.published,
        published
    );

    // Two windows, different paragraphs: the second save merges the first one's change.
    let first_window = client.window().await.expect("window handle");
    let second_window = client
        .new_window(false)
        .await
        .expect("second window")
        .handle;
    client
        .switch_to_window(second_window.clone())
        .await
        .expect("switched");
    client.goto(&edit_url).await.expect("editor loads again");
    type_into(
        &client,
        "form.edit-form textarea[name=text]",
        "Paragraph one, second window.\n\nParagraph two, take 4.\n\nParagraph three.",
    )
    .await;
    assert_eq!(press(&client, "save").await, "Saved.");
    client
        .switch_to_window(first_window.clone())
        .await
        .expect("back");
    type_into(
        &client,
        "form.edit-form textarea[name=text]",
        "Paragraph one.\n\nParagraph two, take 4.\n\nParagraph three, first window.",
    )
    .await;
    let flash = press(&client, "save").await;
    assert!(
        flash.starts_with("Saved. Merged with the changes"),
        "{flash}"
    );
    assert!(
        flash.contains(ADMIN_USER) && flash.contains("Text"),
        "{flash}"
    );
    let merged =
        "Paragraph one, second window.\n\nParagraph two, take 4.\n\nParagraph three, first window.";
    assert_eq!(stored_text_of(&stored_node(&app, about.id).await), merged);
    assert_eq!(
        text_of(&client, "form.edit-form textarea[name=text]").await,
        merged
    );

    // The same paragraph in both: the conflict page shows both versions, loses neither.
    client
        .switch_to_window(second_window.clone())
        .await
        .expect("switched");
    client.goto(&edit_url).await.expect("editor reloads");
    client
        .switch_to_window(first_window.clone())
        .await
        .expect("back");
    client.goto(&edit_url).await.expect("editor reloads");
    client
        .switch_to_window(second_window)
        .await
        .expect("switched");
    type_into(
        &client,
        "form.edit-form textarea[name=text]",
        &merged.replace("take 4", "by the second window"),
    )
    .await;
    assert_eq!(press(&client, "save").await, "Saved.");
    client.switch_to_window(first_window).await.expect("back");
    type_into(
        &client,
        "form.edit-form textarea[name=text]",
        &merged.replace("take 4", "by the first window"),
    )
    .await;
    assert_eq!(press(&client, "save").await, "");
    assert_eq!(
        text_of(&client, "main h1").await,
        "Changed since you opened it"
    );
    assert_eq!(
        text_of(&client, ".conflict-mine pre").await,
        "Paragraph two, by the first window."
    );
    assert_eq!(
        text_of(&client, ".conflict-theirs pre").await,
        "Paragraph two, by the second window."
    );
    assert!(text_of(&client, "p.form-error").await.contains(ADMIN_USER));
    save_screenshot(&client, "content-conflict.png").await;
    // Nothing was overwritten; choosing this window's paragraph keeps the rest of both.
    assert!(stored_text_of(&stored_node(&app, about.id).await).contains("by the second window"));
    client
        .find(Locator::Css("input[name=choice_text][value=mine]"))
        .await
        .expect("the choice")
        .click()
        .await
        .expect("chosen");
    client
        .execute("document.body.dataset.leaving = '1';", vec![])
        .await
        .expect("page marked");
    client
        .find(Locator::Css("form.reapply-form button[type=submit]"))
        .await
        .expect("the save button")
        .click()
        .await
        .expect("clicked");
    wait_for_new_page(&client).await;
    assert_eq!(text_of(&client, ".flash").await, "Saved.");
    assert_eq!(
        stored_text_of(&stored_node(&app, about.id).await),
        merged.replace("take 4", "by the first window")
    );

    client.close().await.expect("browser closes");
}

/// The admin pages a phone must show without sideways scrolling: every list of the admin's
/// navigation and the forms they lead to.
const ADMIN_LISTS: &[&str] = &[
    "/admin",
    "/admin/products",
    "/admin/stock",
    "/admin/orders",
    "/admin/customers",
    "/admin/carts",
    "/admin/categories",
    "/admin/content",
    "/admin/media",
    "/admin/menus",
    "/admin/comments",
    "/admin/analytics",
    "/admin/analytics/month",
    "/admin/settings",
    "/admin/system",
];

/// `path` with each segment that names one record (digits, an ObjectId, an order number)
/// replaced by `*`, so one page of each kind is visited.
fn page_kind(path: &str) -> String {
    let path = path.split(['?', '#']).next().unwrap_or(path);
    path.split('/')
        .map(|segment| {
            if segment.chars().any(|c| c.is_ascii_digit()) {
                "*"
            } else {
                segment
            }
        })
        .collect::<Vec<_>>()
        .join("/")
}

/// What sticks out of a 390 px window on the current page: the page's width when it scrolls
/// sideways, and every visible control (link, button, field) reaching past the right edge.
const OVERFLOW_REPORT: &str = "const width = window.innerWidth; \
    const out = []; \
    if (document.documentElement.scrollWidth > width) { \
      out.push('page ' + document.documentElement.scrollWidth + ' px wide'); } \
    for (const el of document.querySelectorAll('main a, main button, main input, main select, main textarea')) { \
      const r = el.getBoundingClientRect(); \
      if (r.width === 0 || r.height === 0 || el.closest('.visually-hidden, .hp')) continue; \
      if (r.right > width + 1 || r.left < -1) { \
        out.push(el.tagName.toLowerCase() + ' \"' + (el.textContent || el.name || '').trim().slice(0, 30) \
          + '\" at ' + Math.round(r.left) + '..' + Math.round(r.right)); } \
    } \
    return out.slice(0, 5);";

#[tokio::test]
async fn chromium_shows_every_admin_list_and_form_on_a_phone_without_sideways_scrolling() {
    let (driver, browser) = match browser_programs() {
        Ok(programs) => programs,
        Err(reason) if std::env::var_os("CI").is_some() => {
            panic!("the browser test is required in CI: {reason}")
        }
        Err(reason) => {
            eprintln!("skipping the browser test: {reason}");
            return;
        }
    };
    // Every admin list with rows and every kind of page they link to: the demo data fills
    // them all (content of each type, categories, media, comments), and an order and a cart
    // are added here.
    let app = spawn_app_with_demo().await;
    crate::common::shop::product_with_stock(&app.db, "phone1", 5).await;
    let shopper = crate::common::shop::Shopper::new(&app).await;
    shopper.add("phone1", "1").await;
    shopper.checkout("4242424242424242").await;
    let browsing = crate::common::shop::Shopper::new(&app).await;
    browsing.add("phone1", "1").await;
    let (_driver, driver_port) = start_driver(&driver);
    let profile = tempfile::tempdir().expect("profile directory");
    let client = connect(driver_port, &browser, profile.path()).await;
    client
        .set_window_size(390, 844)
        .await
        .expect("window resized");
    let password = ADMIN_PASSWORD.replace(' ', "%20");
    let origin = format!("http://{ADMIN_USER}:{password}@127.0.0.1:{}", app.port);

    // The lists, then one page of every kind they link to (forms, details, confirmations).
    let mut to_visit: Vec<String> = ADMIN_LISTS.iter().map(|p| p.to_string()).collect();
    let mut kinds: Vec<String> = to_visit.iter().map(|p| page_kind(p)).collect();
    let mut problems: Vec<String> = Vec::new();
    let mut visited = 0;
    while let Some(path) = (visited < to_visit.len()).then(|| to_visit[visited].clone()) {
        visited += 1;
        client
            .goto(&format!("{origin}{path}"))
            .await
            .unwrap_or_else(|e| panic!("{path} loads: {e}"));
        let found = script(&client, OVERFLOW_REPORT).await;
        if found.as_array().is_some_and(|a| !a.is_empty()) {
            problems.push(format!("{path}: {found}"));
        }
        if visited <= ADMIN_LISTS.len() {
            let links = script(
                &client,
                "return [...document.querySelectorAll('main a[href^=\"/admin/\"]')]\
                 .map(a => a.getAttribute('href'));",
            )
            .await;
            for link in links.as_array().into_iter().flatten() {
                let Some(link) = link.as_str() else { continue };
                // Files and previews are not admin pages to lay out.
                if link.starts_with("/admin/media/") || link.contains("/preview") {
                    continue;
                }
                let kind = page_kind(link);
                if !kinds.contains(&kind) {
                    kinds.push(kind);
                    to_visit.push(link.to_string());
                }
            }
        }
    }
    let name = |path: &str| {
        format!(
            "admin-mobile{}.png",
            page_kind(path).replace(['/', '*'], "-")
        )
    };
    for path in ["/admin/products", "/admin/stock", "/admin/orders"] {
        client
            .goto(&format!("{origin}{path}"))
            .await
            .expect("list loads");
        // The list itself, not the header, in the picture.
        script(
            &client,
            "const t = document.querySelector('main table'); if (t) { t.scrollIntoView(); } \
             return true;",
        )
        .await;
        save_screenshot(&client, &name(path)).await;
    }
    // Chart labels keep a readable size on a phone (the chart scrolls in its frame instead).
    client
        .goto(&format!("{origin}/admin/analytics"))
        .await
        .expect("analytics loads");
    let tick = script(
        &client,
        "return document.querySelector('#views-by-hour .x-tick').getBoundingClientRect().height;",
    )
    .await;
    assert!(
        tick.as_f64().is_some_and(|h| h >= 9.0),
        "axis labels at least 9 px tall on a phone: {tick}"
    );
    save_screenshot(&client, "admin-mobile-analytics.png").await;
    // The shop's header leaves the screen to the page: at most a fifth of a phone's height.
    client.goto(&app.url("/")).await.expect("home loads");
    let share = script(
        &client,
        "return document.querySelector('.site-header').getBoundingClientRect().height \
         / window.innerHeight;",
    )
    .await;
    assert!(
        share.as_f64().is_some_and(|s| s <= 0.2),
        "the header takes {share} of the screen"
    );
    assert_eq!(script(&client, NO_SIDEWAYS_SCROLL).await, json!(true));
    save_screenshot(&client, "header-mobile.png").await;
    assert!(
        to_visit.len() > ADMIN_LISTS.len() + 8,
        "the forms and detail pages were found too: {to_visit:?}"
    );
    assert!(
        problems.is_empty(),
        "admin pages wider than a 390 px phone:\n{}",
        problems.join("\n")
    );
    client.close().await.expect("browser closes");
    app.stop().await;
}

/// Click the submit button of the form `form_css` and wait for the page that answers.
async fn submit_form(client: &Client, form_css: &str) {
    client
        .execute("document.body.dataset.leaving = '1';", vec![])
        .await
        .expect("page marked");
    client
        .find(Locator::Css(&format!("{form_css} button[type=submit]")))
        .await
        .unwrap_or_else(|e| panic!("{form_css}'s button: {e}"))
        .click()
        .await
        .expect("clicked");
    wait_for_new_page(client).await;
}

#[tokio::test]
async fn chromium_signs_in_by_code_and_by_link_on_a_390_px_screen() {
    let (driver, browser) = match browser_programs() {
        Ok(programs) => programs,
        Err(reason) if std::env::var_os("CI").is_some() => {
            panic!("the browser test is required in CI: {reason}")
        }
        Err(reason) => {
            eprintln!("skipping the browser test: {reason}");
            return;
        }
    };
    let sink = crate::common::smtp::SmtpSink::start().await;
    let app = crate::accounts::app_sending_to(&sink, &[]).await;
    let (_driver, driver_port) = start_driver(&driver);
    let profile = tempfile::tempdir().expect("profile directory");
    let client = connect(driver_port, &browser, profile.path()).await;
    client
        .set_window_size(390, 844)
        .await
        .expect("window resized");

    // By the code, in the browser that asked.
    client
        .goto(&app.url("/account/sign-in"))
        .await
        .expect("sign-in loads");
    assert_eq!(script(&client, NO_SIDEWAYS_SCROLL).await, json!(true));
    save_screenshot(&client, "sign-in-mobile.png").await;
    type_into(&client, "#sign-in-email", "phone.user@example.com").await;
    submit_form(&client, "form.sign-in-form").await;
    let url = client.current_url().await.expect("url");
    assert_eq!(url.path(), "/account/sign-in/code");
    assert_eq!(script(&client, NO_SIDEWAYS_SCROLL).await, json!(true));
    save_screenshot(&client, "sign-in-code-mobile.png").await;
    let got = sink.wait_for(1, Duration::from_secs(20)).await;
    let (_, code) = crate::accounts::received_sign_in(&got, "phone.user@example.com");
    type_into(&client, "#sign-in-code", &code).await;
    submit_form(&client, "form.code-form").await;
    let url = client.current_url().await.expect("url");
    assert_eq!(url.path(), "/account");
    assert_eq!(
        text_of(&client, ".account-email").await,
        "phone.user@example.com"
    );
    assert_eq!(script(&client, NO_SIDEWAYS_SCROLL).await, json!(true));
    save_screenshot(&client, "account-mobile.png").await;

    // Signed out, then back in by the emailed link: open it, press its button.
    submit_form(&client, "form.sign-out-form").await;
    client
        .goto(&app.url("/account/sign-in"))
        .await
        .expect("sign-in loads");
    type_into(&client, "#sign-in-email", "phone.user@example.com").await;
    submit_form(&client, "form.sign-in-form").await;
    let got = sink.wait_for(2, Duration::from_secs(20)).await;
    let (link, _) = crate::accounts::received_sign_in(&got, "phone.user@example.com");
    client.goto(&app.url(&link)).await.expect("link opens");
    assert_eq!(script(&client, NO_SIDEWAYS_SCROLL).await, json!(true));
    submit_form(&client, "form.link-form").await;
    let url = client.current_url().await.expect("url");
    assert_eq!(url.path(), "/account");
    assert_eq!(
        text_of(&client, ".account-email").await,
        "phone.user@example.com"
    );
    client.close().await.expect("browser closes");
}
