//! The admin lists' shared machinery, in the manner of Django's changelist: a page of rows with
//! page links, sortable column headers (only whitelisted sort keys reach the database),
//! select filters whose values must be one of the offered options, and a case-insensitive
//! substring search whose input is escaped so regex metacharacters match literally.
//!
//! A handler describes its list with a [`ListSpec`], parses the query string into a
//! [`ChangeList`], builds its own filter from the chosen values, and loads one page with
//! [`ChangeList::load`]. The templates `admin/_list_controls.html` (search and filters),
//! `admin/_list_head.html` (column headers) and `admin/_list_pages.html` (count and page links)
//! render it; each expects the page struct's `list` field.

use std::collections::HashMap;

use bson::{doc, Bson, Document};
use futures::TryStreamExt;
use serde::de::DeserializeOwned;

use crate::catalog::listing::{contains_ignoring_case, without_control_chars};
use crate::db::DbError;

/// Rows per page unless the query asks for another of [`PER_PAGE_CHOICES`].
pub(crate) const DEFAULT_PER_PAGE: u64 = 50;
/// The page sizes a list offers.
pub(crate) const PER_PAGE_CHOICES: [u64; 4] = [25, 50, 100, 200];
/// Longest search accepted; longer input is cut.
const MAX_SEARCH_CHARS: usize = 100;

/// A sortable column: the key the URL carries and the stored field it sorts by.
pub(crate) struct SortKey {
    pub(crate) key: &'static str,
    pub(crate) field: &'static str,
}

/// A column header: its label, and its sort key when it sorts.
pub(crate) struct Column {
    pub(crate) label: &'static str,
    pub(crate) sort: Option<&'static str>,
    /// Extra class of the header cell (`num` right-aligns).
    pub(crate) class: &'static str,
}

impl Column {
    pub(crate) const fn plain(label: &'static str) -> Column {
        Column {
            label,
            sort: None,
            class: "",
        }
    }

    /// A right-aligned column that does not sort.
    pub(crate) const fn plain_number(label: &'static str) -> Column {
        Column {
            label,
            sort: None,
            class: "num",
        }
    }

    pub(crate) const fn sorted(label: &'static str, key: &'static str) -> Column {
        Column {
            label,
            sort: Some(key),
            class: "",
        }
    }

    pub(crate) const fn number(label: &'static str, key: &'static str) -> Column {
        Column {
            label,
            sort: Some(key),
            class: "num",
        }
    }
}

/// A select filter: the query parameter, its label and the values it offers (value, label).
pub(crate) struct Filter {
    pub(crate) name: &'static str,
    pub(crate) label: &'static str,
    pub(crate) options: Vec<(String, String)>,
    /// The chosen value, when it is one of the options.
    pub(crate) selected: Option<String>,
    /// The value used when none (or an unknown one) is chosen; such a filter offers no "All".
    pub(crate) default: Option<&'static str>,
}

impl Filter {
    pub(crate) fn new(
        name: &'static str,
        label: &'static str,
        options: Vec<(String, String)>,
    ) -> Filter {
        Filter {
            name,
            label,
            options,
            selected: None,
            default: None,
        }
    }

    /// This filter always has a value: `value` unless another option is chosen.
    pub(crate) fn with_default(mut self, value: &'static str) -> Filter {
        self.default = Some(value);
        self
    }

    /// Options from `(value, label)` string pairs.
    pub(crate) fn fixed(
        name: &'static str,
        label: &'static str,
        options: &[(&str, &str)],
    ) -> Filter {
        Filter::new(
            name,
            label,
            options
                .iter()
                .map(|(v, l)| (v.to_string(), l.to_string()))
                .collect(),
        )
    }

    pub(crate) fn is_selected(&self, value: &str) -> bool {
        self.selected.as_deref() == Some(value)
    }
}

