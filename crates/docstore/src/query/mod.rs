//! The read-side languages: query filters, projections and sort specifications (the dotted
//! paths they read documents through are `crate::path`).

mod bits;
pub mod matcher;
pub mod projection;
pub mod schema;
pub mod sort;

pub use matcher::{ElementMatcher, Filter};
pub use projection::Projection;
pub use sort::SortSpec;
