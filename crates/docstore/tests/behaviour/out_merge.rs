//! `$out` and `$merge`: aggregation results written to a collection.
