//! `$unwind`: one output document per array element, with `includeArrayIndex` and
//! `preserveNullAndEmptyArrays`.

use super::*;

#[derive(Debug, Clone)]
pub(crate) struct Unwind {
    path: Vec<String>,
    index_field: Option<Vec<String>>,
    preserve: bool,
}

impl Unwind {
    pub(crate) fn parse(spec: &Bson) -> Result<Unwind> {
        let (path, index_field, preserve) = match spec {
            Bson::String(s) => (s.clone(), None, false),
            Bson::Document(d) => {
                let mut path = None;
                let mut index_field = None;
                let mut preserve = false;
                for (k, v) in d {
                    match k.as_str() {
                        "path" => match v {
                            Bson::String(s) => path = Some(s.clone()),
                            other => {
                                return Err(Error::location(
                                    28808,
                                    format!(
                                        "Expected a string as the path for $unwind stage, got {}",
                                        value::type_name(other)
                                    ),
                                ))
                            }
                        },
                        "includeArrayIndex" => match v {
                            Bson::String(s) if !s.is_empty() => {
                                if s.starts_with('$') {
                                    return Err(Error::location(
                                        28822,
                                        format!(
                                            "includeArrayIndex option to $unwind stage should not \
                                             be prefixed with a '$': {s}"
                                        ),
                                    ));
                                }
                                index_field = Some(split_field_path(s)?);
                            }
                            other => {
                                return Err(Error::location(
                                    28810,
                                    format!(
                                        "expected a non-empty string for the includeArrayIndex \
                                         option to $unwind stage, got {}",
                                        value::type_name(other)
                                    ),
                                ))
                            }
                        },
                        "preserveNullAndEmptyArrays" => match v {
                            Bson::Boolean(b) => preserve = *b,
                            other => {
                                return Err(Error::location(
                                    28809,
                                    format!(
                                        "expected a boolean for the preserveNullAndEmptyArrays \
                                         option to $unwind stage, got {}",
                                        value::type_name(other)
                                    ),
                                ))
                            }
                        },
                        _ => {
                            return Err(Error::location(
                                28811,
                                format!("unrecognized option to $unwind stage: {k}"),
                            ))
                        }
                    }
                }
                let path = path
                    .ok_or_else(|| Error::location(28812, "no path specified to $unwind stage"))?;
                (path, index_field, preserve)
            }
            other => {
                return Err(Error::location(
                    15981,
                    format!(
                        "expected either a string or an object as specification for $unwind \
                         stage, got {}",
                        value::type_name(other)
                    ),
                ))
            }
        };
        let Some(stripped) = path.strip_prefix('$') else {
            return Err(Error::location(
                28818,
                format!("path option to $unwind stage should be prefixed with a '$': {path}"),
            ));
        };
        Ok(Unwind {
            path: split_field_path(stripped)?,
            index_field,
            preserve,
        })
    }

    pub(crate) fn run(&self, docs: Vec<Document>) -> Vec<Document> {
        let mut out = Vec::with_capacity(docs.len());
        for doc in docs {
            match get_nested(&doc, &self.path) {
                Some(Bson::Array(items)) if !items.is_empty() => {
                    let items = items.clone();
                    for (i, item) in items.into_iter().enumerate() {
                        let mut d = doc.clone();
                        set_nested(&mut d, &self.path, item);
                        if let Some(index) = &self.index_field {
                            set_nested(&mut d, index, Bson::Int64(i as i64));
                        }
                        out.push(d);
                    }
                }
                Some(Bson::Array(_)) | Some(Bson::Null) | Some(Bson::Undefined) | None => {
                    if self.preserve {
                        let mut d = doc;
                        // A preserved empty array leaves no field behind.
                        if matches!(get_nested(&d, &self.path), Some(Bson::Array(_))) {
                            remove_nested(&mut d, &self.path);
                        }
                        if let Some(index) = &self.index_field {
                            set_nested(&mut d, index, Bson::Null);
                        }
                        out.push(d);
                    }
                }
                // A non-array value unwinds to itself.
                Some(_) => {
                    let mut d = doc;
                    if let Some(index) = &self.index_field {
                        set_nested(&mut d, index, Bson::Null);
                    }
                    out.push(d);
                }
            }
        }
        out
    }
}
