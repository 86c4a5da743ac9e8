//! Keyset ("seek") pagination for the product listings: a page's Next and Previous links carry
//! the sort key and `_id` of its last or first product (`?after=TOKEN` / `?before=TOKEN`), and
//! the next page is read from that point in the sort index instead of skipping everything
//! before it. A page a thousand pages deep then costs what the second page does.
//!
//! # Tokens
//!
//! A token is URL-safe base64 (no padding) of `v1.<sort>.<page>.<_id hex>.<key>`: the sort it
//! belongs to (a token is refused under another sort), the number of the page it leads to (only
//! shown: "Showing 241–252 of …"), the product's `_id` and its sort key written as text (a date
//! as milliseconds, a price in cents, a discount percentage, a lowercased title). Anything that
//! does not decode exactly like that is refused with a 400 page: tokens are made by the site, so
//! a bad one is a mangled or hand-written address.
//!
//! # Order and ties
//!
//! Every listing sort is its key then `_id`, both in one direction, so `(key, _id)` orders the
//! listing completely. The products after `(k, id)` are those with key `k` and a larger `_id`
//! (the ties), then those with a larger key. They are read as two finds, each a tight range of
//! the sort index (an equality on the key and a range on `_id`, then a range on the key): one
//! find with an `$or` would leave the store to bound it, and an embedded store that cannot
//! would walk every tie. The second find is skipped when the ties fill the page.
//!
//! # Walks and concurrent writes
//!
//! Following Next links visits every product that stays in the listing exactly once, in order,
//! whatever is added or removed meanwhile: a product added ahead of the walk's position shows
//! up, one added behind it does not, and nothing repeats. Page numbers shown during a walk are
//! counted from where the walk started, so they may drift by the products added meanwhile.

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine as _;
use bson::oid::ObjectId;
use bson::{doc, Bson, DateTime, Document};

use futures::TryStreamExt;

use crate::catalog::card::ProductCard;
use crate::catalog::products;
use crate::db::{Db, DbError};

pub const PAGE_SIZE: u64 = 12;
/// Larger page numbers are read as this one (then as the last page): 12 million products.
/// No page skips more than half its listing (see `catalog::listing::find_page`).
pub const MAX_PAGE: u64 = 1_000_000;
/// Page numbers are linked only this close to either end of a listing (where reaching the page
/// by number skips at most this many pages' worth of products); deeper pages are reached by
/// the keyset Next and Previous links (see [`crate::catalog::seek`]), which cost the same at
/// any depth. A deep `page=N` typed in still works, read from the nearer end.
pub const NUMBERED_PAGES: u64 = 20;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Sort {
    #[default]
    Newest,
    PriceLow,
    PriceHigh,
    Discount,
    Title,
}

impl Sort {
    pub const ALL: [Sort; 5] = [
        Sort::Newest,
        Sort::PriceLow,
        Sort::PriceHigh,
        Sort::Discount,
        Sort::Title,
    ];

    pub fn as_str(&self) -> &'static str {
        match self {
            Sort::Newest => "newest",
            Sort::PriceLow => "price",
            Sort::PriceHigh => "price-desc",
            Sort::Discount => "discount",
            Sort::Title => "title",
        }
    }

    pub(crate) fn label(&self) -> &'static str {
        match self {
            Sort::Newest => "Newest",
            Sort::PriceLow => "Price: low to high",
            Sort::PriceHigh => "Price: high to low",
            Sort::Discount => "Biggest discount",
            Sort::Title => "Title",
        }
    }

    pub(crate) fn parse(s: &str) -> Option<Sort> {
        Sort::ALL.into_iter().find(|x| x.as_str() == s)
    }

    /// The sort document; `_id` breaks ties so pages never overlap.
    pub fn document(&self) -> Document {
        match self {
            Sort::Newest => doc! { "details.issue_date": -1, "_id": -1 },
            Sort::PriceLow => doc! { "pricing.retail": 1, "_id": 1 },
            Sort::PriceHigh => doc! { "pricing.retail": -1, "_id": -1 },
            Sort::Discount => doc! { "pricing.pct_savings": -1, "_id": -1 },
            Sort::Title => doc! { "search_title": 1, "_id": 1 },
        }
    }
}

