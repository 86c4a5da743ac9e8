//! Slugs and tags in every language, and old slugs that keep working (issue 35): a title and
//! tags in French, Spanish and Japanese go through the admin forms and come back on the public
//! pages at percent-encoded addresses; a tag with nothing usable in it is refused out loud; a
//! renamed node or product answers its old address with a 301, and whatever takes the old slug
//! later wins over the redirect.

use crate::common::builders::{NodeBuilder, ProductBuilder};
use crate::common::*;
use bazaar::content::model::Node;
use bazaar::content::store;
use bazaar::db::redirects;
use bson::doc;
use bson::oid::ObjectId;
use reqwest::StatusCode;

async fn node_by_slug(app: &TestApp, section: &str, slug: &str) -> Option<Node> {
    store::collection(&app.db)
        .find_one(doc! { "metadata.section": section, "metadata.slug": slug })
        .await
        .unwrap()
}

/// Create a blog entry through the admin form (empty slug: made from the title) and publish
/// it; returns the create form's answer and the stored node.
async fn create_entry(app: &TestApp, title: &str) -> (reqwest::Response, Option<ObjectId>) {
    let new = "/admin/content/new?section=blog&type=entry";
    let token = csrf_token(&admin_page(app, new).await).unwrap();
    let response = app
        .post_admin_form(
            new,
            &[
                ("csrf_token", &token),
                ("title", title),
                ("slug", ""),
                ("author", "Editor"),
                ("text", "Some *text*."),
            ],
        )
        .await;
    if response.status() != StatusCode::SEE_OTHER {
        return (response, None);
    }
    let id = location(&response)
        .trim_start_matches("/admin/content/")
        .trim_end_matches("/edit")
        .parse::<ObjectId>()
        .expect("the form sends to the new node's editor");
    let published = post_edit_form(app, id, "tags", "", "publish").await;
    assert_eq!(published.status(), StatusCode::SEE_OTHER);
    (response, Some(id))
}

/// Post the node's edit form as shown with `field` set to `value`, by the button `action`.
async fn post_edit_form(
    app: &TestApp,
    id: ObjectId,
    field: &str,
    value: &str,
    action: &str,
) -> reqwest::Response {
    let edit = format!("/admin/content/{}/edit", id.to_hex());
    let doc = admin_page(app, &edit).await;
    let sel = scraper::Selector::parse("form.edit-form input, form.edit-form textarea").unwrap();
    let mut fields: Vec<(String, String)> = doc
        .select(&sel)
        .filter_map(|el| {
            let name = el.value().attr("name")?.to_string();
            let shown = match el.value().name() {
                "textarea" => el.text().collect(),
                _ => el.value().attr("value").unwrap_or_default().to_string(),
            };
            Some((name, shown))
        })
        .collect();
    for (name, shown) in fields.iter_mut() {
        if name == field {
            *shown = value.to_string();
        }
    }
    fields.push(("action".into(), action.into()));
    let fields: Vec<(&str, &str)> = fields
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect();
    app.post_admin_form(&edit, &fields).await
}

/// Save `tags` as the node's tag list from its edit form; returns the flash messages the
/// editor then shows, or the form's errors when it was refused.
async fn add_tags(app: &TestApp, id: ObjectId, tags: &str) -> Vec<String> {
    let response = post_edit_form(app, id, "tags", tags, "save").await;
    if response.status() == StatusCode::UNPROCESSABLE_ENTITY {
        return texts(&html(&body(response).await), ".field-error");
    }
    assert_eq!(response.status(), StatusCode::SEE_OTHER);
    let edit = format!("/admin/content/{}/edit", id.to_hex());
    texts(&admin_page(app, &edit).await, ".flash")
}

/// Save the node's edit form with a new slug (everything else as stored).
async fn rename(app: &TestApp, id: ObjectId, slug: &str) -> reqwest::Response {
    let edit = format!("/admin/content/{}/edit", id.to_hex());
    let doc = admin_page(app, &edit).await;
    let node = store::by_id(&app.db, id).await.unwrap().unwrap();
    app.post_admin_form(
        &edit,
        &[
            ("csrf_token", &csrf_token(&doc).unwrap()),
            (
                "edit_version",
                &attr(&doc, "form.content-form input[name=edit_version]", "value").unwrap(),
            ),
            ("title", &node.metadata.title),
            ("slug", slug),
            ("author", &node.metadata.author.name),
            ("text", "Some *text*."),
        ],
    )
    .await
}

