//! The read-side languages: query filters, field paths, projections and sort specifications.

pub mod matcher;
pub mod path;
pub mod projection;
pub mod sort;

pub use matcher::{ElementMatcher, Filter};
pub use projection::Projection;
pub use sort::SortSpec;
