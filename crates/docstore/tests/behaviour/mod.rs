//! Behaviour suites through the official `mongodb` driver, one module per area. They run against
//! an in-memory docstore, or against a real MongoDB when `MONGODB_URI` is set, unchanged.

mod aggregation;
mod auth;
mod bitwise_and_rand;
mod capped;
mod clients_regressions;
mod collation;
mod collections;
mod concurrency;
mod crud;
mod driver_differences;
mod explain;
mod geo;
mod graph_bucket_auto;
mod gridfs;
mod hidden_indexes;
mod max_time;
mod mongod_answers;
mod out_merge;
mod pipeline_updates;
mod profiler;
mod query;
mod text;
mod timeseries;
mod ttl_partial;
mod update;
mod validation;