/// Longest token accepted (a title key is at most a few hundred characters).
const MAX_TOKEN_CHARS: usize = 2_048;

/// One product's place in a listing's order, and the page number a link to it leads to.
#[derive(Debug, Clone, PartialEq)]
pub struct Cursor {
    pub(crate) sort: Sort,
    /// The product's sort key (a date, a number of cents, a percentage or a title).
    pub(crate) key: Bson,
    pub id: ObjectId,
    /// The number of the page this cursor's link shows (for "Showing n–m"; never trusted for
    /// anything else).
    pub(crate) page: u64,
}

/// A keyset page request: the page after one product, or the page before one.
#[derive(Debug, Clone, PartialEq)]
pub enum Seek {
    After(Cursor),
    Before(Cursor),
}

/// Why a page address's `after` / `before` value was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("This page link is not valid ({0}). Start again from the first page of the list.")]
pub(crate) struct BadToken(pub &'static str);

impl Sort {
    /// The field the sort orders by (then by `_id`).
    pub(crate) fn key_field(&self) -> &'static str {
        match self {
            Sort::Newest => "details.issue_date",
            Sort::PriceLow | Sort::PriceHigh => "pricing.retail",
            Sort::Discount => "pricing.pct_savings",
            Sort::Title => "search_title",
        }
    }

    /// True when the key (and `_id`) ascend.
    pub fn ascending(&self) -> bool {
        matches!(self, Sort::PriceLow | Sort::Title)
    }

    /// The key pattern of the index that serves this sort whole (see `products::indexes`): a
    /// descending sort may walk an ascending index backwards. The newest-first one ends in
    /// `status`, which the store tests the on-sale condition on.
    pub fn index(&self) -> Document {
        match self {
            Sort::Newest => doc! { "details.issue_date": -1, "_id": -1, "status": 1 },
            Sort::PriceHigh => Sort::PriceLow.document(),
            other => other.document(),
        }
    }

    /// A product's key under this sort; `None` when the stored document lacks it (such a
    /// product gets page-number links around it instead of keyset ones).
    pub(crate) fn key_of(&self, product: &ProductCard) -> Option<Bson> {
        match self {
            Sort::Newest => match &product.details.issue_date {
                Some(Bson::DateTime(d)) => Some(Bson::DateTime(*d)),
                _ => None,
            },
            Sort::PriceLow | Sort::PriceHigh => Some(Bson::from(product.pricing.retail)),
            Sort::Discount => Some(Bson::Int32(product.pricing.pct_savings)),
            Sort::Title => Some(Bson::String(product.search_title.clone())),
        }
    }

    fn key_to_text(&self, key: &Bson) -> Option<String> {
        match (self, key) {
            (Sort::Newest, Bson::DateTime(d)) => Some(d.timestamp_millis().to_string()),
            (Sort::PriceLow | Sort::PriceHigh, Bson::Int64(n)) => Some(n.to_string()),
            (Sort::Discount, Bson::Int32(n)) => Some(n.to_string()),
            (Sort::Title, Bson::String(s)) => Some(s.clone()),
            _ => None,
        }
    }

    fn key_from_text(&self, text: &str) -> Option<Bson> {
        match self {
            Sort::Newest => text
                .parse::<i64>()
                .ok()
                .map(|ms| Bson::DateTime(DateTime::from_millis(ms))),
            Sort::PriceLow | Sort::PriceHigh => text.parse::<i64>().ok().map(Bson::Int64),
            Sort::Discount => text.parse::<i32>().ok().map(Bson::Int32),
            // A title key is stored text: control characters never reach the store's regexes
            // or keys from an address.
            Sort::Title => (!text.chars().any(char::is_control)).then(|| Bson::String(text.into())),
        }
    }
}

impl Cursor {
    /// The cursor at `product` under `sort`, for a link to page `page`.
    pub fn at(sort: Sort, product: &ProductCard, page: u64) -> Option<Cursor> {
        Some(Cursor {
            sort,
            key: sort.key_of(product)?,
            id: product.id,
            page,
        })
    }

