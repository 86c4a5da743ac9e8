//! The demo catalog: a music/film/book category tree and several dozen real-looking products.
//! Seeding adds only what is missing (categories by slug, products by SKU).

use bson::oid::ObjectId;
use bson::{doc, DateTime, Document};

use crate::catalog::categories;
use crate::catalog::model::midnight_utc;
use crate::catalog::products::{
    self, AlbumDetails, BookDetails, Details, Dimensions, FilmDetails, NewProduct, Shipping,
};
use crate::catalog::CatalogError;
use crate::db::Db;
use crate::domain::{Money, Sku, Slug};
use crate::media;
use futures::TryStreamExt;

/// `(name, slug, parent slug)`, parents before children.
const TREE: &[(&str, &str, Option<&str>)] = &[
    ("Music", "music", None),
    ("Jazz", "jazz", Some("music")),
    ("Ragtime", "ragtime", Some("jazz")),
    ("Bop", "bop", Some("ragtime")),
    ("Modal Jazz", "modal-jazz", Some("bop")),
    ("Swing", "swing", Some("jazz")),
    ("Rock", "rock", Some("music")),
    ("Classical", "classical", Some("music")),
    ("Film", "film", None),
    ("Drama", "drama", Some("film")),
    ("Comedy", "comedy", Some("film")),
    ("Science Fiction", "sci-fi-films", Some("film")),
    ("Adventure", "adventure", Some("film")),
    ("Books", "books", None),
    ("Science Fiction", "science-fiction", Some("books")),
    ("Mystery", "mystery", Some("books")),
    ("History", "history", Some("books")),
    ("Music Writing", "music-writing", Some("books")),
];

type Ymd = (i32, u32, u32);

struct Album {
    title: &'static str,
    artist: &'static str,
    genre: &'static [&'static str],
    label: &'static str,
    date: Ymd,
    tracks: &'static [&'static str],
    price: (i64, i64),
    categories: &'static [&'static str],
}

struct Film {
    title: &'static str,
    director: &'static [&'static str],
    writer: &'static [&'static str],
    actor: &'static [&'static str],
    genre: &'static [&'static str],
    date: Ymd,
    rating: &'static str,
    aspect_ratio: &'static str,
    runtime: i32,
    price: (i64, i64),
    categories: &'static [&'static str],
}

struct Book {
    title: &'static str,
    author: &'static [&'static str],
    publisher: &'static str,
    pages: i32,
    isbn: &'static str,
    date: Ymd,
    genre: &'static [&'static str],
    price: (i64, i64),
    categories: &'static [&'static str],
}

