//! Bazaar's integration tests: one test binary (one link of the whole app instead of one per
//! file), with a module per area. Each test starts the app in-process on a fresh, empty
//! in-memory docstore through `common::spawn_app` (or starts `bazaar` processes,
//! `common::process`) and builds the data it needs with `common::builders`
//! (`ProductBuilder::new("sku").stock(3).build(&app.db)`), so what a test relies on is written
//! in it. Only tests about the demo data itself start with it seeded, through
//! `common::spawn_app_with_demo`, and say so where they do.
//!
//! Cargo's discovery of `tests/*.rs` is off (`autotests = false` in Cargo.toml): a new file here
//! is a module of this binary and is declared below (the architecture test checks that every
//! file is).

mod common;

mod accessibility;
mod accounts;
mod admin;
mod admin_catalog;
mod admin_conflicts;
mod admin_content;
mod admin_lists;
mod admin_orders;
mod analytics;
mod architecture;
mod auth_flood;
mod backup;
mod browser;
mod cart;
mod cart_workload;
mod catalog;
mod catalog_model;
mod checkout;
mod cli;
mod clock_step;
mod comments;
mod content;
mod content_stream;
mod crash;
mod discovery;
mod domain;
mod email;
mod hostile_input;
mod media;
mod media_library;
mod menus;
mod multi_instance;
mod operations;
mod pages;
mod pagination;
mod photo_derivatives;
mod post_cache;
mod preview;
mod revisions;
mod round_trips;
mod search;
mod security;
mod sessions;
mod shopper;
mod stock_moves;
mod time_zone;
mod traffic;
mod unicode_slugs;
