//! Owner-only files and directories: a data directory holds customers' names, emails and
//! addresses (in journal segments, snapshots and backups), so everything docstore creates is
//! made readable by the user running it only (directories 0700, files 0600), whatever the
//! umask, and a directory found with looser modes is tightened when it is opened.

use std::fs::{self, File, OpenOptions};
use std::io;
use std::path::{Path, PathBuf};

/// Mode of every directory docstore creates.
pub const DIR_MODE: u32 = 0o700;
/// Mode of every file docstore creates.
pub const FILE_MODE: u32 = 0o600;

/// `fs::create_dir_all`, with every directory it creates owner-only. Directories that already
/// exist are left as they are (docstore tightens its own data directory's when it opens it).
pub fn create_dir_all(dir: &Path) -> io::Result<()> {
    let mut builder = fs::DirBuilder::new();
    builder.recursive(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::DirBuilderExt;
        builder.mode(DIR_MODE);
    }
    builder.create(dir)
}

/// `fs::create_dir`, owner-only.
pub fn create_dir(dir: &Path) -> io::Result<()> {
    let mut builder = fs::DirBuilder::new();
    #[cfg(unix)]
    {
        use std::os::unix::fs::DirBuilderExt;
        builder.mode(DIR_MODE);
    }
    builder.create(dir)
}

/// Options that create a file owner-only (set `write`, `create`… on them as usual). The mode
/// applies only when the call creates the file; docstore's own code that may open an existing
/// file goes through `open_existing` or `tighten_tree`, which tighten it.
pub fn file_options() -> OpenOptions {
    let mut options = OpenOptions::new();
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(FILE_MODE);
    }
    options
}

/// `File::create` (write, create, truncate), owner-only. An existing file keeps its inode, so
/// its mode is tightened too.
pub(crate) fn create_file(path: &Path) -> io::Result<File> {
    let file = file_options()
        .write(true)
        .create(true)
        .truncate(true)
        .open(path)?;
    restrict(&file)?;
    Ok(file)
}

/// Open an existing file for writing and make sure it is owner-only (a file from a version of
/// docstore that created files 0644 would otherwise stay readable while it grows).
pub(crate) fn open_existing(path: &Path) -> io::Result<File> {
    let file = OpenOptions::new().write(true).open(path)?;
    restrict(&file)?;
    Ok(file)
}

/// Set an open file's mode to owner-only when it is looser.
fn restrict(file: &File) -> io::Result<()> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = file.metadata()?.permissions().mode() & 0o7777;
        if mode & 0o077 != 0 {
            file.set_permissions(fs::Permissions::from_mode(mode & 0o700))?;
        }
    }
    #[cfg(not(unix))]
    let _ = file;
    Ok(())
}

/// One path whose mode [`tighten_tree`] changed, for the warning it leads to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Tightened {
    pub path: PathBuf,
    pub from: u32,
    pub to: u32,
}

impl std::fmt::Display for Tightened {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} {:04o} -> {:04o}",
            self.path.display(),
            self.from,
            self.to
        )
    }
}

/// Make `dir`, and every directory and regular file below it, owner-only: group and other
/// permissions are removed (so a directory becomes 0700 and a data file 0600; what the owner
/// had is kept). Symbolic links are not followed and
/// sockets are left alone (docstore binds its own owner-only). Returns what was changed, so
/// that the caller can say so: a data directory written by an older version, or copied with
/// a permissive umask, was readable by every local user until now.
pub(crate) fn tighten_tree(dir: &Path) -> io::Result<Vec<Tightened>> {
    let mut changed = Vec::new();
    #[cfg(unix)]
    {
        // A work list rather than recursion: how deep the tree goes is not ours to choose.
        let mut pending = vec![dir.to_path_buf()];
        while let Some(path) = pending.pop() {
            let meta = fs::symlink_metadata(&path)?;
            let kind = meta.file_type();
            if !kind.is_dir() && !kind.is_file() {
                continue;
            }
            tighten_one(&path, &meta, &mut changed)?;
            if kind.is_dir() {
                for entry in fs::read_dir(&path)? {
                    pending.push(entry?.path());
                }
            }
        }
    }
    #[cfg(not(unix))]
    let _ = dir;
    Ok(changed)
}

