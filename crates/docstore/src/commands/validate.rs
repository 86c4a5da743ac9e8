//! The `validate` command: checks a collection as mongod's does. Every document must encode
//! as BSON within the size limit and have an `_id`; every index must hold exactly the keys its
//! documents generate (no missing entries, no entries for other keys or for records that are
//! gone). The reply has mongod's shape: `valid`, `nrecords`, `nIndexes`, `keysPerIndex`,
//! `indexDetails`, `errors`, `warnings`, `missingIndexEntries`, `extraIndexEntries`.

use super::args::Args;
use super::Reply;
use crate::collection::Collection;
use crate::error::{Error, ErrorCode, Result};
use crate::state::ServerState;
use bson::{doc, Bson, Document};
use std::collections::BTreeSet;
use std::sync::Arc;

/// Entries of each kind listed in the reply at most (mongod caps these lists too).
const MAX_LISTED: usize = 100;

/// MongoDB's largest stored document (16 MiB) plus the slack it allows internally.
const MAX_DOCUMENT_BYTES: usize = 16 * 1024 * 1024 + 16 * 1024;

pub(crate) fn validate(state: &Arc<ServerState>, db: &str, args: &Args<'_>) -> Result<Reply> {
    args.allow_only(&[
        "full",
        "scandata",
        "repair",
        "metadata",
        "background",
        "checkBSONConformance",
        "enforceFastCount",
    ])?;
    let coll = args.collection()?;
    if args.bool("repair", false)? {
        return Err(Error::not_supported(
            "validate with repair (use `docstore --repair` with the server stopped)",
        ));
    }
    let Some(handle) = state.catalog.get(db, coll) else {
        return Err(Error::new(
            ErrorCode::NamespaceNotFound,
            format!("Collection '{db}.{coll}' does not exist to validate."),
        ));
    };
    let c = handle.read();
    let mut reply = check(&c);
    reply.insert("ns", format!("{db}.{coll}"));
    Ok(Reply::read(reply))
}

/// The validation report for one collection (without `ns`).
pub(crate) fn check(c: &Collection) -> Document {
    let mut errors: Vec<Bson> = Vec::new();
    let mut invalid_documents = 0i64;
    let mut nrecords = 0i64;
    let mut non_compliant = 0i64;
    for (rid, doc) in c.records() {
        nrecords += 1;
        if let (Some(v), Ok(decoded)) = (c.validator(), doc.to_document()) {
            if !v.complies(&decoded) {
                non_compliant += 1;
            }
        }
        let problem = match doc.to_document() {
            Err(e) => Some(format!(
                "record {rid} does not decode as BSON: {}",
                e.message
            )),
            Ok(_) if doc.len() > MAX_DOCUMENT_BYTES => Some(format!(
                "record {rid} is {} bytes, over the BSON document size limit",
                doc.len()
            )),
            Ok(decoded) if !decoded.contains_key("_id") => Some(format!("record {rid} has no _id")),
            Ok(_) => None,
        };
        if let Some(p) = problem {
            invalid_documents += 1;
            if errors.len() < MAX_LISTED {
                errors.push(Bson::String(p));
            }
        }
    }
    let mut keys_per_index = Document::new();
    let mut index_details = Document::new();
    let mut missing_entries: Vec<Bson> = Vec::new();
    let mut extra_entries: Vec<Bson> = Vec::new();
    for idx in c.indexes() {
        let name = idx.spec.name.clone();
        let mut expected: BTreeSet<(Vec<u8>, u64)> = BTreeSet::new();
        let mut index_errors: Vec<Bson> = Vec::new();
        for (rid, doc) in c.records() {
            match idx.keys_for_stored(doc) {
                Ok(keys) => expected.extend(keys.into_iter().map(|k| (k, rid))),
                Err(e) => index_errors.push(Bson::String(format!(
                    "record {rid} cannot be indexed: {}",
                    e.message
                ))),
            }
        }
        let mut missing = 0usize;
        for (key, rid) in &expected {
            if !idx.has_entry(key, *rid) {
                missing += 1;
                if missing_entries.len() < MAX_LISTED {
                    missing_entries.push(entry(idx, &name, key, *rid));
                }
            }
        }
        let mut extra = 0usize;
        let mut count = 0i64;
        for (key, rid) in idx.entries() {
            count += 1;
            if !expected.contains(&(key.to_vec(), rid)) {
                extra += 1;
                if extra_entries.len() < MAX_LISTED {
                    extra_entries.push(entry(idx, &name, &key, rid));
                }
            }
        }
        if missing > 0 {
            index_errors.push(Bson::String(format!(
                "index {name} lacks {missing} entries for documents of the collection"
            )));
        }
        if extra > 0 {
            index_errors.push(Bson::String(format!(
                "index {name} has {extra} entries that match no document"
            )));
        }
        keys_per_index.insert(name.clone(), count);
        let valid = index_errors.is_empty();
        errors.extend(index_errors.iter().cloned());
        index_details.insert(name, doc! { "valid": valid });
    }
    let valid = errors.is_empty();
    doc! {
        "nInvalidDocuments": invalid_documents,
        "nNonCompliantDocuments": non_compliant,
        "nrecords": nrecords,
        "nIndexes": c.indexes().len() as i32,
        "keysPerIndex": keys_per_index,
        "indexDetails": index_details,
        "valid": valid,
        "repaired": false,
        "warnings": if non_compliant > 0 {
            vec![Bson::String(
                "Detected one or more documents not compliant with the collection's schema. \
                 See logs."
                    .to_string(),
            )]
        } else {
            Vec::new()
        },
        "errors": errors,
        "extraIndexEntries": extra_entries,
        "missingIndexEntries": missing_entries,
        "corruptRecords": Vec::<Bson>::new(),
    }
}

