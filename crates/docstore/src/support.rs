//! The one list of MongoDB features docstore refuses, and of the ones it supports that used to
//! be refused or that a reader might doubt. The refusal paths (unknown commands, pipeline
//! stages, query and expression operators, index options) ask [`refusal`] for their error, and
//! the crate README's "Supported and refused features" section is [`markdown`] printed
//! (`docstore --print-support`); a unit test fails when the two differ (`UPDATE_README=1`
//! rewrites the README's block), so the documentation cannot drift from what the server does.

use crate::error::{Error, ErrorCode};

/// Where a feature is named: what a client writes it as.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    Command,
    Stage,
    QueryOperator,
    Expression,
    IndexOption,
}

impl Kind {
    fn heading(self) -> &'static str {
        match self {
            Kind::Command => "Commands",
            Kind::Stage => "Aggregation stages",
            Kind::QueryOperator => "Query operators",
            Kind::Expression => "Expression operators",
            Kind::IndexOption => "Index options and kinds",
        }
    }

    const ALL: [Kind; 5] = [
        Kind::Command,
        Kind::Stage,
        Kind::QueryOperator,
        Kind::Expression,
        Kind::IndexOption,
    ];
}

/// What docstore does with a feature.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Status {
    Supported,
    /// Refused with 115 CommandNotSupported, `"<subject> is not supported by docstore"`.
    NotSupported,
    /// Refused with 2 BadValue and the same message (query operators, as MongoDB's own
    /// refusals of operators are BadValue).
    BadValue,
    /// Refused exactly as a standalone mongod refuses it: this code and message.
    AsMongod(i32, &'static str),
}

/// One row: the feature's name as written, its kind, what docstore does, and why (the README's
/// note). `area` names the group a refusal's message mentions ("replication"), when it is not
/// the name itself.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Feature {
    pub name: &'static str,
    pub kind: Kind,
    pub status: Status,
    pub area: &'static str,
    pub note: &'static str,
}

const fn refused(
    kind: Kind,
    name: &'static str,
    area: &'static str,
    note: &'static str,
) -> Feature {
    Feature {
        name,
        kind,
        status: Status::NotSupported,
        area,
        note,
    }
}

const fn supported(kind: Kind, name: &'static str, note: &'static str) -> Feature {
    Feature {
        name,
        kind,
        status: Status::Supported,
        area: "",
        note,
    }
}

use Kind::*;

const REPLICATION: &str = "single node by design: no replica set";
const SHARDING: &str = "single node by design";
const USERS: &str = "the one user comes from the configuration (`--auth --user`)";
const SEARCH: &str = "Atlas Search only";
const PROFILER: &str = "no registry of running operations";

