"""pymongo (and its gridfs module) against docstore: CRUD, indexes, bulk writes, GridFS and errors,
each result checked against what MongoDB 7.0 answers.

usage: pymongo_smoke.py URI               the full smoke run; leaves data for the restart check
       pymongo_smoke.py URI --after-restart  checks that data survived a server restart
Exits 0 when every check passed, 1 with a message naming the first mismatch otherwise.
"""

import io
import random
import sys

import gridfs
import pymongo
from bson import Int64, ObjectId
from pymongo import (
    DeleteMany,
    DeleteOne,
    InsertOne,
    ReplaceOne,
    ReturnDocument,
    UpdateMany,
    UpdateOne,
)
from gridfs.errors import NoFile
from pymongo.errors import (
    BulkWriteError,
    CollectionInvalid,
    DuplicateKeyError,
    OperationFailure,
)

DB = "clients_pymongo"
PERSIST_DB = "clients_pymongo_persist"
MIB = 1024 * 1024
checks = 0


class Mismatch(Exception):
    """A result that differs from MongoDB's."""


def eq(actual, expected, what):
    global checks
    if actual != expected or type(actual) is not type(expected):
        raise Mismatch(f"{what}\n  expected: {expected!r}\n  actual:   {actual!r}")
    checks += 1


def ok(condition, what):
    global checks
    if not condition:
        raise Mismatch(what)
    checks += 1


def raises(error_type, fn, what):
    """Runs fn, which must raise error_type; returns the exception."""
    try:
        fn()
    except error_type as e:
        global checks
        checks += 1
        return e
    except Exception as e:  # noqa: BLE001 - the wrong error is itself the finding
        raise Mismatch(f"{what}: expected {error_type.__name__}, got {type(e).__name__}: {e}")
    raise Mismatch(f"{what}: expected {error_type.__name__}, nothing was raised")


def payload(seed, size):
    return random.Random(seed).randbytes(size)


