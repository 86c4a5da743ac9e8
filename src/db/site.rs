//! The `settings` collection: site-wide settings kept in the database (name, tagline, currency
//! symbol and code, flat shipping rates, what search engines and shared links are told: site
//! description, default social image, organisation name, robots.txt rules), so every instance behind a load balancer shows the same and
//! the admin can change them (Admin → Settings) without a restart.
//!
//! A request sees one consistent copy: the `state::with_site_settings` middleware reads them
//! through the [`SettingsCache`] (at most a few seconds old; emptied by a save) and makes them
//! the request's [`current`] settings, which money formatting and new carts use.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bson::doc;
use serde::{Deserialize, Serialize};

use crate::db::{Db, DbError};
use crate::domain::{Currency, Money, TimeZone};

pub const COLLECTION: &str = "settings";
const SITE_ID: &str = "site";

/// How long a read of the settings is reused before the next request reads them again.
const CACHE_TTL: Duration = Duration::from_secs(5);

/// Flat shipping: a base charge per order plus a charge for every started half kilogram.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
pub struct ShippingRates {
    /// Charged for any non-empty order.
    pub base_cents: Money,
    /// Added for every started 500 g of the parcel's weight.
    pub(crate) per_half_kilo_cents: Money,
}

impl Default for ShippingRates {
    fn default() -> Self {
        ShippingRates {
            base_cents: Money::from_cents(399),
            per_half_kilo_cents: Money::from_cents(100),
        }
    }
}

/// The parcel weights the published rate table lists a price for (the Shipping page's
/// `{shipping-rates}` block, `content::live_blocks`), in grams.
pub(crate) const RATE_TABLE_WEIGHTS: [i64; 4] = [500, 1_000, 2_000, 5_000];

impl ShippingRates {
    /// Shipping for a parcel of `grams`.
    pub(crate) fn for_weight(&self, grams: i64) -> Money {
        let grams = grams.max(0);
        self.base_cents + self.per_half_kilo_cents.times((grams + 499) / 500)
    }

    /// `(up to grams, charge)` for each of [`RATE_TABLE_WEIGHTS`]: computed by
    /// [`ShippingRates::for_weight`], the function checkout charges with, so the published
    /// table and the charge cannot differ.
    pub(crate) fn table(&self) -> Vec<(i64, Money)> {
        RATE_TABLE_WEIGHTS
            .iter()
            .map(|&grams| (grams, self.for_weight(grams)))
            .collect()
    }
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct SiteSettings {
    pub name: String,
    pub tagline: String,
    /// Put before amounts: `$12.99`, `€12.99`.
    #[serde(default = "default_currency")]
    pub(crate) currency_symbol: String,
    #[serde(default)]
    pub shipping: ShippingRates,
    /// ISO 4217 code of the prices (`USD`, `EUR`): structured data's `priceCurrency`.
    #[serde(default = "default_currency_code")]
    pub currency_code: String,
    /// The site's description for search results and shared links, on pages with no text of
    /// their own (empty: the tagline).
    #[serde(default)]
    pub(crate) description: String,
    /// The picture a shared link shows for pages without one of their own: a path on this site
    /// (`/media/…/display`, `/static/…`) or an `https://` address; empty for none.
    #[serde(default)]
    pub social_image: String,
    /// The organisation behind the shop, for structured data (empty: the shop's name).
    #[serde(default)]
    pub organisation: String,
    /// The rules of `/robots.txt`; the `Sitemap:` line is added when they have none.
    #[serde(default = "default_robots_txt")]
    pub robots_txt: String,
    /// Where times are shown and typed (stored times stay UTC). Like `menus`, not written when
    /// it is the default, so settings stored before it existed read and write back unchanged.
    #[serde(default, skip_serializing_if = "TimeZone::is_utc")]
    pub time_zone: TimeZone,
    /// The header's and footer's navigation (Admin → Menus).
    #[serde(default, skip_serializing_if = "Menus::is_default")]
    pub menus: Menus,
}

/// One link of a navigation menu: a path on this site (`/pages/about`) or an `https://`
/// address, checked when saved (`admin::menus`).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct MenuItem {
    pub(crate) label: String,
    pub(crate) href: String,
}

impl MenuItem {
    fn new(label: &str, href: &str) -> MenuItem {
        MenuItem {
            label: label.to_string(),
            href: href.to_string(),
        }
    }
}

/// The site's navigation menus, in order; stored with the settings (so cached with them) and
/// written only by [`save_menus`].
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct Menus {
    #[serde(default = "default_header_menu")]
    pub header: Vec<MenuItem>,
    #[serde(default = "default_footer_menu")]
    pub(crate) footer: Vec<MenuItem>,
}