#[cfg(unix)]
fn tighten_one(path: &Path, meta: &fs::Metadata, changed: &mut Vec<Tightened>) -> io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    let mode = meta.permissions().mode() & 0o7777;
    if mode & 0o077 == 0 {
        return Ok(());
    }
    // Only ever take permissions away: what the owner had (an executable bit) stays.
    let to = mode & 0o700;
    fs::set_permissions(path, fs::Permissions::from_mode(to))?;
    changed.push(Tightened {
        path: path.to_path_buf(),
        from: mode,
        to,
    });
    Ok(())
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn mode(path: &Path) -> u32 {
        fs::metadata(path).unwrap().permissions().mode() & 0o7777
    }

    #[test]
    fn created_directories_and_files_are_owner_only_whatever_the_umask_allows() {
        let tmp = tempfile::tempdir().unwrap();
        let nested = tmp.path().join("a/b");
        create_dir_all(&nested).unwrap();
        assert_eq!(mode(&tmp.path().join("a")), 0o700);
        assert_eq!(mode(&nested), 0o700);
        let file = nested.join("f");
        create_file(&file).unwrap();
        assert_eq!(mode(&file), 0o600);
    }

    #[test]
    fn recreating_a_world_readable_file_makes_it_owner_only() {
        let tmp = tempfile::tempdir().unwrap();
        let file = tmp.path().join("f");
        fs::write(&file, b"old").unwrap();
        fs::set_permissions(&file, fs::Permissions::from_mode(0o644)).unwrap();
        create_file(&file).unwrap();
        assert_eq!(mode(&file), 0o600);
        fs::set_permissions(&file, fs::Permissions::from_mode(0o664)).unwrap();
        open_existing(&file).unwrap();
        assert_eq!(mode(&file), 0o600);
    }

    #[test]
    fn a_loose_tree_is_tightened_and_each_change_is_reported() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("data");
        fs::create_dir_all(dir.join("repair-1")).unwrap();
        fs::set_permissions(&dir, fs::Permissions::from_mode(0o755)).unwrap();
        fs::set_permissions(dir.join("repair-1"), fs::Permissions::from_mode(0o775)).unwrap();
        fs::write(dir.join("journal-1.log"), b"x").unwrap();
        fs::set_permissions(dir.join("journal-1.log"), fs::Permissions::from_mode(0o644)).unwrap();
        fs::write(dir.join("repair-1/snapshot-1.db"), b"x").unwrap();
        fs::set_permissions(
            dir.join("repair-1/snapshot-1.db"),
            fs::Permissions::from_mode(0o666),
        )
        .unwrap();
        fs::write(dir.join("already.db"), b"x").unwrap();
        fs::set_permissions(dir.join("already.db"), fs::Permissions::from_mode(0o600)).unwrap();

        let mut changed = tighten_tree(&dir).unwrap();
        changed.sort_by(|a, b| a.path.cmp(&b.path));
        let summary: Vec<(PathBuf, u32, u32)> = changed
            .into_iter()
            .map(|t| (t.path, t.from, t.to))
            .collect();
        assert_eq!(
            summary,
            vec![
                (dir.clone(), 0o755, 0o700),
                (dir.join("journal-1.log"), 0o644, 0o600),
                (dir.join("repair-1"), 0o775, 0o700),
                (dir.join("repair-1/snapshot-1.db"), 0o666, 0o600),
            ]
        );
        assert_eq!(mode(&dir.join("already.db")), 0o600);
        assert!(
            tighten_tree(&dir).unwrap().is_empty(),
            "a second pass changes nothing"
        );
    }
}
