//! Backups in mongodump's directory layout, and restoring them (or a real mongodump) into a data
//! directory.
//!
//! A backup directory holds `<db>/<collection>.bson` (the collection's documents, concatenated
//! BSON, in `_id` order) and `<db>/<collection>.metadata.json` (options and index specs in
//! canonical Extended JSON v2), which is what `mongorestore` reads, plus `backup-manifest.json`:
//! per collection, the document count, the size and SHA-256 of both files. The manifest is written
//! last, so a backup without one is either unfinished or a real mongodump; `mongorestore` skips it
//! as a file it does not know.
//!
//! Because the `.bson` file lists documents in `_id` order, its SHA-256 is also the checksum of
//! the collection's content: anyone reading the collection sorted by `_id` through a driver and
//! hashing each document's BSON gets the same value (Bazaar's `backup::collection_checksum`
//! compares two servers so).

use crate::bson_depth::{self, BsonError};
use crate::catalog::validate_namespace;
use crate::index::IndexSpec;
use crate::state::ServerState;
use crate::storage::{private, Storage};
use crate::value;
use bson::{doc, Bson, Document};
use serde_json::{json, Value};
use sha2::{Digest, Sha256};
use std::fmt;
use std::fs::{self, File};
use std::io::{self, BufReader, BufWriter, Read, Write};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// A collection's documents and definition, as a dump holds it, and one stored document: what
/// [`write_verified_dump`] takes and [`load_dump`] gives.
pub use crate::storage::CollectionImage;
pub use crate::stored::StoredDoc;

/// The file that lists what a backup holds and the checksums `restore` verifies.
pub const MANIFEST_FILE: &str = "backup-manifest.json";
/// The `format` field of the manifest.
pub(crate) const MANIFEST_FORMAT: &str = "docstore-backup";
const MANIFEST_VERSION: i64 = 1;
/// A document larger than this cannot be valid (16 MiB plus MongoDB's small internal margin).
const MAX_DOCUMENT_BYTES: usize = 16 * 1024 * 1024 + 16 * 1024;
/// Databases a mongodump may hold that belong to the server, not to an application.
const SERVER_DATABASES: &[&str] = &["local", "config"];

/// One collection in a backup's manifest.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ManifestEntry {
    pub db: String,
    pub collection: String,
    pub documents: u64,
    /// Size of the `.bson` file.
    pub bson_bytes: u64,
    /// SHA-256 (hex) of the `.bson` file: the collection's content checksum.
    pub bson_sha256: String,
    /// SHA-256 (hex) of the `.metadata.json` file.
    pub metadata_sha256: String,
}

/// What a backup holds: written as [`MANIFEST_FILE`], read back by [`load_dump`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Manifest {
    /// When the point-in-time copy was taken, milliseconds since the Unix epoch.
    pub created_at_ms: i64,
    pub collections: Vec<ManifestEntry>,
}

impl Manifest {
    pub fn documents(&self) -> u64 {
        self.collections.iter().map(|c| c.documents).sum()
    }

    /// Bytes of document data (the `.bson` files).
    pub fn bytes(&self) -> u64 {
        self.collections.iter().map(|c| c.bson_bytes).sum()
    }

    /// The entry for `db.collection`.
    pub fn entry(&self, db: &str, collection: &str) -> Option<&ManifestEntry> {
        self.collections
            .iter()
            .find(|e| e.db == db && e.collection == collection)
    }

    fn to_json(&self) -> Value {
        json!({
            "format": MANIFEST_FORMAT,
            "version": MANIFEST_VERSION,
            "createdAt": bson::DateTime::from_millis(self.created_at_ms).try_to_rfc3339_string()
                .unwrap_or_default(),
            "createdAtMillis": self.created_at_ms,
            "collections": self.collections.iter().map(|e| json!({
                "db": e.db,
                "collection": e.collection,
                "documents": e.documents,
                "bsonBytes": e.bson_bytes,
                "bsonSha256": e.bson_sha256,
                "metadataSha256": e.metadata_sha256,
            })).collect::<Vec<_>>(),
        })
    }

    fn from_json(v: &Value) -> Result<Manifest, String> {
        if v.get("format").and_then(Value::as_str) != Some(MANIFEST_FORMAT) {
            return Err(format!("its \"format\" is not {MANIFEST_FORMAT:?}"));
        }
        match v.get("version").and_then(Value::as_i64) {
            Some(MANIFEST_VERSION) => {}
            other => return Err(format!("unknown manifest version {other:?}")),
        }
        let created_at_ms = v
            .get("createdAtMillis")
            .and_then(Value::as_i64)
            .ok_or("\"createdAtMillis\" is missing")?;
        let list = v
            .get("collections")
            .and_then(Value::as_array)
            .ok_or("\"collections\" is missing")?;
        let mut collections = Vec::with_capacity(list.len());
        for item in list {
            let text = |key: &str| {
                item.get(key)
                    .and_then(Value::as_str)
                    .map(str::to_string)
                    .ok_or_else(|| format!("a collection entry lacks {key:?}"))
            };
            let number = |key: &str| {
                item.get(key)
                    .and_then(Value::as_u64)
                    .ok_or_else(|| format!("a collection entry lacks {key:?}"))
            };
            collections.push(ManifestEntry {
                db: text("db")?,
                collection: text("collection")?,
                documents: number("documents")?,
                bson_bytes: number("bsonBytes")?,
                bson_sha256: text("bsonSha256")?,
                metadata_sha256: text("metadataSha256")?,
            });
        }
        Ok(Manifest {
            created_at_ms,
            collections,
        })
    }
}

/// Why a backup could not be written, read or restored. The message says which file and what.
#[derive(Debug)]
pub struct DumpError {
    pub message: String,
}

impl DumpError {
    fn new(message: impl Into<String>) -> DumpError {
        DumpError {
            message: message.into(),
        }
    }

    fn io(what: impl fmt::Display, e: io::Error) -> DumpError {
        DumpError::new(format!("{what}: {e}"))
    }
}

impl fmt::Display for DumpError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for DumpError {}

type DumpResult<T> = Result<T, DumpError>;

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The file name mongodump gives a collection: `%` and `/` (which cannot appear in a file name)
/// are percent-escaped.
fn escape_collection_name(name: &str) -> String {
    name.replace('%', "%25").replace('/', "%2F")
}

fn unescape_collection_name(name: &str) -> String {
    name.replace("%2F", "/")
        .replace("%2f", "/")
        .replace("%25", "%")
}

