//! Three-way merge of an edit that lost a race: the version the editor's form was loaded from
//! (the base), the version stored since (theirs) and the editor's submission (mine). A value or
//! a run of lines changed on one side only takes that side's change; only the same value or
//! the same lines changed differently on both sides is a conflict for the editor to settle.
//! Edit screens merge field by field with [`merge_value`], [`merge_set`] and [`merge_lines`].

use similar::{capture_diff_slices, Algorithm, DiffTag};

/// How one value merged.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Merged<T> {
    /// Neither side changed it, or both made the same change.
    Same(T),
    /// Only this editor changed it.
    Mine(T),
    /// Only the other editor changed it.
    Theirs(T),
    /// Both changed it, differently: `(mine, theirs)`.
    Conflict(T, T),
}

/// The three-way merge of a single value.
pub(crate) fn merge_value<T: PartialEq + Clone>(base: &T, mine: &T, theirs: &T) -> Merged<T> {
    if mine == theirs {
        Merged::Same(mine.clone())
    } else if mine == base {
        Merged::Theirs(theirs.clone())
    } else if theirs == base {
        Merged::Mine(mine.clone())
    } else {
        Merged::Conflict(mine.clone(), theirs.clone())
    }
}

/// The merge of two edits of a set (tags): what either side added is in, what either side
/// removed is out; never a conflict. Order: the stored order, then what this editor added.
pub(crate) fn merge_set(base: &[String], mine: &[String], theirs: &[String]) -> Vec<String> {
    let removed_by_me = |t: &String| base.contains(t) && !mine.contains(t);
    let mut merged: Vec<String> = theirs
        .iter()
        .filter(|t| !removed_by_me(t))
        .cloned()
        .collect();
    for t in mine {
        let removed_by_them = base.contains(t) && !theirs.contains(t);
        if !removed_by_them && !merged.contains(t) {
            merged.push(t.clone());
        }
    }
    merged
}

/// A stretch of a line merge.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Chunk {
    /// Lines both sides agree on (untouched, or changed by one side only, or alike).
    Clean(Vec<String>),
    /// The same base lines changed differently on both sides.
    Conflict {
        base: Vec<String>,
        mine: Vec<String>,
        theirs: Vec<String>,
    },
}

/// Which side a conflicting stretch takes when the merge is written out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Pick {
    Mine,
    Theirs,
    /// Both, between `<<<<<<<`, `=======` and `>>>>>>>` marker lines, for the editor to settle.
    Markers,
}

/// A line-based three-way merge of texts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct LineMerge {
    pub(crate) chunks: Vec<Chunk>,
}

impl LineMerge {
    /// How many stretches conflict.
    pub(crate) fn conflicts(&self) -> usize {
        self.chunks
            .iter()
            .filter(|c| matches!(c, Chunk::Conflict { .. }))
            .count()
    }

    /// The merged text, each conflict written as `pick` says.
    pub(crate) fn text(&self, pick: Pick) -> String {
        let mut lines: Vec<&str> = Vec::new();
        for chunk in &self.chunks {
            match (chunk, pick) {
                (Chunk::Clean(l), _) => lines.extend(l.iter().map(String::as_str)),
                (Chunk::Conflict { mine, .. }, Pick::Mine) => {
                    lines.extend(mine.iter().map(String::as_str))
                }
                (Chunk::Conflict { theirs, .. }, Pick::Theirs) => {
                    lines.extend(theirs.iter().map(String::as_str))
                }
                (Chunk::Conflict { mine, theirs, .. }, Pick::Markers) => {
                    lines.push(MARK_MINE);
                    lines.extend(mine.iter().map(String::as_str));
                    lines.push(MARK_SPLIT);
                    lines.extend(theirs.iter().map(String::as_str));
                    lines.push(MARK_THEIRS);
                }
            }
        }
        lines.join("\n")
    }
}

const MARK_MINE: &str = "<<<<<<< yours";
const MARK_SPLIT: &str = "=======";
const MARK_THEIRS: &str = ">>>>>>> stored";

/// Whether a text still holds the marker lines of an unsettled conflict.
pub(crate) fn has_conflict_markers(text: &str) -> bool {
    text.lines()
        .any(|l| l.starts_with("<<<<<<< ") || l.starts_with(">>>>>>> "))
}

/// One side's change: base lines `start..end` replaced by `lines`.
#[derive(Debug, Clone)]
struct Change {
    start: usize,
    end: usize,
    lines: Vec<String>,
    mine: bool,
}

fn changes(base: &[&str], side: &[&str], mine: bool) -> Vec<Change> {
    capture_diff_slices(Algorithm::Myers, base, side)
        .iter()
        .map(|op| op.as_tag_tuple())
        .filter(|(tag, _, _)| *tag != DiffTag::Equal)
        .map(|(_, old, new)| Change {
            start: old.start,
            end: old.end,
            lines: side[new].iter().map(|l| l.to_string()).collect(),
            mine,
        })
        .collect()
}

/// Whether a change touches the base stretch `start..end`: overlapping lines, or an insertion
/// at its edge (where the order of the two sides' lines would be a guess).
fn touches(c: &Change, start: usize, end: usize) -> bool {
    (c.start < end && start < c.end)
        || c.start == start
        || (c.start == c.end && (start..=end).contains(&c.start))
        || (start == end && (c.start..=c.end).contains(&start))
}

