//! The "changed since you opened it" component of edit conflicts: for each field shown, the
//! editor's value, the stored value and a line diff between the two (stored → theirs). The
//! product edit screen builds a [`Conflict`] of the fields its three-way merge
//! (`web::merge`) could not settle and renders `partials/_conflict.html` in its 409 page, next
//! to a form that applies the editor's values over the stored version and a way to discard
//! them.

use similar::{ChangeTag, TextDiff};

/// One line of a diff: `kind` is `same`, `added` (only in theirs) or `removed` (only stored).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct DiffLine {
    pub(crate) kind: &'static str,
    pub(crate) text: String,
}

impl DiffLine {
    /// The marker shown before the line (`+`, `-` or a space).
    pub(crate) fn sign(&self) -> &'static str {
        match self.kind {
            "added" => "+",
            "removed" => "-",
            _ => " ",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ConflictField {
    pub(crate) label: String,
    pub(crate) theirs: String,
    pub(crate) stored: String,
    pub(crate) diff: Vec<DiffLine>,
    /// When the page offers a choice for this field: the form field's name and the stored
    /// value as the form would send it (radios `choice_{name}` and the hidden `stored_{name}`,
    /// attached to the form with id [`CHOICE_FORM`]).
    pub(crate) choice: Option<(String, String)>,
}

impl ConflictField {
    pub(crate) fn differs(&self) -> bool {
        self.theirs != self.stored
    }
}

/// Both versions of everything the editor submitted.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Conflict {
    pub(crate) fields: Vec<ConflictField>,
}

impl Conflict {
    pub(crate) fn new() -> Conflict {
        Conflict::default()
    }

    /// Add a field: the editor's value and the stored one.
    pub(crate) fn field(&mut self, label: impl Into<String>, theirs: &str, stored: &str) {
        self.fields.push(ConflictField {
            label: label.into(),
            theirs: theirs.to_string(),
            stored: stored.to_string(),
            diff: line_diff(stored, theirs),
            choice: None,
        });
    }

    /// [`Conflict::field`] with a choice between the two versions: form field `name`, whose
    /// stored value the form would send as `stored_value`.
    pub(crate) fn field_with_choice(
        &mut self,
        label: impl Into<String>,
        theirs: &str,
        stored: &str,
        name: &str,
        stored_value: &str,
    ) {
        self.field(label, theirs, stored);
        if let Some(field) = self.fields.last_mut() {
            field.choice = Some((name.to_string(), stored_value.to_string()));
        }
    }

    /// How many fields differ between the two versions.
    pub(crate) fn differing(&self) -> usize {
        self.fields.iter().filter(|f| f.differs()).count()
    }
}

/// A line diff from `stored` to `theirs`.
pub(crate) fn line_diff(stored: &str, theirs: &str) -> Vec<DiffLine> {
    let stored = stored.replace("\r\n", "\n");
    let theirs = theirs.replace("\r\n", "\n");
    let diff = TextDiff::from_lines(&stored, &theirs);
    diff.iter_all_changes()
        .map(|change| DiffLine {
            kind: match change.tag() {
                ChangeTag::Equal => "same",
                ChangeTag::Insert => "added",
                ChangeTag::Delete => "removed",
            },
            text: change.value().trim_end_matches('\n').to_string(),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_line_diff_marks_what_each_side_has_alone() {
        let diff = line_diff("one\ntwo\nthree\n", "one\n2\nthree\n");
        let marked: Vec<String> = diff
            .iter()
            .map(|l| format!("{}{}", l.sign(), l.text))
            .collect();
        assert_eq!(marked, [" one", "-two", "+2", " three"]);
    }

    #[test]
    fn equal_fields_do_not_count_as_differing() {
        let mut conflict = Conflict::new();
        conflict.field("Title", "Same", "Same");
        conflict.field("Text", "mine", "theirs");
        assert_eq!(conflict.differing(), 1);
    }
}