    /// The token for an address (see the module documentation).
    pub(crate) fn token(&self) -> String {
        let key = self.sort.key_to_text(&self.key).unwrap_or_default();
        let text = format!(
            "v1.{}.{}.{}.{key}",
            self.sort.as_str(),
            self.page,
            self.id.to_hex()
        );
        URL_SAFE_NO_PAD.encode(text)
    }

    /// Read a token for a listing sorted by `sort`.
    pub(crate) fn parse(token: &str, sort: Sort) -> Result<Cursor, BadToken> {
        let token = token.trim();
        if token.is_empty() || token.len() > MAX_TOKEN_CHARS {
            return Err(BadToken("empty or too long"));
        }
        let bytes = URL_SAFE_NO_PAD
            .decode(token)
            .map_err(|_| BadToken("not a page token"))?;
        let text = String::from_utf8(bytes).map_err(|_| BadToken("not a page token"))?;
        let mut parts = text.splitn(5, '.');
        let (Some("v1"), Some(sort_name), Some(page), Some(id), Some(key)) = (
            parts.next(),
            parts.next(),
            parts.next(),
            parts.next(),
            parts.next(),
        ) else {
            return Err(BadToken("not a page token"));
        };
        if Sort::parse(sort_name) != Some(sort) {
            return Err(BadToken("made for another sort order"));
        }
        let page = page
            .parse::<u64>()
            .ok()
            .filter(|p| (1..=MAX_PAGE).contains(p))
            .ok_or(BadToken("bad page number"))?;
        let id = ObjectId::parse_str(id).map_err(|_| BadToken("bad product id"))?;
        let key = sort.key_from_text(key).ok_or(BadToken("bad sort key"))?;
        Ok(Cursor {
            sort,
            key,
            id,
            page,
        })
    }
}

impl Seek {
    /// The `after` / `before` parameters of a listing address sorted by `sort`: `None` for
    /// neither, an error for a bad token or for both at once.
    pub(crate) fn from_params(
        after: Option<&str>,
        before: Option<&str>,
        sort: Sort,
    ) -> Result<Option<Seek>, BadToken> {
        match (after, before) {
            (None, None) => Ok(None),
            (Some(_), Some(_)) => Err(BadToken("both after and before")),
            (Some(t), None) => Cursor::parse(t, sort).map(|c| Some(Seek::After(c))),
            (None, Some(t)) => Cursor::parse(t, sort).map(|c| Some(Seek::Before(c))),
        }
    }

    pub(crate) fn cursor(&self) -> &Cursor {
        match self {
            Seek::After(c) | Seek::Before(c) => c,
        }
    }

    /// True when reading forward in the listing's order (Next).
    pub fn forward(&self) -> bool {
        matches!(self, Seek::After(_))
    }

    /// The address parameter for this seek: `after=TOKEN` or `before=TOKEN`.
    pub(crate) fn param(&self) -> String {
        match self {
            Seek::After(c) => format!("after={}", c.token()),
            Seek::Before(c) => format!("before={}", c.token()),
        }
    }
}

/// One find a keyset page sends, described so tests can `explain` exactly what the page runs.
#[derive(Debug, Clone, PartialEq)]
pub struct PlannedFind {
    pub(crate) filter: Document,
    pub(crate) sort: Document,
    /// The sort index, named when walking it is known to be cheap (see [`finds`]).
    pub(crate) hint: Option<Document>,
    pub(crate) limit: i64,
}

impl PlannedFind {
    /// The `find` command for `explain` (or to run by hand).
    pub fn command(&self, collection: &str) -> Document {
        let mut find = doc! {
            "find": collection,
            "filter": self.filter.clone(),
            "sort": self.sort.clone(),
            "limit": self.limit,
        };
        if let Some(hint) = &self.hint {
            find.insert("hint", hint.clone());
        }
        find
    }
}

/// The sort with every direction turned round.
pub(crate) fn reversed(sort: Document) -> Document {
    sort.into_iter()
        .map(|(k, v)| {
            let dir = match v {
                Bson::Int32(d) => -d,
                Bson::Int64(d) => -(d as i32),
                _ => 1,
            };
            (k, Bson::Int32(dir))
        })
        .collect()
}

