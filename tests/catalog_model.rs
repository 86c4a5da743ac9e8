//! The catalog's data model on a fresh in-memory docstore: the category tree operations keep
//! every copy of the hierarchy right, seeding never duplicates, and every storefront query
//! runs on an index.

use std::collections::HashMap;

use crate::common::{assert_uses_index, find_stage, memory_db};
use bazaar::catalog::admin_search::AdminProductSearch;
use bazaar::catalog::categories::{self, Category};
use bazaar::catalog::listing::{self, ListingQuery, Sort};
use bazaar::catalog::products::{self, ProductType};
use bazaar::catalog::CatalogError;
use bazaar::db::Db;
use bazaar::startup::indexes;
use bson::oid::ObjectId;
use bson::{doc, Bson, Document};
use futures::TryStreamExt;

struct TestDb {
    db: Db,
    _server: docstore::ServerHandle,
}

async fn seeded_db() -> TestDb {
    let (server, db) = memory_db("catalog_test").await;
    indexes::ensure_indexes(&db).await.expect("indexes");
    bazaar::demo::run(&db).await.expect("seeds");
    TestDb {
        db,
        _server: server,
    }
}

async fn category(db: &Db, slug: &str) -> Category {
    categories::by_slug(db, &crate::common::slug(slug))
        .await
        .expect("query")
        .unwrap_or_else(|| panic!("category {slug}"))
}

/// Check every category's stored ancestors and every product's `category_path` against a
/// recomputation from `parent` links alone.
async fn assert_hierarchy_consistent(db: &Db) {
    let all = categories::all(db).await.expect("categories");
    let by_id: HashMap<ObjectId, &Category> = all.iter().map(|c| (c.id, c)).collect();
    let chain = |mut parent: Option<ObjectId>| {
        let mut out = Vec::new();
        while let Some(id) = parent {
            let c = by_id[&id];
            out.push((c.id, c.slug.clone(), c.name.clone()));
            parent = c.parent;
            assert!(out.len() < 64, "a cycle in parent links");
        }
        out.reverse();
        out
    };
    for c in &all {
        let stored: Vec<_> = c
            .ancestors
            .iter()
            .map(|a| (a.id, a.slug.clone(), a.name.clone()))
            .collect();
        assert_eq!(stored, chain(c.parent), "ancestors of {}", c.slug);
    }
    let products: Vec<products::Product> = products::collection(db)
        .find(doc! {})
        .await
        .expect("find")
        .try_collect()
        .await
        .expect("products");
    for p in products {
        let mut expected: Vec<ObjectId> = Vec::new();
        for id in &p.categories {
            expected.extend(chain(Some(*id)).into_iter().map(|(id, _, _)| id));
        }
        expected.sort();
        expected.dedup();
        let mut stored = p.category_path.clone();
        stored.sort();
        assert_eq!(stored, expected, "category_path of {}", p.slug);
    }
}

#[tokio::test]
async fn the_seeded_tree_is_consistent_and_reseeding_adds_nothing() {
    let t = seeded_db().await;
    let modal = category(&t.db, "modal-jazz").await;
    let names: Vec<&str> = modal.ancestors.iter().map(|a| a.name.as_str()).collect();
    assert_eq!(names, ["Music", "Jazz", "Ragtime", "Bop"]);
    assert_hierarchy_consistent(&t.db).await;
    let count = products::collection(&t.db)
        .count_documents(doc! {})
        .await
        .unwrap();
    assert!(count >= 36, "{count} products");
    let report = bazaar::demo::run(&t.db).await.expect("re-seeds");
    assert_eq!(report.total(), 0, "{report:?}");
    assert_eq!(
        products::collection(&t.db)
            .count_documents(doc! {})
            .await
            .unwrap(),
        count
    );
}