const ALBUMS: &[Album] = &[
    Album {
        title: "Kind of Blue",
        artist: "Miles Davis",
        genre: &["jazz", "modal"],
        label: "Columbia",
        date: (1959, 8, 17),
        tracks: &[
            "So What",
            "Freddie Freeloader",
            "Blue in Green",
            "All Blues",
            "Flamenco Sketches",
        ],
        price: (1999, 1299),
        categories: &["modal-jazz"],
    },
    Album {
        title: "A Love Supreme",
        artist: "John Coltrane",
        genre: &["jazz", "modal"],
        label: "Impulse!",
        date: (1965, 1, 15),
        tracks: &["Acknowledgement", "Resolution", "Pursuance", "Psalm"],
        price: (1899, 1499),
        categories: &["modal-jazz"],
    },
    Album {
        title: "Maiden Voyage",
        artist: "Herbie Hancock",
        genre: &["jazz", "modal"],
        label: "Blue Note",
        date: (1965, 5, 17),
        tracks: &[
            "Maiden Voyage",
            "The Eye of the Hurricane",
            "Little One",
            "Survival of the Fittest",
            "Dolphin Dance",
        ],
        price: (1699, 1599),
        categories: &["modal-jazz"],
    },
    Album {
        title: "Bird and Diz",
        artist: "Charlie Parker",
        genre: &["jazz", "bebop"],
        label: "Verve",
        date: (1952, 1, 10),
        tracks: &[
            "Bloomdido",
            "An Oscar for Treadwell",
            "Mohawk",
            "My Melancholy Baby",
            "Leap Frog",
            "Relaxin' with Lee",
        ],
        price: (1499, 999),
        categories: &["bop"],
    },
    Album {
        title: "Brilliant Corners",
        artist: "Thelonious Monk",
        genre: &["jazz", "bebop"],
        label: "Riverside",
        date: (1957, 4, 1),
        tracks: &[
            "Brilliant Corners",
            "Ba-lue Bolivar Ba-lues-are",
            "Pannonica",
            "I Surrender, Dear",
            "Bemsha Swing",
        ],
        price: (1599, 1399),
        categories: &["bop"],
    },
    Album {
        title: "Piano Rags by Scott Joplin",
        artist: "Joshua Rifkin",
        genre: &["jazz", "ragtime"],
        label: "Nonesuch",
        date: (1970, 11, 2),
        tracks: &[
            "Maple Leaf Rag",
            "The Entertainer",
            "The Ragtime Dance",
            "Gladiolus Rag",
            "Fig Leaf Rag",
            "Euphonic Sounds",
        ],
        price: (1299, 1299),
        categories: &["ragtime"],
    },
    Album {
        title: "The Atomic Mr. Basie",
        artist: "Count Basie",
        genre: &["jazz", "swing"],
        label: "Roulette",
        date: (1958, 3, 3),
        tracks: &[
            "The Kid from Red Bank",
            "Duet",
            "After Supper",
            "Flight of the Foo Birds",
            "Double-O",
            "Teddy the Toad",
        ],
        price: (1499, 1199),
        categories: &["swing"],
    },
    Album {
        title: "Ellington at Newport",
        artist: "Duke Ellington",
        genre: &["jazz", "swing"],
        label: "Columbia",
        date: (1956, 12, 1),
        tracks: &[
            "Newport Jazz Festival Suite",
            "Jeep's Blues",
            "Diminuendo and Crescendo in Blue",
        ],
        price: (1799, 1399),
        categories: &["swing"],
    },
    Album {
        title: "Abbey Road",
        artist: "The Beatles",
        genre: &["rock", "pop"],
        label: "Apple",
        date: (1969, 9, 26),
        tracks: &[
            "Come Together",
            "Something",
            "Maxwell's Silver Hammer",
            "Oh! Darling",
            "Octopus's Garden",
            "Here Comes the Sun",
        ],
        price: (2199, 1899),
        categories: &["rock"],
    },
    Album {
        title: "Rumours",
        artist: "Fleetwood Mac",
        genre: &["rock"],
        label: "Warner Bros.",
        date: (1977, 2, 4),
        tracks: &[
            "Second Hand News",
            "Dreams",
            "Never Going Back Again",
            "Don't Stop",
            "Go Your Own Way",
            "The Chain",
        ],
        price: (1999, 1499),
        categories: &["rock"],
    },
    Album {
        title: "Goldberg Variations (1981)",
        artist: "Glenn Gould",
        genre: &["classical", "baroque"],
        label: "CBS Masterworks",
        date: (1982, 9, 1),
        tracks: &[
            "Aria",
            "Variatio 1",
            "Variatio 2",
            "Variatio 3. Canone all'Unisono",
            "Aria da capo",
        ],
        price: (1599, 1599),
        categories: &["classical"],
    },
    Album {
        title: "The Four Seasons",
        artist: "I Musici",
        genre: &["classical", "baroque"],
        label: "Philips",
        date: (1959, 6, 1),
        tracks: &["Spring", "Summer", "Autumn", "Winter"],
        price: (1299, 899),
        categories: &["classical"],
    },
];

