//! Parts of the content pages rendered once per cached value rather than once per view: the
//! cards and "Newer"/"Older" links of a stream page, the lists of a tag page, what a post's
//! page shows of the post itself.
//!
//! A [`Part`] is kept inside the value the content cache holds (`content::cache`), so it lives
//! exactly as long as that value (at most `cache::TTL`, and dropped with it by every node,
//! comment or product write this instance reports): a part never outlives what it was made
//! from. It also depends on the site settings (the time zone dates are written in, the
//! currency prices are shown in): it remembers the settings it was made with and is made again
//! when the request's are others (the settings are read again every few seconds, so a part
//! is made at most once per cached value and settings read).
//!
//! Under load this turns the per-view work of a stream or tag page (dates formatted with
//! `chrono`, addresses percent-encoded, a photo's stored detail decoded for its sizes) into
//! one per page per two seconds: over a third of a tag page's time (issue 37).

use std::sync::{Arc, Mutex};

use crate::db::site::SiteSettings;

/// Where a cached value keeps a part of its page once a view has rendered it; shared by every
/// view of the value (see the module documentation).
#[derive(Default)]
pub(crate) struct Part(Mutex<Option<Made>>);

/// A rendered part and the settings it was rendered with (kept, so comparing pointers is
/// sound: the allocation cannot be reused while it is held here).
struct Made {
    settings: Arc<SiteSettings>,
    html: Arc<str>,
}

impl std::fmt::Debug for Part {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Part")
    }
}

impl Part {
    /// The part's HTML for a page shown with `settings`: the one kept here if it was made with
    /// them, else `render`'s (kept for the next views). A failed render is not kept.
    pub(crate) fn get_or_render<E>(
        &self,
        settings: &Arc<SiteSettings>,
        render: impl FnOnce() -> Result<String, E>,
    ) -> Result<Arc<str>, E> {
        if let Some(html) = self.kept(settings) {
            return Ok(html);
        }
        // Rendered outside the lock: two views that miss together both render, and the
        // second one's is kept (the same HTML).
        let html: Arc<str> = render()?.into();
        if let Ok(mut kept) = self.0.lock() {
            *kept = Some(Made {
                settings: Arc::clone(settings),
                html: Arc::clone(&html),
            });
        }
        Ok(html)
    }

    /// The HTML kept here, if it was made with `settings`.
    fn kept(&self, settings: &Arc<SiteSettings>) -> Option<Arc<str>> {
        let kept = self.0.lock().ok()?;
        kept.as_ref()
            .filter(|made| Arc::ptr_eq(&made.settings, settings))
            .map(|made| Arc::clone(&made.html))
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
        assert_eq!(&*part.get_or_render(&settings, || render("a")).unwrap(), "a");
        assert_eq!(&*part.get_or_render(&settings, || render("b")).unwrap(), "a");
        assert_eq!(renders.get(), 1, "the second view used the kept part");

        // Settings read again (another allocation, even with equal values): made again.
        let reread = Arc::new(SiteSettings::default());
        assert_eq!(&*part.get_or_render(&reread, || render("c")).unwrap(), "c");
        assert_eq!(renders.get(), 2);

        let failed = part.get_or_render(&settings, || Err::<String, _>("broken"));
        assert_eq!(failed.err(), Some("broken"));
        assert_eq!(&*part.get_or_render(&reread, || render("d")).unwrap(), "c");
    }
}
