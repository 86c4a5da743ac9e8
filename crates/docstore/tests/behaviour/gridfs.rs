//! GridFS through the driver: streamed multi-chunk upload, download by id and by name (latest
//! and earlier revisions), find, delete.

use crate::common::test_db;
use bson::{doc, Bson, Document};
use futures::io::{AsyncReadExt, AsyncWriteExt};
use futures::TryStreamExt;
use mongodb::gridfs::GridFsBucket;
use mongodb::options::{GridFsBucketOptions, GridFsDownloadByNameOptions};

fn bucket(db: &mongodb::Database) -> GridFsBucket {
    db.gridfs_bucket(
        GridFsBucketOptions::builder()
            .bucket_name("assets".to_string())
            .build(),
    )
}

/// Deterministic pseudo-random bytes, so a corruption anywhere shows up.
fn payload(len: usize, seed: u32) -> Vec<u8> {
    let mut x = seed.wrapping_mul(2654435761).max(1);
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            x as u8
        })
        .collect()
}

async fn upload(bucket: &GridFsBucket, name: &str, data: &[u8]) -> Bson {
    let mut stream = bucket.open_upload_stream(name).await.unwrap();
    // Write in uneven pieces so chunk boundaries fall mid-write.
    for piece in data.chunks(100_003) {
        stream.write_all(piece).await.unwrap();
    }
    stream.close().await.unwrap();
    stream.id().clone()
}

async fn download(bucket: &GridFsBucket, id: Bson) -> Vec<u8> {
    let mut stream = bucket.open_download_stream(id).await.unwrap();
    let mut out = Vec::new();
    stream.read_to_end(&mut out).await.unwrap();
    out
}

#[tokio::test]
async fn a_multi_chunk_file_round_trips_byte_for_byte() {
    let t = test_db().await;
    let b = bucket(&t.db);
    let data = payload(3 * 1024 * 1024 + 17, 1);
    let id = upload(&b, "cover.jpg", &data).await;
    assert_eq!(download(&b, id.clone()).await, data);
    let chunks =
        t.db.collection::<Document>("assets.chunks")
            .count_documents(doc! { "files_id": id.clone() })
            .await
            .unwrap();
    // 255 KiB default chunks.
    assert_eq!(chunks, (data.len() as u64).div_ceil(255 * 1024));
    let files: Vec<_> = b
        .find(doc! { "filename": "cover.jpg" })
        .await
        .unwrap()
        .try_collect()
        .await
        .unwrap();
    assert_eq!(files.len(), 1);
    assert_eq!(files[0].length, data.len() as u64);
}

#[tokio::test]
async fn download_by_name_gets_the_latest_revision_or_the_one_asked_for() {
    let t = test_db().await;
    let b = bucket(&t.db);
    let v0 = payload(1000, 2);
    let v1 = payload(300_000, 3);
    let v2 = payload(10, 4);
    upload(&b, "logo.png", &v0).await;
    upload(&b, "logo.png", &v1).await;
    upload(&b, "logo.png", &v2).await;
    let mut latest = Vec::new();
    b.open_download_stream_by_name("logo.png")
        .await
        .unwrap()
        .read_to_end(&mut latest)
        .await
        .unwrap();
    assert_eq!(latest, v2);
    let mut first = Vec::new();
    b.open_download_stream_by_name("logo.png")
        .with_options(GridFsDownloadByNameOptions::builder().revision(0).build())
        .await
        .unwrap()
        .read_to_end(&mut first)
        .await
        .unwrap();
    assert_eq!(first, v0);
    let mut second = Vec::new();
    b.open_download_stream_by_name("logo.png")
        .with_options(GridFsDownloadByNameOptions::builder().revision(-2).build())
        .await
        .unwrap()
        .read_to_end(&mut second)
        .await
        .unwrap();
    assert_eq!(second, v1);
}

#[tokio::test]
async fn delete_removes_the_file_and_its_chunks() {
    let t = test_db().await;
    let b = bucket(&t.db);
    let id = upload(&b, "gone.bin", &payload(600_000, 5)).await;
    let keep = upload(&b, "kept.bin", &payload(10, 6)).await;
    b.delete(id.clone()).await.unwrap();
    assert!(b.open_download_stream(id.clone()).await.is_err());
    let chunks = t.db.collection::<Document>("assets.chunks");
    assert_eq!(
        chunks
            .count_documents(doc! { "files_id": id })
            .await
            .unwrap(),
        0
    );
    assert_eq!(download(&b, keep).await, payload(10, 6));
}

#[tokio::test]
async fn an_empty_file_round_trips() {
    let t = test_db().await;
    let b = bucket(&t.db);
    let id = upload(&b, "empty", &[]).await;
    assert!(download(&b, id).await.is_empty());
}