#[tokio::test]
async fn moving_a_category_rebuilds_descendants_and_product_paths() {
    let t = seeded_db().await;
    let bop = category(&t.db, "bop").await;
    let jazz = category(&t.db, "jazz").await;
    // Bop (with Modal Jazz below it) moves from Ragtime to directly under Jazz.
    categories::move_to(&t.db, bop.id, Some(jazz.id))
        .await
        .expect("moves");
    let modal = category(&t.db, "modal-jazz").await;
    let names: Vec<&str> = modal.ancestors.iter().map(|a| a.name.as_str()).collect();
    assert_eq!(names, ["Music", "Jazz", "Bop"]);
    let kind_of_blue = products::by_slug(&t.db, &crate::common::slug("kind-of-blue"))
        .await
        .unwrap()
        .expect("seeded");
    let ragtime = category(&t.db, "ragtime").await;
    assert!(!kind_of_blue.category_path.contains(&ragtime.id));
    assert_hierarchy_consistent(&t.db).await;

    // Running the same move again is safe; moving to the root and across the tree too.
    categories::move_to(&t.db, bop.id, Some(jazz.id))
        .await
        .expect("moves again");
    let books = category(&t.db, "books").await;
    categories::move_to(&t.db, bop.id, Some(books.id))
        .await
        .expect("moves across");
    categories::move_to(&t.db, jazz.id, None)
        .await
        .expect("moves to the root");
    assert_hierarchy_consistent(&t.db).await;
    let modal = category(&t.db, "modal-jazz").await;
    let names: Vec<&str> = modal.ancestors.iter().map(|a| a.name.as_str()).collect();
    assert_eq!(names, ["Books", "Bop"]);
}

#[tokio::test]
async fn moving_a_category_under_itself_or_a_descendant_is_refused() {
    let t = seeded_db().await;
    let jazz = category(&t.db, "jazz").await;
    let modal = category(&t.db, "modal-jazz").await;
    for target in [jazz.id, modal.id] {
        let outcome = categories::move_to(&t.db, jazz.id, Some(target)).await;
        assert!(matches!(outcome, Err(CatalogError::Cycle)), "{outcome:?}");
    }
    // Nothing changed.
    assert_eq!(category(&t.db, "jazz").await, jazz);
    assert_hierarchy_consistent(&t.db).await;
}

#[tokio::test]
async fn renaming_a_category_updates_every_descendants_breadcrumbs() {
    let t = seeded_db().await;
    let jazz = category(&t.db, "jazz").await;
    categories::rename(
        &t.db,
        jazz.id,
        "Jazz & Blues",
        &crate::common::slug("jazz-and-blues"),
    )
    .await
    .expect("renames");
    for slug in ["ragtime", "bop", "modal-jazz", "swing"] {
        let c = category(&t.db, slug).await;
        let jazz_ref = c
            .ancestors
            .iter()
            .find(|a| a.id == jazz.id)
            .expect("in path");
        assert_eq!(
            (jazz_ref.name.as_str(), jazz_ref.slug.as_str()),
            ("Jazz & Blues", "jazz-and-blues")
        );
    }
    assert_hierarchy_consistent(&t.db).await;
    // A slug another category has is refused.
    let outcome = categories::rename(&t.db, jazz.id, "Jazz", &crate::common::slug("rock")).await;
    assert!(
        matches!(outcome, Err(CatalogError::SlugTaken)),
        "{outcome:?}"
    );
}

#[tokio::test]
async fn a_category_with_children_or_products_cannot_be_deleted() {
    let t = seeded_db().await;
    let jazz = category(&t.db, "jazz").await;
    let outcome = categories::delete(&t.db, jazz.id).await;
    assert!(
        matches!(outcome, Err(CatalogError::HasChildren(2))),
        "{outcome:?}"
    );
    let swing = category(&t.db, "swing").await;
    let outcome = categories::delete(&t.db, swing.id).await;
    assert!(
        matches!(outcome, Err(CatalogError::HasProducts(2))),
        "{outcome:?}"
    );
    let empty = categories::add(
        &t.db,
        "Bossa Nova",
        &crate::common::slug("bossa-nova"),
        Some(jazz.id),
    )
    .await
    .expect("adds");
    assert_eq!(empty.ancestors.len(), 2);
    categories::delete(&t.db, empty.id).await.expect("deletes");
    assert!(
        categories::by_slug(&t.db, &crate::common::slug("bossa-nova"))
            .await
            .unwrap()
            .is_none()
    );
}

