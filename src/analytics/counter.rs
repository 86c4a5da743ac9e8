//! Counting page views off the request path: [`PageViewCounter::record`] puts a view in a bounded
//! queue without waiting (a full queue drops it and counts the drop), and one background task
//! gathers views for `analytics.flush_interval_ms`, then writes the batch as one `$inc` upsert
//! per report document: per page and day into `stats.daily`, per page and month into
//! `stats.monthly`. Stopping the counter writes what is still queued.
//!
//! Every view carries its own time, so tests drive exactly this path with chosen timestamps.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bson::{doc, Document};
use chrono::{DateTime, Datelike, Timelike, Utc};
use futures::stream::{self, StreamExt};
use futures::TryStreamExt;
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;

use super::{daily_id, metadata, monthly_id, Day, Month, DAILY, MONTHLY, OTHER_PATH};
use crate::config::AnalyticsSettings;
use crate::db::{Db, DbError};

/// A batch is written early once it holds this many views, whatever the flush interval.
const MAX_BATCH_VIEWS: u64 = 10_000;
/// Report upserts in flight at once while a batch is written.
const CONCURRENT_WRITES: usize = 16;
/// Days whose known paths the writer remembers (today, yesterday, and a little slack for
/// views queued across midnight).
const REMEMBERED_DAYS: usize = 3;

/// One page view: the normalised path and when it was served.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PageView {
    pub path: String,
    pub at: DateTime<Utc>,
}

/// What the counter has done since start-up (shown under Admin → Analytics).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CounterStats {
    /// Views accepted into the queue.
    pub queued: u64,
    /// Views dropped because the queue was full.
    pub dropped: u64,
    /// Views written to the reports.
    pub written: u64,
    /// Views lost because the database refused a report write.
    pub failed: u64,
}

#[derive(Default)]
struct Counts {
    queued: AtomicU64,
    dropped: AtomicU64,
    written: AtomicU64,
    failed: AtomicU64,
}

enum Control {
    /// Write everything queued so far, then answer.
    Flush(oneshot::Sender<()>),
    /// Write everything queued so far, answer and stop.
    Stop(oneshot::Sender<()>),
}

/// The handle pages use to count views; cheap to clone.
#[derive(Clone)]
pub struct PageViewCounter {
    views: mpsc::Sender<PageView>,
    control: mpsc::UnboundedSender<Control>,
    counts: Arc<Counts>,
    task: Arc<std::sync::Mutex<Option<JoinHandle<()>>>>,
}

impl PageViewCounter {
    /// Start the background writer on the current Tokio runtime.
    pub fn spawn(db: Db, settings: &AnalyticsSettings) -> PageViewCounter {
        let (views, view_rx) = mpsc::channel(settings.queue_capacity);
        let (control, control_rx) = mpsc::unbounded_channel();
        let counts = Arc::new(Counts::default());
        let writer = ReportWriter {
            db,
            max_paths_per_day: settings.max_paths_per_day,
            known_paths: BTreeMap::new(),
            counts: counts.clone(),
        };
        let task = tokio::spawn(run(writer, view_rx, control_rx, settings.flush_interval));
        PageViewCounter {
            views,
            control,
            counts,
            task: Arc::new(std::sync::Mutex::new(Some(task))),
        }
    }

    /// Queue one view of `path` at `at` without waiting. False when the queue is full (the view
    /// is dropped and counted as dropped) or the counter has stopped.
    pub fn record(&self, path: &str, at: DateTime<Utc>) -> bool {
        let view = PageView {
            path: path.to_string(),
            at,
        };
        match self.views.try_send(view) {
            Ok(()) => {
                self.counts.queued.fetch_add(1, Ordering::Relaxed);
                true
            }
            Err(_) => {
                self.counts.dropped.fetch_add(1, Ordering::Relaxed);
                false
            }
        }
    }