#[tokio::test]
async fn a_french_title_and_spanish_french_and_japanese_tags_round_trip_through_the_admin_to_percent_encoded_pages(
) {
    let app = spawn_app().await;
    let (response, id) = create_entry(&app, "Café society").await;
    assert_eq!(response.status(), StatusCode::SEE_OTHER);
    let id = id.unwrap();
    let node = node_by_slug(&app, "blog", "café-society").await.unwrap();
    assert_eq!(node.id, id);
    assert_eq!(node.url(), "/blog/caf%C3%A9-society");

    let flashes = add_tags(&app, id, "Ñandú, café, 日本のジャズ").await;
    assert!(flashes.iter().any(|f| f.contains("Saved")), "{flashes:?}");
    let node = store::by_id(&app.db, id).await.unwrap().unwrap();
    assert_eq!(node.metadata.tags, ["ñandú", "café", "日本のジャズ"]);

    let page = app.get("/blog/caf%C3%A9-society").await;
    assert_eq!(page.status(), StatusCode::OK);
    let doc = html(&body(page).await);
    assert_eq!(heading(&doc), "Café society");
    assert_eq!(
        texts(&doc, "ul.tags a[rel=tag]"),
        ["ñandú", "café", "日本のジャズ"]
    );
    let hrefs: Vec<String> = doc
        .select(&scraper::Selector::parse("ul.tags a[rel=tag]").unwrap())
        .filter_map(|a| a.value().attr("href").map(str::to_string))
        .collect();
    assert_eq!(
        hrefs,
        [
            "/tags/%C3%B1and%C3%BA",
            "/tags/caf%C3%A9",
            "/tags/%E6%97%A5%E6%9C%AC%E3%81%AE%E3%82%B8%E3%83%A3%E3%82%BA",
        ],
        "links are percent-encoded once (no `%25`)"
    );
    for href in &hrefs {
        let tag_page = app.get(href).await;
        assert_eq!(tag_page.status(), StatusCode::OK, "{href}");
        let tag_doc = html(&body(tag_page).await);
        assert_eq!(texts(&tag_doc, ".tag-nodes a"), ["Café society"], "{href}");
    }
    // The section's list links to the node's encoded address too.
    let list = html(&body(app.get("/blog/").await).await);
    assert!(
        attr(&list, "h2 a", "href").is_some_and(|h| h == "/blog/caf%C3%A9-society"),
        "{:?}",
        attr(&list, "h2 a", "href")
    );
}

#[tokio::test]
async fn a_japanese_title_is_accepted_and_its_page_is_served_at_its_encoded_address() {
    let app = spawn_app().await;
    let (response, id) = create_entry(&app, "日本のジャズ入門").await;
    assert_eq!(response.status(), StatusCode::SEE_OTHER);
    let node = store::by_id(&app.db, id.unwrap()).await.unwrap().unwrap();
    assert_eq!(node.metadata.slug, "日本のジャズ入門");
    let page = app.get(&node.url()).await;
    assert_eq!(page.status(), StatusCode::OK);
    assert_eq!(heading(&html(&body(page).await)), "日本のジャズ入門");
    // Typed into the address bar unencoded, the client encodes it: the same page.
    assert_eq!(
        app.get("/blog/日本のジャズ入門").await.status(),
        StatusCode::OK
    );
}

#[tokio::test]
async fn a_title_a_tag_or_a_product_tag_of_punctuation_only_is_refused_with_a_message_never_dropped(
) {
    let app = spawn_app().await;
    let (response, id) = create_entry(&app, "!!!").await;
    assert_eq!(response.status(), StatusCode::UNPROCESSABLE_ENTITY);
    assert!(id.is_none());
    assert!(body(response).await.contains("single dashes"));

    let node = NodeBuilder::post("tagged").build(&app.db).await;
    let flashes = add_tags(&app, node.id, "jazz, !!!").await;
    assert!(
        flashes
            .iter()
            .any(|f| f.contains("“!!!”") && f.contains("no letter or digit")),
        "{flashes:?}"
    );
    let stored = store::by_id(&app.db, node.id).await.unwrap().unwrap();
    assert!(
        stored.metadata.tags.is_empty(),
        "nothing of a refused list is added"
    );

    let product = ProductBuilder::new("punct")
        .slug("punct")
        .build(&app.db)
        .await;
    let response = submit_product_form(&app, &product, "tags", "noir, ???").await;
    assert_eq!(response.status(), StatusCode::UNPROCESSABLE_ENTITY);
    assert!(body(response)
        .await
        .contains("“???” has no letter or digit"));
}

