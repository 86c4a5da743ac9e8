//! Aggregation pipelines: stage parsing and execution, accumulators and expressions, with
//! MongoDB 7.0's semantics and error codes. Stages MongoDB has but docstore does not implement
//! are refused by name, never ignored.

mod accumulators;
mod projection;
mod stages;
pub(crate) mod terminal;
mod update_pipeline;

use crate::error::{Error, Result};
use crate::expression::{self, Expression};
use crate::query::{Filter, SortSpec};
use accumulators::Group;
use bson::{Bson, Document};
use projection::Projection;
use stages::{Bucket, BucketAuto, CollStats, GraphLookup, Lookup, Unwind};
pub(crate) use terminal::{MergeSpec, TerminalWrite, WhenMatched, WhenNotMatched};

/// Access a pipeline needs beyond its input: other collections of the same database, and
/// the collection it aggregates.
pub(crate) trait PipelineContext {
    /// All documents of `collection` in the current database (empty if it does not exist).
    fn collection_documents(&self, collection: &str) -> Result<Vec<Document>>;

    /// What `$collStats` reports on: the collection the pipeline aggregates.
    fn aggregated_collection(&self) -> Result<AggregatedCollection>;
}

/// The collection a pipeline aggregates, as `$collStats` reports it.
#[derive(Debug, Clone)]
pub(crate) struct AggregatedCollection {
    /// `db.collection`.
    pub namespace: String,
    /// The server's `host` (as `serverStatus` reports it).
    pub host: String,
    /// The collection's `Collection::stats` figures; `None` when it does not exist.
    pub stats: Option<Document>,
}

#[derive(Debug, Clone)]
enum Stage {
    Match {
        spec: Document,
        filter: Filter,
    },
    /// `$project`, `$addFields`/`$set` and `$unset`.
    Project(Projection),
    Group(Group),
    Sort(SortSpec),
    Skip(u64),
    Limit(u64),
    Unwind(Unwind),
    Count(String),
    Lookup(Box<Lookup>),
    ReplaceRoot {
        expr: Expression,
        /// `$replaceWith` names its argument differently in errors.
        with: bool,
    },
    Facet(Vec<(String, Pipeline)>),
    SortByCount(Expression),
    Bucket(Box<Bucket>),
    BucketAuto(Box<BucketAuto>),
    GraphLookup(Box<GraphLookup>),
    Sample(usize),
    /// `$collStats`, which replaces its (empty) input with one report.
    CollStats(CollStats),
    /// `$geoNear` (first stage only): the aggregate command asks the collection for its
    /// documents, nearest first (see [`Pipeline::leading_geo_near`]).
    GeoNear(Box<crate::geospatial::GeoNearSpec>),
}

/// A parsed aggregation pipeline.
#[derive(Debug, Clone)]
pub(crate) struct Pipeline {
    stages: Vec<Stage>,
    /// The stage names as written, parallel to `stages`.
    names: Vec<String>,
    vars: Document,
    /// A final `$out` or `$merge` (top-level pipelines only).
    terminal: Option<TerminalWrite>,
}

impl Pipeline {
    /// Parse the `pipeline` array of an `aggregate` command; `vars` are its `let` variables.
    pub(crate) fn parse(stages: &[Document], vars: &Document) -> Result<Pipeline> {
        for name in vars.keys().filter(|k| *k != expression::MISSING_VARIABLES) {
            expression::validate_variable_name(name)?;
        }
        // Only the top-level pipeline may end in `$out`/`$merge`.
        let last = stages.last().and_then(|s| {
            let (name, spec) = s.iter().next()?;
            (s.len() == 1 && (name == "$out" || name == "$merge")).then_some((name, spec))
        });
        match last {
            Some((name, spec)) => {
                let mut pipeline = Self::parse_stages(&stages[..stages.len() - 1], vars, true)?;
                pipeline.terminal = Some(terminal::parse(name, spec)?);
                if pipeline.ignores_input() {
                    // The report is about the collection; writing it elsewhere is not offered.
                    return Err(Error::not_supported(format!("{name} after $collStats")));
                }
                Ok(pipeline)
            }
            None => Self::parse_stages(stages, vars, true),
        }
    }

