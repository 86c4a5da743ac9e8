//! `$bucket`: grouping by boundaries, with a `default` bucket and per-bucket accumulators.

use super::*;

#[derive(Debug, Clone)]
pub(crate) struct Bucket {
    group_by: Expression,
    boundaries: Vec<Bson>,
    default: Option<Bson>,
    output: Option<Group>,
}

impl Bucket {
    pub(crate) fn parse(spec: &Bson) -> Result<Bucket> {
        let Bson::Document(d) = spec else {
            return Err(Error::location(
                40201,
                format!(
                    "Argument to $bucket stage must be an object, but found type: {}.",
                    value::type_name(spec)
                ),
            ));
        };
        let mut group_by = None;
        let mut boundaries = None;
        let mut default = None;
        let mut output = None;
        for (k, v) in d {
            match k.as_str() {
                "groupBy" => {
                    let is_expr = match v {
                        Bson::String(s) => s.starts_with('$'),
                        Bson::Document(_) => true,
                        _ => false,
                    };
                    if !is_expr {
                        return Err(Error::location(
                            40202,
                            format!(
                                "The $bucket 'groupBy' field must be defined as a $-prefixed \
                                 path or an expression, but found: {}.",
                                fmt_value(v)
                            ),
                        ));
                    }
                    group_by = Some(Expression::parse(v)?);
                }
                "boundaries" => {
                    let Bson::Array(items) = v else {
                        return Err(Error::location(
                            40200,
                            format!(
                                "The $bucket 'boundaries' field must be an array, but found \
                                 type: {}.",
                                value::type_name(v)
                            ),
                        ));
                    };
                    boundaries = Some(items.clone());
                }
                "default" => default = Some(v.clone()),
                "output" => {
                    let Bson::Document(out) = v else {
                        return Err(Error::location(
                            40196,
                            format!(
                                "The $bucket 'output' field must be an object, but found type: {}.",
                                value::type_name(v)
                            ),
                        ));
                    };
                    let mut spec = out.clone();
                    spec.insert("_id", Bson::Null);
                    output = Some(Group::parse(&Bson::Document(spec))?);
                }
                _ => {
                    return Err(Error::location(
                        40197,
                        format!("Unrecognized option to $bucket: {k}."),
                    ))
                }
            }
        }
        let (Some(group_by), Some(boundaries)) = (group_by, boundaries) else {
            return Err(Error::location(
                40198,
                "$bucket requires 'groupBy' and 'boundaries' to be specified.",
            ));
        };
        if boundaries.len() < 2 {
            return Err(Error::location(
                40192,
                format!(
                    "The $bucket 'boundaries' field must have at least 2 values, but found {} \
                     value(s).",
                    boundaries.len()
                ),
            ));
        }
        for pair in boundaries.windows(2) {
            if canonical_rank(&pair[0]) != canonical_rank(&pair[1]) {
                return Err(Error::location(
                    40193,
                    format!(
                        "All values in the the 'boundaries' option to $bucket must have the same \
                         type. Found conflicting types {} and {}.",
                        value::type_name(&pair[0]),
                        value::type_name(&pair[1])
                    ),
                ));
            }
            if compare(&pair[0], &pair[1]) != Ordering::Less {
                return Err(Error::location(
                    40194,
                    format!(
                        "The 'boundaries' option to $bucket must be sorted in ascending order, \
                         but elements {} and {} are not in ascending order",
                        fmt_value(&pair[0]),
                        fmt_value(&pair[1])
                    ),
                ));
            }
        }
        if let Some(d) = &default {
            let (lo, hi) = (&boundaries[0], &boundaries[boundaries.len() - 1]);
            let same_type = canonical_rank(d) == canonical_rank(lo);
            if same_type && compare(d, lo) != Ordering::Less && compare(d, hi) == Ordering::Less {
                return Err(Error::location(
                    40199,
                    "The $bucket 'default' field must be less than the lowest boundary or \
                     greater than or equal to the highest boundary.",
                ));
            }
        }
        Ok(Bucket {
            group_by,
            boundaries,
            default,
            output,
        })
    }

    pub(crate) fn run(&self, docs: &[Document], vars: &Document) -> Result<Vec<Document>> {
        let group = match &self.output {
            Some(g) => g.clone(),
            None => Group::count_by(Expression::Literal(Bson::Null), "count"),
        };
        let mut groups = group.run_keyed(docs, vars, |scope| {
            let v = self.group_by.eval(scope)?.unwrap_or(Bson::Null);
            let bucket = self.boundaries.windows(2).find(|w| {
                canonical_rank(&v) == canonical_rank(&w[0])
                    && compare(&v, &w[0]) != Ordering::Less
                    && compare(&v, &w[1]) == Ordering::Less
            });
            match (bucket, &self.default) {
                (Some(w), _) => Ok(w[0].clone()),
                (None, Some(d)) => Ok(d.clone()),
                // MongoDB builds $bucket from $switch, hence this error.
                (None, None) => Err(Error::location(
                    40066,
                    "$switch could not find a matching branch for an input, and no default was \
                     specified.",
                )),
            }
        })?;
        groups.sort_by(|a, b| {
            compare(
                a.get("_id").unwrap_or(&Bson::Null),
                b.get("_id").unwrap_or(&Bson::Null),
            )
        });
        Ok(groups)
    }
}
