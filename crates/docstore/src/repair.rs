//! `docstore --repair`: storage salvages every snapshot and journal record that still validates
//! (`storage::recovery::repair_with`), and the catalog replays the salvaged operations onto the
//! salvaged collections exactly as start-up does. Kept above both so that storage never calls
//! up into the catalog.

use crate::catalog::{Catalog, SnapshotTrigger};
use crate::storage::recovery::{repair_with, RepairReport};
use crate::storage::{CollectionImage, JournalOp, Recovered, Storage};
use std::io;
use std::path::Path;
use std::sync::Arc;

/// Salvage a damaged data directory: keep what validates, write it as a fresh snapshot, move
/// the old files into `dir/repair-<time>/` and report exactly what was lost. Refuses while a
/// server has the directory open.
pub fn repair(dir: &Path) -> io::Result<RepairReport> {
    repair_with(dir, &replay)
}

/// The collections the salvaged base and operations describe, rebuilt by the catalog.
fn replay(base: Vec<CollectionImage>, ops: Vec<JournalOp>) -> io::Result<Vec<CollectionImage>> {
    let catalog = Catalog::recover(
        Arc::new(Storage::in_memory()),
        Recovered {
            collections: base,
            ops,
            ..Recovered::default()
        },
        SnapshotTrigger::NEVER,
    )
    .map_err(|e| {
        io::Error::new(
            io::ErrorKind::InvalidData,
            format!("cannot rebuild the salvaged state: {}", e.message),
        )
    })?;
    Ok(catalog.images())
}