/// The finds for one keyset page of the listing `filter`: the ties of the cursor's key past its
/// `_id`, then the keys past it, each in the walk's order (reversed for Previous) and each
/// asking for one product more than a page (to know whether there is a further page). The
/// caller runs the second only when the first did not fill the page, with its limit lowered by
/// what the first found.
///
/// `hint_sort_index` names the sort index for both finds. Without it a store may prefer an index
/// on the filter's equality (a category) that does not give the order, and then read and sort
/// every product from the cursor to the end of that category. Walking the sort index is cheap
/// when matches are dense along it (see [`walk_is_cheap`]).
pub fn finds(filter: &Document, seek: &Seek, hint_sort_index: bool) -> [PlannedFind; 2] {
    let cursor = seek.cursor();
    let sort = cursor.sort;
    let walk_ascending = sort.ascending() == seek.forward();
    let past = if walk_ascending { "$gt" } else { "$lt" };
    let order = if seek.forward() {
        sort.document()
    } else {
        reversed(sort.document())
    };
    let field = sort.key_field();
    let hint = hint_sort_index.then(|| sort.index());
    let within = |extra: Document| doc! { "$and": [filter.clone(), extra] };
    let limit = PAGE_SIZE as i64 + 1;
    [
        PlannedFind {
            filter: within(doc! { field: cursor.key.clone(), "_id": { past: cursor.id } }),
            sort: order.clone(),
            hint: hint.clone(),
            limit,
        },
        PlannedFind {
            filter: within(doc! { field: { past: cursor.key.clone() } }),
            sort: order,
            hint,
            limit,
        },
    ]
}

/// Whether walking the whole sort index finds a page of a listing of `matching` products out
/// of `catalog` quickly: with matches spread along the order, about `limit * catalog /
/// matching` entries are read for `limit` matches, against `matching` products read and sorted
/// through a narrower index. Walking wins when `matching² > 4 · limit · catalog` (the same
/// rule the embedded store's planner applies to a first page).
pub(crate) fn walk_is_cheap(matching: u64, catalog: u64) -> bool {
    let limit = PAGE_SIZE + 1;
    (matching as u128).pow(2) > 4 * limit as u128 * catalog as u128
}

/// Up to `limit` products of a keyset read (its two finds, see [`finds`]), the first `skip`
/// of them left out: those tied with the cursor's key, then those past it. `ties` is how many
/// tied products follow the cursor when known (a page anchor knows), so a skip past them goes
/// straight to the second find.
pub(crate) async fn read_keyset(
    db: &Db,
    [tied, past]: [PlannedFind; 2],
    limit: u64,
    skip: u64,
    ties: Option<u64>,
) -> Result<Vec<ProductCard>, DbError> {
    let limited = |find: PlannedFind, n: u64| PlannedFind {
        limit: n as i64,
        ..find
    };
    if let Some(ties) = ties.filter(|&ties| skip >= ties) {
        return run_find(db, &limited(past, limit), skip - ties).await;
    }
    let mut products = run_find(db, &limited(tied, limit), skip).await?;
    if (products.len() as u64) < limit {
        let missing = limit - products.len() as u64;
        products.extend(run_find(db, &limited(past, missing), 0).await?);
    }
    Ok(products)
}

