//! No import cycles between docstore's modules, checked by the same reader and cycle finder as
//! the app's architecture test (`crates/layering`): every path one module uses from another
//! (`use crate::a::b`, `use super::x`, a declared child's `child::f`, inline paths) outside
//! comments, strings and test modules is an edge, and a group of modules that reach each other
//! fails the test, listing the lines that close it.
//!
//! The units compared are the modules down to the second level (`aggregation::expression`,
//! `query::matcher`, `value`); anything deeper counts as its second-level ancestor. A module
//! using its own ancestor (`stages` naming `super::Pipeline`) is not an edge: the parent is
//! the composition of its children, and a recursive structure such as a pipeline holding
//! `$lookup` sub-pipelines could not be written otherwise.

use layering::ModuleMap;
use std::path::Path;

#[test]
fn docstore_modules_import_each_other_without_cycles() {
    let map = ModuleMap::read(Path::new(env!("CARGO_MANIFEST_DIR")), 2);
    assert!(
        map.units.contains("aggregation::expression") && map.units.contains("value"),
        "the source tree was not read: {:?}",
        map.units
    );
    let found = map.cycles();
    assert!(
        found.is_empty(),
        "import cycles between docstore modules:\n{}",
        map.cycle_report(&found)
    );
}