fn default_header_menu() -> Vec<MenuItem> {
    vec![
        MenuItem::new("Home", "/"),
        MenuItem::new("Shop", "/products"),
        MenuItem::new("Categories", "/categories"),
        MenuItem::new("Blog", "/blog"),
        MenuItem::new("Gallery", "/gallery"),
    ]
}

fn default_footer_menu() -> Vec<MenuItem> {
    vec![
        MenuItem::new("About", "/pages/about"),
        MenuItem::new("Shipping and returns", "/pages/shipping"),
        MenuItem::new("Tags", "/tags/"),
        MenuItem::new("Find your order", "/orders/lookup"),
        MenuItem::new("Blog", "/blog/"),
        MenuItem::new("Gallery", "/gallery/"),
    ]
}

impl Menus {
    /// Whether these are the menus a shop starts with.
    pub(crate) fn is_default(&self) -> bool {
        *self == Menus::default()
    }
}

impl Default for Menus {
    fn default() -> Self {
        Menus {
            header: default_header_menu(),
            footer: default_footer_menu(),
        }
    }
}

fn default_currency() -> String {
    "$".to_string()
}

fn default_currency_code() -> String {
    "USD".to_string()
}

/// What `/robots.txt` says until the admin changes it: the storefront is open, the admin, the
/// shopper's own pages and search results are not for crawlers.
pub(crate) const DEFAULT_ROBOTS_TXT: &str = "User-agent: *\n\
Disallow: /admin\n\
Disallow: /cart\n\
Disallow: /checkout\n\
Disallow: /orders\n\
Disallow: /search\n";

fn default_robots_txt() -> String {
    DEFAULT_ROBOTS_TXT.to_string()
}

impl SiteSettings {
    /// The currency money is shown in (Admin → Settings).
    pub fn currency(&self) -> Currency {
        Currency::new(self.currency_symbol.as_str(), self.currency_code.as_str())
    }

    /// The description pages without their own show: the stored one, else the tagline.
    pub(crate) fn description_or_tagline(&self) -> &str {
        if self.description.trim().is_empty() {
            &self.tagline
        } else {
            &self.description
        }
    }

    /// The organisation's name for structured data: the stored one, else the shop's name.
    pub(crate) fn organisation_name(&self) -> &str {
        if self.organisation.trim().is_empty() {
            &self.name
        } else {
            &self.organisation
        }
    }
}

impl Default for SiteSettings {
    fn default() -> Self {
        SiteSettings {
            name: "Bazaar".to_string(),
            tagline: "Records, films and books, with notes from the shop floor.".to_string(),
            currency_symbol: default_currency(),
            shipping: ShippingRates::default(),
            currency_code: default_currency_code(),
            description: String::new(),
            social_image: String::new(),
            organisation: String::new(),
            robots_txt: default_robots_txt(),
            time_zone: TimeZone::utc(),
            menus: Menus::default(),
        }
    }
}

/// The site settings, or the defaults when none are stored yet.
pub async fn load(db: &Db) -> Result<SiteSettings, DbError> {
    let stored = db
        .collection::<SiteSettings>(COLLECTION)
        .find_one(doc! { "_id": SITE_ID })
        .projection(doc! {
            "_id": 0, "name": 1, "tagline": 1, "currency_symbol": 1, "shipping": 1,
            "currency_code": 1, "description": 1, "social_image": 1, "organisation": 1,
            "robots_txt": 1, "time_zone": 1, "menus": 1,
        })
        .await?;
    Ok(stored.unwrap_or_default())
}

/// Store `settings` (Admin → Settings), durably: the admin is told they are saved.
pub(crate) async fn save(db: &Db, settings: &SiteSettings) -> Result<(), DbError> {
    let shipping = bson::to_bson(&settings.shipping).map_err(|e| DbError::Other(e.into()))?;
    db.durable::<bson::Document>(COLLECTION)
        .update_one(
            doc! { "_id": SITE_ID },
            doc! { "$set": {
                "name": &settings.name,
                "tagline": &settings.tagline,
                "currency_symbol": &settings.currency_symbol,
                "shipping": shipping,
                "currency_code": &settings.currency_code,
                "description": &settings.description,
                "social_image": &settings.social_image,
                "organisation": &settings.organisation,
                "robots_txt": &settings.robots_txt,
                "time_zone": settings.time_zone.name(),
            } },
        )
        .upsert(true)
        .await?;
    Ok(())
}