/// `{"options":…,"indexes":[…],"uuid":…,"collectionName":…,"type":"collection"}` in canonical
/// Extended JSON v2, as mongodump writes it.
fn metadata_json(image: &CollectionImage) -> String {
    let mut indexes = vec![Bson::Document(
        doc! {"v": 2, "key": {"_id": 1}, "name": "_id_"},
    )];
    indexes.extend(image.indexes.iter().cloned().map(Bson::Document));
    let uuid: [u8; 16] = rand::random();
    let metadata = doc! {
        "options": image.options.clone(),
        "indexes": indexes,
        "uuid": hex(&uuid),
        "collectionName": image.coll.clone(),
        "type": "collection",
    };
    Bson::Document(metadata)
        .into_canonical_extjson()
        .to_string()
}

fn sync_dir(dir: &Path) -> io::Result<()> {
    File::open(dir)?.sync_all()
}

/// Write `images` into `dir` (which must not exist or be empty) in mongodump's layout, then the
/// manifest. Files are synced before the manifest is written. Does not verify: see
/// [`write_verified_dump`].
pub(crate) fn write_dump(
    dir: &Path,
    images: &[CollectionImage],
    created_at_ms: i64,
) -> DumpResult<Manifest> {
    prepare_empty_dir(dir)?;
    let mut entries = Vec::with_capacity(images.len());
    for image in images {
        let db_dir = dir.join(&image.db);
        private::create_dir_all(&db_dir)
            .map_err(|e| DumpError::io(format!("cannot create {}", db_dir.display()), e))?;
        let base = escape_collection_name(&image.coll);
        let bson_path = db_dir.join(format!("{base}.bson"));
        let mut keyed = Vec::with_capacity(image.docs.len());
        for doc in &image.docs {
            let id = doc
                .id()
                .map_err(|e| DumpError::new(format!("cannot back up: {}", e.message)))?;
            keyed.push((id, doc));
        }
        keyed.sort_by(|a, b| value::compare(&a.0, &b.0));
        let docs: Vec<&StoredDoc> = keyed.into_iter().map(|(_, d)| d).collect();
        let (bson_bytes, bson_sha256) = write_bson_file(&bson_path, &docs)
            .map_err(|e| DumpError::io(format!("cannot write {}", bson_path.display()), e))?;
        let metadata_path = db_dir.join(format!("{base}.metadata.json"));
        let metadata = metadata_json(image);
        write_synced(&metadata_path, metadata.as_bytes())
            .map_err(|e| DumpError::io(format!("cannot write {}", metadata_path.display()), e))?;
        entries.push(ManifestEntry {
            db: image.db.clone(),
            collection: image.coll.clone(),
            documents: docs.len() as u64,
            bson_bytes,
            bson_sha256,
            metadata_sha256: hex(&Sha256::digest(metadata.as_bytes())),
        });
    }
    let mut db_dirs: Vec<&str> = images.iter().map(|i| i.db.as_str()).collect();
    db_dirs.dedup();
    for db in db_dirs {
        sync_dir(&dir.join(db)).map_err(|e| DumpError::io("cannot sync the backup", e))?;
    }
    let manifest = Manifest {
        created_at_ms,
        collections: entries,
    };
    let text = serde_json::to_string_pretty(&manifest.to_json())
        .map_err(|e| DumpError::new(format!("cannot encode the manifest: {e}")))?;
    write_synced(&dir.join(MANIFEST_FILE), text.as_bytes())
        .map_err(|e| DumpError::io(format!("cannot write {MANIFEST_FILE}"), e))?;
    sync_dir(dir).map_err(|e| DumpError::io("cannot sync the backup", e))?;
    Ok(manifest)
}

/// Write `images` as a backup in `dir` (the collections' files, then the manifest last), then
/// read every file back and check it against the manifest: a backup is only reported written
/// when it can be restored.
pub fn write_verified_dump(
    dir: &Path,
    images: &[CollectionImage],
    created_at_ms: i64,
) -> DumpResult<Manifest> {
    let written = write_dump(dir, images, created_at_ms)?;
    let verified = verify_dump(dir)?;
    if verified != written {
        return Err(DumpError::new(format!(
            "the backup in {} does not read back as written",
            dir.display()
        )));
    }
    Ok(written)
}

fn prepare_empty_dir(dir: &Path) -> DumpResult<()> {
    match fs::read_dir(dir) {
        Ok(mut entries) => {
            if entries.next().is_some() {
                return Err(DumpError::new(format!(
                    "the backup directory {} is not empty: choose a new directory",
                    dir.display()
                )));
            }
            Ok(())
        }
        Err(e) if e.kind() == io::ErrorKind::NotFound => private::create_dir_all(dir)
            .map_err(|e| DumpError::io(format!("cannot create {}", dir.display()), e)),
        Err(e) => Err(DumpError::io(format!("cannot read {}", dir.display()), e)),
    }
}

fn write_synced(path: &Path, bytes: &[u8]) -> io::Result<()> {
    let mut file = private::create_file(path)?;
    file.write_all(bytes)?;
    file.sync_all()
}

fn write_bson_file(path: &Path, docs: &[&StoredDoc]) -> io::Result<(u64, String)> {
    let file = private::create_file(path)?;
    let mut out = BufWriter::new(file);
    let mut hasher = Sha256::new();
    let mut total = 0u64;
    for doc in docs {
        let bytes = doc.as_bytes();
        hasher.update(bytes);
        out.write_all(bytes)?;
        total += bytes.len() as u64;
    }
    let file = out.into_inner().map_err(|e| e.into_error())?;
    file.sync_all()?;
    Ok((total, hex(&hasher.finalize())))
}

/// Take a point-in-time copy of every collection of a running server and write it to `dir` as
/// a verified backup. Writes are held back only while document pointers are copied; reads never
/// wait. Blocking: call from a blocking thread.
pub(crate) fn backup_server(state: &ServerState, dir: &Path) -> DumpResult<Manifest> {
    let started = std::time::Instant::now();
    let images = state.catalog.consistent_images();
    let created_at_ms = bson::DateTime::now().timestamp_millis();
    let copied = started.elapsed();
    let manifest = write_verified_dump(dir, &images, created_at_ms)?;
    tracing::info!(
        dir = %dir.display(),
        collections = manifest.collections.len(),
        documents = manifest.documents(),
        bytes = manifest.bytes(),
        writes_held_us = copied.as_micros() as u64,
        total_ms = started.elapsed().as_millis() as u64,
        "backup written and verified"
    );
    Ok(manifest)
}

/// A collection read from a backup, checked and ready to restore.
#[derive(Debug)]
pub struct LoadedDump {
    pub images: Vec<CollectionImage>,
    /// The manifest, when the backup has one (docstore and Bazaar backups; not mongodump's).
    pub manifest: Option<Manifest>,
    /// What was deliberately left out (server databases, views, an oplog), one line each.
    pub skipped: Vec<String>,
}

