//! Links to a path on this site built from stored or submitted text (an analytics path, a
//! Markdown link, a redirect target): the one check every such link goes through, so none of
//! them can point off-site.
//!
//! Browsers read `//host/x` as another site, and they also turn `\` into `/` in http(s) URLs
//! and drop tabs and line breaks anywhere in a URL: `/\evil.example` and `/\t/evil.example`
//! both go to `evil.example`. So a local path must start with exactly one `/` followed by
//! something that is neither `/` nor `\`, and may contain no control characters or spaces.

/// `path` if it is a path on this site that is safe to put in an `href` or a `Location`;
/// `None` for anything a browser could read as another site (or that is not a path at all).
pub(crate) fn local_path(path: &str) -> Option<&str> {
    let rest = path.strip_prefix('/')?;
    if rest.starts_with(['/', '\\']) {
        return None;
    }
    if path
        .chars()
        .any(|c| c.is_control() || c.is_whitespace() || c == '\\')
    {
        return None;
    }
    Some(path)
}

/// Whether `path` is `area` itself or a path under it (`/cart` and `/cart/items`, not
/// `/cartography`). Checked on every request (cache policy, the header's current link), so it
/// builds no string.
pub(crate) fn is_within(path: &str, area: &str) -> bool {
    path.strip_prefix(area)
        .is_some_and(|rest| rest.is_empty() || rest.starts_with('/'))
}

/// Whether a relative link in rendered Markdown may stay: links that do not start with a slash
/// or backslash (`page-2`, `#notes`, `?page=2`) are relative to the page and stay on the site;
/// anything starting with one must pass [`local_path`]. Leading spaces and controls are ignored
/// as a browser ignores them.
pub(crate) fn is_safe_relative_link(url: &str) -> bool {
    let trimmed: String = url
        .trim_matches(|c: char| c.is_ascii_control() || c == ' ')
        .chars()
        .filter(|c| !matches!(c, '\t' | '\n' | '\r'))
        .collect();
    if trimmed.starts_with(['/', '\\']) {
        local_path(&trimmed).is_some()
    } else {
        !trimmed.contains('\\')
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_on_this_site_are_kept() {
        assert_eq!(local_path("/"), Some("/"));
        assert_eq!(local_path("/products/abc"), Some("/products/abc"));
        assert_eq!(local_path("/search?q=a%20b"), Some("/search?q=a%20b"));
        assert_eq!(local_path("/%2F%2Fhost"), Some("/%2F%2Fhost"));
    }

    #[test]
    fn anything_a_browser_reads_as_another_site_is_refused() {
        for path in [
            "//evil.example",
            "/\\evil.example",
            "/\\/evil.example",
            "/\t/evil.example",
            "/\n/evil.example",
            "\\\\evil.example",
            "https://evil.example/",
            "evil.example",
            "",
            "/a\\b",
            "/a b",
            "(other)",
        ] {
            assert_eq!(local_path(path), None, "{path:?}");
        }
    }

    #[test]
    fn a_path_is_within_its_area_and_the_areas_sub_paths_only() {
        assert!(is_within("/cart", "/cart"));
        assert!(is_within("/cart/items/x", "/cart"));
        assert!(is_within("/cart/", "/cart"));
        assert!(!is_within("/cartography", "/cart"));
        assert!(!is_within("/car", "/cart"));
        assert!(!is_within("/", "/cart"));
    }

    #[test]
    fn relative_markdown_links_are_judged_like_browsers_read_them() {
        assert!(is_safe_relative_link("page-2"));
        assert!(is_safe_relative_link("#notes"));
        assert!(is_safe_relative_link("?page=2"));
        assert!(is_safe_relative_link("/pages/about"));
        assert!(!is_safe_relative_link("/\\evil.example"));
        assert!(!is_safe_relative_link("\\\\evil.example"));
        assert!(!is_safe_relative_link(" //evil.example"));
        assert!(!is_safe_relative_link("/\t/evil.example"));
        assert!(!is_safe_relative_link("a\\b"));
    }
}