/// Every row, grouped by kind in the README order.
pub(crate) const FEATURES: &[Feature] = &[
    // Commands.
    supported(Command, "collMod", "`index: {name or keyPattern, hidden}` (hidden indexes), `validator`, `validationLevel`, `validationAction`, `cappedSize`, `cappedMax`; on a time-series collection `expireAfterSeconds` (or \"off\") and a coarser `timeseries.granularity`; other options refused by name"),
    supported(Command, "create with timeseries", "`timeField`, `metaField`, `granularity` or `bucketMaxSpanSeconds`/`bucketRoundingSeconds`, `expireAfterSeconds`, validated with mongod's codes; measurements stored as ordinary documents (no `system.buckets.*`, no bucket statistics), expired by the TTL monitor one by one"),
    supported(Command, "profile", "levels 0-2, `slowms`, `sampleRate` and `filter`; entries in a 1 MiB capped `system.profile` without execution statistics (`keysExamined`, `docsExamined`, `planSummary`)"),
    supported(Command, "usersInfo", "read-only: the one configured user, with the `root` role"),
    supported(Command, "setParameter", "`ttlMonitorSleepSecs` (the TTL sweep interval) and `cursorTimeoutMillis`; other names refused by name (72), start-up-only ones 20"),
    refused(Command, "replSetGetStatus", "replication", REPLICATION),
    refused(Command, "replSetInitiate", "replication", REPLICATION),
    refused(Command, "replSetReconfig", "replication", REPLICATION),
    refused(Command, "replSetGetConfig", "replication", REPLICATION),
    refused(Command, "replSetStepDown", "replication", REPLICATION),
    refused(Command, "replSetFreeze", "replication", REPLICATION),
    refused(Command, "replSetHeartbeat", "replication", REPLICATION),
    refused(Command, "shardCollection", "sharding", SHARDING),
    refused(Command, "enableSharding", "sharding", SHARDING),
    refused(Command, "addShard", "sharding", SHARDING),
    refused(Command, "listShards", "sharding", SHARDING),
    refused(Command, "balancerStatus", "sharding", SHARDING),
    refused(Command, "commitTransaction", "transactions", "no transactions (a `txnNumber` answers 20, as a standalone mongod)"),
    refused(Command, "abortTransaction", "transactions", "no transactions (a `txnNumber` answers 20, as a standalone mongod)"),
    refused(Command, "createUser", "user management (the user comes from the configuration)", USERS),
    refused(Command, "updateUser", "user management (the user comes from the configuration)", USERS),
    refused(Command, "dropUser", "user management (the user comes from the configuration)", USERS),
    refused(Command, "dropAllUsersFromDatabase", "user management (the user comes from the configuration)", USERS),
    refused(Command, "createRole", "user management (the user comes from the configuration)", USERS),
    refused(Command, "grantRolesToUser", "user management (the user comes from the configuration)", USERS),
    refused(Command, "getnonce", "user management (the user comes from the configuration)", "MONGODB-CR was removed in MongoDB 4.0"),
    refused(Command, "mapReduce", "mapReduce", "deprecated in MongoDB 5.0; needs a JavaScript engine (use an aggregation pipeline)"),
    refused(Command, "mapreduce", "mapReduce", "deprecated in MongoDB 5.0; needs a JavaScript engine (use an aggregation pipeline)"),
    refused(Command, "geoSearch", "geoHaystack queries", "removed in MongoDB 5.0 with geoHaystack indexes"),
    refused(Command, "geoNear", "the geoNear command", "removed in MongoDB 4.2: use the `$geoNear` stage"),
    refused(Command, "currentOp", "currentOp/killOp", PROFILER),
    refused(Command, "killOp", "currentOp/killOp", PROFILER),
    refused(Command, "fsync", "fsync locking", "the journal is fsynced by group commit; no lock for file-copy backups (use `createBackup`)"),
    refused(Command, "fsyncUnlock", "fsync locking", "the journal is fsynced by group commit; no lock for file-copy backups (use `createBackup`)"),
    refused(Command, "compact", "compact", "snapshots already compact the journal"),
    supported(Command, "convertToCapped / cloneCollectionAsCapped", "as mongod: the other indexes are dropped"),
    refused(Command, "bulkWrite", "the bulkWrite command", "MongoDB 8.0's command; drivers' bulk writes use `insert`/`update`/`delete`"),
    // Aggregation stages.
    supported(Stage, "$geoNear", "first stage only, on a `2d` or `2dsphere` index (reads every located document: the index keeps no cells)"),
    refused(Stage, "$search", "", SEARCH),
    refused(Stage, "$searchMeta", "", SEARCH),
    refused(Stage, "$vectorSearch", "", SEARCH),
    refused(Stage, "$listSearchIndexes", "", SEARCH),
    Feature {
        name: "$changeStream",
        kind: Stage,
        status: Status::AsMongod(40573, "The $changeStream stage is only supported on replica sets"),
        area: "",
        note: "as a standalone mongod: change streams need a replica set's oplog",
    },
    refused(Stage, "$changeStreamSplitLargeEvent", "", "no change streams (a standalone has none)"),
    supported(Stage, "$graphLookup", "breadth-first, cycles end; reads the `from` collection once per stage (no index)"),
    refused(Stage, "$unionWith", "", "not implemented yet"),
    refused(Stage, "$densify", "", "not implemented yet"),
    refused(Stage, "$fill", "", "not implemented yet"),
    refused(Stage, "$setWindowFields", "", "not implemented yet"),
    refused(Stage, "$redact", "", "not implemented yet"),
    refused(Stage, "$indexStats", "", "no index usage counters"),
    refused(Stage, "$currentOp", "", PROFILER),
    refused(Stage, "$listSessions", "", "sessions are accepted and not recorded"),
    supported(Stage, "$listLocalSessions", "the sessions this server saw in the last 30 minutes (`{aggregate: 1}`)"),
    refused(Stage, "$listSampledQueries", "", SHARDING),
    refused(Stage, "$planCacheStats", "", "no plan cache"),
    supported(Stage, "$bucketAuto", "mongod's bucketing and every `granularity` series"),
    refused(Stage, "$shardedDataDistribution", "", SHARDING),
    // Query operators.
    supported(QueryOperator, "$bitsAllSet", "numeric bitmask, bit positions or BinData; matches integral numbers and BinData"),
    supported(QueryOperator, "$bitsAnySet", "as `$bitsAllSet`"),
    supported(QueryOperator, "$bitsAllClear", "as `$bitsAllSet`"),
    supported(QueryOperator, "$bitsAnyClear", "as `$bitsAllSet`"),
    Feature {
        name: "$where",
        kind: QueryOperator,
        status: Status::BadValue,
        area: "$where (docstore has no JavaScript engine)",
        note: "no JavaScript engine (use `$expr`)",
    },
    supported(QueryOperator, "$jsonSchema", "draft 4 keywords as mongod takes them; `$ref`, `format`, `default`, `definitions`, `id` refused (9) as in mongod"),
    supported(QueryOperator, "$near / $nearSphere", "need a `2d` or `2dsphere` index (291 otherwise); distances on mongod's sphere (6 378 100 m)"),
    supported(QueryOperator, "$geoWithin / $geoIntersects", "GeoJSON and legacy shapes; polygon edges straight in (longitude, latitude), not geodesics"),
    // Expression operators.
    supported(Expression, "$rand", "a double in [0, 1), drawn anew for each document"),
    refused(Expression, "$accumulator", "", "needs a JavaScript engine"),
    refused(Expression, "$function", "", "needs a JavaScript engine"),
    refused(Expression, "$sampleRate", "", "not implemented yet"),
    refused(Expression, "$dateAdd", "", "not implemented yet"),
    refused(Expression, "$dateSubtract", "", "not implemented yet"),
    refused(Expression, "$dateDiff", "", "not implemented yet"),
    refused(Expression, "$dateFromParts", "", "not implemented yet"),
    refused(Expression, "$dateToParts", "", "not implemented yet"),
    refused(Expression, "$dateFromString", "", "not implemented yet"),
    refused(Expression, "$regexFind", "", "not implemented yet"),
    refused(Expression, "$regexFindAll", "", "not implemented yet"),
    refused(Expression, "$zip", "", "not implemented yet"),
    refused(Expression, "$sortArray", "", "not implemented yet"),
    refused(Expression, "$firstN", "", "not implemented yet"),
    refused(Expression, "$lastN", "", "not implemented yet"),
    refused(Expression, "$maxN", "", "not implemented yet"),
    refused(Expression, "$minN", "", "not implemented yet"),
    refused(Expression, "$top", "", "not implemented yet"),
    refused(Expression, "$topN", "", "not implemented yet"),
    refused(Expression, "$bottom", "", "not implemented yet"),
    refused(Expression, "$bottomN", "", "not implemented yet"),
    refused(Expression, "$stdDevPop", "", "not implemented yet"),
    refused(Expression, "$stdDevSamp", "", "not implemented yet"),
    refused(Expression, "$binarySize", "", "not implemented yet"),
    refused(Expression, "$bsonSize", "", "not implemented yet"),
    // Index options and kinds.
    supported(IndexOption, "hidden", "kept up to date and enforced (unique), never chosen by the planner nor hintable; `collMod` toggles it; persisted"),
    supported(IndexOption, "collation", "ICU4X collations (strength 1-5, locales and variants, numericOrdering...); a text index takes only `{locale: \"simple\"}` (67)"),
    refused(IndexOption, "prepareUnique", "prepareUnique indexes", "converting an index to unique is not implemented"),
    supported(IndexOption, "2dsphere / 2d", "validated keys, no cells: a geo query reads every located document"),
    refused(IndexOption, "bucketSize", "geoHaystack indexes", "removed in MongoDB 5.0"),
    refused(IndexOption, "wildcardProjection", "wildcard indexes", "no wildcard indexes"),
    refused(IndexOption, "clustered", "clustered indexes", "no clustered collections"),
];