    /// The final `$out`/`$merge`, whose write the caller performs with the pipeline's results.
    pub(crate) fn terminal_write(&self) -> Option<&TerminalWrite> {
        self.terminal.as_ref()
    }

    /// Parse a sub-pipeline (`$lookup`, `$facet`) whose variables may include system ones
    /// (`$$NOW`) set by the enclosing pipeline.
    fn parse_with_system_vars(stages: &[Document], vars: &Document) -> Result<Pipeline> {
        Self::parse_stages(stages, vars, false)
    }

    /// Parse the stages of a top-level pipeline or, with `top_level` false, of a sub-pipeline.
    fn parse_stages(stages: &[Document], vars: &Document, top_level: bool) -> Result<Pipeline> {
        let parsed = stages
            .iter()
            .enumerate()
            .map(|(i, s)| {
                let position = match (top_level, i) {
                    (false, _) => Position::Nested,
                    (true, 0) => Position::Opening,
                    (true, _) => Position::Later,
                };
                parse_stage(s, vars, position)
            })
            .collect::<Result<Vec<_>>>()?;
        for stage in parsed.iter().skip(1) {
            if let Stage::Match { filter, .. } = stage {
                if filter.text().is_some() {
                    return Err(text_not_first());
                }
            }
        }
        Ok(Pipeline {
            stages: parsed,
            names: stages
                .iter()
                .filter_map(|s| s.keys().next().cloned())
                .collect(),
            vars: vars.clone(),
            terminal: None,
        })
    }

    /// Whether the first stage makes the pipeline's documents itself (`$collStats`), so the
    /// caller has no input to read.
    pub(crate) fn ignores_input(&self) -> bool {
        matches!(self.stages.first(), Some(Stage::CollStats(_)))
    }

    /// The filter of a leading `$match`, which the caller may answer with an index before
    /// running the rest of the pipeline (see [`Pipeline::without_leading_match`]).
    pub(crate) fn leading_match(&self) -> Option<&Document> {
        match self.stages.first() {
            Some(Stage::Match { spec, .. }) => Some(spec),
            _ => None,
        }
    }

    /// The top-level fields the stages after the leading `$match` read, when they are known: a
    /// `$group` right after it names them (its output is all later stages see). A caller may
    /// then decode only those fields of each match, as mongod's dependency analysis projects
    /// what a pipeline needs; `None` to pass whole documents.
    pub(crate) fn fields_after_match(&self) -> Option<&[String]> {
        self.leading_match()?;
        match self.stages.get(1) {
            Some(Stage::Group(g)) => g.fields(),
            _ => None,
        }
    }

    /// The stages after the leading `$match` over its matches given one at a time. When a
    /// `$group` follows it (see [`Pipeline::fields_after_match`]) each match is grouped as it
    /// comes and dropped, so a million matches are never all held decoded (their allocation
    /// cost more than the grouping); otherwise they are collected and run as by
    /// [`Pipeline::run`].
    pub(crate) fn run_after_match<D: std::borrow::Borrow<Document>>(
        &self,
        matches: impl IntoIterator<Item = Result<D>>,
        ctx: &dyn PipelineContext,
    ) -> Result<Vec<Document>> {
        let group = match self.stages.get(1) {
            Some(Stage::Group(group)) if self.leading_match().is_some() => group,
            _ => {
                let input = matches
                    .into_iter()
                    .map(|d| d.map(|d| d.borrow().clone()))
                    .collect::<Result<Vec<Document>>>()?;
                return self.without_leading_match().run(input, ctx);
            }
        };
        let now = bson::DateTime::now();
        let mut vars = self.vars.clone();
        if !vars.contains_key("NOW") {
            vars.insert("NOW", Bson::DateTime(now));
        }
        let rest = Pipeline {
            stages: self.stages[2..].to_vec(),
            names: self.names.get(2..).unwrap_or_default().to_vec(),
            vars: self.vars.clone(),
            terminal: self.terminal.clone(),
        };
        let mut clock = crate::deadline::Ticker::start();
        let matches = matches.into_iter().map(move |d| clock.tick().and(d));
        let groups = group.run_over(matches, &vars)?;
        rest.run_at(groups, ctx, now)
    }

