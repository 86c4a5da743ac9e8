//! The `bazaar` binary as a child process, for the tests that must run the real thing (SIGKILL
//! it, run several at once): started with an environment of its own, its address read from the
//! line it prints once it serves, its log kept for the test to read.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::{mpsc, Arc, Mutex};
use std::time::Duration;

/// A `bazaar` process started but perhaps not serving yet (see [`Launched::wait`]), so several
/// can be started at the same moment.
pub struct Launched {
    child: Child,
    ready: mpsc::Receiver<String>,
    log: Arc<Mutex<Vec<String>>>,
}

/// A `bazaar` process that serves at `address`.
pub struct BazaarProcess {
    pub child: Child,
    /// `http://127.0.0.1:<port>` without a trailing slash.
    pub address: String,
    log: Arc<Mutex<Vec<String>>>,
}

/// Start the binary in `dir` with `env` on top of an environment without `RUST_LOG` and
/// `BAZAAR_CONFIG`.
pub fn launch<K, V>(dir: &Path, env: impl IntoIterator<Item = (K, V)>) -> Launched
where
    K: AsRef<std::ffi::OsStr>,
    V: AsRef<std::ffi::OsStr>,
{
    let mut child = Command::new(env!("CARGO_BIN_EXE_bazaar"))
        .current_dir(dir)
        .env_remove("RUST_LOG")
        .env_remove("BAZAAR_CONFIG")
        .envs(env)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the bazaar binary starts");
    let log = Arc::new(Mutex::new(Vec::new()));
    let stderr = child.stderr.take().expect("stderr");
    let lines = Arc::clone(&log);
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            lines.lock().expect("log").push(line);
        }
    });
    let stdout = child.stdout.take().expect("stdout");
    let (tx, ready) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if let Some(rest) = line.strip_prefix("Bazaar is running at ") {
                let _ = tx.send(rest.trim_end_matches('/').to_string());
            }
        }
    });
    Launched { child, ready, log }
}

impl Launched {
    /// Wait until it prints its address; panics with its log if it does not within `limit`.
    pub fn wait(mut self, limit: Duration) -> BazaarProcess {
        match self.ready.recv_timeout(limit) {
            Ok(address) => BazaarProcess {
                child: self.child,
                address,
                log: self.log,
            },
            Err(_) => {
                let _ = self.child.kill();
                panic!(
                    "bazaar did not print its address; its log:\n{}",
                    self.log.lock().expect("log").join("\n")
                );
            }
        }
    }
}

impl BazaarProcess {
    /// Everything it logged so far.
    pub fn log_text(&self) -> String {
        self.log.lock().expect("log").join("\n")
    }

    /// Log lines containing `text`.
    pub fn log_lines(&self, containing: &str) -> usize {
        self.log
            .lock()
            .expect("log")
            .iter()
            .filter(|l| l.contains(containing))
            .count()
    }

    /// SIGKILL: no request finishes, nothing is flushed.
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A test that fails (or forgets) leaves no server running behind it.
impl Drop for BazaarProcess {
    fn drop(&mut self) {
        self.kill();
    }
}
