//! Open cursors: batches left to return for `getMore`, closed by `killCursors` or when idle.

use bson::Document;
use parking_lot::Mutex;
use std::collections::{HashMap, VecDeque};
use std::time::{Duration, Instant};

/// Documents not yet returned by a cursor.
pub struct OpenCursor {
    pub namespace: String,
    pub remaining: VecDeque<Document>,
    pub last_used: Instant,
}

pub struct CursorManager {
    timeout: Duration,
    cursors: Mutex<HashMap<i64, OpenCursor>>,
}

impl CursorManager {
    pub fn new(timeout: Duration) -> Self {
        CursorManager {
            timeout,
            cursors: Mutex::new(HashMap::new()),
        }
    }

    pub fn timeout(&self) -> Duration {
        self.timeout
    }

    pub fn len(&self) -> usize {
        self.cursors.lock().len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}