#[tokio::test]
async fn a_renamed_node_answers_its_old_addresses_with_a_301_until_another_node_takes_the_old_slug()
{
    let app = spawn_app().await;
    let node = NodeBuilder::post("old-name")
        .title("Moving post")
        .build(&app.db)
        .await;
    assert_eq!(
        rename(&app, node.id, "new-name").await.status(),
        StatusCode::SEE_OTHER
    );
    let old = app.get("/blog/old-name").await;
    assert_eq!(old.status(), StatusCode::MOVED_PERMANENTLY);
    assert_eq!(location(&old), "/blog/new-name");
    let comments = app.get("/blog/old-name/comments").await;
    assert_eq!(comments.status(), StatusCode::MOVED_PERMANENTLY);
    assert_eq!(location(&comments), "/blog/new-name/comments");
    assert_eq!(app.get("/blog/new-name").await.status(), StatusCode::OK);

    // Renamed again, into French: both old addresses lead to the new one in one hop.
    assert_eq!(
        rename(&app, node.id, "Café").await.status(),
        StatusCode::UNPROCESSABLE_ENTITY,
        "a typed slug must already be one"
    );
    assert_eq!(
        rename(&app, node.id, "café").await.status(),
        StatusCode::SEE_OTHER
    );
    for old in ["/blog/old-name", "/blog/new-name"] {
        let response = app.get(old).await;
        assert_eq!(response.status(), StatusCode::MOVED_PERMANENTLY, "{old}");
        assert_eq!(location(&response), "/blog/caf%C3%A9", "{old}");
    }
    // Another section's address is not this node's.
    assert_eq!(
        app.get("/pages/old-name").await.status(),
        StatusCode::NOT_FOUND
    );

    // Another node takes the old slug: it is what the address shows.
    let (_, newcomer) = create_entry(&app, "Old name").await;
    let newcomer = newcomer.unwrap();
    let taken = app.get("/blog/old-name").await;
    assert_eq!(taken.status(), StatusCode::OK);
    assert_eq!(heading(&html(&body(taken).await)), "Old name");
    // And once that one is deleted, the address is not sent back to the renamed node.
    let delete = format!("/admin/content/{}/delete", newcomer.to_hex());
    let token = csrf_token(&admin_page(&app, &delete).await).unwrap();
    app.post_admin_form(&delete, &[("csrf_token", &token)])
        .await;
    assert_eq!(
        app.get("/blog/old-name").await.status(),
        StatusCode::NOT_FOUND
    );

    // Deleting the renamed node drops its old addresses.
    let delete = format!("/admin/content/{}/delete", node.id.to_hex());
    app.post_admin_form(&delete, &[("csrf_token", &token)])
        .await;
    assert_eq!(
        app.get("/blog/new-name").await.status(),
        StatusCode::NOT_FOUND
    );
    let left = app
        .db
        .collection::<bson::Document>(redirects::COLLECTION)
        .count_documents(doc! {})
        .await
        .unwrap();
    assert_eq!(left, 0);
}

#[tokio::test]
async fn a_draft_renamed_away_from_an_address_is_not_revealed_by_the_redirect() {
    let app = spawn_app().await;
    let node = NodeBuilder::post("secret-draft")
        .draft()
        .build(&app.db)
        .await;
    assert_eq!(
        rename(&app, node.id, "still-secret").await.status(),
        StatusCode::SEE_OTHER
    );
    assert_eq!(
        app.get("/blog/secret-draft").await.status(),
        StatusCode::NOT_FOUND
    );
}

#[tokio::test]
async fn a_product_renamed_in_the_admin_form_answers_its_old_address_with_a_301() {
    let app = spawn_app().await;
    let product = ProductBuilder::new("ren-1")
        .slug("old-record")
        .title("Old record")
        .build(&app.db)
        .await;
    let response = submit_product_form(&app, &product, "slug", "disque-ancien-été").await;
    assert_eq!(
        response.status(),
        StatusCode::SEE_OTHER,
        "{}",
        body(response).await
    );
    let old = app.get("/products/old-record?after=x").await;
    assert_eq!(old.status(), StatusCode::MOVED_PERMANENTLY);
    assert_eq!(
        location(&old),
        "/products/disque-ancien-%C3%A9t%C3%A9?after=x"
    );
    assert_eq!(app.get(&location(&old)).await.status(), StatusCode::OK);

    // A new product at the old slug wins.
    ProductBuilder::new("ren-2")
        .slug("old-record")
        .title("Another record")
        .build(&app.db)
        .await;
    let taken = app.get("/products/old-record").await;
    assert_eq!(taken.status(), StatusCode::OK);
    assert_eq!(heading(&html(&body(taken).await)), "Another record");
}

#[tokio::test]
async fn old_address_lookups_use_an_index() {
    let app = spawn_app().await;
    assert_uses_index(
        &app.db,
        "an old address",
        redirects::COLLECTION,
        redirects::address_filter("blog", "old-name"),
        doc! {},
    )
    .await;
    assert_uses_index(
        &app.db,
        "a deleted node's old addresses",
        redirects::COLLECTION,
        redirects::target_filter(ObjectId::new()),
        doc! {},
    )
    .await;
}

/// Submit `product`'s admin edit form as loaded, with `field` set to `value`.
async fn submit_product_form(
    app: &TestApp,
    product: &bazaar::catalog::products::Product,
    field: &str,
    value: &str,
) -> reqwest::Response {
    let path = format!("/admin/products/{}/edit", product.id.to_hex());
    let mut form = product_form(&admin_page(app, &path).await);
    for (name, current) in form.iter_mut() {
        if name == field {
            *current = value.to_string();
        }
    }
    app.client
        .post(app.url(&path))
        .basic_auth(ADMIN_USER, Some(ADMIN_PASSWORD))
        .form(&form)
        .send()
        .await
        .unwrap()
}
