// mongosh against docstore: the everyday shell workflow, each step checked against what MongoDB
// 7.0 answers. Run as `mongosh "$URI" --quiet --file mongosh_smoke.js`; any mismatch throws, and
// mongosh then exits non-zero with the message.

const DB = 'clients_mongosh';
let steps = 0;

// Compares through canonical Extended JSON so that BSON types (int32 vs double vs long) and
// field order count, as they do for a client reading MongoDB's replies.
function canon(value) {
  return EJSON.stringify(value, { relaxed: false });
}

function assertEq(actual, expected, what) {
  const a = canon(actual);
  const e = canon(expected);
  if (a !== e) {
    throw new Error(`mongosh smoke: ${what}\n  expected: ${e}\n  actual:   ${a}`);
  }
  steps += 1;
}

function assertTrue(condition, what) {
  if (!condition) {
    throw new Error(`mongosh smoke: ${what}`);
  }
  steps += 1;
}

// A count that MongoDB may send as int32, int64 or double, as a JS number.
function num(value) {
  return typeof value === 'number' ? value : Number(String(value));
}

// Runs `fn`, which must throw a server error with `code`; returns the error.
function expectError(fn, code, what) {
  let caught = null;
  try {
    fn();
  } catch (e) {
    caught = e;
  }
  assertTrue(caught !== null, `${what}: no error was raised`);
  assertEq(caught.code, code, `${what}: error code`);
  return caught;
}

// `use` switches the shell's current database, as typing `use clients_mongosh` does.
use(DB);
assertEq(db.getName(), DB, 'use() switches the current database');
db.dropDatabase();

// insertOne / insertMany
const one = db.items.insertOne({ _id: 1, sku: 'apple', qty: 5, price: 1.5, tags: ['fruit'] });
assertEq(one.acknowledged, true, 'insertOne is acknowledged');
assertEq(one.insertedId, 1, 'insertOne reports the inserted _id');

const many = db.items.insertMany([
  { _id: 2, sku: 'pear', qty: 3, price: 2.25, tags: ['fruit'] },
  { _id: 3, sku: 'leek', qty: 10, price: 0.75, tags: ['vegetable'] },
  { _id: 4, sku: 'kiwi', qty: 7, price: 3.0, tags: ['fruit', 'exotic'] },
  { _id: 5, sku: 'kale', qty: 1, price: 4.5, tags: ['vegetable'] },
]);
assertEq(many.acknowledged, true, 'insertMany is acknowledged');
assertEq(many.insertedIds, { 0: 2, 1: 3, 2: 4, 3: 5 }, 'insertMany reports every _id by position');

const generated = db.events.insertOne({ kind: 'created' });
assertTrue(generated.insertedId instanceof ObjectId, 'a missing _id is generated as an ObjectId');

// show dbs: the listDatabases command behind it
const dbs = db.adminCommand({ listDatabases: 1 });
assertEq(dbs.ok, 1, 'listDatabases succeeds');
const mine = dbs.databases.find((d) => d.name === DB);
assertTrue(mine !== undefined, `listDatabases lists ${DB}: ${canon(dbs.databases)}`);
assertEq(mine.empty, false, 'a database with documents is not empty');
assertTrue(num(mine.sizeOnDisk) > 0, `listDatabases reports sizeOnDisk: ${canon(mine)}`);
const names = db.adminCommand({ listDatabases: 1, nameOnly: true });
assertTrue(names.databases.some((d) => d.name === DB), 'listDatabases nameOnly lists the database');
assertTrue(db.getMongo().getDBNames().includes(DB), 'getDBNames includes the database');

// find with sort / limit / skip / projection
assertEq(
  db.items.find({}, { _id: 0, sku: 1, price: 1 }).sort({ price: -1 }).limit(2).toArray(),
  [{ sku: 'kale', price: 4.5 }, { sku: 'kiwi', price: 3.0 }],
  'find().sort({price: -1}).limit(2) returns the two dearest items',
);
assertEq(
  db.items.find({ tags: 'fruit' }).sort({ qty: 1 }).skip(1).limit(2).toArray(),
  [
    { _id: 1, sku: 'apple', qty: 5, price: 1.5, tags: ['fruit'] },
    { _id: 4, sku: 'kiwi', qty: 7, price: 3.0, tags: ['fruit', 'exotic'] },
  ],
  'find on an array field with sort/skip/limit returns whole documents',
);
assertEq(db.items.findOne({ sku: 'leek' }, { qty: 1 }), { _id: 3, qty: 10 }, 'findOne with projection');
assertEq(db.items.findOne({ sku: 'none' }), null, 'findOne with no match is null');

