//! `$lookup`: the equality form (hashed on the foreign side) and the pipeline form with `let`
//! variables.

use super::*;

#[derive(Debug, Clone)]
pub(crate) struct Lookup {
    from: String,
    as_path: Vec<String>,
    local: Option<Vec<String>>,
    foreign: Option<Vec<String>>,
    let_vars: Vec<(String, Expression)>,
    pipeline: Option<Vec<Document>>,
    /// The sub-pipeline parsed once, when it needs no per-document variables.
    parsed: Option<Pipeline>,
}

pub(super) fn lookup_string(v: &Bson, field: &str) -> Result<String> {
    match v {
        Bson::String(s) => Ok(s.clone()),
        other => Err(Error::failed_to_parse(format!(
            "$lookup argument '{field}: {}' must be a string, is type {}",
            fmt_value(other),
            value::type_name(other)
        ))),
    }
}

impl Lookup {
    pub(crate) fn parse(spec: &Bson, vars: &Document) -> Result<Lookup> {
        let Bson::Document(d) = spec else {
            return Err(Error::failed_to_parse(format!(
                "the $lookup stage specification must be an object, but found {}",
                value::type_name(spec)
            )));
        };
        let mut from = None;
        let mut as_field = None;
        let mut local = None;
        let mut foreign = None;
        let mut let_vars = Vec::new();
        let mut has_let = false;
        let mut pipeline = None;
        for (k, v) in d {
            match k.as_str() {
                "from" => from = Some(lookup_string(v, k)?),
                "as" => as_field = Some(lookup_string(v, k)?),
                "localField" => local = Some(split_field_path(&lookup_string(v, k)?)?),
                "foreignField" => foreign = Some(split_field_path(&lookup_string(v, k)?)?),
                "let" => {
                    let Bson::Document(defs) = v else {
                        return Err(Error::failed_to_parse(format!(
                            "$lookup argument 'let' must be an object, is type {}",
                            value::type_name(v)
                        )));
                    };
                    has_let = true;
                    for (name, def) in defs {
                        crate::expression::validate_variable_name(name)?;
                        let_vars.push((name.clone(), Expression::parse(def)?));
                    }
                }
                "pipeline" => {
                    let Bson::Array(items) = v else {
                        return Err(Error::failed_to_parse(
                            "'pipeline' option must be specified as an array",
                        ));
                    };
                    let stages = items
                        .iter()
                        .map(|s| match s {
                            Bson::Document(d) => Ok(d.clone()),
                            _ => Err(Error::type_mismatch(
                                "Each element of the 'pipeline' array must be an object",
                            )),
                        })
                        .collect::<Result<Vec<_>>>()?;
                    pipeline = Some(stages);
                }
                _ => {
                    return Err(Error::failed_to_parse(format!(
                        "unknown argument to $lookup: {k}"
                    )))
                }
            }
        }
        let as_field = as_field
            .ok_or_else(|| Error::failed_to_parse("must specify 'as' field for a $lookup"))?;
        let from = from.ok_or_else(|| {
            Error::failed_to_parse(format!(
                "missing 'from' option to $lookup stage specification: {}",
                fmt_document(d)
            ))
        })?;
        if local.is_some() != foreign.is_some() {
            return Err(Error::failed_to_parse(
                "$lookup requires both or neither of 'localField' and 'foreignField' to be \
                 specified",
            ));
        }
        if pipeline.is_none() {
            if has_let {
                return Err(Error::failed_to_parse(
                    "$lookup with 'let' must also specify a 'pipeline'",
                ));
            }
            if local.is_none() {
                return Err(Error::failed_to_parse(
                    "$lookup requires either 'pipeline' or both 'localField' and 'foreignField' \
                     to be specified",
                ));
            }
        }
        // Validate the sub-pipeline now, with placeholders for the per-document variables.
        let mut parsed = None;
        if let Some(stages) = &pipeline {
            let mut sub_vars = vars.clone();
            for (name, _) in &let_vars {
                sub_vars.insert(name.clone(), Bson::Null);
            }
            let p = Pipeline::parse_with_system_vars(stages, &sub_vars)?;
            if let_vars.is_empty() {
                parsed = Some(p);
            }
        }
        Ok(Lookup {
            from,
            as_path: split_field_path(&as_field)?,
            local,
            foreign,
            let_vars,
            pipeline,
            parsed,
        })
    }

