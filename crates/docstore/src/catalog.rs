//! Databases and collections in memory: documents, indexes, and the journaling of every change.

use crate::error::Result;
use crate::storage::{Recovered, Storage};
use std::sync::Arc;

pub struct Catalog {
    storage: Arc<Storage>,
}

impl Catalog {
    pub fn recover(
        storage: Arc<Storage>,
        _recovered: Recovered,
        _snapshot_threshold: u64,
    ) -> Result<Catalog> {
        Ok(Catalog { storage })
    }

    pub fn flush(&self) {
        let _ = self.storage.flush();
    }
}