// A cursor larger than one batch: the shell fetches the rest with getMore.
db.bulk.insertMany(Array.from({ length: 250 }, (_, i) => ({ _id: i, n: i % 7 })));
const all = db.bulk.find().sort({ _id: 1 }).batchSize(40).toArray();
assertEq(all.length, 250, 'iterating a 250-document cursor in batches of 40 sees every document');
assertEq(all[249], { _id: 249, n: 249 % 7 }, 'the last batch ends with the last document');

// updateOne with $inc
const upd = db.items.updateOne({ sku: 'apple' }, { $inc: { qty: 3 } });
assertEq(
  [upd.acknowledged, upd.matchedCount, upd.modifiedCount, upd.upsertedCount, upd.insertedId],
  [true, 1, 1, 0, null],
  'updateOne $inc matches and modifies one document',
);
assertEq(db.items.findOne({ _id: 1 }).qty, 8, '$inc adds to the stored value and keeps it an int32');
const none = db.items.updateOne({ sku: 'plum' }, { $inc: { qty: 1 } });
assertEq([none.matchedCount, none.modifiedCount], [0, 0], 'updateOne with no match changes nothing');
const ups = db.items.updateOne({ _id: 6 }, { $set: { sku: 'plum' }, $inc: { qty: 2 } }, { upsert: true });
assertEq([ups.matchedCount, ups.modifiedCount, ups.upsertedCount, ups.insertedId], [0, 0, 1, 6],
  'updateOne with upsert inserts and reports the new _id');
// MongoDB (5.0 on) applies update operators to new fields in lexicographic order of their names.
assertEq(db.items.findOne({ _id: 6 }), { _id: 6, qty: 2, sku: 'plum' }, 'the upserted document');
const updMany = db.items.updateMany({ tags: 'vegetable' }, { $mul: { price: 2 } });
assertEq([updMany.matchedCount, updMany.modifiedCount], [2, 2], 'updateMany touches every match');

const fam = db.items.findOneAndUpdate({ _id: 2 }, { $inc: { qty: -1 } }, { returnDocument: 'after' });
assertEq(fam.qty, 2, 'findOneAndUpdate returns the document after the update');

// aggregate: $match / $group / $sort
assertEq(
  db.items.aggregate([
    { $match: { tags: { $exists: true } } },
    { $unwind: '$tags' },
    { $group: { _id: '$tags', items: { $sum: 1 }, qty: { $sum: '$qty' } } },
    { $sort: { items: -1, _id: 1 } },
  ]).toArray(),
  [
    { _id: 'fruit', items: 3, qty: 17 },
    { _id: 'vegetable', items: 2, qty: 11 },
    { _id: 'exotic', items: 1, qty: 7 },
  ],
  'aggregate groups by tag and sorts by count',
);
assertEq(
  db.items.aggregate([
    { $match: { price: { $gte: 2 } } },
    { $group: { _id: null, total: { $sum: { $multiply: ['$qty', '$price'] } }, n: { $count: {} } } },
    { $project: { _id: 0 } },
  ]).toArray(),
  // pear 2 * 2.25 + kiwi 7 * 3.0 + kale 1 * 9.0 (price doubled above)
  [{ total: 34.5, n: 3 }],
  'aggregate computes a total over the matched documents',
);

// createIndex (unique) / getIndexes
assertEq(db.items.createIndex({ sku: 1 }, { unique: true }), 'sku_1', 'createIndex returns the index name');
assertEq(db.items.createIndex({ qty: -1, price: 1 }, { name: 'by_qty_price' }), 'by_qty_price',
  'createIndex with an explicit name');
assertEq(
  db.items.getIndexes(),
  [
    { v: 2, key: { _id: 1 }, name: '_id_' },
    { v: 2, key: { sku: 1 }, name: 'sku_1', unique: true },
    { v: 2, key: { qty: -1, price: 1 }, name: 'by_qty_price' },
  ],
  'getIndexes lists the _id index and both new indexes',
);
assertEq(db.items.createIndex({ sku: 1 }, { unique: true }), 'sku_1', 'creating the same index again is a no-op');