    /// The leading `$geoNear`, whose documents (nearest first, with their distances) the
    /// caller takes from the collection before running the rest of the pipeline.
    pub(crate) fn leading_geo_near(&self) -> Option<&crate::geospatial::GeoNearSpec> {
        match self.stages.first() {
            Some(Stage::GeoNear(spec)) => Some(spec),
            _ => None,
        }
    }

    /// Whether the pipeline starts with a `$match` holding `$text`.
    pub(crate) fn leading_text_match(&self) -> bool {
        matches!(self.stages.first(), Some(Stage::Match { filter, .. }) if filter.text().is_some())
    }

    /// Whether what follows the leading `$match` depends only on how many documents it passes
    /// (`$skip`, `$limit`, `$count` and counting `$group`s, see [`Group::only_counts`]): the
    /// shape of the driver's `count_documents`. The caller may then pass placeholder documents
    /// instead of decoding every match.
    pub(crate) fn only_counts_after_match(&self) -> bool {
        self.leading_match().is_some()
            && self.terminal.is_none()
            && self.stages[1..].iter().all(|stage| match stage {
                Stage::Skip(_) | Stage::Limit(_) | Stage::Count(_) => true,
                Stage::Group(g) => g.only_counts(),
                _ => false,
            })
    }

    /// How many of the leading `$match`'s documents the stages after it can use at most: the
    /// `$skip`s and `$limit` right after it (`count_documents` with a `limit`), or `None`
    /// without a `$limit` there. A caller may stop matching after that many.
    pub(crate) fn used_after_match(&self) -> Option<usize> {
        self.leading_match()?;
        let mut skipped: u64 = 0;
        let mut used: Option<u64> = None;
        for stage in &self.stages[1..] {
            match stage {
                Stage::Skip(n) => skipped = skipped.saturating_add(*n),
                Stage::Limit(n) => {
                    let here = skipped.saturating_add(*n);
                    used = Some(used.map_or(here, |u| u.min(here)));
                }
                _ => break,
            }
        }
        used.map(|n| usize::try_from(n).unwrap_or(usize::MAX))
    }

    /// The pipeline minus its leading `$match` (unchanged when it has none), for a caller that
    /// has already selected the matching documents.
    pub(crate) fn without_leading_match(&self) -> Pipeline {
        let skip = usize::from(self.leading_match().is_some() || self.leading_geo_near().is_some());
        Pipeline {
            stages: self.stages[skip..].to_vec(),
            names: self.names[skip..].to_vec(),
            vars: self.vars.clone(),
            terminal: self.terminal.clone(),
        }
    }

    /// The same stages with these variables added (overriding any of the same name), e.g.
    /// `$merge`'s `let` values for one result document.
    pub(crate) fn with_vars(&self, extra: &Document) -> Pipeline {
        let mut p = self.clone();
        for (k, v) in extra {
            p.vars.insert(k.clone(), v.clone());
        }
        p
    }

    /// The stage names as written, in order.
    pub(crate) fn stage_names(&self) -> &[String] {
        &self.names
    }

    /// The number of stages (after parsing; `$count` and friends count as one).
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.stages.len()
    }

    pub(crate) fn run(
        &self,
        input: Vec<Document>,
        ctx: &dyn PipelineContext,
    ) -> Result<Vec<Document>> {
        self.run_at(input, ctx, bson::DateTime::now())
    }

    /// Run with `$$NOW` fixed to `now` (one instant for a whole command, e.g. a multi-document
    /// pipeline update), unless the pipeline's variables already set it.
    pub(crate) fn run_at(
        &self,
        input: Vec<Document>,
        ctx: &dyn PipelineContext,
        now: bson::DateTime,
    ) -> Result<Vec<Document>> {
        let mut vars = self.vars.clone();
        if !vars.contains_key("NOW") {
            vars.insert("NOW", Bson::DateTime(now));
        }
        let mut docs = input;
        let mut i = 0;
        while i < self.stages.len() {
            // A command's `maxTimeMS` is looked at between stages (the collection's scan looks
            // at it as it goes).
            crate::deadline::check()?;
            let stage = &self.stages[i];
            // A sort feeding a limit keeps only the top k documents instead of sorting all.
            if let Stage::Sort(spec) = stage {
                match (self.stages.get(i + 1), self.stages.get(i + 2)) {
                    (Some(Stage::Limit(n)), _) => {
                        docs = stages::top_k(docs, spec, *n);
                        i += 2;
                        continue;
                    }
                    (Some(Stage::Skip(s)), Some(Stage::Limit(n))) => {
                        let mut top = stages::top_k(docs, spec, s.saturating_add(*n));
                        let s = (*s).min(top.len() as u64) as usize;
                        top.drain(..s);
                        docs = top;
                        i += 3;
                        continue;
                    }
                    _ => {}
                }
            }
            docs = run_stage(stage, docs, &vars, ctx)?;
            i += 1;
        }
        Ok(docs)
    }
}