const FILMS: &[Film] = &[
    Film {
        title: "The Godfather",
        director: &["Francis Ford Coppola"],
        writer: &["Mario Puzo", "Francis Ford Coppola"],
        actor: &["Marlon Brando", "Al Pacino", "James Caan"],
        genre: &["drama", "crime"],
        date: (1972, 3, 24),
        rating: "R",
        aspect_ratio: "1.85:1",
        runtime: 175,
        price: (1999, 1499),
        categories: &["drama"],
    },
    Film {
        title: "Casablanca",
        director: &["Michael Curtiz"],
        writer: &["Julius J. Epstein", "Philip G. Epstein", "Howard Koch"],
        actor: &["Humphrey Bogart", "Ingrid Bergman", "Paul Henreid"],
        genre: &["drama", "romance"],
        date: (1942, 11, 26),
        rating: "PG",
        aspect_ratio: "1.37:1",
        runtime: 102,
        price: (1499, 999),
        categories: &["drama"],
    },
    Film {
        title: "12 Angry Men",
        director: &["Sidney Lumet"],
        writer: &["Reginald Rose"],
        actor: &["Henry Fonda", "Lee J. Cobb", "Martin Balsam"],
        genre: &["drama"],
        date: (1957, 4, 10),
        rating: "NR",
        aspect_ratio: "1.66:1",
        runtime: 96,
        price: (1299, 1299),
        categories: &["drama"],
    },
    Film {
        title: "On the Waterfront",
        director: &["Elia Kazan"],
        writer: &["Budd Schulberg"],
        actor: &["Marlon Brando", "Karl Malden", "Lee J. Cobb"],
        genre: &["drama", "crime"],
        date: (1954, 7, 28),
        rating: "NR",
        aspect_ratio: "1.66:1",
        runtime: 108,
        price: (1499, 1499),
        categories: &["drama"],
    },
    Film {
        title: "The Apartment",
        director: &["Billy Wilder"],
        writer: &["Billy Wilder", "I. A. L. Diamond"],
        actor: &["Jack Lemmon", "Shirley MacLaine", "Fred MacMurray"],
        genre: &["comedy", "drama"],
        date: (1960, 6, 15),
        rating: "NR",
        aspect_ratio: "2.35:1",
        runtime: 125,
        price: (1499, 1199),
        categories: &["comedy", "drama"],
    },
    Film {
        title: "Some Like It Hot",
        director: &["Billy Wilder"],
        writer: &["Billy Wilder", "I. A. L. Diamond"],
        actor: &["Marilyn Monroe", "Tony Curtis", "Jack Lemmon"],
        genre: &["comedy"],
        date: (1959, 3, 29),
        rating: "NR",
        aspect_ratio: "1.66:1",
        runtime: 121,
        price: (1299, 899),
        categories: &["comedy"],
    },
    Film {
        title: "Roman Holiday",
        director: &["William Wyler"],
        writer: &["Ian McLellan Hunter", "John Dighton"],
        actor: &["Audrey Hepburn", "Gregory Peck"],
        genre: &["comedy", "romance"],
        date: (1953, 8, 27),
        rating: "NR",
        aspect_ratio: "1.37:1",
        runtime: 118,
        price: (1299, 1099),
        categories: &["comedy"],
    },
    Film {
        title: "2001: A Space Odyssey",
        director: &["Stanley Kubrick"],
        writer: &["Stanley Kubrick", "Arthur C. Clarke"],
        actor: &["Keir Dullea", "Gary Lockwood"],
        genre: &["science fiction"],
        date: (1968, 4, 2),
        rating: "G",
        aspect_ratio: "2.20:1",
        runtime: 149,
        price: (2499, 1999),
        categories: &["sci-fi-films"],
    },
    Film {
        title: "Blade Runner",
        director: &["Ridley Scott"],
        writer: &["Hampton Fancher", "David Peoples"],
        actor: &["Harrison Ford", "Rutger Hauer", "Sean Young"],
        genre: &["science fiction", "thriller"],
        date: (1982, 6, 25),
        rating: "R",
        aspect_ratio: "2.39:1",
        runtime: 117,
        price: (1999, 1299),
        categories: &["sci-fi-films"],
    },
    Film {
        title: "Alien",
        director: &["Ridley Scott"],
        writer: &["Dan O'Bannon"],
        actor: &["Sigourney Weaver", "Tom Skerritt", "John Hurt"],
        genre: &["science fiction", "horror"],
        date: (1979, 5, 25),
        rating: "R",
        aspect_ratio: "2.39:1",
        runtime: 117,
        price: (1799, 1599),
        categories: &["sci-fi-films"],
    },
    Film {
        title: "Star Wars",
        director: &["George Lucas"],
        writer: &["George Lucas"],
        actor: &["Mark Hamill", "Harrison Ford", "Carrie Fisher"],
        genre: &["science fiction", "adventure"],
        date: (1977, 5, 25),
        rating: "PG",
        aspect_ratio: "2.39:1",
        runtime: 121,
        price: (2199, 1799),
        categories: &["sci-fi-films", "adventure"],
    },
    Film {
        title: "Raiders of the Lost Ark",
        director: &["Steven Spielberg"],
        writer: &["Lawrence Kasdan"],
        actor: &["Harrison Ford", "Karen Allen", "Paul Freeman"],
        genre: &["adventure"],
        date: (1981, 6, 12),
        rating: "PG",
        aspect_ratio: "2.39:1",
        runtime: 115,
        price: (1899, 1399),
        categories: &["adventure"],
    },
];