    /// Write every view queued before this call, and wait until it is written.
    pub async fn flush(&self) {
        let (done, wait) = oneshot::channel();
        if self.control.send(Control::Flush(done)).is_ok() {
            let _ = wait.await;
        }
    }

    /// Write what is queued and stop the writer; later views are dropped. Safe to call twice.
    pub async fn stop(&self) {
        let (done, wait) = oneshot::channel();
        if self.control.send(Control::Stop(done)).is_ok() {
            let _ = wait.await;
        }
        let task = self.task.lock().ok().and_then(|mut t| t.take());
        if let Some(task) = task {
            let _ = task.await;
        }
    }

    pub fn stats(&self) -> CounterStats {
        CounterStats {
            queued: self.counts.queued.load(Ordering::Relaxed),
            dropped: self.counts.dropped.load(Ordering::Relaxed),
            written: self.counts.written.load(Ordering::Relaxed),
            failed: self.counts.failed.load(Ordering::Relaxed),
        }
    }
}

/// The writer's loop: gather views until the interval passes (counted from the first view of
/// the batch), the batch is large, or a flush or stop is asked for; then write.
async fn run(
    mut writer: ReportWriter,
    mut views: mpsc::Receiver<PageView>,
    mut control: mpsc::UnboundedReceiver<Control>,
    interval: Duration,
) {
    let mut batch = Batch::default();
    let mut deadline: Option<tokio::time::Instant> = None;
    loop {
        let due = async {
            match deadline {
                Some(at) => tokio::time::sleep_until(at).await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            biased;
            command = control.recv() => {
                while let Ok(view) = views.try_recv() {
                    batch.add(&view);
                }
                writer.write(std::mem::take(&mut batch)).await;
                deadline = None;
                match command {
                    Some(Control::Flush(done)) => {
                        let _ = done.send(());
                    }
                    Some(Control::Stop(done)) => {
                        let _ = done.send(());
                        return;
                    }
                    None => return,
                }
            }
            view = views.recv() => match view {
                Some(view) => {
                    batch.add(&view);
                    deadline.get_or_insert_with(|| tokio::time::Instant::now() + interval);
                    if batch.views >= MAX_BATCH_VIEWS {
                        writer.write(std::mem::take(&mut batch)).await;
                        deadline = None;
                    }
                }
                None => {
                    writer.write(std::mem::take(&mut batch)).await;
                    return;
                }
            },
            () = due => {
                writer.write(std::mem::take(&mut batch)).await;
                deadline = None;
            }
        }
    }
}

/// One page's views on one day, by hour and by minute.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct DayTally {
    pub views: i64,
    /// Hour (0–23) → views.
    pub hours: BTreeMap<u32, i64>,
    /// (hour, minute) → views.
    pub minutes: BTreeMap<(u32, u32), i64>,
}

impl DayTally {
    fn add(&mut self, at: DateTime<Utc>, n: i64) {
        self.views += n;
        *self.hours.entry(at.hour()).or_default() += n;
        *self.minutes.entry((at.hour(), at.minute())).or_default() += n;
    }

    fn merge(&mut self, other: DayTally) {
        self.views += other.views;
        for (hour, n) in other.hours {
            *self.hours.entry(hour).or_default() += n;
        }
        for (minute, n) in other.minutes {
            *self.minutes.entry(minute).or_default() += n;
        }
    }

    /// The `$inc` of this tally on its daily document.
    pub fn daily_increments(&self) -> Document {
        let mut inc = doc! { "daily": self.views };
        for (hour, n) in &self.hours {
            inc.insert(format!("hourly.{hour}"), *n);
        }
        for ((hour, minute), n) in &self.minutes {
            inc.insert(format!("minute.{hour}.{minute}"), *n);
        }
        inc
    }
}

/// Views gathered since the last write, by (day, path).
#[derive(Debug, Default)]
pub struct Batch {
    pub tallies: HashMap<(Day, String), DayTally>,
    pub views: u64,
}