/// One index entry as the reply lists it.
fn entry(idx: &crate::index::Index, name: &str, key: &[u8], rid: u64) -> Bson {
    Bson::Document(doc! {
        "indexName": name,
        "recordId": rid as i64,
        "indexKey": idx.key_to_document(key),
    })
}

#[cfg(test)]
mod tests {
    use super::check;
    use crate::collection::Collection;
    use crate::index::IndexSpec;
    use bson::{doc, Bson};

    fn collection() -> Collection {
        let mut c = Collection::new("db", "c", doc! {});
        c.create_index(IndexSpec::parse(&doc! { "key": { "a": 1 }, "name": "a_1" }).unwrap())
            .unwrap();
        for i in 0..3 {
            c.insert(doc! { "_id": i, "a": [i, i + 10] }).unwrap();
        }
        c
    }

    #[test]
    fn a_consistent_collection_is_valid() {
        let report = check(&collection());
        assert_eq!(report.get_bool("valid"), Ok(true), "{report}");
        assert_eq!(report.get_i64("nrecords"), Ok(3));
        assert_eq!(report.get_i32("nIndexes"), Ok(2));
        let keys = report.get_document("keysPerIndex").unwrap();
        assert_eq!(keys.get_i64("_id_"), Ok(3));
        assert_eq!(keys.get_i64("a_1"), Ok(6), "two keys per multikey document");
        assert!(report.get_array("errors").unwrap().is_empty());
    }

    #[test]
    fn missing_and_extra_index_entries_make_it_invalid() {
        let mut c = collection();
        let doc = c.get(1).unwrap().clone();
        let idx = &mut c.indexes_mut()[1];
        let keys = idx.keys_for_stored(&doc).unwrap();
        // Drop one real entry and add one pointing at a record that does not exist.
        idx.remove(&keys[..1], 1);
        idx.insert(&keys[..1], 99);
        let report = check(&c);
        assert_eq!(report.get_bool("valid"), Ok(false), "{report}");
        let missing = report.get_array("missingIndexEntries").unwrap();
        let extra = report.get_array("extraIndexEntries").unwrap();
        assert_eq!(missing.len(), 1, "{report}");
        assert_eq!(extra.len(), 1, "{report}");
        let Bson::Document(e) = &extra[0] else {
            panic!()
        };
        assert_eq!(e.get_str("indexName"), Ok("a_1"));
        assert_eq!(e.get_i64("recordId"), Ok(99));
        assert_eq!(e.get_document("indexKey").unwrap(), &doc! { "a": 0 });
        assert_eq!(
            report
                .get_document("indexDetails")
                .unwrap()
                .get_document("a_1")
                .unwrap(),
            &doc! { "valid": false }
        );
        assert_eq!(report.get_array("errors").unwrap().len(), 2);
    }
}