const BOOKS: &[Book] = &[
    Book {
        title: "Dune",
        author: &["Frank Herbert"],
        publisher: "Chilton Books",
        pages: 412,
        isbn: "978-0-441-17271-9",
        date: (1965, 8, 1),
        genre: &["science fiction"],
        price: (1899, 1299),
        categories: &["science-fiction"],
    },
    Book {
        title: "The Left Hand of Darkness",
        author: &["Ursula K. Le Guin"],
        publisher: "Ace Books",
        pages: 286,
        isbn: "978-0-441-47812-5",
        date: (1969, 3, 1),
        genre: &["science fiction"],
        price: (1599, 1199),
        categories: &["science-fiction"],
    },
    Book {
        title: "The Dispossessed",
        author: &["Ursula K. Le Guin"],
        publisher: "Harper & Row",
        pages: 341,
        isbn: "978-0-06-051275-3",
        date: (1974, 5, 1),
        genre: &["science fiction"],
        price: (1599, 1399),
        categories: &["science-fiction"],
    },
    Book {
        title: "Foundation",
        author: &["Isaac Asimov"],
        publisher: "Gnome Press",
        pages: 255,
        isbn: "978-0-553-29335-7",
        date: (1951, 6, 1),
        genre: &["science fiction"],
        price: (999, 899),
        categories: &["science-fiction"],
    },
    Book {
        title: "Neuromancer",
        author: &["William Gibson"],
        publisher: "Ace Books",
        pages: 271,
        isbn: "978-0-441-56959-5",
        date: (1984, 7, 1),
        genre: &["science fiction", "cyberpunk"],
        price: (1699, 1699),
        categories: &["science-fiction"],
    },
    Book {
        title: "The Murder of Roger Ackroyd",
        author: &["Agatha Christie"],
        publisher: "Collins Crime Club",
        pages: 312,
        isbn: "978-0-06-207350-4",
        date: (1926, 6, 1),
        genre: &["mystery"],
        price: (1299, 899),
        categories: &["mystery"],
    },
    Book {
        title: "The Big Sleep",
        author: &["Raymond Chandler"],
        publisher: "Alfred A. Knopf",
        pages: 277,
        isbn: "978-0-394-75828-5",
        date: (1939, 2, 6),
        genre: &["mystery", "noir"],
        price: (1499, 1099),
        categories: &["mystery"],
    },
    Book {
        title: "The Maltese Falcon",
        author: &["Dashiell Hammett"],
        publisher: "Alfred A. Knopf",
        pages: 267,
        isbn: "978-0-679-72264-3",
        date: (1930, 2, 14),
        genre: &["mystery", "noir"],
        price: (1399, 1399),
        categories: &["mystery"],
    },
    Book {
        title: "The Guns of August",
        author: &["Barbara W. Tuchman"],
        publisher: "Macmillan",
        pages: 511,
        isbn: "978-0-345-47609-8",
        date: (1962, 1, 15),
        genre: &["history"],
        price: (2099, 1599),
        categories: &["history"],
    },
    Book {
        title: "SPQR: A History of Ancient Rome",
        author: &["Mary Beard"],
        publisher: "Liveright",
        pages: 608,
        isbn: "978-1-63149-222-8",
        date: (2015, 11, 9),
        genre: &["history"],
        price: (2999, 1999),
        categories: &["history"],
    },
    Book {
        title: "Really the Blues",
        author: &["Mezz Mezzrow", "Bernard Wolfe"],
        publisher: "Random House",
        pages: 388,
        isbn: "978-1-59017-227-2",
        date: (1946, 1, 1),
        genre: &["music", "memoir"],
        price: (1899, 1699),
        categories: &["music-writing"],
    },
    Book {
        title: "Kind of Blue: The Making of the Miles Davis Masterpiece",
        author: &["Ashley Kahn"],
        publisher: "Da Capo Press",
        pages: 224,
        isbn: "978-0-306-81067-0",
        date: (2000, 3, 1),
        genre: &["music", "history"],
        price: (1699, 1299),
        categories: &["music-writing", "modal-jazz"],
    },
];

