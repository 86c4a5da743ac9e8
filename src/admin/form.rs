//! The admin's one form framework, which every edit screen (products, categories, content,
//! settings, and whatever comes next) builds on instead of its own copy:
//!
//! - [`FieldSpec`]: a field's name, label, help, input, length limit, the message when a
//!   required field is left empty, and how a save that lost a race merges it;
//! - [`Submitted`]: what the browser sent (the urlencoded pairs; a name may repeat), read
//!   trimmed, as long text, or as a list; the conflict page's per-field choices applied;
//! - [`check`]: the rules every spec states (too long, required), as [`FieldErrors`];
//!   [`Submitted::parse`] converts a field into a domain type through its `TryFrom<&str>`
//!   (the rules stay with the type: `Sku`, `Slug`...) and puts a refusal next to the field;
//! - [`FieldView`] / [`field_views`]: the inputs shown again with what was typed and each
//!   field's message next to it (`templates/admin/products/_field.html`);
//! - [`EDIT_TOKEN`]: the one name of the hidden edit-conflict token ([`EditVersion`]), and
//!   [`base_fields`] / [`Submitted::base`]: the hidden `base_*` fields saying what the form was
//!   loaded with;
//! - [`merge_fields`]: the three-way merge of a save that lost a race, field by field, whose
//!   [`FieldConflict`]s feed the conflict pages (`web::merge` does the merging of values;
//!   [`choice_view`] lays them out side by side with a choice each).

use std::collections::HashMap;

use crate::domain::EditVersion;
use crate::web::field_errors::FieldErrors;
use crate::web::merge::{merge_lines, merge_set, merge_value, Chunk, Merged, Pick};

/// How a field is typed in (what `_field.html` draws).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Input {
    Text,
    /// Several lines (Markdown, a track list).
    Textarea,
    /// Whole numbers.
    Number,
    /// Numbers with a decimal point (a decimal keyboard on phones).
    Decimal,
    /// `YYYY-MM-DD`.
    Date,
}

impl Input {
    /// As the field template compares it (`f.input == "textarea"`).
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Input::Text => "text",
            Input::Textarea => "textarea",
            Input::Number => "number",
            Input::Decimal => "decimal",
            Input::Date => "date",
        }
    }
}

/// How a field that both editors changed, differently, is merged.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum MergeAs {
    /// As one value: a conflict for the editor to settle.
    Value,
    /// As a comma-separated set (tags): what either side added is in, what either removed is
    /// out; never a conflict.
    Set,
    /// Line by line (long text): changes to different lines merge; only the same lines changed
    /// differently conflict.
    Lines,
}

/// One field of a form.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct FieldSpec {
    pub(crate) name: &'static str,
    pub(crate) label: &'static str,
    /// Shown under the input; empty for none.
    pub(crate) help: &'static str,
    pub(crate) input: Input,
    /// Longest accepted value, in characters (after trimming).
    pub(crate) max_chars: usize,
    /// The message when the field is left empty; `None`: it may be.
    pub(crate) required: Option<&'static str>,
    pub(crate) merge: MergeAs,
}

impl FieldSpec {
    /// A field of at most 200 characters, optional, merged as one value.
    pub(crate) const fn new(name: &'static str, label: &'static str, input: Input) -> FieldSpec {
        FieldSpec {
            name,
            label,
            help: "",
            input,
            max_chars: 200,
            required: None,
            merge: MergeAs::Value,
        }
    }

    pub(crate) const fn help(self, help: &'static str) -> FieldSpec {
        FieldSpec { help, ..self }
    }

    pub(crate) const fn max_chars(self, max_chars: usize) -> FieldSpec {
        FieldSpec { max_chars, ..self }
    }

    /// Refuse the field empty, with `message` ("Enter a title.").
    pub(crate) const fn required(self, message: &'static str) -> FieldSpec {
        FieldSpec {
            required: Some(message),
            ..self
        }
    }

    pub(crate) const fn merge(self, merge: MergeAs) -> FieldSpec {
        FieldSpec { merge, ..self }
    }
}

/// Field name → value, one string per field, as a form shows and compares them.
pub(crate) type Values = HashMap<String, String>;

/// The name under which every edit form carries the version it was loaded with.
pub(crate) const EDIT_TOKEN: &str = "edit_version";

