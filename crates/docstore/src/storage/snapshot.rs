//! Snapshot files. STUB.
