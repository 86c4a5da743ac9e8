//! The query planner: picks an index scan with bounds when the filter constrains an index's
//! leading fields (or the index serves the sort), otherwise a collection scan.
//! STUB: replaced by the index module work.

use super::Index;
use crate::error::Result;
use bson::{Bson, Document};

/// Key ranges to scan; a superset of what matches (the filter is always re-checked).
#[derive(Debug, Clone, Default)]
pub struct IndexBounds {}

#[derive(Debug, Clone)]
pub enum Plan {
    CollScan,
    IndexScan {
        /// Position of the chosen index in the slice given to [`plan`].
        index: usize,
        bounds: IndexBounds,
        reverse: bool,
        /// Documents come out in the requested sort order.
        provides_sort: bool,
    },
}

impl Plan {
    /// The explain `winningPlan` for this plan.
    pub fn describe(&self, _indexes: &[&Index]) -> Document {
        bson::doc! { "stage": "COLLSCAN", "direction": "forward" }
    }
}

/// Choose a plan. `hint` is the command's `hint` (index name or key pattern); an unknown hint
/// is error 2 "hint provided does not correspond to an existing index".
pub fn plan(
    _filter: &Document,
    _sort: Option<&Document>,
    _indexes: &[&Index],
    _hint: Option<&Bson>,
) -> Result<Plan> {
    Ok(Plan::CollScan)
}