/// What a list offers: where it lives, its columns, sorts, filters and search.
pub(crate) struct ListSpec {
    pub(crate) path: &'static str,
    pub(crate) columns: Vec<Column>,
    pub(crate) sorts: &'static [SortKey],
    /// The sort when none (or an unknown one) is asked for, e.g. `-placed`.
    pub(crate) default_sort: &'static str,
    pub(crate) filters: Vec<Filter>,
    /// The search box's label; `None`: the list has no search.
    pub(crate) search_label: Option<&'static str>,
}

/// One list as asked for by the query string, and after [`ChangeList::load`], the page found.
pub(crate) struct ChangeList {
    pub(crate) path: &'static str,
    pub(crate) columns: Vec<Column>,
    pub(crate) filters: Vec<Filter>,
    pub(crate) search_label: Option<&'static str>,
    /// The search as typed (trimmed, control characters removed); empty: no search.
    pub(crate) search: String,
    /// The sort key in effect, without its `-`.
    pub(crate) sort: &'static str,
    pub(crate) descending: bool,
    sort_field: &'static str,
    default_sort: &'static str,
    pub(crate) page: u64,
    pub(crate) per_page: u64,
    pub(crate) total: u64,
    /// Rows on the loaded page.
    pub(crate) shown: u64,
}

impl ChangeList {
    /// Read `q`, `sort`, `page`, `per_page` and each filter from the query. Unknown sort keys,
    /// filter values and page sizes fall back to the defaults; a bad page number is page 1.
    pub(crate) fn parse(spec: ListSpec, params: &HashMap<String, String>) -> ChangeList {
        let asked = params.get("sort").map(|s| s.trim()).unwrap_or("");
        let (descending, key) = match asked.strip_prefix('-') {
            Some(k) => (true, k),
            None => (false, asked),
        };
        let known = |k: &str| spec.sorts.iter().find(|s| s.key == k);
        let (descending, sort) = match known(key) {
            Some(s) => (descending, s),
            None => {
                let fallback = spec.default_sort.trim_start_matches('-');
                let s = known(fallback).unwrap_or(&spec.sorts[0]);
                (spec.default_sort.starts_with('-'), s)
            }
        };
        let mut filters = spec.filters;
        for f in &mut filters {
            f.selected = params
                .get(f.name)
                .map(|v| v.trim())
                .filter(|v| f.options.iter().any(|(value, _)| value == v))
                .or(f.default)
                .map(str::to_string);
        }
        let search = match spec.search_label {
            Some(_) => params
                .get("q")
                .map(|q| {
                    without_control_chars(q)
                        .trim()
                        .chars()
                        .take(MAX_SEARCH_CHARS)
                        .collect()
                })
                .unwrap_or_default(),
            None => String::new(),
        };
        let per_page = params
            .get("per_page")
            .and_then(|v| v.trim().parse::<u64>().ok())
            .filter(|n| PER_PAGE_CHOICES.contains(n))
            .unwrap_or(DEFAULT_PER_PAGE);
        let page = params
            .get("page")
            .and_then(|v| v.trim().parse::<u64>().ok())
            .filter(|n| *n >= 1)
            .unwrap_or(1);
        ChangeList {
            path: spec.path,
            columns: spec.columns,
            filters,
            search_label: spec.search_label,
            search,
            sort: sort.key,
            descending,
            sort_field: sort.field,
            default_sort: spec.default_sort,
            page,
            per_page,
            total: 0,
            shown: 0,
        }
    }

    /// The chosen value of filter `name`, if any.
    pub(crate) fn filter_value(&self, name: &str) -> Option<&str> {
        self.filters
            .iter()
            .find(|f| f.name == name)
            .and_then(|f| f.selected.as_deref())
    }

    /// A case-insensitive "contains" match for the search, its metacharacters escaped;
    /// `None` without a search.
    pub(crate) fn search_pattern(&self) -> Option<Bson> {
        (!self.search.is_empty()).then(|| contains_ignoring_case(&self.search))
    }

    /// The sort document: the chosen field, then `_id` in the same direction so that pages
    /// never overlap when the field has equal values.
    pub(crate) fn sort_document(&self) -> Document {
        let dir = if self.descending { -1 } else { 1 };
        if self.sort_field == "_id" {
            doc! { "_id": dir }
        } else {
            doc! { self.sort_field: dir, "_id": dir }
        }
    }