/// Midnight UTC of one of the demo data's dates (all real dates; an impossible one would give
/// the Unix epoch rather than fail the seeding).
pub fn date(y: i32, m: u32, d: u32) -> DateTime {
    midnight_utc(y, m, d).unwrap_or(DateTime::from_millis(0))
}

fn strings(items: &[&str]) -> Vec<String> {
    items.iter().map(|s| s.to_string()).collect()
}

/// The demo tree's category slugs, parents before their children.
pub fn category_slugs() -> Vec<Slug> {
    TREE.iter().map(|(_, slug, _)| demo_slug(slug)).collect()
}

/// One of the demo tree's constant slugs, all valid (the test
/// `every_demo_category_slug_is_a_valid_slug` proves it).
fn demo_slug(slug: &str) -> Slug {
    Slug::parse(slug).expect("the demo tree's slugs are valid")
}

/// Add the demo category tree; returns how many categories were added.
pub async fn seed_categories(db: &Db) -> Result<u64, CatalogError> {
    let mut added = 0;
    for (name, slug, parent) in TREE {
        let slug = demo_slug(slug);
        if categories::by_slug(db, &slug).await?.is_some() {
            continue;
        }
        let parent_id = match parent {
            Some(p) => Some(
                categories::by_slug(db, &demo_slug(p))
                    .await?
                    .ok_or(CatalogError::NotFound)?
                    .id,
            ),
            None => None,
        };
        match categories::add(db, name, &slug, parent_id).await {
            Ok(_) => added += 1,
            // Another instance seeding at the same moment got there first.
            Err(CatalogError::SlugTaken) => {}
            Err(e) => return Err(e),
        }
    }
    Ok(added)
}

async fn category_ids(db: &Db, slugs: &[&str]) -> Result<Vec<ObjectId>, CatalogError> {
    let mut ids = Vec::new();
    for slug in slugs {
        if let Some(c) = categories::by_slug(db, &demo_slug(slug)).await? {
            ids.push(c.id);
        }
    }
    Ok(ids)
}

