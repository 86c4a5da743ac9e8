//! A small SMTP server for the email tests: it speaks real SMTP over TCP on loopback (greeting,
//! EHLO/HELO, MAIL, RCPT, DATA with dot-unstuffing, RSET, NOOP, QUIT) and keeps every message
//! it accepts. It can be stopped and started again on the same port (the "mail server down"
//! tests), and told to answer DATA with a permanent refusal.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::{TcpListener, TcpStream};

/// One accepted message.
#[derive(Debug, Clone)]
pub struct Received {
    pub from: String,
    pub to: Vec<String>,
    /// The message as sent, CRLF line ends, dot-stuffing removed.
    pub data: Vec<u8>,
}

#[derive(Default)]
struct Shared {
    received: Mutex<Vec<Received>>,
    refuse: AtomicBool,
}

pub struct SmtpSink {
    pub port: u16,
    shared: Arc<Shared>,
    task: Option<tokio::task::JoinHandle<()>>,
}

impl SmtpSink {
    /// A sink listening on a free loopback port.
    pub async fn start() -> SmtpSink {
        let mut sink = SmtpSink {
            port: 0,
            shared: Arc::default(),
            task: None,
        };
        sink.listen(0).await;
        sink
    }

    async fn listen(&mut self, port: u16) {
        let listener = TcpListener::bind(("127.0.0.1", port))
            .await
            .expect("the SMTP sink binds");
        self.port = listener.local_addr().expect("bound").port();
        let shared = self.shared.clone();
        self.task = Some(tokio::spawn(async move {
            loop {
                let Ok((stream, _)) = listener.accept().await else {
                    continue;
                };
                let shared = shared.clone();
                tokio::spawn(async move {
                    let _ = session(stream, shared).await;
                });
            }
        }));
    }

    /// Stop listening: connections are refused until [`SmtpSink::resume`].
    pub async fn stop(&mut self) {
        if let Some(task) = self.task.take() {
            task.abort();
            let _ = task.await;
        }
    }

    /// Listen again on the same port.
    pub async fn resume(&mut self) {
        let port = self.port;
        for _ in 0..50 {
            if std::net::TcpListener::bind(("127.0.0.1", port)).is_ok() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        self.listen(port).await;
    }

    /// Answer every DATA with `554` (a permanent refusal) while `refuse` is true.
    pub fn refuse(&self, refuse: bool) {
        self.shared.refuse.store(refuse, Ordering::SeqCst);
    }

    pub fn received(&self) -> Vec<Received> {
        self.shared.received.lock().unwrap().clone()
    }

    /// Wait until at least `n` messages arrived (or panic after `within`).
    pub async fn wait_for(&self, n: usize, within: Duration) -> Vec<Received> {
        let deadline = tokio::time::Instant::now() + within;
        loop {
            let got = self.received();
            if got.len() >= n {
                return got;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "expected {n} messages, the SMTP server got {}",
                got.len()
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

impl Drop for SmtpSink {
    fn drop(&mut self) {
        if let Some(task) = self.task.take() {
            task.abort();
        }
    }
}

async fn session(stream: TcpStream, shared: Arc<Shared>) -> std::io::Result<()> {
    let (read, mut write) = stream.into_split();
    let mut lines = BufReader::new(read);
    write.write_all(b"220 sink.test ESMTP ready\r\n").await?;
    let (mut from, mut to) = (String::new(), Vec::new());
    let mut line = String::new();
    loop {
        line.clear();
        if lines.read_line(&mut line).await? == 0 {
            return Ok(());
        }
        let command = line.trim_end().to_string();
        let verb = command
            .split_whitespace()
            .next()
            .unwrap_or_default()
            .to_ascii_uppercase();
        let reply: &[u8] = match verb.as_str() {
            "EHLO" => b"250-sink.test\r\n250-8BITMIME\r\n250 SMTPUTF8\r\n",
            "HELO" => b"250 sink.test\r\n",
            "MAIL" => {
                from = argument(&command, "FROM:");
                b"250 OK\r\n"
            }
            "RCPT" => {
                to.push(argument(&command, "TO:"));
                b"250 OK\r\n"
            }
            "DATA" => {
                write.write_all(b"354 end with <CRLF>.<CRLF>\r\n").await?;
                let mut data = Vec::new();
                loop {
                    let mut raw = Vec::new();
                    if lines.read_until(b'\n', &mut raw).await? == 0 {
                        return Ok(());
                    }
                    if raw == b".\r\n" || raw == b".\n" {
                        break;
                    }
                    let unstuffed = if raw.starts_with(b"..") {
                        &raw[1..]
                    } else {
                        &raw[..]
                    };
                    data.extend_from_slice(unstuffed);
                }
                if shared.refuse.load(Ordering::SeqCst) {
                    b"554 5.7.1 refused by the test server\r\n"
                } else {
                    shared.received.lock().unwrap().push(Received {
                        from: std::mem::take(&mut from),
                        to: std::mem::take(&mut to),
                        data,
                    });
                    b"250 OK queued\r\n"
                }
            }
            "RSET" => {
                from.clear();
                to.clear();
                b"250 OK\r\n"
            }
            "NOOP" => b"250 OK\r\n",
            "QUIT" => {
                write.write_all(b"221 bye\r\n").await?;
                return Ok(());
            }
            _ => b"502 command not implemented\r\n",
        };
        write.write_all(reply).await?;
    }
}

/// The address of `MAIL FROM:<a>` / `RCPT TO:<a>`: `<a>` (parameters after it dropped).
fn argument(command: &str, key: &str) -> String {
    let upper = command.to_ascii_uppercase();
    let start = upper.find(key).map_or(4, |i| i + key.len());
    command[start..]
        .split_whitespace()
        .next()
        .unwrap_or_default()
        .to_string()
}