def crud(db):
    items = db.items
    res = items.insert_one({"_id": 1, "sku": "apple", "qty": 5, "price": 1.5, "tags": ["fruit"]})
    eq(res.inserted_id, 1, "insert_one returns the _id")
    res = items.insert_many(
        [
            {"_id": 2, "sku": "pear", "qty": 3, "price": 2.25, "tags": ["fruit"]},
            {"_id": 3, "sku": "leek", "qty": 10, "price": 0.75, "tags": ["vegetable"]},
            {"_id": 4, "sku": "kiwi", "qty": 7, "price": 3.0, "tags": ["fruit", "exotic"]},
            {"_id": 5, "sku": "kale", "qty": 1, "price": 4.5, "tags": ["vegetable"]},
        ]
    )
    eq(res.inserted_ids, [2, 3, 4, 5], "insert_many returns every _id in order")
    oid = db.events.insert_one({"kind": "created"}).inserted_id
    ok(isinstance(oid, ObjectId), "a missing _id is generated as an ObjectId")

    # find with sort / limit / skip / projection
    eq(
        list(items.find({}, {"_id": 0, "sku": 1}).sort("price", pymongo.DESCENDING).limit(3)),
        [{"sku": "kale"}, {"sku": "kiwi"}, {"sku": "pear"}],
        "find sorted by price descending, limit 3, projected to sku",
    )
    eq(
        list(items.find({"tags": "fruit"}, {"tags": 0}).sort([("qty", 1)]).skip(1)),
        [
            {"_id": 1, "sku": "apple", "qty": 5, "price": 1.5},
            {"_id": 4, "sku": "kiwi", "qty": 7, "price": 3.0},
        ],
        "find on an array field with an exclusion projection and skip",
    )
    eq(items.find_one({"qty": {"$gt": 100}}), None, "find_one with no match is None")

    # A cursor that needs getMore.
    db.many.insert_many([{"_id": i, "even": i % 2 == 0} for i in range(300)])
    seen = [d["_id"] for d in db.many.find({"even": True}).sort("_id", 1).batch_size(16)]
    eq(seen, list(range(0, 300, 2)), "a cursor iterated in batches of 16 returns every match once")

    # update_one / update_many, with and without upsert
    res = items.update_one({"sku": "apple"}, {"$inc": {"qty": 2}})
    eq((res.matched_count, res.modified_count, res.upserted_id), (1, 1, None), "update_one $inc")
    eq(items.find_one({"_id": 1})["qty"], 7, "$inc keeps an int an int")
    res = items.update_one({"sku": "plum"}, {"$set": {"qty": 4}}, upsert=True)
    eq((res.matched_count, res.modified_count), (0, 0), "update_one upsert matches nothing")
    ok(isinstance(res.upserted_id, ObjectId), "update_one upsert reports a generated _id")
    eq(
        items.find_one({"_id": res.upserted_id}, {"_id": 0}),
        {"sku": "plum", "qty": 4},
        "the upserted document holds the equality fields of the filter and the update",
    )
    res = items.update_many({"tags": "fruit"}, {"$set": {"fresh": True}})
    eq((res.matched_count, res.modified_count), (3, 3), "update_many matches every fruit")
    res = items.update_many({"tags": "fruit"}, {"$set": {"fresh": True}})
    eq((res.matched_count, res.modified_count), (3, 0), "a no-op update_many modifies nothing")
    res = items.update_many({"_id": 99}, {"$set": {"sku": "fig"}}, upsert=True)
    eq((res.matched_count, res.upserted_id), (0, 99), "update_many upsert takes the filter's _id")

    # replace_one
    res = items.replace_one({"_id": 99}, {"sku": "fig", "qty": 12})
    eq((res.matched_count, res.modified_count), (1, 1), "replace_one")
    eq(items.find_one({"_id": 99}), {"_id": 99, "sku": "fig", "qty": 12}, "the replaced document")
    res = items.replace_one({"_id": 100}, {"sku": "date"}, upsert=True)
    eq(res.upserted_id, 100, "replace_one upsert")

    # find_one_and_update / find_one_and_delete
    doc = items.find_one_and_update(
        {"sku": "pear"}, {"$inc": {"qty": 10}}, return_document=ReturnDocument.AFTER
    )
    eq(doc["qty"], 13, "find_one_and_update with ReturnDocument.AFTER returns the new value")
    doc = items.find_one_and_update(
        {"sku": "pear"}, {"$inc": {"qty": 1}}, projection={"qty": 1, "_id": 0}
    )
    eq(doc, {"qty": 13}, "find_one_and_update returns the document before by default")
    doc = items.find_one_and_update(
        {"sku": "quince"},
        {"$setOnInsert": {"qty": 0}},
        upsert=True,
        return_document=ReturnDocument.AFTER,
    )
    eq((doc["sku"], doc["qty"]), ("quince", 0), "find_one_and_update upsert returns the new document")
    eq(items.find_one_and_delete({"sku": "quince"})["qty"], 0, "find_one_and_delete")

    # count_documents / estimated_document_count / distinct
    eq(items.count_documents({}), 8, "count_documents of everything")
    eq(items.count_documents({"fresh": True}), 3, "count_documents with a filter")
    eq(items.count_documents({}, skip=2, limit=4), 4, "count_documents with skip and limit")
    eq(items.estimated_document_count(), 8, "estimated_document_count")
    eq(sorted(items.distinct("tags")), ["exotic", "fruit", "vegetable"], "distinct unwinds arrays")
    eq(sorted(items.distinct("sku", {"qty": {"$lt": 5}})), ["kale", "plum"], "distinct with a filter")

    # aggregate
    eq(
        list(
            items.aggregate(
                [
                    {"$match": {"tags": {"$exists": True}}},
                    {"$unwind": "$tags"},
                    {"$group": {"_id": "$tags", "n": {"$sum": 1}, "qty": {"$sum": "$qty"}}},
                    {"$sort": {"n": -1, "_id": 1}},
                ]
            )
        ),
        [
            {"_id": "fruit", "n": 3, "qty": 28},
            {"_id": "vegetable", "n": 2, "qty": 11},
            {"_id": "exotic", "n": 1, "qty": 7},
        ],
        "aggregate: $match, $unwind, $group, $sort",
    )
    eq(
        list(items.aggregate([{"$match": {"_id": {"$in": [1, 4]}}}, {"$project": {"_id": 0, "v": {"$multiply": ["$qty", "$price"]}}}])),
        [{"v": 10.5}, {"v": 21.0}],
        "aggregate: $project with an arithmetic expression",
    )

    # delete_one / delete_many
    eq(items.delete_one({"_id": 100}).deleted_count, 1, "delete_one")
    eq(items.delete_one({"_id": 100}).deleted_count, 0, "delete_one of nothing")
    eq(items.delete_many({"tags": "vegetable"}).deleted_count, 2, "delete_many")
    eq(items.count_documents({}), 5, "what is left after the deletes")