// countDocuments / estimatedDocumentCount / distinct
assertEq(db.items.countDocuments(), 6, 'countDocuments counts every document');
assertEq(db.items.countDocuments({ qty: { $gt: 4 } }), 3, 'countDocuments with a filter');
assertEq(db.items.countDocuments({}, { skip: 2, limit: 3 }), 3, 'countDocuments with skip and limit');
assertEq(db.items.estimatedDocumentCount(), 6, 'estimatedDocumentCount');
assertEq(db.items.distinct('tags').sort(), ['exotic', 'fruit', 'vegetable'], 'distinct unwinds arrays');

// A duplicate key on the unique index: error 11000, and nothing written.
const dup = expectError(() => db.items.insertOne({ sku: 'apple' }), 11000, 'insertOne of a duplicate sku');
assertTrue(/E11000 duplicate key error/.test(dup.message), `duplicate key message: ${dup.message}`);
assertEq(dup.keyValue, { sku: 'apple' }, 'the duplicate key error names the key value');
const bulkDup = expectError(
  () => db.items.insertMany([{ _id: 10, sku: 'fig' }, { _id: 11, sku: 'fig' }, { _id: 12, sku: 'date' }]),
  11000,
  'ordered insertMany with a duplicate',
);
assertEq(bulkDup.result.insertedCount, 1, 'an ordered insertMany stops at the duplicate');
expectError(() => db.items.updateOne({ _id: 2 }, { $set: { sku: 'kiwi' } }), 11000, 'update into a duplicate sku');
assertEq(db.items.countDocuments(), 7, 'only the document before the duplicate was inserted');

// deleteOne / deleteMany
assertEq(db.items.deleteOne({ _id: 10 }).deletedCount, 1, 'deleteOne');
assertEq(db.items.deleteMany({ tags: 'vegetable' }).deletedCount, 2, 'deleteMany');

// The helpers an interactive session uses: show collections, db.stats()
assertEq(db.getCollectionNames(), ['bulk', 'events', 'items'], 'getCollectionNames (show collections)');
const stats = db.stats();
assertEq([stats.ok, stats.db], [1, DB], 'db.stats() succeeds for the database');
assertTrue(num(stats.collections) === 3 && num(stats.objects) === 255,
  `db.stats() counts collections and objects: ${canon(stats)}`);
const itemStats = db.items.stats();
assertEq([itemStats.ok, itemStats.ns, num(itemStats.count), num(itemStats.nindexes)], [1, `${DB}.items`, 4, 3],
  'db.items.stats() (the $collStats stage) counts documents and indexes');
assertEq(Object.keys(itemStats.indexSizes).sort(), ['_id_', 'by_qty_price', 'sku_1'], 'db.items.stats() names the indexes');
assertTrue(num(db.items.dataSize()) === num(itemStats.size) && num(itemStats.size) > 0,
  'db.items.dataSize() agrees with stats()');
assertTrue(num(db.items.totalIndexSize()) === num(itemStats.totalIndexSize),
  'db.items.totalIndexSize() agrees with stats()');
assertEq(num(db.getProfilingStatus().was), 0, 'db.getProfilingStatus() says the profiler is off');
assertEq(db.serverBuildInfo().version, '7.0.0', 'buildInfo reports the MongoDB version docstore answers as');
assertEq(db.runCommand({ ping: 1 }).ok, 1, 'ping');

// dropIndex / drop / dropDatabase
assertEq(db.items.dropIndex('by_qty_price').ok, 1, 'dropIndex by name');
assertEq(db.items.getIndexes().map((i) => i.name), ['_id_', 'sku_1'], 'the dropped index is gone');
assertEq(db.items.drop(), true, 'drop() of an existing collection is true');
// MongoDB 7.0 answers ok to dropping a collection that does not exist, so the shell says true.
assertEq(db.items.drop(), true, 'drop() of a missing collection succeeds');
assertEq(db.getCollectionNames(), ['bulk', 'events'], 'the dropped collection is no longer listed');
assertEq(db.dropDatabase().ok, 1, 'dropDatabase');
assertTrue(!db.getMongo().getDBNames().includes(DB), 'the dropped database is no longer listed');

print(`mongosh smoke: ${steps} checks passed`);