#[tokio::test]
async fn every_storefront_query_uses_an_index() {
    let t = seeded_db().await;
    let db = &t.db;
    let jazz = category(db, "jazz").await;
    let q = |pairs: &[(&str, &str)]| {
        ListingQuery::from_params(
            &pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        )
    };
    let mut cases: Vec<(String, Document, Document)> = vec![
        (
            "product by slug".into(),
            doc! { "slug": "kind-of-blue" },
            doc! {},
        ),
        ("product by sku".into(), doc! { "sku": "demo0001" }, doc! {}),
    ];
    let (f, s) = listing::featured_filter();
    cases.push(("featured shelf".into(), f, s));
    let (f, s) = listing::discounts_filter();
    cases.push(("discount shelf".into(), f, s));
    let (f, s) = listing::newest_filter();
    cases.push(("newest shelf".into(), f, s));
    for sort in Sort::ALL {
        let query = q(&[("sort", sort.as_str())]);
        cases.push((
            format!("all products by {}", sort.as_str()),
            query.filter(doc! {}),
            query.sort.document(),
        ));
        cases.push((
            format!("a category by {}", sort.as_str()),
            query.filter(listing::in_category(jazz.id)),
            query.sort.document(),
        ));
    }
    for (what, pairs) in [
        ("type and genre", vec![("type", "album"), ("genre", "jazz")]),
        (
            "films by actor",
            vec![("type", "film"), ("person", "Harrison Ford")],
        ),
        (
            "albums by artist",
            vec![("type", "album"), ("person", "Miles Davis")],
        ),
        (
            "books by author",
            vec![("type", "book"), ("person", "Ursula K. Le Guin")],
        ),
        (
            "price range",
            vec![("min_price", "10"), ("max_price", "15"), ("sort", "price")],
        ),
        (
            "minimum discount",
            vec![("min_discount", "20"), ("sort", "discount")],
        ),
        ("in stock", vec![("in_stock", "1")]),
    ] {
        let query = q(&pairs);
        cases.push((
            what.to_string(),
            query.filter(doc! {}),
            query.sort.document(),
        ));
    }
    for (what, filter, sort) in cases {
        assert_uses_index(db, &what, products::COLLECTION, filter, sort).await;
    }
    for (what, filter) in [
        ("category descendants", doc! { "ancestors._id": jazz.id }),
        ("category children", doc! { "parent": jazz.id }),
    ] {
        assert_uses_index(db, what, categories::COLLECTION, filter, doc! {}).await;
    }
    // The people filter's field is the type's own.
    assert_eq!(ProductType::Film.people_field(), "details.actor");
}

#[tokio::test]
async fn breadcrumbs_come_from_one_projected_query_on_the_slug_index() {
    let t = seeded_db().await;
    let crumbs = categories::breadcrumbs(&t.db, &crate::common::slug("modal-jazz"))
        .await
        .expect("query")
        .expect("modal jazz");
    assert_eq!(crumbs.name, "Modal Jazz");
    assert_eq!(crumbs.id, category(&t.db, "modal-jazz").await.id);
    let trail: Vec<(&str, &str)> = crumbs
        .ancestors
        .iter()
        .map(|c| (c.slug.as_str(), c.name.as_str()))
        .collect();
    assert_eq!(
        trail,
        [
            ("music", "Music"),
            ("jazz", "Jazz"),
            ("ragtime", "Ragtime"),
            ("bop", "Bop"),
        ]
    );
    // Only the trail's fields come back, not the ancestors' ids or the parent link.
    let raw =
        t.db.database()
            .collection::<Document>(categories::COLLECTION)
            .find_one(doc! { "slug": "modal-jazz" })
            .projection(categories::breadcrumbs_projection())
            .await
            .expect("query")
            .expect("modal jazz");
    assert_eq!(raw.keys().collect::<Vec<_>>(), ["_id", "name", "ancestors"]);
    let first = raw
        .get_array("ancestors")
        .ok()
        .and_then(|a| a.first())
        .and_then(Bson::as_document)
        .expect("an ancestor");
    assert_eq!(first.keys().collect::<Vec<_>>(), ["slug", "name"]);
    assert!(
        categories::breadcrumbs(&t.db, &crate::common::slug("no-such-category"))
            .await
            .expect("query")
            .is_none()
    );

    // The query as the category page issues it, projection included.
    let explain =
        t.db.database()
            .run_command(doc! {
                "explain": {
                    "find": categories::COLLECTION,
                    "filter": { "slug": "modal-jazz" },
                    "projection": categories::breadcrumbs_projection(),
                    "limit": 1,
                },
                "verbosity": "queryPlanner",
            })
            .await
            .expect("explain runs");
    let plan = Bson::Document(explain.clone());
    let ixscan = find_stage(&plan, "IXSCAN").expect("an index scan");
    assert_eq!(
        ixscan.get_document("keyPattern").ok(),
        Some(&doc! { "slug": 1 })
    );
    assert!(find_stage(&plan, "COLLSCAN").is_none(), "{explain}");
}