/// What the token was called before it had one name (categories `version`, content `nonce`):
/// a page opened before an upgrade and saved after it still posts them, and its editor should
/// get a save (or the conflict page), not a refusal.
const OLD_TOKEN_NAMES: [&str; 2] = ["version", "nonce"];

/// The prefix of the hidden fields that carry what an edit form was loaded with
/// (`base_title`...), so that a save that lost a race can be merged three ways. A tampered base
/// only spoils its sender's own merge: the stored version is always read from the database.
pub(crate) const BASE_PREFIX: &str = "base_";

/// The hidden `base_*` fields for a form loaded with `loaded`, in name order.
pub(crate) fn base_fields(loaded: &Values) -> Vec<(String, String)> {
    let mut fields: Vec<(String, String)> = loaded
        .iter()
        .map(|(name, value)| (format!("{BASE_PREFIX}{name}"), value.clone()))
        .collect();
    fields.sort();
    fields
}

/// The edit token a form sent could not be read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct DamagedToken;

/// What a form sent: every value by name (a name may repeat, like checkboxes).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Submitted {
    fields: HashMap<String, Vec<String>>,
}

impl Submitted {
    /// The form's pairs, in the order sent.
    pub(crate) fn from_pairs(pairs: impl IntoIterator<Item = (String, String)>) -> Submitted {
        let mut fields: HashMap<String, Vec<String>> = HashMap::new();
        for (name, value) in pairs {
            fields.entry(name).or_default().push(value);
        }
        Submitted { fields }
    }

    /// The field's value, trimmed; the last one when it repeats; empty when not sent.
    pub(crate) fn get(&self, name: &str) -> &str {
        self.raw(name).map_or("", str::trim)
    }

    /// The field's value exactly as sent, if it was.
    pub(crate) fn raw(&self, name: &str) -> Option<&str> {
        self.fields
            .get(name)
            .and_then(|v| v.last())
            .map(String::as_str)
    }

    /// Long text: the browser's CRLF line ends as LF and the ends trimmed; the inner
    /// whitespace stays (Markdown depends on it).
    pub(crate) fn text(&self, name: &str) -> String {
        self.raw(name).map_or(String::new(), |v| {
            v.replace("\r\n", "\n").trim().to_string()
        })
    }

    /// Every value sent under `name` (checkboxes), in order.
    pub(crate) fn all(&self, name: &str) -> &[String] {
        self.fields.get(name).map_or(&[], Vec::as_slice)
    }

    /// The field converted into a domain type (`Sku`, `Slug`... through `TryFrom<&str>`, which
    /// holds the type's rules); a refusal puts `message` next to the field.
    pub(crate) fn parse<'a, T: TryFrom<&'a str>>(
        &'a self,
        name: &'static str,
        errors: &mut FieldErrors,
        message: &str,
    ) -> Option<T> {
        T::try_from(self.get(name))
            .map_err(|_| errors.add(name, message))
            .ok()
    }

    /// Whether the form sent the field at all (an older page may not have it).
    pub(crate) fn has(&self, name: &str) -> bool {
        self.fields.contains_key(name)
    }

    /// Replace the field's values with one value.
    pub(crate) fn set(&mut self, name: impl Into<String>, value: impl Into<String>) {
        self.fields.insert(name.into(), vec![value.into()]);
    }

    /// Replace the field's values.
    pub(crate) fn set_all(&mut self, name: impl Into<String>, values: Vec<String>) {
        self.fields.insert(name.into(), values);
    }

    /// One value per field as sent (the last, untrimmed), to show the form again as typed.
    pub(crate) fn values(&self) -> Values {
        self.fields
            .iter()
            .filter_map(|(name, values)| Some((name.clone(), values.last()?.clone())))
            .collect()
    }

    /// The fields whose names start with `prefix` (hidden fields a page carries), sorted.
    pub(crate) fn prefixed(&self, prefix: &str) -> Vec<(String, String)> {
        let mut found: Vec<(String, String)> = self
            .fields
            .iter()
            .filter(|(name, _)| name.starts_with(prefix))
            .filter_map(|(name, values)| Some((name.clone(), values.last()?.clone())))
            .collect();
        found.sort();
        found
    }

