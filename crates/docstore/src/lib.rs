//! docstore: an embedded, MongoDB-wire-compatible document store.
//!
//! Layers, top to bottom: `wire` (frames) → `server` (connections) → `commands` (dispatch) →
//! `catalog` (databases, collections, cursors) → `query`/`update`/`aggregation`/`index` (the
//! languages and structures) → `storage` (journal and snapshots). See the crate README.

pub mod aggregation;
pub mod auth;
pub mod catalog;
pub mod collection;
pub mod commands;
pub mod config;
pub mod cursor;
pub mod dump;
pub mod error;
pub mod index;
mod printing;
pub mod query;
pub mod server;
pub mod state;
pub mod storage;
pub mod text;
pub mod update;
pub mod value;
pub mod wire;

pub use auth::User;
pub use config::{Config, StorageMode};
pub use error::{Error, ErrorCode, Result};
pub use server::{Server, ServerHandle};
pub use storage::recovery::{repair, RepairReport};
pub use storage::DiskFaults;