impl Batch {
    pub fn add(&mut self, view: &PageView) {
        let day = Day::from_date(view.at.date_naive());
        self.tallies
            .entry((day, view.path.clone()))
            .or_default()
            .add(view.at, 1);
        self.views += 1;
    }

    /// Per (month, path): day of month → views, from the daily tallies.
    pub fn monthly(&self) -> BTreeMap<(Month, String), BTreeMap<u32, i64>> {
        let mut months: BTreeMap<(Month, String), BTreeMap<u32, i64>> = BTreeMap::new();
        for ((day, path), tally) in &self.tallies {
            *months
                .entry((day.month(), path.clone()))
                .or_default()
                .entry(day.date().day())
                .or_default() += tally.views;
        }
        months
    }
}

/// Applies batches to the report collections, keeping each day's distinct paths under the cap.
struct ReportWriter {
    db: Db,
    max_paths_per_day: usize,
    /// Per day, the paths that already have a document (loaded from the database the first
    /// time a day is written, so a restart does not reset the cap).
    known_paths: BTreeMap<Day, HashSet<String>>,
    counts: Arc<Counts>,
}

impl ReportWriter {
    async fn write(&mut self, batch: Batch) {
        if batch.views == 0 {
            return;
        }
        let batch = match self.cap_paths(batch).await {
            Ok(batch) => batch,
            Err((e, views)) => {
                tracing::warn!(error = %e, views, "page views could not be counted");
                self.counts.failed.fetch_add(views, Ordering::Relaxed);
                return;
            }
        };
        // Each document's upsert is independent: several run at once so a batch touching many
        // pages is written in a fraction of the time one after another would take.
        let daily = self.db.collection::<Document>(DAILY);
        let writes: Vec<(Document, Document, u64)> = batch
            .tallies
            .iter()
            .map(|((day, path), tally)| {
                let update = doc! {
                    "$setOnInsert": { "metadata": metadata(day.start(), path) },
                    "$inc": tally.daily_increments(),
                };
                (
                    doc! { "_id": daily_id(*day, path) },
                    update,
                    tally.views as u64,
                )
            })
            .collect();
        let outcomes: Vec<(u64, Result<(), DbError>)> = stream::iter(writes)
            .map(|(filter, update, views)| {
                let daily = daily.clone();
                async move { (views, upsert(&daily, filter, update).await) }
            })
            .buffer_unordered(CONCURRENT_WRITES)
            .collect()
            .await;
        for (views, outcome) in outcomes {
            match outcome {
                Ok(()) => {
                    self.counts.written.fetch_add(views, Ordering::Relaxed);
                }
                Err(e) => {
                    tracing::warn!(error = %e, views, "page views could not be counted");
                    self.counts.failed.fetch_add(views, Ordering::Relaxed);
                }
            }
        }
        let monthly = self.db.collection::<Document>(MONTHLY);
        let writes: Vec<(Document, Document)> = batch
            .monthly()
            .into_iter()
            .map(|((month, path), days)| {
                let mut inc = doc! { "total": days.values().sum::<i64>() };
                for (day, n) in days {
                    inc.insert(format!("daily.{day}"), n);
                }
                let update = doc! {
                    "$setOnInsert": { "metadata": metadata(month.start(), &path) },
                    "$inc": inc,
                };
                (doc! { "_id": monthly_id(month, &path) }, update)
            })
            .collect();
        let outcomes: Vec<Result<(), DbError>> = stream::iter(writes)
            .map(|(filter, update)| {
                let monthly = monthly.clone();
                async move { upsert(&monthly, filter, update).await }
            })
            .buffer_unordered(CONCURRENT_WRITES)
            .collect()
            .await;
        for e in outcomes.into_iter().filter_map(Result::err) {
            tracing::warn!(error = %e, "a monthly page-view report could not be updated");
        }
    }

