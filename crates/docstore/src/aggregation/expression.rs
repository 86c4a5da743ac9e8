//! Aggregation expressions: field paths, variables, literals and operators.
//! STUB: replaced by the aggregation module work.

use crate::error::{Error, Result};
use bson::{Bson, Document};

/// A parsed expression.
#[derive(Debug, Clone)]
pub struct Expression {}

impl Expression {
    pub fn parse(_expr: &Bson) -> Result<Expression> {
        Err(Error::not_supported("aggregation expressions"))
    }

    /// Evaluate with `$$ROOT`/`$$CURRENT` = `root` and user variables `vars` (`$$name`).
    /// A missing value evaluates to `None`.
    pub fn evaluate(&self, _root: &Document, _vars: &Document) -> Result<Option<Bson>> {
        Err(Error::not_supported("aggregation expressions"))
    }
}
