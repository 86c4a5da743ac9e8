//! The read-side languages: query filters, projections and sort specifications (the dotted
//! paths they read documents through are `crate::path`).

mod bits;
pub(crate) mod matcher;
pub(crate) mod projection;
pub(crate) mod schema;
pub(crate) mod sort;

pub(crate) use matcher::{ElementMatcher, Filter};
pub(crate) use projection::Projection;
pub(crate) use sort::SortSpec;
