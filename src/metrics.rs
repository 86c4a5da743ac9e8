//! Operators' metrics, exposed at `/metrics` in Prometheus's text format (`health::metrics`).
//! Every metric Bazaar keeps is named here, once; the rest of the code records through the small
//! functions below, which cost one relaxed load and nothing else while metrics are off
//! (`metrics.token` unset, the default).
//!
//! Labels are bounded by construction: HTTP requests are labelled by route *template*
//! (`/products/{slug}`), never by the raw path; jobs, caches, leases and commands by names that
//! are fixed in the code.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::OnceLock;
use std::time::Duration;

use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusHandle};

static ENABLED: AtomicBool = AtomicBool::new(false);
static DB_COMMANDS_ENABLED: AtomicBool = AtomicBool::new(false);

/// Time database commands too (`metrics.database_commands`); call before connecting.
pub(crate) fn keep_database_commands() {
    DB_COMMANDS_ENABLED.store(true, Ordering::Relaxed);
}

/// True when database commands are timed (metrics kept and `metrics.database_commands` on).
pub(crate) fn database_commands_enabled() -> bool {
    enabled() && DB_COMMANDS_ENABLED.load(Ordering::Relaxed)
}
static HANDLE: OnceLock<PrometheusHandle> = OnceLock::new();

/// Latency buckets in seconds: 1 ms to 10 s, dense where pages live.
const SECONDS_BUCKETS: &[f64] = &[
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
];

/// Start keeping metrics in this process (once; later calls return the same handle). The
/// process-wide recorder is the `metrics` crate's design: any module records without a handle
/// being passed down to it.
pub(crate) fn install() -> Result<&'static PrometheusHandle, String> {
    if let Some(handle) = HANDLE.get() {
        return Ok(handle);
    }
    let recorder = PrometheusBuilder::new()
        .set_buckets_for_metric(Matcher::Suffix("_seconds".to_string()), SECONDS_BUCKETS)
        .map_err(|e| e.to_string())?
        .build_recorder();
    let handle = recorder.handle();
    // A second caller racing this one loses `set_global_recorder`; both then use the winner.
    if ::metrics::set_global_recorder(recorder).is_ok() {
        // Histogram samples are buffered until this folds them into the buckets: without it
        // they would pile up between scrapes (or forever, unscraped).
        let upkeep = handle.clone();
        let _ = std::thread::Builder::new()
            .name("metrics-upkeep".into())
            .spawn(move || loop {
                std::thread::sleep(Duration::from_secs(5));
                upkeep.run_upkeep();
            });
        let _ = HANDLE.set(handle);
    }
    ENABLED.store(true, Ordering::Relaxed);
    describe();
    HANDLE
        .get()
        .ok_or_else(|| "another metrics recorder is installed in this process".to_string())
}

/// True once [`install`] ran: callers with labels to build check this first.
pub(crate) fn enabled() -> bool {
    ENABLED.load(Ordering::Relaxed)
}

/// The text `/metrics` serves.
pub(crate) fn render() -> Option<String> {
    HANDLE.get().map(PrometheusHandle::render)
}

