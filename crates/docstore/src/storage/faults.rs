//! Disk failures on demand, so that tests can fill the disk (or break it) at an exact byte and
//! then give the space back, without needing a small file system to fill.
//!
//! A [`DiskFaults`] handle is passed to the store when it opens (see `Config::disk_faults`); every
//! write of the journal and of snapshots then goes through it. It is a budget of bytes, not a
//! model of a file system: bytes a failed journal write leaves behind and then truncates are
//! given back, nothing else is. With no handle (the normal case) files are written directly.

use parking_lot::Mutex;
use std::fs::File;
use std::io::{self, Write};
use std::sync::Arc;
use std::time::Duration;

/// Linux's errno for "No space left on device".
pub const ENOSPC: i32 = 28;
/// Linux's errno for "Input/output error".
pub const EIO: i32 = 5;
/// Linux's errno for "Read-only file system".
pub const EROFS: i32 = 30;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    Healthy,
    /// This many more bytes fit; then writes fail with ENOSPC.
    SpaceLeft(u64),
    /// Every write and sync fails with this OS error.
    Failing(i32),
}

#[derive(Debug)]
struct State {
    mode: Mode,
    sync_delay: Duration,
}

/// A shared switch that makes the store's disk writes fail. Cloning shares the switch.
#[derive(Debug, Clone)]
pub struct DiskFaults(Arc<Mutex<State>>);

impl Default for DiskFaults {
    fn default() -> Self {
        DiskFaults::new()
    }
}

impl DiskFaults {
    /// A healthy disk until told otherwise.
    pub fn new() -> DiskFaults {
        DiskFaults(Arc::new(Mutex::new(State {
            mode: Mode::Healthy,
            sync_delay: Duration::ZERO,
        })))
    }

    /// The disk fills up after `bytes` more bytes: the write that crosses the line writes what
    /// fits, then fails with ENOSPC, as a real full disk does.
    pub fn fill_after(&self, bytes: u64) {
        self.0.lock().mode = Mode::SpaceLeft(bytes);
    }

    /// Every write and fsync fails with the OS error `errno` (e.g. [`EIO`], [`EROFS`]).
    pub fn fail_with(&self, errno: i32) {
        self.0.lock().mode = Mode::Failing(errno);
    }

    /// Space comes back and the device works again.
    pub fn heal(&self) {
        self.0.lock().mode = Mode::Healthy;
    }

    /// Each fsync takes at least this long (a slow disk), to observe how commits are grouped.
    pub fn slow_sync(&self, delay: Duration) {
        self.0.lock().sync_delay = delay;
    }

    /// How many of `wanted` bytes may be written now; `Err` when none may.
    fn take(&self, wanted: usize) -> io::Result<usize> {
        let mut s = self.0.lock();
        match s.mode {
            Mode::Healthy => Ok(wanted),
            Mode::Failing(errno) => Err(io::Error::from_raw_os_error(errno)),
            Mode::SpaceLeft(0) if wanted > 0 => Err(io::Error::from_raw_os_error(ENOSPC)),
            Mode::SpaceLeft(left) => {
                let n = wanted.min(usize::try_from(left).unwrap_or(usize::MAX));
                s.mode = Mode::SpaceLeft(left - n as u64);
                Ok(n)
            }
        }
    }

    /// Bytes truncated away are free again.
    fn give_back(&self, bytes: u64) {
        let mut s = self.0.lock();
        if let Mode::SpaceLeft(left) = s.mode {
            s.mode = Mode::SpaceLeft(left.saturating_add(bytes));
        }
    }

    fn before_sync(&self) -> io::Result<()> {
        let delay = self.0.lock().sync_delay;
        if !delay.is_zero() {
            std::thread::sleep(delay);
        }
        // Read after the delay, so a test can break the disk while an fsync is in progress.
        match self.0.lock().mode {
            Mode::Failing(errno) => Err(io::Error::from_raw_os_error(errno)),
            _ => Ok(()),
        }
    }
}

/// A file written through an optional [`DiskFaults`] switch.
pub(crate) struct FaultyFile {
    file: File,
    faults: Option<DiskFaults>,
    /// The file's length as far as writes through this handle know (for giving space back).
    end: u64,
    pos: u64,
}

impl FaultyFile {
    pub(crate) fn new(file: File, faults: Option<DiskFaults>) -> io::Result<FaultyFile> {
        let end = if faults.is_some() {
            file.metadata()?.len()
        } else {
            0
        };
        Ok(FaultyFile {
            file,
            faults,
            end,
            pos: end,
        })
    }

    /// Write `buf` at byte `offset`.
    pub(crate) fn write_all_at(&mut self, offset: u64, buf: &[u8]) -> io::Result<()> {
        use std::io::{Seek, SeekFrom};
        self.file.seek(SeekFrom::Start(offset))?;
        self.pos = offset;
        self.write_all(buf)
    }

    pub(crate) fn sync_data(&mut self) -> io::Result<()> {
        if let Some(f) = &self.faults {
            f.before_sync()?;
        }
        self.file.sync_data()
    }

    pub(crate) fn sync_all(&mut self) -> io::Result<()> {
        if let Some(f) = &self.faults {
            f.before_sync()?;
        }
        self.file.sync_all()
    }

    pub(crate) fn set_len(&mut self, len: u64) -> io::Result<()> {
        self.file.set_len(len)?;
        if let Some(f) = &self.faults {
            if len < self.end {
                f.give_back(self.end - len);
            }
        }
        self.end = len;
        Ok(())
    }
}

impl Write for FaultyFile {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let allowed = match &self.faults {
            Some(f) => f.take(buf.len())?,
            None => buf.len(),
        };
        let n = self.file.write(&buf[..allowed])?;
        if let Some(f) = &self.faults {
            // The budget was taken for `allowed` bytes; a short write returns the rest.
            f.give_back((allowed - n) as u64);
        }
        self.pos += n as u64;
        self.end = self.end.max(self.pos);
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.file.flush()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_filled_disk_writes_what_fits_then_fails_with_enospc_until_healed() {
        let dir = tempfile::tempdir().unwrap();
        let faults = DiskFaults::new();
        let file = File::create(dir.path().join("f")).unwrap();
        let mut f = FaultyFile::new(file, Some(faults.clone())).unwrap();
        faults.fill_after(10);
        let err = f.write_all_at(0, &[1u8; 16]).unwrap_err();
        assert_eq!(err.raw_os_error(), Some(ENOSPC));
        assert_eq!(err.kind(), io::ErrorKind::StorageFull);
        assert_eq!(std::fs::metadata(dir.path().join("f")).unwrap().len(), 10);
        // Truncating frees the space again, so the same write fails at the same place.
        f.set_len(0).unwrap();
        assert!(f.write_all_at(0, &[1u8; 16]).is_err());
        f.set_len(0).unwrap();
        f.write_all_at(0, &[1u8; 10]).unwrap();
        faults.heal();
        f.write_all_at(10, &[2u8; 100]).unwrap();
        f.sync_data().unwrap();
        faults.fail_with(EIO);
        assert_eq!(f.sync_data().unwrap_err().raw_os_error(), Some(EIO));
    }
}
