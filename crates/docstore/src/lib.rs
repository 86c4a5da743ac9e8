//! docstore: an embedded, MongoDB-wire-compatible document store.
//!
//! Layers, top to bottom: `wire` (frames) → `server` (connections) → `commands` (dispatch) →
//! `catalog` (databases, collections, cursors) → `update`/`aggregation`/`index`/`query`/
//! `expression`/`text` (the languages and structures) → `storage` (journal and snapshots). See
//! the crate README; `tests/module_cycles.rs` holds the exact order of the top-level modules.

mod aggregation;
pub mod auth;
mod bson_depth;
mod catalog;
mod collation;
mod collection;
mod commands;
mod config;
mod cursor;
pub mod dump;
mod error;
mod expression;
mod geospatial;
mod index;
mod keystring;
mod login_throttle;
mod path;
mod pattern;
mod printing;
mod query;
mod repair;
mod server;
mod sessions;
mod state;
mod stats;
pub mod storage;
mod stored;
pub mod support;
pub mod text;
mod update;
mod value;
mod wire;

pub use auth::User;
pub use config::{Config, StorageMode, DEFAULT_MAX_CONNECTIONS};
pub use error::{Error, ErrorCode, Result};
pub use repair::repair;
pub use server::{Endpoint, InProcess, Server, ServerHandle};
pub use storage::recovery::RepairReport;
pub use storage::DiskFaults;

/// Internals that docstore's own property tests (`tests/fuzz.rs`) exercise directly, below the
/// wire protocol. Not part of the API: anything here may change without notice.
#[doc(hidden)]
pub mod internals {
    pub use crate::query::Filter;
    pub use crate::update::{ApplyContext, UpdateSpec};
    pub use crate::value::{canonical_rank, compare, decimal_to_f64, values_equal};

    /// The order-preserving key encoding, for the ordering and round-trip properties.
    pub mod keystring {
        pub use crate::keystring::{
            decode, decode_key, encode, encode_value, encode_value_descending,
        };
    }

    /// The wire protocol's framing, for the message fuzzers.
    pub mod wire {
        pub use crate::wire::{
            encode_op_msg, parse_message, Message, CHECKSUM_PRESENT, MORE_TO_COME, OP_MSG, OP_QUERY,
        };
    }
}