/// The row for `name` of `kind`, if the table has one.
pub(crate) fn find(kind: Kind, name: &str) -> Option<&'static Feature> {
    FEATURES.iter().find(|f| f.kind == kind && f.name == name)
}

impl Feature {
    /// What a refusal's message names: the area when given, else the name (an expression
    /// operator as "the $x expression", a command with its name in brackets).
    fn subject(&self) -> String {
        match (self.kind, self.area) {
            (Command, area) => format!("{area} ('{}')", self.name),
            (Expression, "") => format!("the {} expression", self.name),
            (_, "") => self.name.to_string(),
            (_, area) => area.to_string(),
        }
    }

    /// The error this refused feature answers; `None` for a supported one.
    pub(crate) fn error(&self) -> Option<Error> {
        let message = || format!("{} is not supported by docstore", self.subject());
        match self.status {
            Status::Supported => None,
            Status::NotSupported => Some(Error::new(ErrorCode::CommandNotSupported, message())),
            Status::BadValue => Some(Error::bad_value(message())),
            Status::AsMongod(code, text) => Some(Error::location(code, text)),
        }
    }
}

/// The error a refused feature answers; `None` when the table does not refuse `name`.
pub(crate) fn refusal(kind: Kind, name: &str) -> Option<Error> {
    find(kind, name).and_then(Feature::error)
}