/// Where a stage sits, for the stages that may only open a top-level pipeline.
#[derive(Debug, Clone, Copy)]
enum Position {
    /// The first stage of a top-level pipeline.
    Opening,
    /// A later stage of a top-level pipeline.
    Later,
    /// Any stage of a `$lookup` or `$facet` sub-pipeline.
    Nested,
}

fn parse_stage(stage: &Document, vars: &Document, position: Position) -> Result<Stage> {
    if stage.len() != 1 {
        return Err(Error::location(
            40323,
            "A pipeline stage specification object must contain exactly one field.",
        ));
    }
    let (name, spec) = stage.iter().next().expect("one field");
    Ok(match name.as_str() {
        "$match" => {
            let Bson::Document(spec) = spec else {
                return Err(Error::location(
                    15959,
                    "the match filter must be an expression in an object",
                ));
            };
            let filter = Filter::parse_with_vars(spec, vars)?;
            if filter.near().is_some() {
                return Err(Error::location(
                    5626500,
                    "$geoNear, $near, and $nearSphere are not allowed in this context, as these \
                     operators require sorting geospatial data. If you do not need sort, \
                     consider using $geoWithin instead.",
                ));
            }
            Stage::Match {
                filter,
                spec: spec.clone(),
            }
        }
        "$project" => {
            let Bson::Document(spec) = spec else {
                return Err(Error::location(
                    15969,
                    "$project specification must be an object",
                ));
            };
            Stage::Project(Projection::parse_project(spec)?)
        }
        "$addFields" | "$set" => {
            let Bson::Document(spec) = spec else {
                return Err(Error::location(
                    40272,
                    format!(
                        "{name} specification stage must be an object, got {}",
                        crate::value::type_name(spec)
                    ),
                ));
            };
            Stage::Project(Projection::parse_add_fields(spec, name)?)
        }
        "$unset" => Stage::Project(Projection::parse_unset(spec)?),
        "$group" => Stage::Group(Group::parse(spec)?),
        "$sort" => {
            let Bson::Document(spec) = spec else {
                return Err(Error::location(
                    15973,
                    "the $sort key specification must be an object",
                ));
            };
            if spec.is_empty() {
                return Err(Error::location(
                    15976,
                    "$sort stage must have at least one sort key",
                ));
            }
            Stage::Sort(SortSpec::parse(spec)?)
        }
        "$skip" => Stage::Skip(stages::parse_non_negative(spec, "$skip", 5107200)?),
        "$limit" => {
            let n = stages::parse_non_negative(spec, "$limit", 5107201)?;
            if n == 0 {
                return Err(Error::location(15958, "the limit must be positive"));
            }
            Stage::Limit(n)
        }
        "$unwind" => Stage::Unwind(Unwind::parse(spec)?),
        "$count" => Stage::Count(stages::parse_count(spec)?),
        "$lookup" => Stage::Lookup(Box::new(Lookup::parse(spec, vars)?)),
        "$replaceRoot" => Stage::ReplaceRoot {
            expr: stages::parse_replace_root(spec)?,
            with: false,
        },
        "$replaceWith" => Stage::ReplaceRoot {
            expr: Expression::parse(spec)?,
            with: true,
        },
        "$facet" => Stage::Facet(parse_facet(spec, vars)?),
        "$sortByCount" => Stage::SortByCount(stages::parse_sort_by_count(spec)?),
        "$bucket" => Stage::Bucket(Box::new(Bucket::parse(spec)?)),
        "$bucketAuto" => Stage::BucketAuto(Box::new(BucketAuto::parse(spec)?)),
        "$graphLookup" => Stage::GraphLookup(Box::new(GraphLookup::parse(spec)?)),
        "$sample" => Stage::Sample(stages::parse_sample(spec)?),
        "$collStats" => match position {
            Position::Opening => Stage::CollStats(CollStats::parse(spec)?),
            Position::Later => {
                return Err(Error::location(
                    40602,
                    "$collStats is only valid as the first stage in a pipeline",
                ))
            }
            // A sub-pipeline's collection is not the one the command names.
            Position::Nested => return Err(Error::not_supported(name)),
        },
        "$geoNear" => match position {
            Position::Opening => {
                Stage::GeoNear(Box::new(crate::geospatial::GeoNearSpec::parse(spec)?))
            }
            Position::Later => return Err(geo_near_not_first()),
            // A sub-pipeline reads another collection, whose indexes the stage would need.
            Position::Nested => return Err(Error::not_supported("$geoNear in a sub-pipeline")),
        },
        "$out" | "$merge" => {
            return Err(Error::location(
                40601,
                format!("{name} can only be the final stage in the pipeline"),
            ))
        }
        // A leading `$documents` of `aggregate: 1` is taken off by the command before parsing.
        "$documents" => {
            return Err(Error::location(
                40602,
                "$documents is only valid as the first stage in a pipeline",
            ))
        }
        other => {
            if let Some(refusal) = crate::support::refusal(crate::support::Kind::Stage, other) {
                return Err(refusal);
            }
            return Err(Error::location(
                40324,
                format!("Unrecognized pipeline stage name: '{other}'"),
            ));
        }
    })
}