def indexes_and_errors(db):
    items = db.items
    eq(items.create_index("sku", unique=True), "sku_1", "create_index returns the name")
    eq(items.create_index([("qty", -1), ("price", 1)]), "qty_-1_price_1", "compound index name")
    info = items.index_information()
    eq(sorted(info), ["_id_", "qty_-1_price_1", "sku_1"], "index_information names")
    eq(info["sku_1"]["key"], [("sku", 1)], "index_information key of sku_1")
    eq(info["sku_1"].get("unique"), True, "index_information says sku_1 is unique")
    eq(info["qty_-1_price_1"]["key"], [("qty", -1), ("price", 1)], "compound key order")

    e = raises(DuplicateKeyError, lambda: items.insert_one({"sku": "apple"}), "duplicate insert_one")
    eq(e.code, 11000, "DuplicateKeyError code")
    ok("E11000 duplicate key error" in str(e), f"DuplicateKeyError message: {e}")
    eq(e.details.get("keyValue"), {"sku": "apple"}, "DuplicateKeyError details carry keyValue")
    e = raises(
        DuplicateKeyError,
        lambda: items.update_one({"sku": "pear"}, {"$set": {"sku": "kiwi"}}),
        "update into a duplicate",
    )
    eq(e.code, 11000, "DuplicateKeyError code on update")
    raises(
        DuplicateKeyError,
        lambda: items.find_one_and_update({"sku": "pear"}, {"$set": {"sku": "kiwi"}}),
        "find_one_and_update into a duplicate",
    )
    e = raises(
        BulkWriteError,
        lambda: items.insert_many([{"sku": "lime"}, {"sku": "lime"}, {"sku": "lemon"}]),
        "insert_many with a duplicate",
    )
    eq(e.details["nInserted"], 1, "an ordered insert_many stops at the duplicate")
    eq([w["code"] for w in e.details["writeErrors"]], [11000], "the bulk write error code")
    e = raises(
        BulkWriteError,
        lambda: items.insert_many([{"sku": "lime"}, {"sku": "melon"}], ordered=False),
        "unordered insert_many with a duplicate",
    )
    eq((e.details["nInserted"], e.details["writeErrors"][0]["index"]), (1, 0), "unordered goes on")

    e = raises(OperationFailure, lambda: db.command("noSuchCommand"), "an unknown command")
    eq(e.code, 59, "an unknown command is CommandNotFound (59)")
    eq(e.details.get("codeName"), "CommandNotFound", "codeName of an unknown command")
    e = raises(OperationFailure, lambda: list(items.find({"$nope": 1})), "an unknown operator")
    eq(e.code, 2, "an unknown top-level operator is BadValue (2)")

    eq(items.drop_index("qty_-1_price_1"), None, "drop_index")
    eq(sorted(items.index_information()), ["_id_", "sku_1"], "the dropped index is gone")


def bulk(db):
    coll = db.bulk
    coll.insert_many([{"_id": i, "v": i} for i in range(1, 6)])
    res = coll.bulk_write(
        [
            InsertOne({"_id": 10, "v": 10}),
            UpdateOne({"_id": 1}, {"$inc": {"v": 100}}),
            UpdateMany({"v": {"$in": [2, 3]}}, {"$set": {"small": True}}),
            ReplaceOne({"_id": 4}, {"v": 40}),
            UpdateOne({"_id": 20}, {"$set": {"v": 20}}, upsert=True),
            DeleteOne({"_id": 5}),
            DeleteMany({"small": True}),
        ]
    )
    eq(res.inserted_count, 1, "bulk_write inserted_count")
    eq(res.matched_count, 4, "bulk_write matched_count")
    eq(res.modified_count, 4, "bulk_write modified_count")
    eq(res.deleted_count, 3, "bulk_write deleted_count")
    eq(res.upserted_count, 1, "bulk_write upserted_count")
    eq(res.upserted_ids, {4: 20}, "bulk_write upserted_ids by operation index")
    eq(
        list(coll.find().sort("_id", 1)),
        [{"_id": 1, "v": 101}, {"_id": 4, "v": 40}, {"_id": 10, "v": 10}, {"_id": 20, "v": 20}],
        "the collection after the mixed bulk write",
    )


