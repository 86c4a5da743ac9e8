//! docstore: an embedded, MongoDB-wire-compatible document store.
//!
//! Layers, top to bottom: `wire` (frames) → `server` (connections) → `commands` (dispatch) →
//! `catalog` (databases, collections, cursors) → `update`/`aggregation`/`index`/`query`/
//! `expression`/`text` (the languages and structures) → `storage` (journal and snapshots). See
//! the crate README; `tests/module_cycles.rs` holds the exact order of the top-level modules.
//!
//! # Public API
//!
//! What other crates (Bazaar, the `docstore` binary) may use is listed here; every module of the
//! implementation is private and its items `pub(crate)` (`unreachable_pub` warns of a `pub` the
//! API does not reach), so the compiler reports code nothing calls.
//!
//! - The server: [`Server`], [`ServerHandle`], [`Config`], [`StorageMode`], [`Endpoint`],
//!   [`InProcess`], [`DEFAULT_MAX_CONNECTIONS`]; its one [`User`] (from a password, or from
//!   stored [`ScramCredentials`]) and [`generate_password`] for a process that starts its own;
//!   [`Error`], [`ErrorCode`], [`Result`].
//! - Offline maintenance: [`repair`] and its [`RepairReport`]; [`support_table`], the
//!   supported-features table the binary prints.
//! - [`dump`]: backups (writing, verifying, loading and restoring a dump directory).
//! - [`private_fs`]: owner-only files and directories like the data directory's, for the
//!   application's own private files (backups, the session key).
//! - [`tokenizer`]: the tokenizer text indexes use, so that the application's search marks
//!   matched words and suggests spellings with exactly the terms `$text` looks up.
//! - [`faults`]: injected disk failures, for tests of a full or failing disk.
//!
//! The property tests reach the few internals they exercise through the hidden `internals`
//! module, which is not part of the API.

#![warn(unreachable_pub)]

mod aggregation;
mod auth;
mod bson_depth;
mod catalog;
mod collation;
mod collection;
mod commands;
mod config;
mod cursor;
mod deadline;
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
mod storage;
mod stored;
mod support;
mod text;
mod update;
mod value;
mod wire;

pub use auth::{generate_password, ScramCredentials, User};
pub use config::{Config, StorageMode, DEFAULT_MAX_CONNECTIONS};
pub use error::{Error, ErrorCode, Result};
pub use repair::repair;
pub use server::{Endpoint, InProcess, Server, ServerHandle};
pub use storage::faults::DiskFaults;
pub use storage::recovery::RepairReport;
pub use support::markdown as support_table;

/// Owner-only files and directories (0700 directories, 0600 files on Unix, whatever the umask):
/// what docstore makes its data directory of, for the application's files that hold the same
/// customers' data (backups) or secrets.
pub mod private_fs {
    pub use crate::storage::private::{
        create_dir, create_dir_all, file_options, DIR_MODE, FILE_MODE,
    };
}

/// The tokenizer of text indexes and `$text`: how a string becomes search terms (words split at
/// delimiters, folded, stop words dropped, stemmed). The application's search uses it to mark
/// matched words and to suggest spellings with the very terms the index holds.
pub mod tokenizer {
    pub use crate::text::language::{fold, word_spans, words, Language, Sensitivity, Tokenizer};
    pub use crate::text::search::ParsedQuery;
}

/// Injected disk failures: a [`DiskFaults`] given in [`Config`] makes the data directory's
/// writes fail (with these `errno` values) as a full or broken disk would.
pub mod faults {
    pub use crate::storage::faults::{DiskFaults, EIO, ENOSPC, EROFS};
}

/// Internals that docstore's own property tests (`tests/fuzz.rs`) exercise directly, below the
/// wire protocol. Not part of the API: anything here may change without notice.
#[doc(hidden)]
pub mod internals {
    pub use crate::query::matcher::Filter;
    pub use crate::update::{ApplyContext, UpdateSpec};
    pub use crate::value::{canonical_rank, compare, decimal_to_f64, values_equal};

    /// The order-preserving key encoding, for the ordering and round-trip properties.
    pub mod keystring {
        pub use crate::keystring::{
            decode, decode_key, encode, encode_value, encode_value_descending,
        };
    }

    /// The journal, snapshots and recovery, for the damaged-journal properties.
    pub mod storage {
        pub use crate::storage::{CollectionImage, JournalOp, Recovered, Storage, StoredDoc};

        pub mod journal {
            pub use crate::storage::journal::{encode_group, write_record};
        }

        pub mod recovery {
            pub use crate::storage::recovery::{
                check_segment, damage, salvage_segment, salvage_snapshot, torn_tail_name,
                SegmentCheck,
            };
        }

        pub mod snapshot {
            pub use crate::storage::snapshot::write_file;
        }
    }

    /// The wire protocol's framing, for the message fuzzers.
    pub mod wire {
        pub use crate::wire::op_msg::{encode_op_msg, CHECKSUM_PRESENT, MORE_TO_COME};
        pub use crate::wire::{parse_message, Message, OP_MSG, OP_QUERY};
    }
}