fn describe() {
    use ::metrics::{describe_counter, describe_gauge, describe_histogram, Unit};
    describe_counter!(
        HTTP_REQUESTS,
        "HTTP requests answered, by route template, method and status class"
    );
    describe_histogram!(
        HTTP_SECONDS,
        Unit::Seconds,
        "Time to answer an HTTP request, by route template"
    );
    describe_counter!(
        DB_COMMANDS,
        "Database commands sent, by command and outcome"
    );
    describe_histogram!(
        DB_SECONDS,
        Unit::Seconds,
        "Database command round-trip time, by command"
    );
    describe_counter!(
        CACHE_LOOKUPS,
        "Cache lookups, by cache and result (hit or miss)"
    );
    describe_counter!(
        CACHE_REFRESHES,
        "Cache entries loaded or refreshed from the database, by cache"
    );
    describe_counter!(CARTS_CREATED, "Carts created");
    describe_counter!(
        CARTS_EXPIRED,
        "Carts expired by the idle-cart job (stock returned)"
    );
    describe_counter!(ORDERS, "Orders placed");
    describe_counter!(PAYMENTS, "Payment attempts at checkout, by outcome");
    describe_counter!(
        REFUNDS,
        "Refunds issued for charges that did not become orders"
    );
    describe_counter!(JOB_RUNS, "Background job runs, by job and outcome");
    describe_histogram!(
        JOB_SECONDS,
        Unit::Seconds,
        "Background job run time, by job"
    );
    describe_counter!(
        LEASE_TAKEOVERS,
        "Leases taken over from another instance whose lease ran out"
    );
    describe_gauge!(STORE_DOCUMENTS, "Documents per collection");
    describe_gauge!(STORE_BYTES, Unit::Bytes, "Data bytes per collection");
    describe_gauge!(STORE_INDEX_BYTES, Unit::Bytes, "Index bytes per collection");
    describe_gauge!(
        JOURNAL_BYTES,
        Unit::Bytes,
        "Bytes in the embedded store's journal files"
    );
    describe_counter!(
        JOURNAL_COMMITS,
        "Group commits the embedded store has made (each one fsync)"
    );
    describe_gauge!(
        FSYNC_SECONDS_TOTAL,
        Unit::Seconds,
        "Time the embedded store spent in fsync"
    );
    describe_gauge!(
        SNAPSHOT_AGE,
        Unit::Seconds,
        "Age of the embedded store's newest snapshot"
    );
    describe_gauge!(
        WRITES_REFUSED,
        "1 while the embedded store refuses writes (a full or failing disk)"
    );
    describe_gauge!(PROCESS_RSS, Unit::Bytes, "Resident memory of the process");
    describe_gauge!(PROCESS_FDS, "Open file descriptors of the process");
    describe_gauge!(
        UPTIME,
        Unit::Seconds,
        "Seconds since this process started serving"
    );
    describe_counter!(
        EMAILS_SENT,
        "Emails the outbox sender handed to the mail server (or folder)"
    );
    describe_counter!(
        EMAIL_FAILURES,
        "Emails not sent, by what happens next (retrying or given_up)"
    );
    describe_gauge!(OUTBOX_BACKLOG, "Emails waiting in the outbox to be sent");
}

pub(crate) const HTTP_REQUESTS: &str = "bazaar_http_requests_total";
pub(crate) const HTTP_SECONDS: &str = "bazaar_http_request_duration_seconds";
pub(crate) const DB_COMMANDS: &str = "bazaar_db_commands_total";
pub(crate) const DB_SECONDS: &str = "bazaar_db_command_duration_seconds";
pub(crate) const CACHE_LOOKUPS: &str = "bazaar_cache_lookups_total";
pub(crate) const CACHE_REFRESHES: &str = "bazaar_cache_refreshes_total";
pub(crate) const CARTS_CREATED: &str = "bazaar_carts_created_total";
pub(crate) const CARTS_EXPIRED: &str = "bazaar_carts_expired_total";
pub(crate) const ORDERS: &str = "bazaar_orders_total";
pub(crate) const PAYMENTS: &str = "bazaar_payments_total";
pub(crate) const REFUNDS: &str = "bazaar_refunds_total";
pub(crate) const JOB_RUNS: &str = "bazaar_job_runs_total";
pub(crate) const JOB_SECONDS: &str = "bazaar_job_duration_seconds";
pub(crate) const LEASE_TAKEOVERS: &str = "bazaar_lease_takeovers_total";
pub(crate) const STORE_DOCUMENTS: &str = "bazaar_store_documents";
pub(crate) const STORE_BYTES: &str = "bazaar_store_data_bytes";
pub(crate) const STORE_INDEX_BYTES: &str = "bazaar_store_index_bytes";
pub(crate) const JOURNAL_BYTES: &str = "docstore_journal_bytes";
pub(crate) const JOURNAL_COMMITS: &str = "docstore_group_commits_total";
pub(crate) const FSYNC_SECONDS_TOTAL: &str = "docstore_fsync_seconds";
pub(crate) const SNAPSHOT_AGE: &str = "docstore_snapshot_age_seconds";
pub(crate) const WRITES_REFUSED: &str = "docstore_writes_refused";
pub(crate) const PROCESS_RSS: &str = "process_resident_memory_bytes";
pub(crate) const PROCESS_FDS: &str = "process_open_fds";
pub(crate) const UPTIME: &str = "bazaar_uptime_seconds";
pub(crate) const EMAILS_SENT: &str = "bazaar_emails_sent_total";
pub(crate) const EMAIL_FAILURES: &str = "bazaar_email_send_failures_total";
pub(crate) const OUTBOX_BACKLOG: &str = "bazaar_outbox_waiting";