    /// Count the rows matching `filter`, move a page past the end to the last page, and load
    /// that page sorted, optionally projected.
    pub(crate) async fn load<T>(
        &mut self,
        collection: &mongodb::Collection<T>,
        filter: Document,
        projection: Option<Document>,
    ) -> Result<Vec<T>, DbError>
    where
        T: DeserializeOwned + Send + Sync,
    {
        self.total = collection.count_documents(filter.clone()).await?;
        self.page = self.page.clamp(1, self.pages());
        let mut find = collection
            .find(filter)
            .sort(self.sort_document())
            .skip((self.page - 1) * self.per_page)
            .limit(self.per_page as i64);
        if let Some(p) = projection {
            find = find.projection(p);
        }
        let rows: Vec<T> = find.await?.try_collect().await?;
        self.shown = rows.len() as u64;
        Ok(rows)
    }

    pub(crate) fn pages(&self) -> u64 {
        self.total.div_ceil(self.per_page).max(1)
    }

    pub(crate) fn first_shown(&self) -> u64 {
        if self.shown == 0 {
            0
        } else {
            (self.page - 1) * self.per_page + 1
        }
    }

    pub(crate) fn last_shown(&self) -> u64 {
        (self.first_shown() + self.shown).saturating_sub(1)
    }

    /// Whether any filter (other than one at its default) or the search narrows the list.
    pub(crate) fn is_filtered(&self) -> bool {
        !self.search.is_empty()
            || self
                .filters
                .iter()
                .any(|f| f.selected.is_some() && f.selected.as_deref() != f.default)
    }

    /// The query pairs that keep this list's choices, `page` left out.
    fn pairs(&self, sort: Option<String>) -> Vec<(String, String)> {
        let mut pairs = Vec::new();
        if !self.search.is_empty() {
            pairs.push(("q".to_string(), self.search.clone()));
        }
        for f in &self.filters {
            if let Some(v) = &f.selected {
                pairs.push((f.name.to_string(), v.clone()));
            }
        }
        let sort = sort.unwrap_or_else(|| self.sort_param());
        if sort != self.default_sort {
            pairs.push(("sort".to_string(), sort));
        }
        if self.per_page != DEFAULT_PER_PAGE {
            pairs.push(("per_page".to_string(), self.per_page.to_string()));
        }
        pairs
    }

    fn url(&self, pairs: Vec<(String, String)>) -> String {
        if pairs.is_empty() {
            return self.path.to_string();
        }
        let mut s = form_urlencoded::Serializer::new(String::new());
        for (k, v) in &pairs {
            s.append_pair(k, v);
        }
        format!("{}?{}", self.path, s.finish())
    }

    /// The `sort` parameter now in effect (`-placed`, `title`).
    pub(crate) fn sort_param(&self) -> String {
        if self.descending {
            format!("-{}", self.sort)
        } else {
            self.sort.to_string()
        }
    }

    /// Where a column header links: its key ascending, or descending when it is the current
    /// ascending sort. Back to page 1.
    pub(crate) fn sort_url(&self, key: &str) -> String {
        let sort = if self.sort == key && !self.descending {
            format!("-{key}")
        } else {
            key.to_string()
        };
        self.url(self.pairs(Some(sort)))
    }