/// The demo products, each with a stable SKU so re-seeding can tell what exists.
async fn demo_products(db: &Db) -> Result<Vec<NewProduct>, CatalogError> {
    let mut out = Vec::new();
    let mut n = 0u32;
    let mut next = |title: &str| {
        n += 1;
        // Some products sold out, a few featured: the shelves and filters have something to show.
        let qty = [12, 5, 0, 30, 8, 2, 17, 0, 9][n as usize % 9];
        let sku = Sku::parse(&format!("demo{n:04}"));
        let slug = Slug::parse(&crate::catalog::slugify(title));
        (sku, slug, qty, n % 5 == 1)
    };
    for a in ALBUMS {
        let (sku, slug, qty, featured) = next(a.title);
        out.push(NewProduct {
            sku: sku?,
            slug: slug?,
            title: a.title.to_string(),
            description: format!(
                "{} by {}, first issued on {} and remastered from the original tapes.",
                a.title, a.artist, a.label
            ),
            list_price: Money::from_cents(a.price.0),
            retail_price: Money::from_cents(a.price.1),
            categories: category_ids(db, a.categories).await?,
            details: Details::Album(AlbumDetails {
                title: a.title.to_string(),
                artist: a.artist.to_string(),
                genre: strings(a.genre),
                tracks: strings(a.tracks),
                issue_date: date(a.date.0, a.date.1, a.date.2),
                label: a.label.to_string(),
            }),
            qty,
            featured,
            shipping: Shipping {
                weight: 120,
                dimensions: Dimensions {
                    width: 14.2,
                    height: 12.5,
                    depth: 1.0,
                },
            },
        });
    }
    for f in FILMS {
        let (sku, slug, qty, featured) = next(f.title);
        out.push(NewProduct {
            sku: sku?,
            slug: slug?,
            title: f.title.to_string(),
            description: format!(
                "{}, directed by {}, restored and presented in its original {} aspect ratio.",
                f.title,
                f.director.join(" and "),
                f.aspect_ratio
            ),
            list_price: Money::from_cents(f.price.0),
            retail_price: Money::from_cents(f.price.1),
            categories: category_ids(db, f.categories).await?,
            details: Details::Film(FilmDetails {
                title: f.title.to_string(),
                director: strings(f.director),
                writer: strings(f.writer),
                actor: strings(f.actor),
                genre: strings(f.genre),
                issue_date: date(f.date.0, f.date.1, f.date.2),
                rating: f.rating.to_string(),
                aspect_ratio: f.aspect_ratio.to_string(),
                runtime: f.runtime,
            }),
            qty,
            featured,
            shipping: Shipping {
                weight: 100,
                dimensions: Dimensions {
                    width: 19.0,
                    height: 13.5,
                    depth: 1.5,
                },
            },
        });
    }
    for b in BOOKS {
        let (sku, slug, qty, featured) = next(b.title);
        out.push(NewProduct {
            sku: sku?,
            slug: slug?,
            title: b.title.to_string(),
            description: format!(
                "{} by {} ({}), {} pages.",
                b.title,
                b.author.join(" and "),
                b.publisher,
                b.pages
            ),
            list_price: Money::from_cents(b.price.0),
            retail_price: Money::from_cents(b.price.1),
            categories: category_ids(db, b.categories).await?,
            details: Details::Book(BookDetails {
                author: strings(b.author),
                publisher: b.publisher.to_string(),
                pages: b.pages,
                isbn: b.isbn.to_string(),
                issue_date: date(b.date.0, b.date.1, b.date.2),
                genre: strings(b.genre),
            }),
            qty,
            featured,
            shipping: Shipping {
                weight: i64::from(b.pages) + 150,
                dimensions: Dimensions {
                    width: 13.5,
                    height: 21.0,
                    depth: 2.5,
                },
            },
        });
    }
    Ok(out)
}