    /// What the form was loaded with (its `base_*` fields, read as [`Submitted::text`] reads,
    /// since browsers send line ends as CRLF); `None` from a form without them.
    pub(crate) fn base(&self) -> Option<Values> {
        let base: Values = self
            .fields
            .keys()
            .filter_map(|key| {
                let name = key.strip_prefix(BASE_PREFIX)?;
                Some((name.to_string(), self.text(key)))
            })
            .collect();
        (!base.is_empty()).then_some(base)
    }

    /// The version the form was loaded with ([`EDIT_TOKEN`], or an older page's name for it):
    /// `None` when it sent none or an empty one (a document stored before versions existed).
    pub(crate) fn edit_version(&self) -> Result<Option<EditVersion>, DamagedToken> {
        let sent = std::iter::once(EDIT_TOKEN)
            .chain(OLD_TOKEN_NAMES)
            .find(|name| self.has(name))
            .map_or("", |name| self.get(name));
        match sent {
            "" => Ok(None),
            v => EditVersion::parse(v).map(Some).map_err(|_| DamagedToken),
        }
    }

    /// Apply a conflict page's per-field choices: `choice_{name}={side}`, where `side` is one
    /// of `sides`, takes the value the page carried as `{side}_{name}`. Fields in `lists` carry
    /// their values joined by commas (categories) and get them back one by one.
    pub(crate) fn apply_choices(&mut self, sides: &[&str], lists: &[&str]) {
        let chosen: Vec<(String, String)> = self
            .fields
            .iter()
            .filter_map(|(key, values)| {
                let name = key.strip_prefix("choice_")?;
                let side = values.last()?;
                if !sides.contains(&side.as_str()) {
                    return None;
                }
                let value = self.raw(&format!("{side}_{name}"))?;
                Some((name.to_string(), value.to_string()))
            })
            .collect();
        for (name, value) in chosen {
            if lists.contains(&name.as_str()) {
                self.set_all(name, split_list(&value, ','));
            } else {
                self.set(name, value);
            }
        }
    }
}

/// A list typed into one field: split at `separator`, each item trimmed, empty ones dropped.
pub(crate) fn split_list(value: &str, separator: char) -> Vec<String> {
    value
        .split(separator)
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(str::to_string)
        .collect()
}

/// The rules the specs state: a value longer than its field's limit, and a required field left
/// empty. The form's own rules (formats, domain types) add theirs after.
pub(crate) fn check<'a>(
    specs: impl IntoIterator<Item = &'a FieldSpec>,
    form: &Submitted,
    errors: &mut FieldErrors,
) {
    for spec in specs {
        let value = form.get(spec.name);
        if value.chars().count() > spec.max_chars {
            errors.add(
                spec.name,
                format!(
                    "{} is too long (at most {} characters).",
                    spec.label, spec.max_chars
                ),
            );
        }
        if let (Some(message), true) = (spec.required, value.is_empty()) {
            errors.add(spec.name, message);
        }
    }
}

/// One input of a form, with what was entered and what is wrong with it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct FieldView {
    pub(crate) name: &'static str,
    pub(crate) label: &'static str,
    pub(crate) hint: &'static str,
    /// [`Input::as_str`].
    pub(crate) input: &'static str,
    pub(crate) value: String,
    pub(crate) error: Option<String>,
}

/// The inputs of `specs`, holding `values`, each with its message from `errors`.
pub(crate) fn field_views<'a>(
    specs: impl IntoIterator<Item = &'a FieldSpec>,
    values: &Values,
    errors: &FieldErrors,
) -> Vec<FieldView> {
    specs
        .into_iter()
        .map(|spec| FieldView {
            name: spec.name,
            label: spec.label,
            hint: spec.help,
            input: spec.input.as_str(),
            value: values.get(spec.name).cloned().unwrap_or_default(),
            error: errors.get(spec.name).cloned(),
        })
        .collect()
}

/// One field both editors changed differently, for a conflict page.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct FieldConflict {
    pub(crate) name: String,
    pub(crate) label: String,
    /// The value both started from (empty when the form did not say what it loaded).
    pub(crate) base: String,
    pub(crate) mine: String,
    pub(crate) theirs: String,
    /// For line-merged fields: only the conflicting stretches, `(base, mine, theirs)`.
    pub(crate) hunks: Vec<(String, String, String)>,
    /// The whole value taking this editor's side of every conflicting stretch, and taking the
    /// other's (for line-merged fields, every other line merged).
    pub(crate) take_mine: String,
    pub(crate) take_theirs: String,
    /// What a form shows to settle it by hand: for line-merged fields both versions of each
    /// conflicting stretch between marker lines; otherwise this editor's value.
    pub(crate) unsettled: String,
}