    pub(crate) fn run(
        &self,
        docs: Vec<Document>,
        vars: &Document,
        ctx: &dyn PipelineContext,
    ) -> Result<Vec<Document>> {
        let foreign_docs = ctx.collection_documents(&self.from)?;
        let index = self
            .foreign
            .as_ref()
            .map(|path| ForeignIndex::build(&foreign_docs, path));
        let mut out = Vec::with_capacity(docs.len());
        // Each document may join many foreign ones (or run a sub-pipeline): the command's
        // `maxTimeMS` is looked at as they go.
        let mut clock = crate::deadline::Ticker::start();
        for mut doc in docs {
            clock.tick()?;
            let candidates: Vec<Document> = match (&index, &self.local) {
                (Some(index), Some(local)) => index
                    .matching(&local_values(&doc, local))
                    .into_iter()
                    .map(|i| foreign_docs[i].clone())
                    .collect(),
                _ => foreign_docs.clone(),
            };
            let matched = match &self.pipeline {
                None => candidates,
                Some(stages) => {
                    let mut sub_vars = vars.clone();
                    let scope = Scope::new(&doc, vars);
                    for (name, expr) in &self.let_vars {
                        // A missing value is bound as `undefined`, which compares like missing.
                        let v = expr.eval(&scope)?.unwrap_or(Bson::Undefined);
                        sub_vars.insert(name.clone(), v);
                    }
                    match &self.parsed {
                        Some(p) => p.run_with_vars(candidates, &sub_vars, ctx)?,
                        None => Pipeline::parse_with_system_vars(stages, &sub_vars)?
                            .run(candidates, ctx)?,
                    }
                }
            };
            set_nested(
                &mut doc,
                &self.as_path,
                Bson::Array(matched.into_iter().map(Bson::Document).collect()),
            );
            out.push(doc);
        }
        Ok(out)
    }
}

/// The values `$lookup` matches on for the local side: every value at the path, arrays
/// expanded into their elements; `null` when there are none.
pub(super) fn local_values(doc: &Document, path: &[String]) -> Vec<Bson> {
    let mut out = Vec::new();
    collect_local(&Bson::Document(doc.clone()), path, &mut out);
    if out.is_empty() {
        out.push(Bson::Null);
    }
    out
}

pub(super) fn collect_local(v: &Bson, path: &[String], out: &mut Vec<Bson>) {
    match path.split_first() {
        None => match v {
            Bson::Array(items) => out.extend(items.iter().cloned()),
            other => out.push(other.clone()),
        },
        Some((first, rest)) => match v {
            Bson::Document(d) => {
                if let Some(child) = d.get(first) {
                    collect_local(child, rest, out);
                }
            }
            Bson::Array(items) => {
                for item in items {
                    if let Bson::Document(_) = item {
                        collect_local(item, path, out);
                    }
                }
            }
            _ => {}
        },
    }
}

/// Foreign documents keyed by every value an equality query on the path would match: the
/// value, each element of an array value, and `null` for a missing field.
struct ForeignIndex {
    by_value: BTreeMap<OrdBson, Vec<usize>>,
}

impl ForeignIndex {
    fn build(docs: &[Document], path: &[String]) -> ForeignIndex {
        let mut by_value: BTreeMap<OrdBson, Vec<usize>> = BTreeMap::new();
        for (i, doc) in docs.iter().enumerate() {
            let mut keys = Vec::new();
            collect_foreign(&Bson::Document(doc.clone()), path, &mut keys);
            for k in keys {
                let slot = by_value.entry(OrdBson(k)).or_default();
                if slot.last() != Some(&i) {
                    slot.push(i);
                }
            }
        }
        ForeignIndex { by_value }
    }

    /// Indexes of the documents matching any of `values`, in collection order.
    fn matching(&self, values: &[Bson]) -> Vec<usize> {
        let mut hits: Vec<usize> = values
            .iter()
            .filter_map(|v| self.by_value.get(&OrdBson(v.clone())))
            .flatten()
            .copied()
            .collect();
        hits.sort_unstable();
        hits.dedup();
        hits
    }
}

pub(super) fn collect_foreign(v: &Bson, path: &[String], out: &mut Vec<Bson>) {
    match path.split_first() {
        None => {
            if let Bson::Array(items) = v {
                out.extend(items.iter().cloned());
            }
            out.push(v.clone());
        }
        Some((first, rest)) => match v {
            Bson::Document(d) => match d.get(first) {
                Some(child) => collect_foreign(child, rest, out),
                // A missing field equals null in a query.
                None => out.push(Bson::Null),
            },
            Bson::Array(items) => {
                // Numeric path components may index into the array.
                if let Ok(pos) = first.parse::<usize>() {
                    if let Some(item) = items.get(pos) {
                        collect_foreign(item, rest, out);
                    }
                }
                for item in items {
                    if let Bson::Document(_) = item {
                        collect_foreign(item, path, out);
                    }
                }
            }
            _ => {}
        },
    }
}