fn geo_near_not_first() -> Error {
    Error::location(
        40602,
        "$geoNear is only valid as the first stage in a pipeline",
    )
}

fn text_not_first() -> Error {
    Error::location(
        17313,
        "$match with $text is only allowed as the first pipeline stage",
    )
}

/// Whether a stage specification asks for `{$meta: "textScore"}` anywhere.
pub(crate) fn uses_text_score(value: &Bson) -> bool {
    match value {
        Bson::Document(d) => {
            (d.len() == 1 && d.get("$meta") == Some(&Bson::String("textScore".into())))
                || d.values().any(uses_text_score)
        }
        Bson::Array(items) => items.iter().any(uses_text_score),
        _ => false,
    }
}

/// Stages a `$facet` sub-pipeline may not contain.
const NOT_IN_FACET: &[&str] = &[
    "$facet",
    "$out",
    "$merge",
    "$geoNear",
    "$indexStats",
    "$collStats",
    "$changeStream",
    "$search",
    "$searchMeta",
];

fn parse_facet(spec: &Bson, vars: &Document) -> Result<Vec<(String, Pipeline)>> {
    let Bson::Document(spec) = spec else {
        return Err(Error::location(
            15947,
            "the $facet specification must be a non-empty object",
        ));
    };
    if spec.is_empty() {
        return Err(Error::location(
            40169,
            "the $facet specification must be a non-empty object",
        ));
    }
    let mut facets = Vec::new();
    for (name, sub) in spec {
        if name.is_empty() || name.starts_with('$') || name.contains('.') {
            return Err(Error::location(
                40172,
                format!("$facet pipeline names must be valid field names: '{name}'"),
            ));
        }
        let Bson::Array(items) = sub else {
            return Err(Error::location(
                40170,
                format!(
                    "arguments to $facet must be arrays, {name} is type {}",
                    crate::value::type_name(sub)
                ),
            ));
        };
        let mut stages = Vec::with_capacity(items.len());
        for item in items {
            let Bson::Document(stage) = item else {
                return Err(Error::location(
                    40171,
                    format!(
                        "subpipeline of $facet stage must consist of only objects, but found \
                         type {}",
                        crate::value::type_name(item)
                    ),
                ));
            };
            if let Some(stage_name) = stage.keys().next() {
                if NOT_IN_FACET.contains(&stage_name.as_str()) {
                    return Err(Error::location(
                        40600,
                        format!("{stage_name} is not allowed to be used within a $facet stage"),
                    ));
                }
            }
            stages.push(stage.clone());
        }
        let pipeline = Pipeline::parse_with_system_vars(&stages, vars)?;
        if pipeline.leading_text_match() {
            return Err(text_not_first());
        }
        facets.push((name.clone(), pipeline));
    }
    Ok(facets)
}