/// A save that lost a race, merged field by field with the version stored since.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct FormMerge {
    /// Every field's merge; a conflicting field holds this editor's value.
    pub(crate) values: Values,
    /// Labels of the fields this editor changed (alone, or as well as the other editor).
    pub(crate) changed: Vec<String>,
    /// Labels of the fields whose other editor's change was merged in.
    pub(crate) merged: Vec<String>,
    pub(crate) conflicts: Vec<FieldConflict>,
}

/// Merge `mine` (the submission) with `theirs` (the stored version) three ways, against `base`
/// (what the form was loaded with), field by field in `specs` order: a field changed on one
/// side takes that side's value; changed on both, it merges as its spec says, and conflicts
/// otherwise. Without a base (a form that did not say what it loaded) every field where the
/// two differ conflicts. Missing values count as empty.
pub(crate) fn merge_fields<'a>(
    specs: impl IntoIterator<Item = &'a FieldSpec>,
    base: Option<&Values>,
    mine: &Values,
    theirs: &Values,
) -> FormMerge {
    let mut out = FormMerge::default();
    for spec in specs {
        let get = |v: &Values| v.get(spec.name).cloned().unwrap_or_default();
        let (m, t) = (get(mine), get(theirs));
        let label = spec.label.to_string();
        let Some(base) = base else {
            if m != t {
                out.changed.push(label);
                out.conflicts
                    .push(value_conflict(spec, String::new(), m.clone(), t));
            }
            out.values.insert(spec.name.to_string(), m);
            continue;
        };
        let b = get(base);
        let value = match merge_value(&b, &m, &t) {
            Merged::Same(v) => v,
            Merged::Mine(v) => {
                out.changed.push(label);
                v
            }
            Merged::Theirs(v) => {
                out.merged.push(label);
                v
            }
            Merged::Conflict(m, t) => {
                out.changed.push(label.clone());
                match spec.merge {
                    MergeAs::Value => {
                        out.conflicts.push(value_conflict(spec, b, m.clone(), t));
                        m
                    }
                    MergeAs::Set => {
                        out.merged.push(label);
                        let split = |v: &str| split_list(v, ',');
                        merge_set(&split(&b), &split(&m), &split(&t)).join(", ")
                    }
                    MergeAs::Lines => {
                        let lines = merge_lines(&b, &m, &t);
                        if lines.conflicts() == 0 {
                            out.merged.push(label);
                            lines.text(Pick::Mine)
                        } else {
                            let hunks = lines
                                .chunks
                                .iter()
                                .filter_map(|c| match c {
                                    Chunk::Conflict { base, mine, theirs } => {
                                        Some((base.join("\n"), mine.join("\n"), theirs.join("\n")))
                                    }
                                    Chunk::Clean(_) => None,
                                })
                                .collect();
                            out.conflicts.push(FieldConflict {
                                name: spec.name.to_string(),
                                label,
                                base: b,
                                mine: m.clone(),
                                theirs: t,
                                hunks,
                                take_mine: lines.text(Pick::Mine),
                                take_theirs: lines.text(Pick::Theirs),
                                unsettled: lines.text(Pick::Markers),
                            });
                            m
                        }
                    }
                }
            }
        };
        out.values.insert(spec.name.to_string(), value);
    }
    out
}

/// The side-by-side view of `conflicts` (`partials/_conflict.html`): both versions with a line
/// diff, and a choice each between this editor's value (in the form) and the stored one (sent
/// as `stored_{name}`, read back by [`Submitted::apply_choices`] with side `stored`). `shown`
/// writes a field's value for people (`shown(name, value)`: category names for their ids).
pub(crate) fn choice_view(
    conflicts: &[FieldConflict],
    shown: impl Fn(&str, &str) -> String,
) -> crate::web::conflict::Conflict {
    let mut view = crate::web::conflict::Conflict::new();
    for c in conflicts {
        view.field_with_choice(
            &c.label,
            &shown(&c.name, &c.mine),
            &shown(&c.name, &c.theirs),
            &c.name,
            &c.theirs,
        );
    }
    view
}

