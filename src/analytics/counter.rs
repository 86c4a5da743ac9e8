//! Counting page views off the request path. [`PageViewCounter::record`] adds a view to a
//! tally shared with the writer, without waiting and without waking anything: each thread adds
//! to its own shard of (path → minute → views) under an uncontended lock, so a page pays for a
//! counter increment (and a path allocation the first time a path is seen in a batch), not for
//! a queued message and a cross-thread wake-up per view. At most `analytics.queue_capacity` views
//! wait to be written; beyond that a view is dropped and the drop counted.
//!
//! One background task takes the shards every `analytics.flush_interval_ms` (sooner when many
//! views wait), and writes the batch as one `$inc` upsert per report document: per page and day
//! into `stats.daily`, per page and month into `stats.monthly`. The upserts of a batch travel
//! as one multi-statement `update` command per collection (in chunks), not one round trip each.
//! Stopping the counter writes what is still waiting.
//!
//! Every view carries its own time, so tests drive exactly this path with chosen timestamps.

use std::cell::Cell;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bson::{doc, Bson, Document};
use chrono::{DateTime, Datelike, Timelike, Utc};
use futures::TryStreamExt;
use tokio::sync::{mpsc, oneshot, Notify};
use tokio::task::JoinHandle;

use super::{daily_id, metadata, monthly_id, Day, Month, DAILY, MONTHLY, OTHER_PATH};
use crate::config::AnalyticsSettings;
use crate::db::{Db, DbError};

/// Shards of the shared tally; each thread sticks to one, so page threads rarely share a lock.
const SHARDS: usize = 8;
/// Upsert statements per `update` command (MongoDB accepts up to 100 000 per command; this keeps
/// each command well under the 16 MB message limit whatever the paths).
const STATEMENTS_PER_COMMAND: usize = 1_000;
/// MongoDB's duplicate key error code.
const DUPLICATE_KEY: i32 = 11000;
/// Days whose known paths the writer remembers (today, yesterday, and a little slack for
/// views queued across midnight).
const REMEMBERED_DAYS: usize = 3;

/// One page view: the normalised path and when it was served.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PageView {
    pub(crate) path: String,
    pub(crate) at: DateTime<Utc>,
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

/// Views waiting for the writer: path → (minute, views), in the order the
/// minutes were first seen (a path's views of one batch fall in one or two minutes, so a short
/// list searched from its end beats a map).
type Pending = HashMap<String, Vec<(DateTime<Utc>, u64)>>;

#[derive(Default)]
struct Shard {
    views: Pending,
    /// Set when the writer has stopped: nothing added any more would ever be written.
    closed: bool,
}

/// What the page threads and the writer share.
struct Shared {
    shards: [Mutex<Shard>; SHARDS],
    /// Views recorded and not yet taken by the writer.
    waiting: AtomicU64,
    /// At most this many views wait; more are dropped.
    capacity: u64,
    /// When this many views (half the capacity) wait, the writer is woken before its interval
    /// is up. A batch's size is bounded by its distinct pages and minutes, not by its views, so
    /// waiting longer only makes each write count more views.
    early_write_at: u64,
    /// Wakes the writer for an early write.
    early: Notify,
    counts: Counts,
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
    shared: Arc<Shared>,
    control: mpsc::UnboundedSender<Control>,
    task: Arc<Mutex<Option<JoinHandle<()>>>>,
    /// The database's clock ([`Db::clock`]), which views are counted at, so a test stepping it
    /// counts them in the stepped hour, as the traffic log's events are.
    clock: Arc<dyn crate::clock::Clock>,
}

/// The shard this thread adds to, chosen once per thread in turn.
fn shard_index() -> usize {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    thread_local! {
        static SHARD: Cell<Option<usize>> = const { Cell::new(None) };
    }
    SHARD.with(|s| {
        s.get().unwrap_or_else(|| {
            let i = NEXT.fetch_add(1, Ordering::Relaxed) % SHARDS;
            s.set(Some(i));
            i
        })
    })
}

impl PageViewCounter {
    /// Start the background writer on the current Tokio runtime.
    pub(crate) fn spawn(db: Db, settings: &AnalyticsSettings) -> PageViewCounter {
        let capacity = settings.queue_capacity as u64;
        let shared = Arc::new(Shared {
            shards: Default::default(),
            waiting: AtomicU64::new(0),
            capacity,
            early_write_at: (capacity / 2).max(1),
            early: Notify::new(),
            counts: Counts::default(),
        });
        let (control, control_rx) = mpsc::unbounded_channel();
        let clock = db.clock();
        let writer = ReportWriter {
            db,
            max_paths_per_day: settings.max_paths_per_day,
            known_paths: BTreeMap::new(),
            shared: shared.clone(),
        };
        let task = tokio::spawn(run(writer, control_rx, settings.flush_interval));
        PageViewCounter {
            shared,
            control,
            task: Arc::new(Mutex::new(Some(task))),
            clock,
        }
    }