/// Every metric name above, for checks that a dashboard or alert names only real ones.
pub const ALL: &[&str] = &[
    HTTP_REQUESTS,
    HTTP_SECONDS,
    DB_COMMANDS,
    DB_SECONDS,
    CACHE_LOOKUPS,
    CACHE_REFRESHES,
    CARTS_CREATED,
    CARTS_EXPIRED,
    ORDERS,
    PAYMENTS,
    REFUNDS,
    JOB_RUNS,
    JOB_SECONDS,
    LEASE_TAKEOVERS,
    STORE_DOCUMENTS,
    STORE_BYTES,
    STORE_INDEX_BYTES,
    JOURNAL_BYTES,
    JOURNAL_COMMITS,
    FSYNC_SECONDS_TOTAL,
    SNAPSHOT_AGE,
    WRITES_REFUSED,
    PROCESS_RSS,
    PROCESS_FDS,
    UPTIME,
    EMAILS_SENT,
    EMAIL_FAILURES,
    OUTBOX_BACKLOG,
];

/// One HTTP request answered. `route` is the matched route's template, or `"unmatched"`.
pub(crate) fn http_request(route: &str, method: &str, status: u16, took: Duration) {
    if !enabled() {
        return;
    }
    let class = match status {
        100..=199 => "1xx",
        200..=299 => "2xx",
        300..=399 => "3xx",
        400..=499 => "4xx",
        _ => "5xx",
    };
    // Methods outside the usual set would be a label per invented verb.
    let method: &'static str = match method {
        "GET" => "GET",
        "HEAD" => "HEAD",
        "POST" => "POST",
        "PUT" => "PUT",
        "DELETE" => "DELETE",
        "PATCH" => "PATCH",
        "OPTIONS" => "OPTIONS",
        _ => "other",
    };
    let route = route.to_string();
    ::metrics::counter!(HTTP_REQUESTS, "route" => route.clone(), "method" => method, "status" => class)
        .increment(1);
    ::metrics::histogram!(HTTP_SECONDS, "route" => route).record(took.as_secs_f64());
}

/// One database command answered (`ok`) or failed.
pub(crate) fn db_command(command: &str, ok: bool, took: Duration) {
    if !enabled() {
        return;
    }
    let command = command.to_string();
    let outcome = if ok { "ok" } else { "error" };
    ::metrics::counter!(DB_COMMANDS, "command" => command.clone(), "outcome" => outcome)
        .increment(1);
    ::metrics::histogram!(DB_SECONDS, "command" => command).record(took.as_secs_f64());
}

/// A lookup in one of the read caches (`"catalog"`, `"product"`, `"settings"`, `"content"`).
pub(crate) fn cache_lookup(cache: &'static str, hit: bool) {
    if enabled() {
        let result = if hit { "hit" } else { "miss" };
        ::metrics::counter!(CACHE_LOOKUPS, "cache" => cache, "result" => result).increment(1);
    }
}

/// A cache entry loaded or refreshed from the database.
pub(crate) fn cache_refresh(cache: &'static str) {
    if enabled() {
        ::metrics::counter!(CACHE_REFRESHES, "cache" => cache).increment(1);
    }
}