fn run_stage(
    stage: &Stage,
    mut docs: Vec<Document>,
    vars: &Document,
    ctx: &dyn PipelineContext,
) -> Result<Vec<Document>> {
    Ok(match stage {
        Stage::Match { filter, .. } => {
            docs.retain(|d| filter.matches(d));
            docs
        }
        // Only a pipeline over a collection's documents can start with it (the command
        // answers it there); over `$documents` input it has no index to search.
        Stage::GeoNear(_) => return Err(geo_near_not_first()),
        Stage::Project(p) => docs
            .iter()
            .map(|d| p.apply(d, &expression::Scope::new(d, vars)))
            .collect::<Result<_>>()?,
        Stage::Group(g) => g.run(&docs, vars)?,
        Stage::Sort(spec) => {
            // `sort_by` is stable: ties keep their input order.
            docs.sort_by(|a, b| spec.compare(a, b));
            docs
        }
        Stage::Skip(n) => {
            let n = (*n).min(docs.len() as u64) as usize;
            docs.drain(..n);
            docs
        }
        Stage::Limit(n) => {
            docs.truncate((*n).min(docs.len() as u64) as usize);
            docs
        }
        Stage::Unwind(u) => u.run(docs),
        Stage::Count(field) => {
            if docs.is_empty() {
                Vec::new()
            } else {
                let n = docs.len();
                let count = i32::try_from(n).map_or(Bson::Int64(n as i64), Bson::Int32);
                let mut out = Document::new();
                out.insert(field.clone(), count);
                vec![out]
            }
        }
        Stage::Lookup(l) => l.run(docs, vars, ctx)?,
        Stage::ReplaceRoot { expr, with } => docs
            .iter()
            .map(|d| stages::replace_root(expr, *with, d, vars))
            .collect::<Result<_>>()?,
        Stage::Facet(facets) => {
            let mut out = Document::new();
            for (name, pipeline) in facets {
                let results = pipeline.run_with_vars(docs.clone(), vars, ctx)?;
                out.insert(
                    name.clone(),
                    Bson::Array(results.into_iter().map(Bson::Document).collect()),
                );
            }
            vec![out]
        }
        Stage::SortByCount(expr) => {
            let mut groups = Group::count_by(expr.clone(), "count").run(&docs, vars)?;
            groups.sort_by(|a, b| {
                crate::value::compare(
                    b.get("count").unwrap_or(&Bson::Null),
                    a.get("count").unwrap_or(&Bson::Null),
                )
            });
            groups
        }
        Stage::Bucket(b) => b.run(&docs, vars)?,
        Stage::BucketAuto(b) => b.run(docs, vars)?,
        Stage::GraphLookup(g) => g.run(docs, vars, ctx)?,
        Stage::Sample(n) => stages::sample(docs, *n),
        Stage::CollStats(c) => vec![c.run(ctx)?],
    })
}

impl Pipeline {
    /// Run as a sub-pipeline that shares its parent's variables (including `$$NOW`).
    fn run_with_vars(
        &self,
        input: Vec<Document>,
        vars: &Document,
        ctx: &dyn PipelineContext,
    ) -> Result<Vec<Document>> {
        let mut merged = vars.clone();
        for (k, v) in &self.vars {
            merged.insert(k.clone(), v.clone());
        }
        Pipeline {
            stages: self.stages.clone(),
            names: self.names.clone(),
            vars: merged,
            terminal: None,
        }
        .run(input, ctx)
    }
}

#[cfg(test)]
mod tests;
