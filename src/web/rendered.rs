//! Parts of pages made once per cached value rather than once per view: the cards and
//! "Newer"/"Older" links of a stream page, the lists of a tag page, what a post's page shows of
//! the post itself (its article and its `<head>` metadata), what a product page shows of its
//! product (`catalog::product_view`).
//!
//! A [`Part`] is kept inside the value a cache holds (`content::cache`, `catalog::product_cache`),
//! so it lives exactly as long as that value (at most the cache's bound, and dropped with it by
//! every write this instance reports that drops the value): a part never outlives what it was
//! made from. It also depends on the site settings (the time zone dates are written in, the
//! currency prices are shown in) and, for metadata, on the site's address: it remembers the
//! settings and address it was made with and is made again when the request's are others (the
//! settings are read again every few seconds, so a part is made at most once per cached value
//! and settings read).
//!
//! Under load this turns the per-view work of a stream or tag page (dates formatted with
//! `chrono`, addresses percent-encoded, a photo's stored detail decoded for its sizes) into
//! one per page per two seconds: over a third of a tag page's time (issue 37); on a product
//! page, about a fifth.

use std::sync::{Arc, Mutex};

use crate::db::site::SiteSettings;

/// Where a cached value keeps a part of its page once a view has made it (rendered HTML by
/// default); shared by every view of the value (see the module documentation).
pub(crate) struct Part<T: ?Sized = str>(Mutex<Option<Made<T>>>);

/// A part and what it was made with: the settings (kept, so comparing pointers is sound: the
/// allocation cannot be reused while it is held here) and the site's address (empty for a
/// part that has no absolute address in it).
struct Made<T: ?Sized> {
    settings: Arc<SiteSettings>,
    site_url: String,
    value: Arc<T>,
}

impl<T: ?Sized> Default for Part<T> {
    fn default() -> Self {
        Part(Mutex::new(None))
    }
}

impl<T: ?Sized> std::fmt::Debug for Part<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Part")
    }
}

impl<T: ?Sized> Part<T> {
    /// The part for a page shown with `settings` at `site_url`: the one kept here if it was
    /// made with them, else `make`'s (kept for the next views). A failure is not kept.
    pub(crate) fn get_or_make<E>(
        &self,
        settings: &Arc<SiteSettings>,
        site_url: &str,
        make: impl FnOnce() -> Result<Arc<T>, E>,
    ) -> Result<Arc<T>, E> {
        if let Some(value) = self.kept(settings, site_url) {
            return Ok(value);
        }
        // Made outside the lock: two views that miss together both make it, and the second
        // one's is kept (the same part).
        let value = make()?;
        self.keep(settings, site_url, Arc::clone(&value));
        Ok(value)
    }

    /// Keep `value`, made with `settings` at `site_url`, for the next views (for a part made
    /// by awaiting, which [`Part::get_or_make`] cannot).
    pub(crate) fn keep(&self, settings: &Arc<SiteSettings>, site_url: &str, value: Arc<T>) {
        if let Ok(mut kept) = self.0.lock() {
            *kept = Some(Made {
                settings: Arc::clone(settings),
                site_url: site_url.to_string(),
                value,
            });
        }
    }

    /// The part kept here, if it was made with `settings` at `site_url`.
    pub(crate) fn kept(&self, settings: &Arc<SiteSettings>, site_url: &str) -> Option<Arc<T>> {
        let kept = self.0.lock().ok()?;
        kept.as_ref()
            .filter(|made| Arc::ptr_eq(&made.settings, settings) && made.site_url == site_url)
            .map(|made| Arc::clone(&made.value))
    }
}

impl Part {
    /// The part's HTML for a page shown with `settings` (it has no absolute address in it):
    /// the one kept here if it was made with them, else `render`'s.
    pub(crate) fn get_or_render<E>(
        &self,
        settings: &Arc<SiteSettings>,
        render: impl FnOnce() -> Result<String, E>,
    ) -> Result<Arc<str>, E> {
        self.get_or_make(settings, "", || render().map(Arc::from))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_part_is_rendered_once_per_settings_and_a_failure_is_not_kept() {
        let part = Part::default();
        let settings = Arc::new(SiteSettings::default());
        let renders = std::cell::Cell::new(0);
        let render = |text: &str| {
            renders.set(renders.get() + 1);
            Ok::<_, &str>(text.to_string())
        };
        assert_eq!(
            &*part.get_or_render(&settings, || render("a")).unwrap(),
            "a"
        );
        assert_eq!(
            &*part.get_or_render(&settings, || render("b")).unwrap(),
            "a"
        );
        assert_eq!(renders.get(), 1, "the second view used the kept part");

        // Settings read again (another allocation, even with equal values): made again.
        let reread = Arc::new(SiteSettings::default());
        assert_eq!(&*part.get_or_render(&reread, || render("c")).unwrap(), "c");
        assert_eq!(renders.get(), 2);

        let failed = part.get_or_render(&settings, || Err::<String, _>("broken"));
        assert_eq!(failed.err(), Some("broken"));
        assert_eq!(&*part.get_or_render(&reread, || render("d")).unwrap(), "c");
    }

    #[test]
    fn a_part_with_addresses_is_made_again_for_another_site_address() {
        let part = Part::<String>::default();
        let settings = Arc::new(SiteSettings::default());
        let make = |text: &str| Ok::<_, ()>(Arc::new(text.to_string()));
        let first = part.get_or_make(&settings, "https://a.example", || make("a"));
        assert_eq!(first.unwrap().as_str(), "a");
        let again = part.get_or_make(&settings, "https://a.example", || make("b"));
        assert_eq!(again.unwrap().as_str(), "a");
        let other = part.get_or_make(&settings, "https://b.example", || make("c"));
        assert_eq!(other.unwrap().as_str(), "c");
    }
}