/// The plan of a `find` on products as the admin's product list sends it (first page, sorted
/// by title, the list's default).
async fn explain_admin_product_query(db: &Db, filter: Document) -> Document {
    db.database()
        .run_command(doc! {
            "explain": {
                "find": products::COLLECTION,
                "filter": filter,
                "sort": { "search_title": 1, "_id": 1 },
                "limit": 25,
            },
            "verbosity": "queryPlanner",
        })
        .await
        .expect("explain runs")
}

#[tokio::test]
async fn the_admin_product_search_runs_on_the_title_index_then_the_text_index() {
    let t = seeded_db().await;
    let search = AdminProductSearch {
        search: "blue",
        ..Default::default()
    };
    let attempts = search.attempts();
    assert_eq!(attempts.len(), 2);

    // Title or SKU contains: an unanchored regex cannot narrow an index, so the title index
    // walks the products in the list's order and the regexes filter them (no sort stage).
    let explain = explain_admin_product_query(&t.db, attempts[0].filter.clone()).await;
    let plan = Bson::Document(explain.clone());
    let ixscan = find_stage(&plan, "IXSCAN").expect("an index scan");
    assert_eq!(
        ixscan.get_document("keyPattern").ok(),
        Some(&doc! { "search_title": 1, "_id": 1 }),
        "{explain}"
    );
    assert!(find_stage(&plan, "COLLSCAN").is_none(), "{explain}");

    // The full-text fallback: the products' text index.
    let explain = explain_admin_product_query(&t.db, attempts[1].filter.clone()).await;
    let plan = Bson::Document(explain.clone());
    assert!(find_stage(&plan, "TEXT_MATCH").is_some(), "{explain}");
    let ixscan = find_stage(&plan, "IXSCAN").expect("an index scan");
    assert_eq!(
        ixscan.get_document("keyPattern").ok(),
        Some(&doc! { "_fts": "text", "_ftsx": 1 }),
        "{explain}"
    );
    assert!(find_stage(&plan, "COLLSCAN").is_none(), "{explain}");

    // With a type chosen, an index led by `type` narrows the products to that type first.
    let by_type = AdminProductSearch {
        kind: Some("album"),
        search: "blue",
        ..Default::default()
    };
    let explain = explain_admin_product_query(&t.db, by_type.attempts()[0].filter.clone()).await;
    let plan = Bson::Document(explain.clone());
    let ixscan = find_stage(&plan, "IXSCAN").expect("an index scan");
    let first_key = ixscan
        .get_document("keyPattern")
        .ok()
        .and_then(|k| k.keys().next().cloned());
    assert_eq!(first_key.as_deref(), Some("type"), "{explain}");
    assert!(find_stage(&plan, "COLLSCAN").is_none(), "{explain}");
}

