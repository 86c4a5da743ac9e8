//! Updates given as an aggregation pipeline, through `update` and `findAndModify`.