/// Add the demo tree and products that are missing; returns `(categories, products)` added.
pub async fn seed(db: &Db) -> Result<(u64, u64), CatalogError> {
    let categories_added = seed_categories(db).await?;
    let mut products_added = 0;
    for product in demo_products(db).await? {
        let exists = products::collection(db)
            .find_one(doc! { "sku": &product.sku })
            .await
            .map_err(crate::db::DbError::from)?
            .is_some();
        if exists {
            continue;
        }
        match products::create(db, product).await {
            Ok(_) => products_added += 1,
            Err(CatalogError::SkuTaken | CatalogError::SlugTaken) => {}
            Err(e) => return Err(e),
        }
    }
    Ok((categories_added, products_added))
}

/// Generated products per `insert_many`: large enough that a round trip costs little per
/// product, small enough that only one batch is ever held in memory.
pub const BULK_BATCH: usize = 2_000;

/// Add generated products (SKUs `bulk000001`, ...) until there are `n` of them, for load tests
/// and `seed --products N`: variations on the demo catalog spread over the whole tree.
pub async fn seed_bulk(db: &Db, n: u64) -> Result<u64, CatalogError> {
    seed_bulk_with_progress(db, n, |_, _| {}).await
}

/// [`seed_bulk`], calling `progress(added, to_add)` after each batch. Products are generated
/// and inserted [`BULK_BATCH`] at a time, so memory stays bounded whatever `n` is.
///
/// Numbering continues after the highest generated SKU already stored (not after the count of
/// them), so generated products deleted earlier never make a new SKU or slug collide.
pub async fn seed_bulk_with_progress(
    db: &Db,
    n: u64,
    mut progress: impl FnMut(u64, u64),
) -> Result<u64, CatalogError> {
    seed_categories(db).await?;
    let generated = doc! { "sku": { "$regex": "^bulk" } };
    let existing = products::collection(db)
        .count_documents(generated.clone())
        .await
        .map_err(crate::db::DbError::from)?;
    let to_add = n.saturating_sub(existing);
    if to_add == 0 {
        return Ok(0);
    }
    let first = first_free_number(db, existing).await?;
    let templates = demo_products(db).await?;
    if templates.is_empty() {
        return Ok(0);
    }
    // Category paths, worked out once per template rather than once per product.
    let mut paths = Vec::with_capacity(templates.len());
    for t in &templates {
        paths.push(crate::catalog::categories::category_path_for(db, &t.categories).await?);
    }
    let mut added = 0;
    progress(0, to_add);
    while added < to_add {
        let size = (to_add - added).min(BULK_BATCH as u64);
        let mut batch = Vec::with_capacity(size as usize);
        for i in first + added..first + added + size {
            let k = (i as usize) % templates.len();
            batch.push(
                generated_product(&templates[k], i, templates.len() as u64)?
                    .into_product(paths[k].clone(), db.now())?,
            );
        }
        products::collection(db).insert_many(batch).await?;
        added += size;
        progress(added, to_add);
    }
    crate::catalog::changes::products_changed(db);
    Ok(added)
}

/// Where numbering continues: after the `existing` generated products, unless some were
/// deleted (then `bulk{existing + 1}` may still be taken), in which case after the highest
/// number stored. SKUs pad to six digits, so past 999 999 string order is not number order:
/// the highest is found by reading the SKUs, once, only in that rare case.
async fn first_free_number(db: &Db, existing: u64) -> Result<u64, CatalogError> {
    let taken = products::collection(db)
        .find_one(doc! { "sku": bulk_sku(existing) })
        .projection(doc! { "sku": 1 })
        .await
        .map_err(crate::db::DbError::from)?
        .is_some();
    if !taken {
        return Ok(existing);
    }
    let mut skus = db
        .collection::<Document>(products::COLLECTION)
        .find(doc! { "sku": { "$regex": "^bulk" } })
        .projection(doc! { "_id": 0, "sku": 1 })
        .await
        .map_err(crate::db::DbError::from)?;
    let mut highest = existing;
    while let Some(d) = skus.try_next().await.map_err(crate::db::DbError::from)? {
        let number = d
            .get_str("sku")
            .ok()
            .and_then(|s| s.strip_prefix("bulk"))
            .and_then(|n| n.parse::<u64>().ok());
        highest = highest.max(number.unwrap_or(0));
    }
    Ok(highest)
}

