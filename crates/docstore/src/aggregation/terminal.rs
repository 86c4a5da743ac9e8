//! `$out` and `$merge`: the stages that write a pipeline's results to a collection. They are
//! parsed here; the `aggregate` command, which has the catalog, carries out the write.

use super::Pipeline;
use crate::error::{Error, Result};
use crate::value::type_name;
use bson::{Bson, Document};

/// Where and how a pipeline's results are written.
#[derive(Debug, Clone)]
pub(crate) enum TerminalWrite {
    /// Replace the target's documents (keeping its indexes) with the results, all at once.
    Out(Target),
    Merge(Box<MergeSpec>),
}

/// A target collection; `db` is the aggregate's own database when absent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Target {
    pub db: Option<String>,
    pub coll: String,
}

#[derive(Debug, Clone)]
pub(crate) struct MergeSpec {
    pub into: Target,
    /// The fields that identify a result's match in the target (`["_id"]` by default).
    pub on: Vec<String>,
    pub when_matched: WhenMatched,
    pub when_not_matched: WhenNotMatched,
    /// `let` of a pipeline `whenMatched`: expressions over the result document (default
    /// `{ new: "$$ROOT" }`).
    pub vars: Document,
}

#[derive(Debug, Clone)]
pub(crate) enum WhenMatched {
    Replace,
    KeepExisting,
    Merge,
    Fail,
    /// An update pipeline run on the matched target document.
    Pipeline(Box<Pipeline>),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum WhenNotMatched {
    Insert,
    Discard,
    Fail,
}

impl TerminalWrite {
    pub(crate) fn stage_name(&self) -> &'static str {
        match self {
            TerminalWrite::Out(_) => "$out",
            TerminalWrite::Merge(_) => "$merge",
        }
    }

    pub(crate) fn target(&self) -> &Target {
        match self {
            TerminalWrite::Out(t) => t,
            TerminalWrite::Merge(m) => &m.into,
        }
    }
}

pub(super) fn parse(name: &str, spec: &Bson) -> Result<TerminalWrite> {
    match name {
        "$out" => parse_out(spec).map(TerminalWrite::Out),
        _ => parse_merge(spec).map(|m| TerminalWrite::Merge(Box::new(m))),
    }
}

fn missing(field: &str) -> Error {
    Error::location(
        40414,
        format!("BSON field '{field}' is missing but a required field"),
    )
}

fn wrong_type(field: &str, got: &Bson, expected: &str) -> Error {
    Error::type_mismatch(format!(
        "BSON field '{field}' is the wrong type '{}', expected type '{expected}'",
        type_name(got)
    ))
}

fn parse_out(spec: &Bson) -> Result<Target> {
    match spec {
        Bson::String(coll) => Ok(Target {
            db: None,
            coll: coll.clone(),
        }),
        Bson::Document(d) => {
            let mut db = None;
            let mut coll = None;
            for (k, v) in d {
                match (k.as_str(), v) {
                    ("db", Bson::String(s)) => db = Some(s.clone()),
                    ("coll", Bson::String(s)) => coll = Some(s.clone()),
                    ("db" | "coll", other) => {
                        return Err(wrong_type(&format!("$out.{k}"), other, "string"))
                    }
                    ("timeseries", _) => {
                        return Err(Error::not_supported("$out to a time series collection"))
                    }
                    (other, _) => {
                        return Err(Error::location(
                            40415,
                            format!("BSON field '$out.{other}' is an unknown field."),
                        ))
                    }
                }
            }
            let db = db.ok_or_else(|| missing("$out.db"))?;
            let coll = coll.ok_or_else(|| missing("$out.coll"))?;
            Ok(Target { db: Some(db), coll })
        }
        other => Err(Error::location(
            16990,
            format!(
                "$out only supports a string or object argument, not {}",
                type_name(other)
            ),
        )),
    }
}