/// The products `find` plans, after skipping `skip` of them, as grid cards.
pub(crate) async fn run_find(
    db: &Db,
    find: &PlannedFind,
    skip: u64,
) -> Result<Vec<ProductCard>, DbError> {
    let collection = products::collection(db).clone_with_type::<ProductCard>();
    let mut action = collection
        .find(find.filter.clone())
        .sort(find.sort.clone())
        .projection(ProductCard::projection())
        .skip(skip)
        .limit(find.limit);
    if let Some(hint) = &find.hint {
        action = action.hint(mongodb::options::Hint::Keys(hint.clone()));
    }
    Ok(action.await?.try_collect().await?)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cursor(sort: Sort, key: Bson) -> Cursor {
        Cursor {
            sort,
            key,
            id: ObjectId::parse_str("64b7f0c2a1b2c3d4e5f60718").unwrap(),
            page: 7,
        }
    }

    #[test]
    fn tokens_round_trip_under_every_sort() {
        for (sort, key) in [
            (
                Sort::Newest,
                Bson::DateTime(DateTime::from_millis(-327_456_000_000)),
            ),
            (Sort::PriceLow, Bson::Int64(1299)),
            (Sort::PriceHigh, Bson::Int64(0)),
            (Sort::Discount, Bson::Int32(35)),
            (
                Sort::Title,
                Bson::String("kind of blue. (edition 3) é".into()),
            ),
        ] {
            let c = cursor(sort, key);
            assert_eq!(Cursor::parse(&c.token(), sort), Ok(c.clone()), "{sort:?}");
        }
    }

    #[test]
    fn bad_tokens_are_refused() {
        let good = cursor(Sort::PriceLow, Bson::Int64(1299)).token();
        assert!(Cursor::parse(&good, Sort::PriceLow).is_ok());
        assert_eq!(
            Cursor::parse(&good, Sort::Title),
            Err(BadToken("made for another sort order"))
        );
        let encoded = |text: &str| URL_SAFE_NO_PAD.encode(text);
        for (bad, sort) in [
            (String::new(), Sort::PriceLow),
            ("!!!".to_string(), Sort::PriceLow),
            ("djE".to_string(), Sort::PriceLow),
            (
                encoded("v2.price.1.64b7f0c2a1b2c3d4e5f60718.5"),
                Sort::PriceLow,
            ),
            (
                encoded("v1.price.0.64b7f0c2a1b2c3d4e5f60718.5"),
                Sort::PriceLow,
            ),
            (encoded("v1.price.1.nothex.5"), Sort::PriceLow),
            (
                encoded("v1.price.1.64b7f0c2a1b2c3d4e5f60718.five"),
                Sort::PriceLow,
            ),
            (
                encoded("v1.price.1.64b7f0c2a1b2c3d4e5f60718"),
                Sort::PriceLow,
            ),
            (
                encoded("v1.title.1.64b7f0c2a1b2c3d4e5f60718.a\u{0}b"),
                Sort::Title,
            ),
            ("A".repeat(MAX_TOKEN_CHARS + 1), Sort::PriceLow),
        ] {
            assert!(Cursor::parse(&bad, sort).is_err(), "{bad:?}");
        }
        assert!(Seek::from_params(Some(&good), Some(&good), Sort::PriceLow).is_err());
        assert_eq!(Seek::from_params(None, None, Sort::PriceLow), Ok(None));
    }

    #[test]
    fn previous_walks_the_reversed_order_with_the_opposite_comparison() {
        let filter = doc! { "status": "active" };
        let c = cursor(Sort::PriceLow, Bson::Int64(1299));
        let [ties, rest] = finds(&filter, &Seek::Before(c.clone()), true);
        assert_eq!(ties.sort, doc! { "pricing.retail": -1, "_id": -1 });
        assert_eq!(
            ties.filter,
            doc! { "$and": [filter.clone(), { "pricing.retail": 1299i64, "_id": { "$lt": c.id } }] }
        );
        assert_eq!(
            rest.filter,
            doc! { "$and": [filter.clone(), { "pricing.retail": { "$lt": 1299i64 } }] }
        );
        assert_eq!(rest.hint, Some(doc! { "pricing.retail": 1, "_id": 1 }));
        let [_, newer] = finds(
            &filter,
            &Seek::After(cursor(
                Sort::Newest,
                Bson::DateTime(DateTime::from_millis(5)),
            )),
            false,
        );
        assert_eq!(newer.sort, doc! { "details.issue_date": -1, "_id": -1 });
        assert_eq!(
            newer.filter,
            doc! { "$and": [filter, { "details.issue_date": { "$lt": DateTime::from_millis(5) } }] }
        );
        assert_eq!(newer.hint, None);
    }

    #[test]
    fn walking_the_sort_index_is_chosen_for_dense_listings_only() {
        assert!(walk_is_cheap(300_000, 1_000_000));
        assert!(!walk_is_cheap(2_000, 1_000_000));
        assert!(walk_is_cheap(100, 100));
        assert!(
            !walk_is_cheap(40, 40),
            "tiny listings: the planner reads them whole anyway"
        );
    }
}