    /// `ascending`, `descending` or `none`, for a header's `aria-sort`.
    pub(crate) fn aria_sort(&self, key: &str) -> &'static str {
        match (self.sort == key, self.descending) {
            (true, false) => "ascending",
            (true, true) => "descending",
            (false, _) => "none",
        }
    }

    pub(crate) fn page_url(&self, n: &u64) -> String {
        let mut pairs = self.pairs(None);
        if *n > 1 {
            pairs.push(("page".to_string(), n.to_string()));
        }
        self.url(pairs)
    }

    pub(crate) fn is_current(&self, n: &u64) -> bool {
        *n == self.page
    }

    /// Page numbers to link: all when few, else the first, last and neighbours of the current
    /// one (`None` marks a gap).
    pub(crate) fn page_links(&self) -> Vec<Option<u64>> {
        let pages = self.pages();
        let mut out: Vec<Option<u64>> = Vec::new();
        for n in 1..=pages {
            if n == 1 || n == pages || n.abs_diff(self.page) <= 2 {
                out.push(Some(n));
            } else if out.last().is_some_and(Option::is_some) {
                out.push(None);
            }
        }
        out
    }

    /// The sort and page size as hidden fields of the filter form, so filtering keeps them.
    pub(crate) fn kept_fields(&self) -> Vec<(String, String)> {
        self.pairs(None)
            .into_iter()
            .filter(|(k, _)| k == "sort" || k == "per_page")
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SORTS: &[SortKey] = &[
        SortKey {
            key: "title",
            field: "search_title",
        },
        SortKey {
            key: "placed",
            field: "created",
        },
    ];

    fn spec() -> ListSpec {
        ListSpec {
            path: "/admin/things",
            columns: vec![Column::sorted("Title", "title")],
            sorts: SORTS,
            default_sort: "-placed",
            filters: vec![Filter::fixed(
                "status",
                "Status",
                &[("paid", "Paid"), ("shipped", "Shipped")],
            )],
            search_label: Some("Search"),
        }
    }

    fn parse(pairs: &[(&str, &str)]) -> ChangeList {
        let params = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        ChangeList::parse(spec(), &params)
    }

    #[test]
    fn only_whitelisted_sorts_reach_the_sort_document() {
        let list = parse(&[("sort", "title")]);
        assert_eq!(list.sort_document(), doc! { "search_title": 1, "_id": 1 });
        let list = parse(&[("sort", "-title")]);
        assert_eq!(list.sort_document(), doc! { "search_title": -1, "_id": -1 });
        for bad in ["$where", "-password", "", "details.secret"] {
            let list = parse(&[("sort", bad)]);
            assert_eq!(
                list.sort_document(),
                doc! { "created": -1, "_id": -1 },
                "{bad}"
            );
        }
    }

    #[test]
    fn filter_values_must_be_offered_options() {
        assert_eq!(
            parse(&[("status", "paid")]).filter_value("status"),
            Some("paid")
        );
        assert_eq!(
            parse(&[("status", "{\"$ne\":1}")]).filter_value("status"),
            None
        );
    }

    #[test]
    fn search_escapes_regex_metacharacters_and_ignores_case() {
        let list = parse(&[("q", "  a.b*(c  ")]);
        assert_eq!(list.search, "a.b*(c");
        match list.search_pattern() {
            Some(Bson::RegularExpression(re)) => {
                assert_eq!(re.pattern, r"a\.b\*\(c");
                assert_eq!(re.options, "i");
            }
            other => panic!("expected a regex, got {other:?}"),
        }
        assert!(parse(&[("q", "   ")]).search_pattern().is_none());
    }

    #[test]
    fn links_keep_the_choices_and_toggle_the_sort_direction() {
        let mut list = parse(&[("q", "blue & green"), ("status", "paid"), ("sort", "title")]);
        list.total = 120;
        assert_eq!(
            list.sort_url("title"),
            "/admin/things?q=blue+%26+green&status=paid&sort=-title"
        );
        assert_eq!(
            list.page_url(&2),
            "/admin/things?q=blue+%26+green&status=paid&sort=title&page=2"
        );
        assert_eq!(list.pages(), 3);
        assert_eq!(list.aria_sort("title"), "ascending");
        assert_eq!(list.aria_sort("placed"), "none");
    }

    #[test]
    fn bad_page_numbers_and_sizes_fall_back() {
        let list = parse(&[("page", "-3"), ("per_page", "100000")]);
        assert_eq!((list.page, list.per_page), (1, DEFAULT_PER_PAGE));
        let list = parse(&[("page", "7"), ("per_page", "100")]);
        assert_eq!((list.page, list.per_page), (7, 100));
    }
}