    /// The time a view happening now is counted at: the database's clock.
    pub(crate) fn now(&self) -> DateTime<Utc> {
        self.clock.now().to_chrono()
    }

    /// Count one view of `path` at `at` without waiting. False when the queue is full (the view
    /// is dropped and counted as dropped) or the counter has stopped.
    pub fn record(&self, path: &str, at: DateTime<Utc>) -> bool {
        let shared = &*self.shared;
        let waiting = shared.waiting.fetch_add(1, Ordering::AcqRel);
        if waiting >= shared.capacity || !self.add(path, at) {
            shared.waiting.fetch_sub(1, Ordering::AcqRel);
            shared.counts.dropped.fetch_add(1, Ordering::Relaxed);
            return false;
        }
        shared.counts.queued.fetch_add(1, Ordering::Relaxed);
        if waiting + 1 == shared.early_write_at {
            shared.early.notify_one();
        }
        true
    }

    /// Add the view to this thread's shard; false once the writer has stopped.
    fn add(&self, path: &str, at: DateTime<Utc>) -> bool {
        // Only the minute matters to the reports; a valid time always has a second 0.
        let minute = at
            .with_second(0)
            .and_then(|t| t.with_nanosecond(0))
            .unwrap_or(at);
        let Ok(mut shard) = self.shared.shards[shard_index()].lock() else {
            return false;
        };
        if shard.closed {
            return false;
        }
        match shard.views.get_mut(path) {
            Some(minutes) => match minutes.iter_mut().rev().find(|(m, _)| *m == minute) {
                Some((_, n)) => *n += 1,
                None => minutes.push((minute, 1)),
            },
            None => {
                shard.views.insert(path.to_string(), vec![(minute, 1)]);
            }
        }
        true
    }

    /// Write every view queued before this call, and wait until it is written.
    pub async fn flush(&self) {
        let (done, wait) = oneshot::channel();
        if self.control.send(Control::Flush(done)).is_ok() {
            let _ = wait.await;
        }
    }

    /// Write what is queued and stop the writer; later views are dropped. Safe to call twice.
    pub(crate) async fn stop(&self) {
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
        let counts = &self.shared.counts;
        CounterStats {
            queued: counts.queued.load(Ordering::Relaxed),
            dropped: counts.dropped.load(Ordering::Relaxed),
            written: counts.written.load(Ordering::Relaxed),
            failed: counts.failed.load(Ordering::Relaxed),
        }
    }
}

impl Shared {
    /// Everything waiting, as one batch; `close` also refuses any later view (the writer is
    /// stopping).
    fn take(&self, close: bool) -> Batch {
        let mut batch = Batch::default();
        for shard in &self.shards {
            let views = match shard.lock() {
                Ok(mut shard) => {
                    shard.closed |= close;
                    std::mem::take(&mut shard.views)
                }
                Err(poisoned) => {
                    let mut shard = poisoned.into_inner();
                    shard.closed |= close;
                    std::mem::take(&mut shard.views)
                }
            };
            for (path, minutes) in views {
                for (minute, n) in minutes {
                    batch.add_views(&path, minute, n);
                }
            }
        }
        self.waiting.fetch_sub(batch.views, Ordering::AcqRel);
        batch
    }
}

/// The writer's loop: every interval, when many views wait, or when a flush or stop is asked
/// for, take what waits and write it.
async fn run(
    mut writer: ReportWriter,
    mut control: mpsc::UnboundedReceiver<Control>,
    interval: Duration,
) {
    let shared = writer.shared.clone();
    let mut ticks = tokio::time::interval_at(tokio::time::Instant::now() + interval, interval);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            biased;
            command = control.recv() => {
                let stopping = !matches!(command, Some(Control::Flush(_)));
                writer.write(shared.take(stopping)).await;
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
            () = shared.early.notified() => writer.write(shared.take(false)).await,
            _ = ticks.tick() => writer.write(shared.take(false)).await,
        }
    }
}

