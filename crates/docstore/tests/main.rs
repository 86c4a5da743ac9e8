//! docstore's integration tests: one test binary with a module per concern. `behaviour` runs
//! the driver-level suites (against an in-memory docstore, or a real MongoDB when `MONGODB_URI`
//! is set); the others exercise durability, a full disk, damaged journals, the wire layer under
//! hostile clients, bounded fuzzing, a soak, and the module map.
//!
//! Cargo's discovery of `tests/*.rs` is off (`autotests = false` in Cargo.toml): a new file here
//! is a module of this binary and is declared below.

mod common;

mod behaviour;
mod durability;
mod full_disk;
mod fuzz;
mod journal_damage;
mod module_cycles;
mod soak;
mod wire_robustness;