/// The refusal of a feature the table is known to list (an index option the parser meets,
/// say). A name missing from the table still gets a 115 naming it, never a panic.
pub(crate) fn refuse(kind: Kind, name: &str) -> Error {
    refusal(kind, name).unwrap_or_else(|| Error::not_supported(name))
}

/// The README section: one table per kind, supported rows first.
pub fn markdown() -> String {
    let mut out = String::new();
    for kind in Kind::ALL {
        out.push_str(&format!(
            "\n**{}**\n\n| name | docstore | note |\n|---|---|---|\n",
            kind.heading()
        ));
        let rows = FEATURES.iter().filter(|f| f.kind == kind);
        let (yes, no): (Vec<&Feature>, Vec<&Feature>) =
            rows.partition(|f| f.status == Status::Supported);
        for f in yes.into_iter().chain(no) {
            let answer = match f.status {
                Status::Supported => "supported".to_string(),
                Status::NotSupported => "refused, 115".to_string(),
                Status::BadValue => "refused, 2".to_string(),
                Status::AsMongod(code, _) => format!("refused, {code} (as mongod)"),
            };
            out.push_str(&format!("| `{}` | {answer} | {} |\n", f.name, f.note));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The README's markers around the generated section.
    const README_BEGIN: &str =
        "<!-- support table: generated by `docstore --print-support`; edit src/support.rs -->";
    const README_END: &str = "<!-- end of support table -->";

    #[test]
    fn no_feature_is_listed_twice() {
        for (i, f) in FEATURES.iter().enumerate() {
            assert!(
                !FEATURES[..i]
                    .iter()
                    .any(|g| g.kind == f.kind && g.name == f.name),
                "{} is listed twice",
                f.name
            );
        }
    }

    #[test]
    fn refusals_name_the_feature_with_mongods_codes() {
        let e = refuse(Command, "mapReduce");
        assert_eq!(e.code, ErrorCode::CommandNotSupported);
        assert_eq!(
            e.message,
            "mapReduce ('mapReduce') is not supported by docstore"
        );
        assert_eq!(refuse(QueryOperator, "$where").code, ErrorCode::BadValue);
        assert_eq!(refuse(Stage, "$changeStream").code.code(), 40573);
        assert_eq!(
            refuse(Expression, "$function").message,
            "the $function expression is not supported by docstore"
        );
        assert!(refusal(QueryOperator, "$bitsAllSet").is_none());
    }

    /// The README's block between the markers is exactly [`markdown`]; `UPDATE_README=1`
    /// rewrites it instead of failing.
    #[test]
    fn the_readme_support_section_is_the_table_printed() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/README.md");
        let readme = std::fs::read_to_string(path).expect("README.md is readable");
        let start = readme
            .find(README_BEGIN)
            .expect("README.md has the support table's begin marker");
        let body_start = start + README_BEGIN.len();
        let end = body_start
            + readme[body_start..]
                .find(README_END)
                .expect("README.md has the support table's end marker");
        let expected = format!("\n{}\n", markdown());
        if readme[body_start..end] == expected {
            return;
        }
        if std::env::var("UPDATE_README").is_ok_and(|v| v == "1") {
            let updated = format!("{}{}{}", &readme[..body_start], expected, &readme[end..]);
            std::fs::write(path, updated).expect("README.md is writable");
            return;
        }
        panic!(
            "README.md's support section differs from src/support.rs; regenerate it with \
             `UPDATE_README=1 cargo test -p docstore --lib support`"
        );
    }
}