fn parse_merge(spec: &Bson) -> Result<MergeSpec> {
    let mut merge = MergeSpec {
        into: Target {
            db: None,
            coll: String::new(),
        },
        on: vec!["_id".to_string()],
        when_matched: WhenMatched::Merge,
        when_not_matched: WhenNotMatched::Insert,
        vars: Document::new(),
    };
    let d = match spec {
        Bson::String(coll) => {
            merge.into.coll = coll.clone();
            return Ok(merge);
        }
        Bson::Document(d) => d,
        other => {
            return Err(Error::location(
                51182,
                format!(
                    "$merge only supports a string or object argument, but found {}",
                    type_name(other)
                ),
            ))
        }
    };
    let mut into = None;
    let mut matched_pipeline = None;
    let mut vars = None;
    for (k, v) in d {
        match k.as_str() {
            "into" => {
                into = Some(match v {
                    Bson::String(coll) => Target {
                        db: None,
                        coll: coll.clone(),
                    },
                    Bson::Document(t) => {
                        let db = match t.get("db") {
                            None => None,
                            Some(Bson::String(s)) => Some(s.clone()),
                            Some(other) => {
                                return Err(wrong_type("$merge.into.db", other, "string"))
                            }
                        };
                        let coll = match t.get("coll") {
                            Some(Bson::String(s)) => s.clone(),
                            Some(other) => {
                                return Err(wrong_type("$merge.into.coll", other, "string"))
                            }
                            None => return Err(missing("$merge.into.coll")),
                        };
                        Target { db, coll }
                    }
                    other => {
                        return Err(Error::location(
                            51178,
                            format!(
                                "$merge 'into' field must be either a string or an object, but \
                                 found {}",
                                type_name(other)
                            ),
                        ))
                    }
                })
            }
            "on" => {
                merge.on = match v {
                    Bson::String(s) => vec![s.clone()],
                    Bson::Array(items) if !items.is_empty() => items
                        .iter()
                        .map(|i| match i {
                            Bson::String(s) => Ok(s.clone()),
                            _ => Err(Error::location(
                                51134,
                                "$merge 'on' array elements must be strings",
                            )),
                        })
                        .collect::<Result<_>>()?,
                    Bson::Array(_) => {
                        return Err(Error::location(
                            51187,
                            "If explicitly specifying $merge 'on', must include at least one \
                             field",
                        ))
                    }
                    other => {
                        return Err(Error::location(
                            51186,
                            format!(
                                "$merge 'on' field  must be either a string or an array of \
                                 strings, but found {}",
                                type_name(other)
                            ),
                        ))
                    }
                };
            }
            "whenMatched" => match v {
                Bson::String(mode) => {
                    merge.when_matched = match mode.as_str() {
                        "replace" => WhenMatched::Replace,
                        "keepExisting" => WhenMatched::KeepExisting,
                        "merge" => WhenMatched::Merge,
                        "fail" => WhenMatched::Fail,
                        other => {
                            return Err(Error::bad_value(format!(
                                "Enumeration value '{other}' for field 'whenMatched' is not a \
                                 valid value."
                            )))
                        }
                    }
                }
                Bson::Array(stages) => matched_pipeline = Some(stages.clone()),
                other => {
                    return Err(Error::location(
                        51191,
                        format!(
                            "$merge 'whenMatched' field must be either a string or an array, \
                             but found {}",
                            type_name(other)
                        ),
                    ))
                }
            },
            "whenNotMatched" => match v {
                Bson::String(mode) => {
                    merge.when_not_matched = match mode.as_str() {
                        "insert" => WhenNotMatched::Insert,
                        "discard" => WhenNotMatched::Discard,
                        "fail" => WhenNotMatched::Fail,
                        other => {
                            return Err(Error::bad_value(format!(
                                "Enumeration value '{other}' for field 'whenNotMatched' is not a \
                                 valid value."
                            )))
                        }
                    }
                }
                other => return Err(wrong_type("$merge.whenNotMatched", other, "string")),
            },
            "let" => match v {
                Bson::Document(l) => vars = Some(l.clone()),
                other => return Err(wrong_type("$merge.let", other, "object")),
            },
            "targetCollectionVersion" => {}
            other => {
                return Err(Error::location(
                    40415,
                    format!("BSON field '$merge.{other}' is an unknown field."),
                ))
            }
        }
    }
    merge.into = into.ok_or_else(|| missing("$merge.into"))?;
    let unsupported = match (
        &matched_pipeline,
        &merge.when_matched,
        merge.when_not_matched,
    ) {
        (None, WhenMatched::KeepExisting, WhenNotMatched::Fail) => Some(("keepExisting", "fail")),
        (None, WhenMatched::KeepExisting, WhenNotMatched::Discard) => {
            Some(("keepExisting", "discard"))
        }
        (None, WhenMatched::Fail, WhenNotMatched::Fail) => Some(("fail", "fail")),
        (None, WhenMatched::Fail, WhenNotMatched::Discard) => Some(("fail", "discard")),
        _ => None,
    };
    if let Some((matched, not_matched)) = unsupported {
        return Err(Error::location(
            51189,
            format!(
                "Combination of $merge modes 'whenMatched: {matched}' and 'whenNotMatched: \
                 {not_matched}' is not supported"
            ),
        ));
    }
    match matched_pipeline {
        Some(stages) => {
            let vars = vars.unwrap_or_else(|| bson::doc! { "new": "$$ROOT" });
            // Names only at parse time: the values come from each result document.
            let placeholders: Document = vars.keys().map(|k| (k.clone(), Bson::Null)).collect();
            let pipeline = Pipeline::parse_for_update(&stages, &placeholders)?;
            merge.vars = vars;
            merge.when_matched = WhenMatched::Pipeline(Box::new(pipeline));
        }
        None => {
            if vars.is_some() {
                let mode = match merge.when_matched {
                    WhenMatched::Replace => "replace",
                    WhenMatched::KeepExisting => "keepExisting",
                    WhenMatched::Merge => "merge",
                    _ => "fail",
                };
                return Err(Error::location(
                    51199,
                    format!("Cannot use 'let' variables with 'whenMatched: {mode}' mode"),
                ));
            }
        }
    }
    Ok(merge)
}