def grid(db):
    data = payload(5, 5 * MIB)

    fs = gridfs.GridFS(db)
    file_id = fs.put(data, filename="five.bin", content_type="application/octet-stream")
    eq(fs.exists(file_id), True, "GridFS.exists after put")
    out = fs.get(file_id)
    # The GridFS spec stores length as an Int64; it must come back as one.
    eq(out.length, Int64(5 * MIB), "GridFS file length")
    eq(out.filename, "five.bin", "GridFS filename")
    ok(out.read() == data, "GridFS.get returns the 5 MiB that were put")
    eq(db.fs.chunks.count_documents({"files_id": file_id}), 21, "5 MiB in 255 KiB chunks is 21 chunks")
    eq(fs.get_last_version("five.bin")._id, file_id, "GridFS.get_last_version by filename")
    eq([f.filename for f in fs.find({"length": {"$gt": MIB}})], ["five.bin"], "GridFS.find")
    fs.delete(file_id)
    eq(fs.exists(file_id), False, "GridFS.exists after delete")
    eq(db.fs.chunks.count_documents({"files_id": file_id}), 0, "deleting removes the chunks")

    bucket = gridfs.GridFSBucket(db, bucket_name="media", chunk_size_bytes=1024 * 1024)
    stream_id = bucket.upload_from_stream("clip.bin", io.BytesIO(data), metadata={"kind": "clip"})
    with bucket.open_download_stream(stream_id) as down:
        eq(down.length, Int64(5 * MIB), "GridFSBucket file length")
        ok(down.read() == data, "GridFSBucket.open_download_stream returns the uploaded bytes")
    sink = io.BytesIO()
    bucket.download_to_stream_by_name("clip.bin", sink)
    ok(sink.getvalue() == data, "download_to_stream_by_name returns the uploaded bytes")
    with bucket.open_download_stream(stream_id) as down:
        down.seek(3 * MIB + 7)
        eq(down.read(5), data[3 * MIB + 7 : 3 * MIB + 12], "seeking into the middle of a chunk")
    found = list(bucket.find({"metadata.kind": "clip"}))
    eq([(f._id, f.filename, f.chunk_size) for f in found], [(stream_id, "clip.bin", MIB)], "GridFSBucket.find")
    second = bucket.upload_from_stream("clip.bin", io.BytesIO(b"v2"))
    with bucket.open_download_stream_by_name("clip.bin") as down:
        eq(down.read(), b"v2", "open_download_stream_by_name returns the newest revision")
    eq(len(list(bucket.find({"filename": "clip.bin"}))), 2, "both revisions are listed")
    bucket.delete(stream_id)
    bucket.delete(second)
    raises(NoFile, lambda: bucket.open_download_stream(stream_id), "a deleted file")
    eq(db.media.chunks.count_documents({}), 0, "no chunks are left after deleting every file")


def server_level(client, db):
    eq(client.server_info()["version"], "7.0.0", "server_info reports the MongoDB version")
    eq(client.admin.command("ping"), {"ok": 1.0}, "ping")
    ok(DB in client.list_database_names(), "list_database_names lists the database")
    eq(
        sorted(db.list_collection_names()),
        ["bulk", "events", "fs.chunks", "fs.files", "items", "many", "media.chunks", "media.files"],
        "list_collection_names",
    )
    db.create_collection("made")
    # create_collection checks client-side first; the raw command reaches the server.
    raises(CollectionInvalid, lambda: db.create_collection("made"), "create_collection of an existing one")
    e = raises(OperationFailure, lambda: db.command("create", "made"), "creating an existing collection")
    eq(e.code, 48, "creating an existing collection is NamespaceExists (48)")
    db.made.rename("renamed")
    ok("renamed" in db.list_collection_names() and "made" not in db.list_collection_names(), "rename")
    stats = db.command("dbstats")
    eq(stats["db"], DB, "dbstats names the database")


def write_persisted(client):
    db = client[PERSIST_DB]
    db.drop_collection("kept")
    db.kept.insert_many([{"_id": i, "sq": i * i} for i in range(1000)])
    db.kept.create_index("sq", unique=True)
    bucket = gridfs.GridFSBucket(db)
    for f in bucket.find({"filename": "kept.bin"}):
        bucket.delete(f._id)
    bucket.upload_from_stream("kept.bin", io.BytesIO(payload(7, 2 * MIB + 3)))


def check_persisted(client):
    db = client[PERSIST_DB]
    eq(db.kept.count_documents({}), 1000, "every document survived the restart")
    eq(db.kept.find_one({"_id": 999}), {"_id": 999, "sq": 998001}, "a document after the restart")
    eq(sorted(db.kept.index_information()), ["_id_", "sq_1"], "indexes survived the restart")
    raises(DuplicateKeyError, lambda: db.kept.insert_one({"sq": 4}), "the unique index still holds")
    with gridfs.GridFSBucket(db).open_download_stream_by_name("kept.bin") as down:
        ok(down.read() == payload(7, 2 * MIB + 3), "the GridFS file survived the restart")
    client.drop_database(PERSIST_DB)


def main(argv):
    if len(argv) not in (2, 3) or (len(argv) == 3 and argv[2] != "--after-restart"):
        print(__doc__, file=sys.stderr)
        return 2
    client = pymongo.MongoClient(argv[1], serverSelectionTimeoutMS=10_000)
    try:
        if len(argv) == 3:
            check_persisted(client)
        else:
            client.drop_database(DB)
            db = client[DB]
            crud(db)
            indexes_and_errors(db)
            bulk(db)
            grid(db)
            server_level(client, db)
            client.drop_database(DB)
            ok(DB not in client.list_database_names(), "drop_database")
            write_persisted(client)
    except Mismatch as e:
        print(f"pymongo smoke: FAILED after {checks} checks: {e}", file=sys.stderr)
        return 1
    finally:
        client.close()
    print(f"pymongo smoke (pymongo {pymongo.version}): {checks} checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