/// `base[start..end]` with `changes` (all inside it, of one side, in order) applied.
fn apply(base: &[&str], start: usize, end: usize, changes: &[&Change]) -> Vec<String> {
    let mut out = Vec::new();
    let mut at = start;
    for c in changes {
        out.extend(base[at..c.start].iter().map(|l| l.to_string()));
        out.extend(c.lines.iter().cloned());
        at = c.end;
    }
    out.extend(base[at..end].iter().map(|l| l.to_string()));
    out
}

/// Merge texts line by line (Markdown paragraphs are runs of lines).
pub(crate) fn merge_lines(base: &str, mine: &str, theirs: &str) -> LineMerge {
    let base: Vec<&str> = base.split('\n').collect();
    let mine: Vec<&str> = mine.split('\n').collect();
    let theirs: Vec<&str> = theirs.split('\n').collect();
    let mut all = changes(&base, &mine, true);
    all.extend(changes(&base, &theirs, false));
    all.sort_by_key(|c| (c.start, c.end));
    let mut chunks = Vec::new();
    let mut at = 0;
    let mut i = 0;
    while i < all.len() {
        // A cluster: changes that touch one another, whichever side they come from.
        let (mut start, mut end) = (all[i].start, all[i].end);
        let mut j = i + 1;
        while j < all.len() && touches(&all[j], start, end) {
            start = start.min(all[j].start);
            end = end.max(all[j].end);
            j += 1;
        }
        let cluster = &all[i..j];
        if at < start {
            chunks.push(Chunk::Clean(
                base[at..start].iter().map(|l| l.to_string()).collect(),
            ));
        }
        let of =
            |side: bool| -> Vec<&Change> { cluster.iter().filter(|c| c.mine == side).collect() };
        let (m, t) = (of(true), of(false));
        let mine_lines = apply(&base, start, end, &m);
        let theirs_lines = apply(&base, start, end, &t);
        if m.is_empty() || mine_lines == theirs_lines {
            chunks.push(Chunk::Clean(theirs_lines));
        } else if t.is_empty() {
            chunks.push(Chunk::Clean(mine_lines));
        } else {
            chunks.push(Chunk::Conflict {
                base: base[start..end].iter().map(|l| l.to_string()).collect(),
                mine: mine_lines,
                theirs: theirs_lines,
            });
        }
        at = end;
        i = j;
    }
    if at < base.len() {
        chunks.push(Chunk::Clean(
            base[at..].iter().map(|l| l.to_string()).collect(),
        ));
    }
    LineMerge { chunks }
}

#[cfg(test)]
mod tests {
    use super::*;

    const BASE: &str = "# Title\n\nFirst paragraph.\n\nSecond paragraph.\n\nThird paragraph.";

    #[test]
    fn changes_to_different_paragraphs_merge_without_a_conflict() {
        let mine = BASE.replace("First paragraph.", "First, edited by me.");
        let theirs = BASE.replace("Third paragraph.", "Third, edited by them.");
        let merged = merge_lines(BASE, &mine, &theirs);
        assert_eq!(merged.conflicts(), 0);
        assert_eq!(
            merged.text(Pick::Markers),
            "# Title\n\nFirst, edited by me.\n\nSecond paragraph.\n\nThird, edited by them."
        );
    }

    #[test]
    fn a_line_added_by_the_other_editor_is_kept_not_taken_for_a_deletion() {
        let mine = BASE.replace("First paragraph.", "First, edited.");
        let theirs = format!("{BASE}\n\nA fourth paragraph.");
        let merged = merge_lines(BASE, &mine, &theirs);
        assert_eq!(merged.conflicts(), 0);
        assert!(merged.text(Pick::Mine).ends_with("A fourth paragraph."));
        assert!(merged.text(Pick::Mine).contains("First, edited."));
    }

    #[test]
    fn the_same_paragraph_changed_differently_is_a_conflict_with_both_versions() {
        let mine = BASE.replace("Second paragraph.", "Second, mine.");
        let theirs = BASE.replace("Second paragraph.", "Second, theirs.");
        let merged = merge_lines(BASE, &mine, &theirs);
        assert_eq!(merged.conflicts(), 1);
        assert_eq!(merged.text(Pick::Mine), mine);
        assert_eq!(merged.text(Pick::Theirs), theirs);
        let marked = merged.text(Pick::Markers);
        assert!(marked.contains("Second, mine.") && marked.contains("Second, theirs."));
        assert!(has_conflict_markers(&marked));
        assert!(!has_conflict_markers(&mine));
    }

    #[test]
    fn the_same_change_on_both_sides_is_no_conflict() {
        let both = BASE.replace("Second paragraph.", "Second, alike.");
        let merged = merge_lines(BASE, &both, &both);
        assert_eq!(merged.conflicts(), 0);
        assert_eq!(merged.text(Pick::Markers), both);
    }

    #[test]
    fn values_take_the_side_that_changed_them() {
        assert_eq!(merge_value(&"a", &"b", &"a"), Merged::Mine("b"));
        assert_eq!(merge_value(&"a", &"a", &"c"), Merged::Theirs("c"));
        assert_eq!(merge_value(&"a", &"b", &"b"), Merged::Same("b"));
        assert_eq!(merge_value(&"a", &"b", &"c"), Merged::Conflict("b", "c"));
    }

    #[test]
    fn tag_sets_keep_what_either_side_added_and_drop_what_either_removed() {
        let s = |v: &[&str]| v.iter().map(|t| t.to_string()).collect::<Vec<_>>();
        let merged = merge_set(
            &s(&["a", "b", "c"]),
            &s(&["a", "c", "mine"]),
            &s(&["a", "b", "theirs"]),
        );
        assert_eq!(merged, s(&["a", "theirs", "mine"]));
    }
}