/// The SKU of the `i`-th generated product (0-based).
fn bulk_sku(i: u64) -> String {
    format!("bulk{:06}", i + 1)
}

/// The `i`-th generated product (0-based; its SKU is `bulk{i + 1}`), a variation on `template`.
fn generated_product(
    template: &NewProduct,
    i: u64,
    templates: u64,
) -> Result<NewProduct, CatalogError> {
    let mut new = template.clone();
    let edition = i / templates + 1;
    new.title = format!("{} (edition {edition})", new.title);
    new.slug = Slug::parse(&format!("{}-edition-{edition}", new.slug))?;
    new.sku = Sku::parse(&bulk_sku(i))?;
    // Vary prices and stock so sorts and filters have work to do.
    let list = new.list_price.cents() + (i % 500) as i64;
    new.list_price = Money::from_cents(list);
    new.retail_price = Money::from_cents(list * (60 + (i % 41) as i64) / 100);
    new.qty = (i % 13) as i64;
    new.featured = false;
    let later = |d: &mut DateTime| {
        *d = DateTime::from_millis(d.timestamp_millis() + i as i64 * 3_600_000);
    };
    match &mut new.details {
        Details::Album(d) => later(&mut d.issue_date),
        Details::Film(d) => later(&mut d.issue_date),
        Details::Book(d) => later(&mut d.issue_date),
    }
    Ok(new)
}

/// Give every demo product without a photo a generated cover; returns how many were added.
pub async fn seed_covers(db: &Db) -> Result<u64, CatalogError> {
    let missing: Vec<products::Product> = products::collection(db)
        .find(doc! { "sku": { "$regex": "^demo" }, "photos": { "$size": 0 } })
        .await
        .map_err(crate::db::DbError::from)?
        .try_collect()
        .await
        .map_err(crate::db::DbError::from)?;
    let mut added = 0;
    for product in missing {
        let cover = match media::store_generated_cover(
            db,
            &product.title,
            &crate::catalog::slugify(&product.title),
        )
        .await
        {
            Ok(cover) => cover,
            Err(media::UploadError::Db(e)) => return Err(e.into()),
            Err(e) => {
                tracing::warn!(error = %e, product = %product.slug, "a demo cover was refused");
                continue;
            }
        };
        // Conditional: a second seeder (another instance starting at the same moment) that
        // found the product bare too must not give it a second cover.
        if products::add_first_photo(db, product.id, cover.id).await? {
            added += 1;
        } else {
            media::delete_file(db, cover.id).await?;
        }
    }
    Ok(added)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_demo_category_slug_is_a_valid_slug() {
        for (_, slug, parent) in TREE {
            assert!(Slug::parse(slug).is_ok(), "{slug}");
            if let Some(parent) = parent {
                assert!(Slug::parse(parent).is_ok(), "{parent}");
            }
        }
    }

    #[test]
    fn dates_are_midnight_utc_of_the_calendar_day() {
        assert_eq!(date(1970, 1, 1).timestamp_millis(), 0);
        assert_eq!(date(2000, 3, 1).timestamp_millis(), 951_868_800_000);
        assert_eq!(date(1959, 8, 17).timestamp_millis(), -327_456_000_000);
    }

    #[test]
    fn demo_slugs_and_skus_are_unique() {
        let mut titles: Vec<String> = ALBUMS
            .iter()
            .map(|a| a.title)
            .chain(FILMS.iter().map(|f| f.title))
            .chain(BOOKS.iter().map(|b| b.title))
            .map(crate::catalog::slugify)
            .collect();
        let n = titles.len();
        titles.sort();
        titles.dedup();
        assert_eq!(titles.len(), n);
        assert!(n >= 36);
    }
}