#[tokio::test]
async fn generated_products_fill_the_tree_consistently_and_regenerating_adds_nothing() {
    let t = seeded_db().await;
    let added = bazaar::demo::catalog::seed_bulk(&t.db, 100)
        .await
        .expect("generates");
    assert_eq!(added, 100);
    assert_eq!(
        bazaar::demo::catalog::seed_bulk(&t.db, 100)
            .await
            .expect("again"),
        0
    );
    assert_eq!(
        products::collection(&t.db)
            .count_documents(doc! {})
            .await
            .unwrap(),
        136
    );
    assert_hierarchy_consistent(&t.db).await;
    let jazz = category(&t.db, "jazz").await;
    let page = listing::find_page(
        &t.db,
        listing::in_category(jazz.id),
        &ListingQuery::default(),
    )
    .await
    .expect("lists");
    assert!(page.total > 9, "{}", page.total);
}

#[tokio::test]
async fn deleting_with_reparenting_hands_children_and_products_to_the_parent() {
    let t = seeded_db().await;
    let music = category(&t.db, "music").await;
    let jazz = category(&t.db, "jazz").await;
    let products = t.db.collection::<Document>(products::COLLECTION);
    let filed_under_jazz_tree = products
        .count_documents(doc! { "category_path": jazz.id })
        .await
        .unwrap();
    assert!(filed_under_jazz_tree > 0);
    // A product filed directly under jazz, so the products are re-filed too.
    products
        .update_one(
            doc! { "category_path": jazz.id },
            doc! { "$addToSet": { "categories": jazz.id } },
        )
        .await
        .unwrap();

    categories::delete_reparenting(&t.db, jazz.id)
        .await
        .expect("deletes, handing its contents to Music");

    assert!(categories::by_slug(&t.db, &crate::common::slug("jazz"))
        .await
        .unwrap()
        .is_none());
    let swing = category(&t.db, "swing").await;
    assert_eq!(swing.parent, Some(music.id));
    assert!(products
        .find_one(doc! { "$or": [{ "categories": jazz.id }, { "category_path": jazz.id }] })
        .await
        .unwrap()
        .is_none());
    // Nothing was lost: every product that was under jazz is still under music.
    let under_music = products
        .count_documents(doc! { "category_path": music.id })
        .await
        .unwrap();
    assert!(under_music >= filed_under_jazz_tree);
    assert_hierarchy_consistent(&t.db).await;

    // A top-level category's own products have nowhere to go: refused before anything moves.
    let books = category(&t.db, "books").await;
    products
        .update_one(
            doc! { "category_path": books.id },
            doc! { "$addToSet": { "categories": books.id } },
        )
        .await
        .unwrap();
    let children_before = categories::children(&t.db, Some(books.id))
        .await
        .unwrap()
        .len();
    assert!(children_before > 0);
    let outcome = categories::delete_reparenting(&t.db, books.id).await;
    assert!(
        matches!(outcome, Err(CatalogError::HasProducts(1))),
        "{outcome:?}"
    );
    assert_eq!(
        categories::children(&t.db, Some(books.id))
            .await
            .unwrap()
            .len(),
        children_before
    );
}

/// Indexes no query uses any more are dropped at start-up where an older version created
/// them, and creating the current ones again changes nothing.
#[tokio::test]
async fn start_up_drops_the_retired_product_indexes() {
    let t = seeded_db().await;
    let coll = t.db.collection::<Document>(products::COLLECTION);
    coll.create_index(
        mongodb::IndexModel::builder()
            .keys(doc! { "type": 1, "details.genre": 1, "details.issue_date": -1 })
            .build(),
    )
    .await
    .unwrap();
    let names = coll.list_index_names().await.unwrap();
    assert!(names.contains(&products::RETIRED_INDEXES[0].to_string()));
    bazaar::startup::indexes::ensure_indexes(&t.db)
        .await
        .unwrap();
    let after = coll.list_index_names().await.unwrap();
    for retired in products::RETIRED_INDEXES {
        assert!(!after.iter().any(|n| n == retired), "{retired} still there");
    }
    assert_eq!(after.len(), names.len() - 1);
}