    /// The batch with every path beyond the day's cap counted under [`OTHER_PATH`].
    async fn cap_paths(&mut self, batch: Batch) -> Result<Batch, (DbError, u64)> {
        let mut capped = Batch {
            tallies: HashMap::with_capacity(batch.tallies.len()),
            views: batch.views,
        };
        // In path order, so which new paths still fit under the cap does not depend on hashing.
        let mut entries: Vec<((Day, String), DayTally)> = batch.tallies.into_iter().collect();
        entries.sort_by(|a, b| a.0.cmp(&b.0));
        for ((day, path), tally) in entries {
            if !self.known_paths.contains_key(&day) {
                let known = self
                    .paths_with_reports(day)
                    .await
                    .map_err(|e| (e, capped.views))?;
                self.known_paths.insert(day, known);
                while self.known_paths.len() > REMEMBERED_DAYS {
                    self.known_paths.pop_first();
                }
            }
            let known = self.known_paths.entry(day).or_default();
            let path = if path == OTHER_PATH || known.contains(&path) {
                path
            } else if known.len() < self.max_paths_per_day {
                known.insert(path.clone());
                path
            } else {
                OTHER_PATH.to_string()
            };
            capped.tallies.entry((day, path)).or_default().merge(tally);
        }
        Ok(capped)
    }

    /// Paths (other than the catch-all) that have a daily document for `day`, up to the cap.
    async fn paths_with_reports(&self, day: Day) -> Result<HashSet<String>, DbError> {
        let (filter, _) = super::report::day_pages_query(day);
        let docs: Vec<Document> = self
            .db
            .collection::<Document>(DAILY)
            .find(filter)
            .projection(doc! { "_id": 0, "metadata.path": 1 })
            .limit(self.max_paths_per_day as i64 + 1)
            .await?
            .try_collect()
            .await?;
        Ok(docs
            .iter()
            .filter_map(|d| d.get_document("metadata").ok())
            .filter_map(|m| m.get_str("path").ok())
            .filter(|p| *p != OTHER_PATH)
            .map(str::to_string)
            .collect())
    }
}

/// One `$inc` upsert; a second writer creating the same document at the same moment makes the
/// first attempt fail with a duplicate key, and the retry then updates the document it created.
async fn upsert(
    collection: &mongodb::Collection<Document>,
    filter: Document,
    update: Document,
) -> Result<(), DbError> {
    let mut attempts = 0;
    loop {
        attempts += 1;
        match collection
            .update_one(filter.clone(), update.clone())
            .upsert(true)
            .await
        {
            Ok(_) => return Ok(()),
            Err(e) if attempts < 2 && crate::db::is_duplicate_key(&e) => continue,
            Err(e) => return Err(e.into()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    fn at(d: u32, h: u32, m: u32) -> DateTime<Utc> {
        Utc.with_ymd_and_hms(2026, 11, d, h, m, 7)
            .single()
            .expect("valid")
    }

    #[test]
    fn a_batch_tallies_views_by_day_hour_and_minute() {
        let mut batch = Batch::default();
        for (path, time) in [
            ("/a", at(21, 9, 5)),
            ("/a", at(21, 9, 5)),
            ("/a", at(21, 23, 59)),
            ("/b", at(21, 9, 6)),
            ("/a", at(22, 0, 0)),
        ] {
            batch.add(&PageView {
                path: path.into(),
                at: time,
            });
        }
        assert_eq!(batch.views, 5);
        let day = Day::parse("2026-11-21").expect("valid");
        let a = &batch.tallies[&(day, "/a".to_string())];
        assert_eq!(
            a.daily_increments(),
            doc! { "daily": 3_i64, "hourly.9": 2_i64, "hourly.23": 1_i64,
            "minute.9.5": 2_i64, "minute.23.59": 1_i64 }
        );
        let months = batch.monthly();
        let month = day.month();
        assert_eq!(
            months[&(month, "/a".to_string())],
            BTreeMap::from([(21, 3), (22, 1)])
        );
        assert_eq!(
            months[&(month, "/b".to_string())],
            BTreeMap::from([(21, 1)])
        );
    }
}
