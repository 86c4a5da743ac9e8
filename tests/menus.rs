//! Admin → Menus: the header's and footer's links edited, ordered and checked, and what the
//! public pages show.

use std::collections::HashMap;

use crate::common::*;
use reqwest::StatusCode;

/// The menus form as the admin's browser would send it.
async fn menus_form(app: &TestApp) -> HashMap<String, String> {
    let doc = admin_page(app, "/admin/menus").await;
    let sel = scraper::Selector::parse("form.menus-form input").expect("selector");
    doc.select(&sel)
        .filter_map(|el| {
            let v = el.value();
            Some((
                v.attr("name")?.to_string(),
                v.attr("value").unwrap_or_default().to_string(),
            ))
        })
        .collect()
}

async fn post(app: &TestApp, form: &HashMap<String, String>) -> reqwest::Response {
    let pairs: Vec<(&str, &str)> = form.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    app.post_admin_form("/admin/menus", &pairs).await
}

fn header_links(doc: &scraper::Html) -> Vec<String> {
    texts(doc, ".site-nav a")
}

fn footer_links(doc: &scraper::Html) -> Vec<String> {
    texts(doc, ".footer-nav a")
}

/// Set row `i` of menu `menu`.
fn set(
    form: &mut HashMap<String, String>,
    menu: &str,
    i: usize,
    label: &str,
    href: &str,
    position: &str,
) {
    form.insert(format!("{menu}_label_{i}"), label.into());
    form.insert(format!("{menu}_href_{i}"), href.into());
    form.insert(format!("{menu}_position_{i}"), position.into());
}

#[tokio::test]
async fn the_menus_start_as_the_shops_sections_and_pages() {
    let app = spawn_app().await;
    let home = page(&app, "/").await;
    assert_eq!(
        header_links(&home),
        ["Home", "Shop", "Categories", "Blog", "Gallery"]
    );
    assert_eq!(
        footer_links(&home),
        [
            "About",
            "Shipping and returns",
            "Tags",
            "Find your order",
            "Blog",
            "Gallery"
        ]
    );
    let blog = page(&app, "/blog/").await;
    assert_eq!(
        attr(&blog, ".site-nav a[aria-current=page]", "href").as_deref(),
        Some("/blog")
    );
}

#[tokio::test]
async fn edited_menus_are_shown_in_their_order_on_the_next_page() {
    let app = spawn_app().await;
    let mut form = menus_form(&app).await;
    // Header rows: 0 Home, 1 Shop, 2 Categories, 3 Blog, 4 Gallery, 5–7 empty.
    set(&mut form, "header", 3, "Journal", "/blog/", "3");
    set(&mut form, "header", 4, "", "", "");
    set(&mut form, "header", 5, "Jazz", "/tags/jazz", "2");
    set(
        &mut form,
        "footer",
        5,
        "Our radio",
        "https://radio.example.com/live",
        "",
    );
    let saved = post(&app, &form).await;
    assert_eq!(saved.status(), StatusCode::SEE_OTHER);

    let home = page(&app, "/").await;
    // Positions 1, 2, 2, 3, 3: ties keep the rows' order.
    assert_eq!(
        header_links(&home),
        ["Home", "Shop", "Jazz", "Categories", "Journal"]
    );
    assert_eq!(
        footer_links(&home).last().map(String::as_str),
        Some("Our radio")
    );
    assert_eq!(
        attr(&home, ".footer-nav a[href^='https://']", "href").as_deref(),
        Some("https://radio.example.com/live")
    );
    let stored = bazaar::db::site::load(&app.db)
        .await
        .expect("settings")
        .menus;
    assert_eq!(stored.header.len(), 5);
    // The other settings are untouched.
    assert_eq!(
        bazaar::db::site::load(&app.db)
            .await
            .expect("settings")
            .name,
        "Bazaar"
    );
}

#[tokio::test]
async fn a_bad_row_sends_the_form_back_as_typed_and_saves_nothing() {
    let app = spawn_app().await;
    let before = bazaar::db::site::load(&app.db)
        .await
        .expect("settings")
        .menus;
    for (label, href, position, message) in [
        (
            "Evil",
            "javascript:alert(1)",
            "",
            "Enter a path on this site",
        ),
        ("", "/pages/about", "", "Enter the link's label"),
        ("Far", "//evil.example/x", "", "Enter a path on this site"),
        ("Odd", "/blog", "first", "whole number"),
    ] {
        let mut form = menus_form(&app).await;
        set(&mut form, "header", 5, label, href, position);
        let refused = post(&app, &form).await;
        assert_eq!(refused.status(), StatusCode::UNPROCESSABLE_ENTITY, "{href}");
        let doc = html(&body(refused).await);
        assert!(
            texts(&doc, "#header-error-5")[0].contains(message),
            "{:?}",
            texts(&doc, ".field-error")
        );
        assert_eq!(attr(&doc, "#header-href-5", "value").as_deref(), Some(href));
        assert_eq!(
            attr(&doc, "#header-label-5", "value").as_deref(),
            Some(label)
        );
    }
    let mut form = menus_form(&app).await;
    for i in 0..13 {
        set(
            &mut form,
            "footer",
            i,
            &format!("Link {i}"),
            &format!("/pages/p{i}"),
            "",
        );
    }
    let refused = post(&app, &form).await;
    assert_eq!(refused.status(), StatusCode::UNPROCESSABLE_ENTITY);
    assert!(body(refused).await.contains("at most 12 links"));
    let after = bazaar::db::site::load(&app.db)
        .await
        .expect("settings")
        .menus;
    assert_eq!(after, before, "nothing saved");
}

/// The hostile-input pass (`hostile_input`'s corpus) over the menus form: no 5xx, nothing
/// reflected unescaped.
#[tokio::test]
async fn the_menus_form_survives_the_hostile_corpus() {
    use crate::hostile_input::{CORPUS, MARK, UNESCAPED};
    let app = spawn_app().await;
    for value in CORPUS {
        let marked = format!("{value}{MARK}");
        let mut form = menus_form(&app).await;
        set(&mut form, "header", 5, &marked, &marked, &marked);
        form.insert(format!("footer_label_{value}"), marked.clone());
        let response = post(&app, &form).await;
        let status = response.status();
        assert!(!status.is_server_error(), "{value:?}: {status}");
        assert!(
            !body(response).await.contains(UNESCAPED),
            "{value:?} reflected"
        );
    }
    assert!(!body(app.get("/").await).await.contains(UNESCAPED));
}
