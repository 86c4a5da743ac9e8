//! The `docstore` binary as a child process on a data directory, for tests that must kill it.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};

/// A `docstore` process on a data directory, killed (not stopped) on drop.
pub struct Process {
    child: Child,
    pub uri: String,
}

impl Process {
    pub fn start(dir: &Path) -> Process {
        let child = Command::new(env!("CARGO_BIN_EXE_docstore"))
            .args(["--dbpath", dir.to_str().unwrap(), "--port", "0"])
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("docstore binary starts");
        let mut process = Process {
            child,
            uri: String::new(),
        };
        let stdout = process.child.stdout.take().expect("piped stdout");
        let mut reader = BufReader::new(stdout);
        let mut line = String::new();
        loop {
            line.clear();
            if reader.read_line(&mut line).unwrap_or(0) == 0 {
                panic!("docstore exited before listening");
            }
            if let Some(pos) = line.find("mongodb://") {
                process.uri = line[pos..].trim().to_string();
                // Keep draining stdout so the process never blocks on a full pipe.
                std::thread::spawn(move || for _ in reader.lines() {});
                return process;
            }
        }
    }

    /// Resident set size in bytes, from `/proc/<pid>/status`.
    pub fn rss_bytes(&self) -> u64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id()))
            .expect("process status readable");
        status
            .lines()
            .find_map(|l| l.strip_prefix("VmRSS:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
            .expect("VmRSS line")
            * 1024
    }

    pub fn kill(mut self) {
        self.child.kill().expect("SIGKILL");
        self.child.wait().unwrap();
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
