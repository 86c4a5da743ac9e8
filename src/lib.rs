//! Bazaar: a server-rendered storefront, CMS and tumblelog on MongoDB, running on the embedded
//! docstore by default. `main.rs` only calls [`cli::run`].

#![warn(unreachable_pub)]
// The docs of a public item may name the crate-private items it is built on (this is an
// application, not a library); links that resolve to nothing are still errors in CI.
#![allow(rustdoc::private_intra_doc_links)]

pub mod accounts;
pub mod admin;
pub mod analytics;
pub mod backup;
pub mod cart;
pub mod catalog;
pub mod checkout;
pub mod cli;
pub mod clock;
pub mod comments;
pub mod config;
pub mod content;
pub mod db;
pub mod demo;
pub mod discovery;
pub mod domain;
pub mod health;
pub mod home;
pub mod jobs;
pub mod mail;
pub mod media;
pub mod metrics;
pub mod routes;
pub mod search;
pub mod startup;
pub mod state;
pub mod stock;
pub mod telemetry;
pub mod web;

pub use docstore;