/// Adds `n` to one of the label-free counters ([`CARTS_CREATED`], [`ORDERS`], ...).
pub(crate) fn count(counter: &'static str, n: u64) {
    if enabled() && n > 0 {
        ::metrics::counter!(counter).increment(n);
    }
}

/// A payment attempt's outcome at checkout (`"charged"`, `"declined"`, `"failed"`).
pub(crate) fn payment(outcome: &'static str) {
    if enabled() {
        ::metrics::counter!(PAYMENTS, "outcome" => outcome).increment(1);
    }
}

/// An email the sender could not send: `"retrying"` later or `"given_up"`.
pub(crate) fn email_failure(next: &'static str) {
    if enabled() {
        ::metrics::counter!(EMAIL_FAILURES, "next" => next).increment(1);
    }
}

/// One run of a background job: `error` is why it failed, `None` when it succeeded. Counted in
/// the metrics (when kept) and, always, in this process's [`job_statuses`].
pub(crate) fn job_run(job: &'static str, error: Option<&str>, took: Duration) {
    if let Ok(mut jobs) = JOBS.lock() {
        let status = jobs.entry(job).or_default();
        status.runs += 1;
        status.last_run = Some(std::time::SystemTime::now());
        status.last_took = took;
        match error {
            None => status.last_error = None,
            Some(error) => {
                status.failures += 1;
                status.last_error = Some(error.chars().take(500).collect());
            }
        }
    }
    if enabled() {
        let outcome = if error.is_none() { "ok" } else { "error" };
        ::metrics::counter!(JOB_RUNS, "job" => job, "outcome" => outcome).increment(1);
        ::metrics::histogram!(JOB_SECONDS, "job" => job).record(took.as_secs_f64());
    }
}

/// What this process knows of one background job's runs.
#[derive(Debug, Clone, Default)]
pub(crate) struct JobStatus {
    pub(crate) runs: u64,
    pub(crate) failures: u64,
    pub(crate) last_run: Option<std::time::SystemTime>,
    pub(crate) last_took: Duration,
    /// Why the last run failed; `None` when it succeeded.
    pub(crate) last_error: Option<String>,
}

static JOBS: std::sync::Mutex<std::collections::BTreeMap<&'static str, JobStatus>> =
    std::sync::Mutex::new(std::collections::BTreeMap::new());

/// Every background job this process has run, by name.
pub(crate) fn job_statuses() -> Vec<(&'static str, JobStatus)> {
    JOBS.lock()
        .map(|jobs| jobs.iter().map(|(k, v)| (*k, v.clone())).collect())
        .unwrap_or_default()
}

/// A lease taken over from another instance whose lease had run out.
pub(crate) fn lease_takeover(lease: &str) {
    if enabled() {
        ::metrics::counter!(LEASE_TAKEOVERS, "lease" => lease.to_string()).increment(1);
    }
}

/// Sets a counter kept elsewhere (the embedded store's) to its current `value`, at scrape time.
pub(crate) fn counter_absolute(name: &'static str, value: u64) {
    if enabled() {
        ::metrics::counter!(name).absolute(value);
    }
}

/// Sets a gauge read at scrape time, with at most one label.
pub(crate) fn gauge(name: &'static str, label: Option<(&'static str, String)>, value: f64) {
    if !enabled() {
        return;
    }
    match label {
        Some((key, label)) => ::metrics::gauge!(name, key => label).set(value),
        None => ::metrics::gauge!(name).set(value),
    }
}

static STARTED: OnceLock<std::time::Instant> = OnceLock::new();

/// Note the moment this process started serving (the first call counts).
pub(crate) fn mark_started() {
    STARTED.get_or_init(std::time::Instant::now);
}

/// Time since [`mark_started`]; zero before it.
pub(crate) fn uptime() -> Duration {
    STARTED.get().map(|s| s.elapsed()).unwrap_or_default()
}
