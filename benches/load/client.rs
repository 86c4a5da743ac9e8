//! A small keep-alive HTTP/1.1 load client: `connections` tasks, each with its own connection,
//! sending GETs one after another and timing each response. It parses no more of the response
//! than it must (the status line and the body length), so its own cost per request stays small
//! and the same for every server it drives: the ratios between servers mean something.

use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// Chooses the path of the i-th request.
pub type PickPath = Arc<dyn Fn(u64) -> String + Send + Sync>;

/// What one load run measured.
pub struct Outcome {
    pub requests: u64,
    pub errors: u64,
    pub elapsed: Duration,
    /// Sorted, microseconds.
    pub latencies_us: Vec<u64>,
}

impl Outcome {
    pub fn per_second(&self) -> f64 {
        self.requests as f64 / self.elapsed.as_secs_f64()
    }

    /// The `p`th percentile in milliseconds.
    pub fn percentile_ms(&self, p: f64) -> f64 {
        let sorted = &self.latencies_us;
        if sorted.is_empty() {
            return 0.0;
        }
        let rank = ((p / 100.0) * (sorted.len() - 1) as f64).round() as usize;
        sorted[rank.min(sorted.len() - 1)] as f64 / 1000.0
    }

    pub fn max_ms(&self) -> f64 {
        self.latencies_us.last().copied().unwrap_or(0) as f64 / 1000.0
    }
}

/// One response read off a keep-alive connection: its status and body.
pub struct Response {
    pub status: u16,
    pub body: Vec<u8>,
}

/// A keep-alive connection to `addr`.
pub struct Connection {
    addr: String,
    stream: Option<TcpStream>,
    buf: Vec<u8>,
    /// Sent as `User-Agent` when set (a server that tells browsers from bots sees a browser).
    pub user_agent: Option<&'static str>,
}

impl Connection {
    pub fn new(addr: &str) -> Connection {
        Connection {
            addr: addr.to_string(),
            stream: None,
            buf: Vec::with_capacity(64 * 1024),
            user_agent: None,
        }
    }

    /// GET `path`; reconnects once when the server closed the idle connection.
    pub async fn get(&mut self, path: &str) -> std::io::Result<Response> {
        match self.try_get(path).await {
            Ok(r) => Ok(r),
            Err(_) => {
                self.stream = None;
                self.try_get(path).await
            }
        }
    }

    async fn try_get(&mut self, path: &str) -> std::io::Result<Response> {
        if self.stream.is_none() {
            let s = TcpStream::connect(&self.addr).await?;
            s.set_nodelay(true)?;
            self.stream = Some(s);
            self.buf.clear();
        }
        let stream = self.stream.as_mut().expect("connected");
        let agent = self
            .user_agent
            .map(|ua| format!("User-Agent: {ua}\r\n"))
            .unwrap_or_default();
        let request = format!(
            "GET {path} HTTP/1.1\r\nHost: {}\r\nAccept: text/html\r\n{agent}\r\n",
            self.addr
        );
        stream.write_all(request.as_bytes()).await?;
        // Headers.
        let header_end = loop {
            if let Some(i) = find(&self.buf, b"\r\n\r\n") {
                break i + 4;
            }
            read_more(stream, &mut self.buf).await?;
        };
        let head = String::from_utf8_lossy(&self.buf[..header_end]).to_string();
        let status: u16 = head
            .split(' ')
            .nth(1)
            .and_then(|s| s.parse().ok())
            .ok_or_else(|| bad("no status line"))?;
        let mut length = None;
        let mut chunked = false;
        let mut close = false;
        for line in head.lines().skip(1) {
            let Some((name, value)) = line.split_once(':') else {
                continue;
            };
            let (name, value) = (name.trim().to_ascii_lowercase(), value.trim());
            match name.as_str() {
                "content-length" => length = value.parse::<usize>().ok(),
                "transfer-encoding" => chunked = value.eq_ignore_ascii_case("chunked"),
                "connection" => close = value.eq_ignore_ascii_case("close"),
                _ => {}
            }
        }
        self.buf.drain(..header_end);
        let body = if chunked {
            let mut body = Vec::new();
            loop {
                let line_end = loop {
                    if let Some(i) = find(&self.buf, b"\r\n") {
                        break i;
                    }
                    read_more(stream, &mut self.buf).await?;
                };
                let size_text = String::from_utf8_lossy(&self.buf[..line_end]).to_string();
                let size =
                    usize::from_str_radix(size_text.split(';').next().unwrap_or("").trim(), 16)
                        .map_err(|_| bad("bad chunk size"))?;
                while self.buf.len() < line_end + 2 + size + 2 {
                    read_more(stream, &mut self.buf).await?;
                }
                body.extend_from_slice(&self.buf[line_end + 2..line_end + 2 + size]);
                self.buf.drain(..line_end + 2 + size + 2);
                if size == 0 {
                    break body;
                }
            }
        } else {
            let length = length.unwrap_or(0);
            while self.buf.len() < length {
                read_more(stream, &mut self.buf).await?;
            }
            self.buf.drain(..length).collect()
        };
        if close {
            self.stream = None;
        }
        Ok(Response { status, body })
    }
}

fn bad(what: &str) -> std::io::Error {
    std::io::Error::new(std::io::ErrorKind::InvalidData, what.to_string())
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

async fn read_more(stream: &mut TcpStream, buf: &mut Vec<u8>) -> std::io::Result<()> {
    let mut chunk = [0u8; 16 * 1024];
    let n = stream.read(&mut chunk).await?;
    if n == 0 {
        return Err(std::io::Error::new(
            std::io::ErrorKind::UnexpectedEof,
            "connection closed",
        ));
    }
    buf.extend_from_slice(&chunk[..n]);
    Ok(())
}

/// Send GETs for the paths `pick` chooses to `addr` from `connections` connections for
/// `duration`; a response other than 200 counts as an error.
pub async fn run(addr: &str, connections: u64, duration: Duration, pick: PickPath) -> Outcome {
    let started = Instant::now();
    let deadline = started + duration;
    let mut tasks = Vec::new();
    for c in 0..connections {
        let pick = Arc::clone(&pick);
        let mut conn = Connection::new(addr);
        tasks.push(tokio::spawn(async move {
            let mut latencies = Vec::with_capacity(4096);
            let mut errors = 0u64;
            let mut i = c * 7919;
            while Instant::now() < deadline {
                let path = pick(i);
                i += 1;
                let t = Instant::now();
                match conn.get(&path).await {
                    Ok(r) if r.status == 200 => latencies.push(t.elapsed().as_micros() as u64),
                    _ => errors += 1,
                }
            }
            (latencies, errors)
        }));
    }
    gather(tasks, started).await
}

/// Sum up what each client task measured (its latencies and its error count).
pub async fn gather(
    tasks: Vec<tokio::task::JoinHandle<(Vec<u64>, u64)>>,
    started: Instant,
) -> Outcome {
    let mut latencies_us = Vec::new();
    let mut errors = 0;
    for t in tasks {
        if let Ok((l, e)) = t.await {
            latencies_us.extend(l);
            errors += e;
        }
    }
    let elapsed = started.elapsed();
    latencies_us.sort_unstable();
    Outcome {
        requests: latencies_us.len() as u64,
        errors,
        elapsed,
        latencies_us,
    }
}