/// Read and check a backup without keeping the documents: the manifest it holds, once every
/// file matched its count, size and checksum.
pub fn verify_dump(dir: &Path) -> DumpResult<Manifest> {
    let manifest = read_manifest(dir)?.ok_or_else(|| {
        DumpError::new(format!(
            "{} has no {MANIFEST_FILE}: it is not a finished backup",
            dir.display()
        ))
    })?;
    for entry in &manifest.collections {
        let base = dir
            .join(&entry.db)
            .join(escape_collection_name(&entry.collection));
        let bson_path = with_suffix(&base, ".bson");
        let namespace = format!("{}.{}", entry.db, entry.collection);
        let (count, bytes, sha) = scan_bson_file(&bson_path, &namespace, |_| Ok(()))?;
        check_entry(entry, &bson_path, count, bytes, &sha)?;
        let metadata_path = with_suffix(&base, ".metadata.json");
        let metadata = fs::read(&metadata_path)
            .map_err(|e| DumpError::io(format!("cannot read {}", metadata_path.display()), e))?;
        if hex(&Sha256::digest(&metadata)) != entry.metadata_sha256 {
            return Err(corrupt(
                &metadata_path,
                "its checksum does not match the manifest",
            ));
        }
    }
    Ok(manifest)
}

fn with_suffix(base: &Path, suffix: &str) -> PathBuf {
    let mut s = base.as_os_str().to_owned();
    s.push(suffix);
    PathBuf::from(s)
}

fn corrupt(path: &Path, what: &str) -> DumpError {
    DumpError::new(format!(
        "the backup is damaged: {} {what}; nothing was restored",
        path.display()
    ))
}

fn check_entry(
    entry: &ManifestEntry,
    path: &Path,
    count: u64,
    bytes: u64,
    sha: &str,
) -> DumpResult<()> {
    if bytes != entry.bson_bytes {
        return Err(corrupt(
            path,
            &format!("has {bytes} bytes, the manifest says {}", entry.bson_bytes),
        ));
    }
    if count != entry.documents {
        return Err(corrupt(
            path,
            &format!(
                "holds {count} documents, the manifest says {}",
                entry.documents
            ),
        ));
    }
    if sha != entry.bson_sha256 {
        return Err(corrupt(
            path,
            "has a SHA-256 checksum that does not match the manifest",
        ));
    }
    Ok(())
}

/// A backup's manifest, without checking the files against it (`None`: there is none).
pub fn read_manifest(dir: &Path) -> DumpResult<Option<Manifest>> {
    let path = dir.join(MANIFEST_FILE);
    let text = match fs::read_to_string(&path) {
        Ok(text) => text,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(DumpError::io(format!("cannot read {}", path.display()), e)),
    };
    let value: Value = serde_json::from_str(&text)
        .map_err(|e| corrupt(&path, &format!("is not valid JSON ({e})")))?;
    Manifest::from_json(&value)
        .map(Some)
        .map_err(|e| corrupt(&path, &format!("is not a backup manifest: {e}")))
}

/// Read a `.bson` file (of the collection `namespace`) document by document, handing each to
/// `each`; returns the count, byte size and SHA-256. A truncated or malformed document, or one
/// nested deeper than any path of docstore accepts, is an error naming the file, the collection
/// and the offset.
fn scan_bson_file(
    path: &Path,
    namespace: &str,
    mut each: impl FnMut(Document) -> DumpResult<()>,
) -> DumpResult<(u64, u64, String)> {
    let file = File::open(path)
        .map_err(|e| DumpError::io(format!("cannot read {}", path.display()), e))?;
    let mut input = BufReader::new(file);
    let mut hasher = Sha256::new();
    let mut offset = 0u64;
    let mut count = 0u64;
    let mut buf = Vec::new();
    loop {
        let mut len_bytes = [0u8; 4];
        match read_full(&mut input, &mut len_bytes) {
            Ok(0) => break,
            Ok(4) => {}
            Ok(_) => {
                return Err(corrupt(
                    path,
                    &format!("ends inside a document at byte {offset}"),
                ))
            }
            Err(e) => return Err(DumpError::io(format!("cannot read {}", path.display()), e)),
        }
        let len = i32::from_le_bytes(len_bytes);
        let len = usize::try_from(len).unwrap_or(0);
        if !(5..=MAX_DOCUMENT_BYTES).contains(&len) {
            return Err(corrupt(
                path,
                &format!("has an impossible document length at byte {offset}"),
            ));
        }
        buf.clear();
        buf.extend_from_slice(&len_bytes);
        buf.resize(len, 0);
        match read_full(&mut input, &mut buf[4..]) {
            Ok(n) if n == len - 4 => {}
            Ok(_) => {
                return Err(corrupt(
                    path,
                    &format!("ends inside a document at byte {offset}"),
                ))
            }
            Err(e) => return Err(DumpError::io(format!("cannot read {}", path.display()), e)),
        }
        // Through the depth check before anything recurses: a document thousands of levels
        // deep would otherwise overflow the stack and abort the restore.
        let doc = bson_depth::decode(&buf).map_err(|e| match e {
            BsonError::TooDeep => DumpError::new(format!(
                "{}: the document of {namespace} at byte {offset} is nested more than {} levels \
                 deep, which neither MongoDB nor docstore accepts; nothing was restored",
                path.display(),
                bson_depth::MAX_BSON_DEPTH
            )),
            BsonError::Invalid(e) => corrupt(
                path,
                &format!("holds an unreadable document of {namespace} at byte {offset} ({e})"),
            ),
        })?;
        hasher.update(&buf);
        each(doc)?;
        offset += len as u64;
        count += 1;
    }
    Ok((count, offset, hex(&hasher.finalize())))
}