/// Store the navigation menus (Admin → Menus), durably; the other settings are left as they
/// are (stored first as the defaults when there are none yet).
pub(crate) async fn save_menus(db: &Db, menus: &Menus) -> Result<(), DbError> {
    insert_defaults(db).await?;
    let menus = bson::to_bson(menus).map_err(|e| DbError::Other(e.into()))?;
    db.durable::<bson::Document>(COLLECTION)
        .update_one(doc! { "_id": SITE_ID }, doc! { "$set": { "menus": menus } })
        .await?;
    Ok(())
}

/// Store the defaults unless settings exist; returns whether a document was added. An existing
/// document is never touched, so an edited tagline survives re-seeding.
pub(crate) async fn insert_defaults(db: &Db) -> Result<bool, DbError> {
    let defaults = SiteSettings::default();
    let shipping = bson::to_bson(&defaults.shipping).map_err(|e| DbError::Other(e.into()))?;
    let result = db
        .collection::<bson::Document>(COLLECTION)
        .update_one(
            doc! { "_id": SITE_ID },
            doc! { "$setOnInsert": {
                "name": &defaults.name,
                "tagline": &defaults.tagline,
                "currency_symbol": &defaults.currency_symbol,
                "shipping": shipping,
                "currency_code": &defaults.currency_code,
                "description": &defaults.description,
                "social_image": &defaults.social_image,
                "organisation": &defaults.organisation,
                "robots_txt": &defaults.robots_txt,
            } },
        )
        .upsert(true)
        .await?;
    Ok(result.upserted_id.is_some())
}

/// The last read of the settings, shared by every server worker.
#[derive(Default)]
pub(crate) struct SettingsCache {
    entry: Mutex<Option<(Instant, Arc<SiteSettings>)>>,
}

impl SettingsCache {
    /// The settings, read again when the last read is older than a few seconds. A failed read
    /// falls back to the last one (or the defaults): a page never fails over its currency sign.
    /// The failure is remembered like a read, so during an outage only one request per
    /// `CACHE_TTL` waits for the database here. The flag is true when this call found the
    /// database unreachable.
    pub(crate) async fn get(&self, db: &Db) -> (Arc<SiteSettings>, bool) {
        let cached = self.entry.lock().ok().and_then(|e| e.clone());
        if let Some((at, settings)) = &cached {
            if at.elapsed() < CACHE_TTL {
                crate::metrics::cache_lookup("settings", true);
                return (settings.clone(), false);
            }
        }
        crate::metrics::cache_lookup("settings", false);
        crate::metrics::cache_refresh("settings");
        let (settings, unreachable) = match load(db).await {
            Ok(settings) => (Arc::new(settings), false),
            Err(e) => {
                tracing::warn!(error = %e, "reading the site settings failed; using the last ones");
                let unreachable = matches!(e, DbError::Unavailable(_));
                (cached.map(|(_, s)| s).unwrap_or_default(), unreachable)
            }
        };
        if let Ok(mut entry) = self.entry.lock() {
            *entry = Some((Instant::now(), settings.clone()));
        }
        (settings, unreachable)
    }

    /// Forget the last read (after a save), so the next request reads the new settings.
    pub(crate) fn invalidate(&self) {
        if let Ok(mut entry) = self.entry.lock() {
            *entry = None;
        }
    }
}

tokio::task_local! {
    static CURRENT: Arc<SiteSettings>;
}

/// The settings of the request being handled; the defaults outside a request (background jobs,
/// the command line), which never format money for people or start carts.
pub(crate) fn current() -> Arc<SiteSettings> {
    CURRENT
        .try_with(Arc::clone)
        .unwrap_or_else(|_| Arc::new(SiteSettings::default()))
}

/// The currency of the request being handled, for the page structs whose templates show money.
///
/// Outside a request there is no shop choice to read, and a silent default would show money in
/// a currency nobody chose (an email sent by a background job): code that runs there passes the
/// currency of the settings it loads. Reaching this outside a request is a bug, so it is
/// logged as one (and listed under Admin → System) while the page still shows the default.
pub(crate) fn currency() -> Currency {
    match CURRENT.try_with(|settings| settings.currency()) {
        Ok(currency) => currency,
        Err(_) => {
            tracing::error!(
                "money shown outside a request, in the default currency: pass the site's currency"
            );
            SiteSettings::default().currency()
        }
    }
}

/// The site's time zone for the request being handled; UTC outside a request (a background
/// job that shows times to people loads the settings and uses theirs).
pub(crate) fn time_zone() -> TimeZone {
    CURRENT
        .try_with(|settings| settings.time_zone)
        .unwrap_or_default()
}

/// Run `work` (a request) with `settings` as its [`current`] settings; the middleware that
/// reads them for each request is `crate::state::with_site_settings`.
pub(crate) async fn scope<F: std::future::Future>(
    settings: Arc<SiteSettings>,
    work: F,
) -> F::Output {
    CURRENT.scope(settings, work).await
}