fn value_conflict(spec: &FieldSpec, base: String, mine: String, theirs: String) -> FieldConflict {
    FieldConflict {
        name: spec.name.to_string(),
        label: spec.label.to_string(),
        base,
        take_mine: mine.clone(),
        take_theirs: theirs.clone(),
        unsettled: mine.clone(),
        mine,
        theirs,
        hunks: Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SPECS: &[FieldSpec] = &[
        FieldSpec::new("title", "Title", Input::Text).required("Enter a title."),
        FieldSpec::new("tags", "Tags", Input::Text).merge(MergeAs::Set),
        FieldSpec::new("text", "Text", Input::Textarea)
            .max_chars(20)
            .merge(MergeAs::Lines),
    ];

    fn pairs(pairs: &[(&str, &str)]) -> Submitted {
        Submitted::from_pairs(pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())))
    }

    fn values(pairs: &[(&str, &str)]) -> Values {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn a_submission_reads_trimmed_values_long_text_and_repeated_fields() {
        let form = pairs(&[
            ("title", "  Kind of Blue "),
            ("text", "\r\n one\r\ntwo  \r\n"),
            ("categories", "a"),
            ("categories", "b"),
        ]);
        assert_eq!(form.get("title"), "Kind of Blue");
        assert_eq!(form.raw("title"), Some("  Kind of Blue "));
        assert_eq!(form.text("text"), "one\ntwo");
        assert_eq!(form.all("categories"), ["a", "b"]);
        assert_eq!(form.get("missing"), "");
        assert!(form.has("title") && !form.has("missing"));
    }

    #[test]
    fn the_spec_rules_put_each_message_next_to_its_field() {
        let mut errors = FieldErrors::new();
        check(
            SPECS,
            &pairs(&[("title", " "), ("text", &"x".repeat(21))]),
            &mut errors,
        );
        assert_eq!(errors.get("title").unwrap(), "Enter a title.");
        assert_eq!(
            errors.get("text").unwrap(),
            "Text is too long (at most 20 characters)."
        );
        assert_eq!(errors.get("tags"), None);
        let views = field_views(SPECS, &values(&[("title", "typed")]), &errors);
        assert_eq!(views[0].value, "typed");
        assert_eq!(views[0].error.as_deref(), Some("Enter a title."));
        assert_eq!(views[2].input, "textarea");
    }

    #[test]
    fn a_field_parses_into_its_domain_type_or_says_why_next_to_it() {
        let mut errors = FieldErrors::new();
        let form = pairs(&[("sku", " KOB-1959 "), ("other", "not a sku!")]);
        let sku: Option<crate::domain::Sku> = form.parse("sku", &mut errors, "Enter a SKU.");
        assert_eq!(sku.unwrap().as_str(), "KOB-1959");
        let bad: Option<crate::domain::Sku> = form.parse("other", &mut errors, "Enter a SKU.");
        assert!(bad.is_none());
        assert_eq!(errors.get("other").unwrap(), "Enter a SKU.");
        assert_eq!(errors.get("sku"), None);
    }

    #[test]
    fn the_base_a_form_carries_comes_back_as_it_was_loaded() {
        let loaded = values(&[("title", "Kind of Blue"), ("text", "one\ntwo")]);
        let fields = base_fields(&loaded);
        assert_eq!(fields[0].0, "base_text");
        // What a browser sends back: line ends as CRLF.
        let sent = Submitted::from_pairs(
            fields
                .into_iter()
                .map(|(name, value)| (name, value.replace('\n', "\r\n"))),
        );
        assert_eq!(sent.base(), Some(loaded));
        assert_eq!(pairs(&[("title", "x")]).base(), None);
    }

    #[test]
    fn the_edit_token_has_one_name_and_older_pages_names_are_still_read() {
        let version = EditVersion::new();
        let hex = version.to_hex();
        assert_eq!(
            pairs(&[(EDIT_TOKEN, &hex)]).edit_version(),
            Ok(Some(version))
        );
        assert_eq!(pairs(&[("nonce", &hex)]).edit_version(), Ok(Some(version)));
        assert_eq!(
            pairs(&[("version", &hex)]).edit_version(),
            Ok(Some(version))
        );
        assert_eq!(pairs(&[(EDIT_TOKEN, "")]).edit_version(), Ok(None));
        assert_eq!(pairs(&[]).edit_version(), Ok(None));
        assert_eq!(
            pairs(&[(EDIT_TOKEN, "damaged")]).edit_version(),
            Err(DamagedToken)
        );
    }

    #[test]
    fn a_choice_takes_the_carried_value_of_an_allowed_side_only() {
        let mut form = pairs(&[
            ("title", "mine"),
            ("choice_title", "stored"),
            ("stored_title", "theirs"),
            ("categories", "a"),
            ("choice_categories", "stored"),
            ("stored_categories", "b,c"),
            ("text", "typed"),
            ("choice_text", "base"),
            ("base_text", "loaded"),
        ]);
        form.apply_choices(&["stored"], &["categories"]);
        assert_eq!(form.get("title"), "theirs");
        assert_eq!(form.all("categories"), ["b", "c"]);
        assert_eq!(form.get("text"), "typed");
    }

    #[test]
    fn one_sided_changes_merge_and_only_true_conflicts_remain() {
        let base = values(&[("title", "A"), ("tags", "x, y"), ("text", "1\n2\n3")]);
        let mine = values(&[
            ("title", "B"),
            ("tags", "x, y, mine"),
            ("text", "one\n2\n3"),
        ]);
        let theirs = values(&[
            ("title", "A"),
            ("tags", "y, theirs"),
            ("text", "1\n2\nthree"),
        ]);
        let merge = merge_fields(SPECS, Some(&base), &mine, &theirs);
        assert!(merge.conflicts.is_empty());
        assert_eq!(merge.values["title"], "B");
        assert_eq!(merge.values["tags"], "y, theirs, mine");
        assert_eq!(merge.values["text"], "one\n2\nthree");
        assert_eq!(merge.changed, ["Title", "Tags", "Text"]);
        assert_eq!(merge.merged, ["Tags", "Text"]);
    }

    #[test]
    fn the_same_lines_changed_differently_conflict_with_both_sides_carried() {
        let base = values(&[("title", "A"), ("text", "1\n2")]);
        let mine = values(&[("title", "B"), ("text", "mine\n2")]);
        let theirs = values(&[("title", "C"), ("text", "theirs\n2")]);
        let merge = merge_fields(SPECS, Some(&base), &mine, &theirs);
        assert_eq!(merge.conflicts.len(), 2);
        let title = &merge.conflicts[0];
        assert_eq!((title.mine.as_str(), title.theirs.as_str()), ("B", "C"));
        assert!(title.hunks.is_empty());
        let text = &merge.conflicts[1];
        assert_eq!(
            text.hunks,
            [("1".to_string(), "mine".to_string(), "theirs".to_string())]
        );
        assert_eq!(text.take_theirs, "theirs\n2");
        assert!(crate::web::merge::has_conflict_markers(&text.unsettled));
        assert_eq!(merge.values["title"], "B");
    }

    #[test]
    fn the_conflict_view_offers_the_stored_value_as_the_form_would_send_it() {
        let base = values(&[("title", "A")]);
        let merge = merge_fields(
            SPECS,
            Some(&base),
            &values(&[("title", "B")]),
            &values(&[("title", "C")]),
        );
        let view = choice_view(&merge.conflicts, |_, v| format!("“{v}”"));
        let field = &view.fields[0];
        assert_eq!(
            (field.theirs.as_str(), field.stored.as_str()),
            ("“B”", "“C”")
        );
        assert_eq!(field.choice, Some(("title".to_string(), "C".to_string())));
    }

    #[test]
    fn without_a_base_every_difference_is_a_conflict() {
        let mine = values(&[("title", "B"), ("tags", "x")]);
        let theirs = values(&[("title", "A"), ("tags", "x")]);
        let merge = merge_fields(SPECS, None, &mine, &theirs);
        assert_eq!(merge.conflicts.len(), 1);
        assert_eq!(merge.conflicts[0].name, "title");
        assert_eq!(merge.changed, ["Title"]);
        assert_eq!(merge.values["title"], "B");
    }
}
