//! Progress of the long commands (`seed --products`, `backup`, `restore`, `migrate`, `repair`)
//! on standard error. On a terminal: an indicatif bar redrawn in place (count, rate, ETA), or a
//! spinner with the elapsed time for a step whose size Bazaar cannot see (the store writes a
//! backup in one command). Otherwise nothing is redrawn: a counted task writes a line at every
//! tenth of the way and a step a line every [`STEP_LINE_EVERY`], so the logs of unattended runs
//! show the progress too.

use std::io::IsTerminal;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressState, ProgressStyle};

/// How often a step that is not on a terminal says it is still going.
pub(crate) const STEP_LINE_EVERY: Duration = Duration::from_secs(30);

/// A counted task: `done` of `total` units.
pub(crate) struct Progress {
    bar: Option<ProgressBar>,
    log: bool,
    unit: String,
    total: u64,
    done: u64,
    last_tenth: u64,
    started: Instant,
}

impl Progress {
    /// Counting `total` `unit`s ("products", "documents"): a bar on a terminal, tenths in a log.
    pub(crate) fn counting(total: u64, unit: &str) -> Progress {
        let terminal = std::io::stderr().is_terminal();
        let bar = terminal.then(|| {
            let bar = ProgressBar::with_draw_target(Some(total), ProgressDrawTarget::stderr());
            bar.set_style(
                ProgressStyle::with_template(&format!(
                    "[{{bar:40}}] {{pos}}/{{len}} {unit} ({{percent}}%) · {{rate}} · \
                     {{elapsed}} elapsed, ETA {{eta}} {{msg}}"
                ))
                .unwrap_or_else(|_| ProgressStyle::default_bar())
                .with_key(
                    "rate",
                    |state: &ProgressState, w: &mut dyn std::fmt::Write| {
                        let _ = write!(w, "{:.0}/s", state.per_sec());
                    },
                )
                .progress_chars("#> "),
            );
            bar
        });
        Progress {
            bar,
            log: !terminal,
            unit: unit.to_string(),
            total,
            done: 0,
            last_tenth: 0,
            started: Instant::now(),
        }
    }

    /// No output at all (library callers, tests).
    pub(crate) fn hidden() -> Progress {
        Progress {
            bar: None,
            log: false,
            unit: String::new(),
            total: 0,
            done: 0,
            last_tenth: 0,
            started: Instant::now(),
        }
    }

    /// What is being worked on now (a collection's name), shown on the bar.
    pub(crate) fn set_message(&self, message: &str) {
        if let Some(bar) = &self.bar {
            bar.set_message(message.to_string());
        }
    }

    /// `n` more units done.
    pub(crate) fn inc(&mut self, n: u64) {
        self.set_position(self.done + n);
    }

    /// `done` units done in all.
    pub(crate) fn set_position(&mut self, done: u64) {
        self.done = done;
        if let Some(bar) = &self.bar {
            bar.set_position(done);
        }
        if self.log && self.total > 0 {
            let tenth = done.min(self.total) * 10 / self.total;
            if tenth > self.last_tenth {
                self.last_tenth = tenth;
                eprintln!("{}", self.line());
            }
        }
    }

    /// Units done so far.
    pub(crate) fn position(&self) -> u64 {
        self.done
    }

    /// `1200/12000 products (10%), 4 s, 300/s`
    fn line(&self) -> String {
        let elapsed = self.started.elapsed();
        let total = self.total.max(1);
        let rate = self.done as f64 / elapsed.as_secs_f64().max(0.001);
        format!(
            "{}/{} {} ({}%), {} s, {rate:.0}/s",
            self.done,
            self.total,
            self.unit,
            self.done.min(total) * 100 / total,
            elapsed.as_secs()
        )
    }

    /// The bar stays on screen with its final count.
    pub(crate) fn finish(self) {
        if let Some(bar) = &self.bar {
            bar.finish();
        }
    }
}

/// A step of unknown size: a spinner with the elapsed time on a terminal, otherwise a line
/// every [`STEP_LINE_EVERY`] while it lasts. Ends when dropped.
pub(crate) struct Step {
    bar: Option<ProgressBar>,
    stop: Option<mpsc::Sender<()>>,
    ticker: Option<std::thread::JoinHandle<()>>,
}

impl Step {
    /// Start showing `what` ("writing the backup").
    pub(crate) fn start(what: &str) -> Step {
        if std::io::stderr().is_terminal() {
            let bar = ProgressBar::with_draw_target(None, ProgressDrawTarget::stderr());
            bar.set_style(
                ProgressStyle::with_template("{spinner} {msg} ({elapsed})")
                    .unwrap_or_else(|_| ProgressStyle::default_spinner()),
            );
            bar.set_message(what.to_string());
            bar.enable_steady_tick(Duration::from_millis(120));
            return Step {
                bar: Some(bar),
                stop: None,
                ticker: None,
            };
        }
        Step::logging(what, STEP_LINE_EVERY)
    }

    /// Off a terminal: a line every `every` until dropped.
    fn logging(what: &str, every: Duration) -> Step {
        let (stop, stopped) = mpsc::channel::<()>();
        let what = what.to_string();
        let started = Instant::now();
        let ticker = std::thread::spawn(move || {
            while let Err(mpsc::RecvTimeoutError::Timeout) = stopped.recv_timeout(every) {
                eprintln!("{what}: still running, {} s", started.elapsed().as_secs());
            }
        });
        Step {
            bar: None,
            stop: Some(stop),
            ticker: Some(ticker),
        }
    }
}

impl Drop for Step {
    fn drop(&mut self) {
        if let Some(bar) = &self.bar {
            bar.finish_and_clear();
        }
        // Dropping the sender wakes the ticker at once.
        self.stop.take();
        if let Some(ticker) = self.ticker.take() {
            let _ = ticker.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_log_line_counts_units_and_percent() {
        let mut progress = Progress::hidden();
        progress.total = 200;
        progress.unit = "documents".into();
        progress.set_position(50);
        let line = progress.line();
        assert!(line.starts_with("50/200 documents (25%), "), "{line}");
        assert!(line.ends_with("/s"), "{line}");
    }

    #[test]
    fn a_step_off_a_terminal_ends_as_soon_as_it_is_dropped() {
        let started = Instant::now();
        drop(Step::logging("test", Duration::from_secs(60)));
        assert!(started.elapsed() < Duration::from_secs(5));
    }
}