/// One page's views on one day, by hour and by minute.
#[derive(Debug, Default, Clone, PartialEq)]
pub(crate) struct DayTally {
    pub(crate) views: i64,
    /// Hour (0–23) → views.
    pub(crate) hours: BTreeMap<u32, i64>,
    /// (hour, minute) → views.
    pub(crate) minutes: BTreeMap<(u32, u32), i64>,
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
    pub(crate) fn daily_increments(&self) -> Document {
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
pub(crate) struct Batch {
    pub(crate) tallies: HashMap<(Day, String), DayTally>,
    pub(crate) views: u64,
}

impl Batch {
    #[cfg(test)]
    pub(crate) fn add(&mut self, view: &PageView) {
        self.add_views(&view.path, view.at, 1);
    }

    /// `n` views of `path` at `at`.
    pub(crate) fn add_views(&mut self, path: &str, at: DateTime<Utc>, n: u64) {
        let day = Day::from_date(at.date_naive());
        self.tallies
            .entry((day, path.to_string()))
            .or_default()
            .add(at, n as i64);
        self.views += n;
    }

    /// Per (month, path): day of month → views, from the daily tallies.
    pub(crate) fn monthly(&self) -> BTreeMap<(Month, String), BTreeMap<u32, i64>> {
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
    shared: Arc<Shared>,
}

impl ReportWriter {
    async fn write(&mut self, batch: Batch) {
        if batch.views == 0 {
            return;
        }
        let shared = self.shared.clone();
        let counts = &shared.counts;
        let batch = match self.cap_paths(batch).await {
            Ok(batch) => batch,
            Err((e, views)) => {
                tracing::warn!(error = %e, views, "page views could not be counted");
                counts.failed.fetch_add(views, Ordering::Relaxed);
                return;
            }
        };
        let daily: Vec<Upsert> = batch
            .tallies
            .iter()
            .map(|((day, path), tally)| Upsert {
                id: daily_id(*day, path),
                metadata: metadata(day.start(), path),
                inc: tally.daily_increments(),
                views: tally.views as u64,
            })
            .collect();
        let (written, failed) = upsert_all(&self.db, DAILY, daily).await;
        counts.written.fetch_add(written, Ordering::Relaxed);
        counts.failed.fetch_add(failed, Ordering::Relaxed);
        let monthly: Vec<Upsert> = batch
            .monthly()
            .into_iter()
            .map(|((month, path), days)| {
                let total: i64 = days.values().sum();
                let mut inc = doc! { "total": total };
                for (day, n) in days {
                    inc.insert(format!("daily.{day}"), n);
                }
                Upsert {
                    id: monthly_id(month, &path),
                    metadata: metadata(month.start(), &path),
                    inc,
                    views: total as u64,
                }
            })
            .collect();
        let (_, failed) = upsert_all(&self.db, MONTHLY, monthly).await;
        if failed > 0 {
            tracing::warn!(
                views = failed,
                "monthly page-view reports could not be updated"
            );
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

/// One report document's `$inc` for a batch, created with its `metadata` if missing.
struct Upsert {
    id: String,
    metadata: Document,
    inc: Document,
    /// The page views it counts.
    views: u64,
}

impl Upsert {
    fn statement(&self) -> Document {
        doc! {
            "q": { "_id": &self.id },
            "u": { "$setOnInsert": { "metadata": &self.metadata }, "$inc": &self.inc },
            "upsert": true,
        }
    }
}

/// Apply `upserts` to `collection` as multi-statement `update` commands (unordered, so one
/// refused statement does not hold back the others; each document's `$inc` is still atomic).
/// A second writer creating the same document at the same moment makes a statement fail with a
/// duplicate key; such statements are sent once more, and then update the document that now
/// exists. Returns the views written and the views lost.
async fn upsert_all(db: &Db, collection: &str, upserts: Vec<Upsert>) -> (u64, u64) {
    let (mut written, mut failed) = (0, 0);
    let mut pending = upserts;
    for attempt in 1..=2 {
        let mut retry = Vec::new();
        while !pending.is_empty() {
            let rest = pending.split_off(pending.len().min(STATEMENTS_PER_COMMAND));
            let chunk = std::mem::replace(&mut pending, rest);
            let views: u64 = chunk.iter().map(|u| u.views).sum();
            let command = doc! {
                "update": collection,
                "updates": chunk.iter().map(|u| Bson::Document(u.statement())).collect::<Vec<_>>(),
                "ordered": false,
            };
            let reply = match db.database().run_command(command).await {
                Ok(reply) => reply,
                Err(e) => {
                    tracing::warn!(error = %e, collection, views, "page views could not be counted");
                    failed += views;
                    continue;
                }
            };
            let mut refused = vec![false; chunk.len()];
            for error in reply.get_array("writeErrors").into_iter().flatten() {
                let Some(error) = error.as_document() else {
                    continue;
                };
                let index = match error.get("index") {
                    Some(Bson::Int32(i)) => *i as usize,
                    Some(Bson::Int64(i)) => *i as usize,
                    _ => continue,
                };
                if index < refused.len() {
                    refused[index] = true;
                    if error.get_i32("code") != Ok(DUPLICATE_KEY) || attempt == 2 {
                        tracing::warn!(
                            collection,
                            error = error.get_str("errmsg").unwrap_or("refused"),
                            "page views could not be counted"
                        );
                    }
                }
            }
            for (upsert, refused) in chunk.into_iter().zip(refused) {
                if !refused {
                    written += upsert.views;
                } else if attempt == 1 {
                    retry.push(upsert);
                } else {
                    failed += upsert.views;
                }
            }
        }
        pending = retry;
    }
    (written, failed)
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