/// Like `read_exact`, but reports how many bytes were read before the end of the file.
fn read_full(input: &mut impl Read, buf: &mut [u8]) -> io::Result<usize> {
    let mut filled = 0;
    while filled < buf.len() {
        match input.read(&mut buf[filled..]) {
            Ok(0) => break,
            Ok(n) => filled += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(filled)
}

/// Read a whole backup into memory, checking every file: against the manifest when there is
/// one, otherwise (a mongodump) every document and metadata file must parse. Nothing is written.
pub fn load_dump(dir: &Path) -> DumpResult<LoadedDump> {
    if !dir.is_dir() {
        return Err(DumpError::new(format!(
            "{} is not a directory holding a backup",
            dir.display()
        )));
    }
    let manifest = read_manifest(dir)?;
    let mut skipped = Vec::new();
    let mut images = Vec::new();
    let mut db_names = Vec::new();
    for entry in read_dir_sorted(dir)? {
        let name = file_name(&entry);
        if entry.is_dir() {
            if SERVER_DATABASES.contains(&name.as_str()) {
                skipped.push(format!(
                    "database {name:?} (it belongs to the MongoDB server)"
                ));
            } else {
                db_names.push(name);
            }
        } else if name == "oplog.bson" {
            skipped.push(
                "oplog.bson (docstore cannot replay an oplog; take the dump with writes stopped)"
                    .into(),
            );
        } else if name.ends_with(".gz") || name.ends_with(".archive") || name == "archive" {
            return Err(compressed(&entry));
        }
    }
    for db in db_names {
        load_database(dir, &db, manifest.as_ref(), &mut images, &mut skipped)?;
    }
    if let Some(manifest) = &manifest {
        for entry in &manifest.collections {
            if !images
                .iter()
                .any(|i: &CollectionImage| i.db == entry.db && i.coll == entry.collection)
            {
                return Err(DumpError::new(format!(
                    "the backup is incomplete: {}.{} is in the manifest but its files are \
                     missing; nothing was restored",
                    entry.db, entry.collection
                )));
            }
        }
    }
    Ok(LoadedDump {
        images,
        manifest,
        skipped,
    })
}

fn compressed(path: &Path) -> DumpError {
    DumpError::new(format!(
        "{} is compressed or an archive: restore reads mongodump's plain directory layout only \
         (take the dump without --gzip and without --archive)",
        path.display()
    ))
}

fn read_dir_sorted(dir: &Path) -> DumpResult<Vec<PathBuf>> {
    let mut paths = Vec::new();
    let entries = fs::read_dir(dir)
        .map_err(|e| DumpError::io(format!("cannot read {}", dir.display()), e))?;
    for entry in entries {
        let entry =
            entry.map_err(|e| DumpError::io(format!("cannot read {}", dir.display()), e))?;
        paths.push(entry.path());
    }
    paths.sort();
    Ok(paths)
}

fn file_name(path: &Path) -> String {
    path.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
}

fn load_database(
    dir: &Path,
    db: &str,
    manifest: Option<&Manifest>,
    images: &mut Vec<CollectionImage>,
    skipped: &mut Vec<String>,
) -> DumpResult<()> {
    let db_dir = dir.join(db);
    let mut bases = Vec::new();
    for path in read_dir_sorted(&db_dir)? {
        let name = file_name(&path);
        if name.ends_with(".gz") {
            return Err(compressed(&path));
        }
        let base = name
            .strip_suffix(".metadata.json")
            .or_else(|| name.strip_suffix(".bson"));
        if let Some(base) = base {
            if !bases.iter().any(|b| b == base) {
                bases.push(base.to_string());
            }
        }
    }
    for base in bases {
        let coll_name = unescape_collection_name(&base);
        let metadata_path = db_dir.join(format!("{base}.metadata.json"));
        let bson_path = db_dir.join(format!("{base}.bson"));
        let metadata = match fs::read(&metadata_path) {
            Ok(bytes) => Some(bytes),
            Err(e) if e.kind() == io::ErrorKind::NotFound => None,
            Err(e) => {
                return Err(DumpError::io(
                    format!("cannot read {}", metadata_path.display()),
                    e,
                ))
            }
        };
        let entry = manifest.map(|m| {
            m.entry(db, &coll_name).ok_or_else(|| {
                DumpError::new(format!(
                    "the backup holds {} which its manifest does not list: it was changed after \
                     it was written; nothing was restored",
                    bson_path.display()
                ))
            })
        });
        let entry = entry.transpose()?;
        let parsed = match &metadata {
            Some(bytes) => {
                if let Some(entry) = entry {
                    if hex(&Sha256::digest(bytes)) != entry.metadata_sha256 {
                        return Err(corrupt(
                            &metadata_path,
                            "has a checksum that does not match the manifest",
                        ));
                    }
                }
                parse_metadata(&metadata_path, bytes)?
            }
            None => Metadata::default(),
        };
        let coll_name = parsed.collection_name.clone().unwrap_or(coll_name);
        if coll_name.starts_with("system.") {
            skipped.push(format!("{db}.{coll_name} (a system collection)"));
            continue;
        }
        if let Some(kind) = &parsed.kind {
            if kind == "view" {
                skipped.push(format!("{db}.{coll_name} (a view; docstore has no views)"));
                continue;
            }
            if kind != "collection" {
                return Err(DumpError::new(format!(
                    "{}: {db}.{coll_name} is a {kind} collection, which docstore does not \
                     support; nothing was restored",
                    metadata_path.display()
                )));
            }
        }
        validate_namespace(db, &coll_name)
            .map_err(|e| DumpError::new(format!("{}: {}", metadata_path.display(), e.message)))?;
        let kept_options = check_options(&metadata_path, &parsed.options)?;
        let mut docs = Vec::new();
        if bson_path.exists() {
            let namespace = format!("{db}.{coll_name}");
            let (count, bytes, sha) = scan_bson_file(&bson_path, &namespace, |doc| {
                let stored = StoredDoc::from_document(&doc).map_err(|e| {
                    DumpError::new(format!("{}: {}", bson_path.display(), e.message))
                })?;
                docs.push(stored);
                Ok(())
            })?;
            if let Some(entry) = entry {
                check_entry(entry, &bson_path, count, bytes, &sha)?;
            }
        } else if entry.is_some() {
            return Err(corrupt(&bson_path, "is missing"));
        }
        // The one option docstore keeps: the default collation, resolved (check_options
        // validated it).
        let mut options = Document::new();
        if let Ok(requested) = crate::collation::parse(parsed.options.get("collation")) {
            if let Some(c) = requested.or_default(None) {
                options.insert("collation", c.spec().clone());
            }
        }
        images.push(CollectionImage {
            db: db.to_string(),
            coll: coll_name,
            options: kept_options,
            indexes: parsed.indexes,
            docs,
        });
    }
    Ok(())
}

/// What a `.metadata.json` file says about its collection.
#[derive(Debug, Default)]
struct Metadata {
    options: Document,
    /// Index specs except `_id_`, checked to be ones docstore can build.
    indexes: Vec<Document>,
    collection_name: Option<String>,
    kind: Option<String>,
}

/// Parse mongodump's metadata: canonical or relaxed Extended JSON v2, or the legacy (v1) form of
/// older mongodump versions.
fn parse_metadata(path: &Path, bytes: &[u8]) -> DumpResult<Metadata> {
    let json: Value = serde_json::from_slice(bytes)
        .map_err(|e| corrupt(path, &format!("is not valid JSON ({e})")))?;
    let Ok(Bson::Document(doc)) = Bson::try_from(json) else {
        return Err(corrupt(path, "is not an Extended JSON object"));
    };
    let options = match doc.get("options") {
        None | Some(Bson::Null) => Document::new(),
        Some(Bson::Document(d)) => d.clone(),
        Some(_) => return Err(corrupt(path, "has \"options\" that is not an object")),
    };
    let mut indexes = Vec::new();
    match doc.get("indexes") {
        None | Some(Bson::Null) => {}
        Some(Bson::Array(list)) => {
            for item in list {
                let Bson::Document(spec) = item else {
                    return Err(corrupt(path, "lists an index that is not an object"));
                };
                let mut spec = spec.clone();
                spec.remove("ns");
                let parsed = IndexSpec::parse(&spec).map_err(|e| {
                    DumpError::new(format!(
                        "{}: index {} cannot be restored: {}; nothing was restored",
                        path.display(),
                        spec.get_str("name").unwrap_or("?"),
                        e.message
                    ))
                })?;
                if parsed.name != "_id_" {
                    indexes.push(parsed.to_document());
                }
            }
        }
        Some(_) => return Err(corrupt(path, "has \"indexes\" that is not a list")),
    }
    Ok(Metadata {
        options,
        indexes,
        collection_name: doc.get_str("collectionName").ok().map(str::to_string),
        kind: doc.get_str("type").ok().map(str::to_string),
    })
}

/// Accept the collection options docstore keeps (a validator, capped limits, time-series
/// options with their expiry, the default collation), which it returns for the restored collection, and those that change nothing;
/// refuse the rest by name.
fn check_options(path: &Path, options: &Document) -> DumpResult<Document> {
    const KEPT: &[&str] = &[
        "validator",
        "validationLevel",
        "validationAction",
        "capped",
        "size",
        "max",
        "timeseries",
        "expireAfterSeconds",
    ];
    // `expireAfterSeconds` alone belongs to a clustered collection, which docstore lacks.
    if options.contains_key("expireAfterSeconds") && !options.contains_key("timeseries") {
        return Err(DumpError::new(format!(
            "{}: collection option \"expireAfterSeconds\" without \"timeseries\" (a clustered \
             collection) is not supported by docstore; nothing was restored",
            path.display()
        )));
    }
    let mut kept = Document::new();
    for (key, value) in options {
        if KEPT.contains(&key.as_str()) {
            kept.insert(key.clone(), value.clone());
        }
    }
    let parsed = crate::collection::validation::Validator::from_options(&kept)
        .and_then(|_| crate::collection::validation::Capped::from_options(&kept))
        .and_then(|_| crate::collection::timeseries::TimeSeries::from_options(&kept));
    if let Err(e) = parsed {
        return Err(DumpError::new(format!(
            "{}: collection options cannot be restored: {}; nothing was restored",
            path.display(),
            e.message
        )));
    }
    for (key, value) in options {
        let harmless = match key.as_str() {
            k if KEPT.contains(&k) => true,
            "uuid" | "idIndex" => true,
            // The default collation is kept when valid.
            "collation" => {
                let valid = matches!(value, Bson::Document(_))
                    && crate::collation::parse(Some(value)).is_ok();
                if valid {
                    kept.insert(key.clone(), value.clone());
                }
                valid
            }
            _ => false,
        };
        if !harmless {
            return Err(DumpError::new(format!(
                "{}: collection option {key:?} is not supported by docstore; nothing was restored",
                path.display()
            )));
        }
    }
    Ok(kept)
}

/// What [`restore_into_directory`] did.
#[derive(Debug)]
pub struct RestoreReport {
    pub collections: usize,
    pub documents: u64,
    /// The checksums were verified against a manifest (a docstore or Bazaar backup).
    pub verified_manifest: bool,
    pub skipped: Vec<String>,
    /// Where the data directory's previous contents were moved (`force` on a non-empty one).
    pub previous_moved_to: Option<PathBuf>,
}

/// Restore the backup in `dump_dir` as the whole content of the data directory `data_dir`.
///
/// Everything is checked first; the new data directory is built beside the old one, opened once
/// to check it loads (indexes, uniqueness), and only then renamed into place, so a failure at any
/// point leaves `data_dir` as it was. A non-empty `data_dir` is refused unless `force`, in which
/// case its files are moved to `<data_dir>.before-restore-<time>` rather than deleted. A data
/// directory in use by a running server is always refused.
pub fn restore_into_directory(
    dump_dir: &Path,
    data_dir: &Path,
    force: bool,
) -> DumpResult<RestoreReport> {
    let existing = dir_has_entries(data_dir)?;
    if existing && !force {
        return Err(DumpError::new(format!(
            "the data directory {} is not empty: restore into an empty directory, or add --force \
             to move its current files aside first",
            data_dir.display()
        )));
    }
    if existing {
        ensure_not_in_use(data_dir)?;
    }
    let loaded = load_dump(dump_dir)?;
    let stamp = chrono::Utc::now().format("%Y%m%dT%H%M%SZ").to_string();
    let staging = sibling(data_dir, &format!("restore-{stamp}-{}", std::process::id()))?;
    let built = build_data_directory(&staging, &loaded.images);
    if let Err(e) = built {
        let _ = fs::remove_dir_all(&staging);
        return Err(e);
    }
    let mut previous_moved_to = None;
    if existing {
        let aside = sibling(data_dir, &format!("before-restore-{stamp}"))?;
        fs::rename(data_dir, &aside).map_err(|e| {
            let _ = fs::remove_dir_all(&staging);
            DumpError::io(format!("cannot move {} aside", data_dir.display()), e)
        })?;
        previous_moved_to = Some(aside);
    } else if data_dir.exists() {
        fs::remove_dir(data_dir)
            .map_err(|e| DumpError::io(format!("cannot replace {}", data_dir.display()), e))?;
    }
    fs::rename(&staging, data_dir).map_err(|e| {
        DumpError::io(
            format!(
                "cannot move the restored data from {} to {}",
                staging.display(),
                data_dir.display()
            ),
            e,
        )
    })?;
    if let Some(parent) = data_dir.parent().filter(|p| !p.as_os_str().is_empty()) {
        let _ = sync_dir(parent);
    }
    Ok(RestoreReport {
        collections: loaded.images.len(),
        documents: loaded.images.iter().map(|i| i.docs.len() as u64).sum(),
        verified_manifest: loaded.manifest.is_some(),
        skipped: loaded.skipped,
        previous_moved_to,
    })
}

fn dir_has_entries(dir: &Path) -> DumpResult<bool> {
    match fs::read_dir(dir) {
        Ok(mut entries) => Ok(entries.next().is_some()),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(false),
        Err(e) => Err(DumpError::io(format!("cannot read {}", dir.display()), e)),
    }
}

/// Refuse a data directory whose `LOCK` a running server holds.
fn ensure_not_in_use(dir: &Path) -> DumpResult<()> {
    let lock = dir.join("LOCK");
    let Ok(file) = fs::OpenOptions::new().read(true).write(true).open(&lock) else {
        return Ok(());
    };
    match file.try_lock() {
        Ok(()) => Ok(()),
        Err(fs::TryLockError::WouldBlock) => Err(DumpError::new(format!(
            "the data directory {} is in use by a running server: stop it before restoring",
            dir.display()
        ))),
        Err(fs::TryLockError::Error(_)) => Ok(()),
    }
}

/// `<dir>.<suffix>` beside `dir`.
fn sibling(dir: &Path, suffix: &str) -> DumpResult<PathBuf> {
    let name = dir.file_name().ok_or_else(|| {
        DumpError::new(format!("{} is not a usable data directory", dir.display()))
    })?;
    let mut name = name.to_os_string();
    name.push(format!(".{suffix}"));
    Ok(dir.with_file_name(name))
}

/// Write `images` as a snapshot in a new data directory, then open it once as a server would.
fn build_data_directory(dir: &Path, images: &[CollectionImage]) -> DumpResult<()> {
    {
        let (storage, _) = Storage::open(dir, Duration::from_millis(100))
            .map_err(|e| DumpError::io(format!("cannot create {}", dir.display()), e))?;
        let token = storage
            .rotate()
            .map_err(|e| DumpError::io("cannot start the restored journal", e))?;
        storage
            .write_snapshot(token, images)
            .map_err(|e| DumpError::io("cannot write the restored data", e))?;
        storage
            .flush()
            .map_err(|e| DumpError::io("cannot write the restored data", e))?;
    }
    let state = ServerState::open(crate::Config::persistent(dir)).map_err(|e| {
        DumpError::new(format!(
            "the restored data does not load ({}); nothing was restored",
            e.message
        ))
    })?;
    let mut problem = None;
    for image in images {
        let loaded = state
            .catalog
            .get(&image.db, &image.coll)
            .map_or(0, |c| c.read().len());
        if loaded != image.docs.len() {
            problem = Some(format!(
                "{}.{} holds {} documents but {} distinct _id values; nothing was restored",
                image.db,
                image.coll,
                image.docs.len(),
                loaded
            ));
            break;
        }
    }
    state.shutdown();
    match problem {
        Some(message) => Err(DumpError::new(message)),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The checksum of a collection's content: SHA-256 over each document's BSON, in `_id` order.
    /// Equal to the `bsonSha256` of the collection in a backup's manifest.
    fn collection_checksum<'a>(docs_in_id_order: impl IntoIterator<Item = &'a [u8]>) -> String {
        let mut hasher = Sha256::new();
        for raw in docs_in_id_order {
            hasher.update(raw);
        }
        hex(&hasher.finalize())
    }

    fn image(db: &str, coll: &str, ids: &[i32]) -> CollectionImage {
        CollectionImage {
            db: db.into(),
            coll: coll.into(),
            options: Document::new(),
            indexes: vec![doc! {"v": 2, "key": {"sku": 1}, "name": "sku_1", "unique": true}],
            docs: ids
                .iter()
                .map(|&i| {
                    StoredDoc::from_document(
                        &doc! {"_id": i, "sku": format!("sku-{i}"), "price": 1.5},
                    )
                    .unwrap()
                })
                .collect(),
        }
    }

    fn opened(dir: &Path) -> std::sync::Arc<ServerState> {
        ServerState::open(crate::Config::persistent(dir)).unwrap()
    }

    #[test]
    fn a_backup_reads_back_in_id_order_with_the_manifest_checksums() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("backup");
        let images = [
            image("shop", "products", &[3, 1, 2]),
            image("shop", "fs.files", &[]),
        ];
        let manifest = write_verified_dump(&dir, &images, 1_700_000_000_000).unwrap();
        assert_eq!(manifest.documents(), 3);
        let loaded = load_dump(&dir).unwrap();
        assert_eq!(loaded.manifest.as_ref(), Some(&manifest));
        let products = loaded.images.iter().find(|i| i.coll == "products").unwrap();
        let ids: Vec<i32> = products
            .docs
            .iter()
            .map(|d| d.to_document().unwrap().get_i32("_id").unwrap())
            .collect();
        assert_eq!(ids, vec![1, 2, 3]);
        assert_eq!(products.indexes.len(), 1);
        let raws: Vec<Vec<u8>> = products
            .docs
            .iter()
            .map(|d| d.as_bytes().to_vec())
            .collect();
        let checksum = collection_checksum(raws.iter().map(Vec::as_slice));
        assert_eq!(
            manifest.entry("shop", "products").unwrap().bson_sha256,
            checksum
        );
        // The metadata is canonical Extended JSON, as mongodump writes it.
        let metadata = fs::read_to_string(dir.join("shop/products.metadata.json")).unwrap();
        assert!(metadata.contains(r#""v":{"$numberInt":"2"}"#), "{metadata}");
        assert!(
            metadata.contains(r#""collectionName":"products""#),
            "{metadata}"
        );
        // A second backup into the same directory is refused rather than mixed in.
        assert!(write_dump(&dir, &images, 0).is_err());
    }

    #[test]
    fn a_flipped_byte_is_detected_and_nothing_is_restored() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("backup");
        write_verified_dump(&dir, &[image("shop", "products", &[1, 2, 3])], 0).unwrap();
        let file = dir.join("shop/products.bson");
        let mut bytes = fs::read(&file).unwrap();
        let last = bytes.len() - 3;
        bytes[last] ^= 0x01;
        fs::write(&file, &bytes).unwrap();
        let err = verify_dump(&dir).unwrap_err();
        assert!(err.message.contains("products.bson"), "{err}");
        let data = tmp.path().join("data");
        let err = restore_into_directory(&dir, &data, false).unwrap_err();
        assert!(err.message.contains("damaged"), "{err}");
        assert!(!data.exists());
        let leftovers: Vec<_> = fs::read_dir(tmp.path()).unwrap().collect();
        assert_eq!(leftovers.len(), 1, "only the backup remains: {leftovers:?}");
    }

    #[test]
    fn a_truncated_file_is_detected() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("backup");
        write_verified_dump(&dir, &[image("shop", "products", &[1, 2, 3])], 0).unwrap();
        let file = dir.join("shop/products.bson");
        let bytes = fs::read(&file).unwrap();
        fs::write(&file, &bytes[..bytes.len() - 10]).unwrap();
        let err = load_dump(&dir).unwrap_err();
        assert!(err.message.contains("ends inside a document"), "{err}");
    }

    #[test]
    fn restore_refuses_a_non_empty_directory_unless_forced_and_keeps_the_old_files() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("backup");
        write_verified_dump(&dir, &[image("shop", "products", &[1, 2])], 0).unwrap();
        let data = tmp.path().join("data");
        fs::create_dir(&data).unwrap();
        fs::write(data.join("something"), b"old").unwrap();
        let err = restore_into_directory(&dir, &data, false).unwrap_err();
        assert!(err.message.contains("not empty"), "{err}");
        let report = restore_into_directory(&dir, &data, true).unwrap();
        assert_eq!(report.documents, 2);
        assert!(report.verified_manifest);
        let aside = report.previous_moved_to.unwrap();
        assert_eq!(fs::read(aside.join("something")).unwrap(), b"old");
        let state = opened(&data);
        let products = state.catalog.get("shop", "products").unwrap();
        let products = products.read();
        assert_eq!(products.len(), 2);
        assert!(products
            .indexes()
            .iter()
            .any(|i| i.spec.name == "sku_1" && i.spec.unique));
    }

    /// Files shaped as mongodump 100.x writes them: canonical Extended JSON v2 metadata with the
    /// `_id_` index, a non-default index, plus the server's own `admin.system.version` and a view.
    #[test]
    fn a_mongodump_directory_restores() {
        let tmp = tempfile::tempdir().unwrap();
        let dump = tmp.path().join("dump");
        fs::create_dir_all(dump.join("shop")).unwrap();
        fs::create_dir_all(dump.join("admin")).unwrap();
        let oid = bson::oid::ObjectId::parse_str("65a1b2c3d4e5f60718293a4b").unwrap();
        let docs = [
            doc! {"_id": oid, "title": "Mug", "price": bson::Decimal128::from_bytes([0; 16]),
            "added": bson::DateTime::from_millis(1_700_000_000_000), "n": 5_i64},
            doc! {"_id": bson::oid::ObjectId::new(), "title": "Cup", "tags": ["a", "b"]},
        ];
        let mut bytes = Vec::new();
        for d in &docs {
            d.to_writer(&mut bytes).unwrap();
        }
        fs::write(dump.join("shop/products.bson"), &bytes).unwrap();
        fs::write(
            dump.join("shop/products.metadata.json"),
            r#"{"indexes":[{"v":{"$numberInt":"2"},"key":{"_id":{"$numberInt":"1"}},"name":"_id_"},{"v":{"$numberInt":"2"},"key":{"title":{"$numberInt":"1"},"price":{"$numberInt":"-1"}},"name":"title_1_price_-1","unique":true},{"v":{"$numberInt":"2"},"key":{"added":{"$numberInt":"1"}},"name":"added_1","expireAfterSeconds":{"$numberInt":"3600"}}],"uuid":"3b241101e2bb42558caf4136c566a962","collectionName":"products","type":"collection"}"#,
        )
        .unwrap();
        fs::write(dump.join("shop/empty.bson"), b"").unwrap();
        fs::write(
            dump.join("shop/empty.metadata.json"),
            r#"{"options":{},"indexes":[{"v":{"$numberInt":"2"},"key":{"_id":{"$numberInt":"1"}},"name":"_id_"}],"uuid":"9b241101e2bb42558caf4136c566a962","collectionName":"empty","type":"collection"}"#,
        )
        .unwrap();
        fs::write(
            dump.join("shop/cheap.metadata.json"),
            r#"{"options":{"viewOn":"products","pipeline":[{"$match":{"price":{"$lt":{"$numberInt":"5"}}}}]},"indexes":[],"collectionName":"cheap","type":"view"}"#,
        )
        .unwrap();
        let mut version = Vec::new();
        doc! {"_id": "featureCompatibilityVersion", "version": "7.0"}
            .to_writer(&mut version)
            .unwrap();
        fs::write(dump.join("admin/system.version.bson"), &version).unwrap();
        fs::write(
            dump.join("admin/system.version.metadata.json"),
            r#"{"indexes":[{"v":{"$numberInt":"2"},"key":{"_id":{"$numberInt":"1"}},"name":"_id_"}],"uuid":"1b241101e2bb42558caf4136c566a962","collectionName":"system.version","type":"collection"}"#,
        )
        .unwrap();
        fs::write(
            dump.join("prelude.json"),
            r#"{"ServerVersion":"7.0.4","ToolVersion":"100.9.4"}"#,
        )
        .unwrap();

        let data = tmp.path().join("data");
        let report = restore_into_directory(&dump, &data, false).unwrap();
        assert_eq!(report.collections, 2, "{report:?}");
        assert_eq!(report.documents, 2);
        assert!(!report.verified_manifest);
        assert!(
            report.skipped.iter().any(|s| s.contains("system.version")),
            "{report:?}"
        );
        assert!(
            report.skipped.iter().any(|s| s.contains("view")),
            "{report:?}"
        );
        let state = opened(&data);
        assert!(state.catalog.get("admin", "system.version").is_none());
        let products = state.catalog.get("shop", "products").unwrap();
        let products = products.read();
        let mug = products.find_by_id(&Bson::ObjectId(oid)).unwrap();
        assert_eq!(products.get(mug).unwrap().to_document().unwrap(), docs[0]);
        let names: Vec<_> = products
            .indexes()
            .iter()
            .map(|i| i.spec.name.clone())
            .collect();
        assert_eq!(names, vec!["_id_", "title_1_price_-1", "added_1"]);
        assert!(state.catalog.get("shop", "empty").is_some());
    }

    #[test]
    fn a_collection_default_collation_and_collated_indexes_are_restored() {
        let tmp = tempfile::tempdir().unwrap();
        let dump = tmp.path().join("dump");
        fs::create_dir_all(dump.join("shop")).unwrap();
        let mut bytes = Vec::new();
        doc! {"_id": 1, "name": "Müller"}
            .to_writer(&mut bytes)
            .unwrap();
        fs::write(dump.join("shop/people.bson"), &bytes).unwrap();
        fs::write(
            dump.join("shop/people.metadata.json"),
            r#"{"options":{"collation":{"locale":"de","strength":{"$numberInt":"2"}}},"indexes":[{"v":{"$numberInt":"2"},"key":{"_id":{"$numberInt":"1"}},"name":"_id_","collation":{"locale":"de","strength":{"$numberInt":"2"}}},{"v":{"$numberInt":"2"},"key":{"name":{"$numberInt":"1"}},"name":"name_1","unique":true,"collation":{"locale":"de","strength":{"$numberInt":"2"}}}],"collectionName":"people","type":"collection"}"#,
        )
        .unwrap();
        let data = tmp.path().join("data");
        restore_into_directory(&dump, &data, false).unwrap();
        let state = opened(&data);
        let people = state.catalog.get("shop", "people").unwrap();
        let people = people.read();
        let default = people.default_collation().expect("the default collation");
        assert_eq!(default.spec().get_i32("strength"), Ok(2));
        for index in people.indexes() {
            assert_eq!(
                index.spec.collation.as_ref().map(|c| c.spec().clone()),
                Some(default.spec().clone()),
                "{}",
                index.spec.name
            );
        }
    }

    #[test]
    fn a_gzipped_mongodump_is_refused_with_a_clear_message() {
        let tmp = tempfile::tempdir().unwrap();
        let dump = tmp.path().join("dump");
        fs::create_dir_all(dump.join("shop")).unwrap();
        fs::write(dump.join("shop/products.bson.gz"), b"\x1f\x8b").unwrap();
        let err = load_dump(&dump).unwrap_err();
        assert!(err.message.contains("--gzip"), "{err}");
    }

    #[test]
    fn a_validator_and_capped_limits_are_restored_with_their_collection() {
        let tmp = tempfile::tempdir().unwrap();
        let dump = tmp.path().join("dump");
        fs::create_dir_all(dump.join("shop")).unwrap();
        fs::write(dump.join("shop/log.bson"), b"").unwrap();
        fs::write(
            dump.join("shop/log.metadata.json"),
            r#"{"options":{"capped":true,"size":{"$numberInt":"4096"},"validator":{"a":{"$gt":{"$numberInt":"1"}}},"validationLevel":"moderate","validationAction":"error"},"indexes":[],"collectionName":"log","type":"collection"}"#,
        )
        .unwrap();
        let loaded = load_dump(&dump).unwrap();
        assert_eq!(
            loaded.images[0].options,
            doc! {
                "capped": true,
                "size": 4096,
                "validator": { "a": { "$gt": 1 } },
                "validationLevel": "moderate",
                "validationAction": "error",
            }
        );
        // A validator that does not parse is refused, naming the file.
        fs::write(
            dump.join("shop/log.metadata.json"),
            r#"{"options":{"validator":{"$jsonSchema":{"bogus":true}}},"indexes":[],"collectionName":"log","type":"collection"}"#,
        )
        .unwrap();
        let err = load_dump(&dump).unwrap_err();
        assert!(err.message.contains("log.metadata.json"), "{err}");
    }

    #[test]
    fn time_series_options_and_their_expiry_are_restored_with_their_collection() {
        let tmp = tempfile::tempdir().unwrap();
        let dump = tmp.path().join("dump");
        fs::create_dir_all(dump.join("shop")).unwrap();
        fs::write(dump.join("shop/log.bson"), b"").unwrap();
        fs::write(
            dump.join("shop/log.metadata.json"),
            r#"{"options":{"timeseries":{"timeField":"t","metaField":"m","granularity":"minutes","bucketMaxSpanSeconds":{"$numberInt":"86400"}},"expireAfterSeconds":{"$numberLong":"60"}},"indexes":[],"collectionName":"log","type":"collection"}"#,
        )
        .unwrap();
        let loaded = load_dump(&dump).unwrap();
        assert_eq!(
            loaded.images[0].options,
            doc! {
                "timeseries": { "timeField": "t", "metaField": "m", "granularity": "minutes",
                                "bucketMaxSpanSeconds": 86400 },
                "expireAfterSeconds": 60i64,
            }
        );
        // `expireAfterSeconds` alone (a clustered collection) is refused by name.
        fs::write(
            dump.join("shop/log.metadata.json"),
            r#"{"options":{"expireAfterSeconds":{"$numberLong":"60"}},"indexes":[],"collectionName":"log","type":"collection"}"#,
        )
        .unwrap();
        let err = load_dump(&dump).unwrap_err();
        assert!(err.message.contains("expireAfterSeconds"), "{err}");
    }

    #[test]
    fn unsupported_collection_options_are_refused_by_name() {
        let tmp = tempfile::tempdir().unwrap();
        let dump = tmp.path().join("dump");
        fs::create_dir_all(dump.join("shop")).unwrap();
        fs::write(dump.join("shop/log.bson"), b"").unwrap();
        fs::write(
            dump.join("shop/log.metadata.json"),
            r#"{"options":{"changeStreamPreAndPostImages":{"enabled":true}},"indexes":[],"collectionName":"log","type":"collection"}"#,
        )
        .unwrap();
        let err = load_dump(&dump).unwrap_err();
        assert!(
            err.message.contains("\"changeStreamPreAndPostImages\""),
            "{err}"
        );
    }

    /// `bazaar restore` of a dump holding a document nested 1 200 or 100 000 levels deep (a
    /// crafted or damaged file; 1 200 used to abort the process with a stack overflow): the
    /// restore is refused with a message naming the file and the collection, and nothing is
    /// written.
    #[test]
    fn a_dump_with_a_document_nested_too_deep_is_refused_and_nothing_is_written() {
        for depth in [1_200, 100_000] {
            let tmp = tempfile::tempdir().unwrap();
            let dump = tmp.path().join("dump");
            fs::create_dir_all(dump.join("shop")).unwrap();
            let mut bytes = Vec::new();
            doc! {"_id": 1, "title": "Mug"}
                .to_writer(&mut bytes)
                .unwrap();
            bytes.extend(bson_depth::nested_bytes(depth));
            let file = dump.join("shop/products.bson");
            fs::write(&file, &bytes).unwrap();
            let data = tmp.path().join("data");

            let err = restore_into_directory(&dump, &data, false).unwrap_err();
            assert!(
                err.message.contains(&file.display().to_string())
                    && err.message.contains("shop.products")
                    && err.message.contains("nested more than 200 levels"),
                "depth {depth}: {err}"
            );
            assert!(
                !data.exists(),
                "depth {depth}: the data directory was created"
            );
            let left: Vec<_> = fs::read_dir(tmp.path())
                .unwrap()
                .map(|e| e.unwrap().file_name())
                .collect();
            assert_eq!(
                left,
                vec![std::ffi::OsString::from("dump")],
                "depth {depth}"
            );
        }
    }

    /// The limit is the wire's: a document as deep as a client could store restores.
    #[test]
    fn a_dump_with_a_document_at_the_depth_limit_restores() {
        let tmp = tempfile::tempdir().unwrap();
        let dump = tmp.path().join("dump");
        fs::create_dir_all(dump.join("shop")).unwrap();
        let mut deep = doc! {"leaf": 1};
        for _ in 2..bson_depth::MAX_BSON_DEPTH {
            deep = doc! {"a": deep};
        }
        let mut bytes = Vec::new();
        doc! {"_id": 1, "a": deep}.to_writer(&mut bytes).unwrap();
        fs::write(dump.join("shop/products.bson"), &bytes).unwrap();
        let data = tmp.path().join("data");
        let report = restore_into_directory(&dump, &data, false).unwrap();
        assert_eq!(report.documents, 1);
    }
}
