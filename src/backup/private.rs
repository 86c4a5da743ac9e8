//! Owner-only files and directories for backups: a backup holds every order, customer address
//! and password hash of the shop, so on Unix its directories are 0700 and its files 0600
//! whatever the process's umask. Elsewhere the platform's defaults apply.

use std::io;
use std::path::Path;

use docstore::private_fs as store_private;

/// Owner-only mode bits of directories and files (the embedded store's, so a backup and a data
/// directory are private alike).
#[cfg(unix)]
const DIR_MODE: u32 = store_private::DIR_MODE;
#[cfg(unix)]
const FILE_MODE: u32 = store_private::FILE_MODE;

/// Create `dir` and any missing parents owner-only (existing ones are left as they are).
pub(crate) fn create_dir_all(dir: &Path) -> io::Result<()> {
    store_private::create_dir_all(dir)
}

/// Create the single directory `dir` owner-only; fails if it exists, so two writers never
/// share one.
pub(crate) fn create_new_dir(dir: &Path) -> io::Result<()> {
    store_private::create_dir(dir)
}

/// Write a new owner-only file and sync it.
pub(crate) fn write_file(path: &Path, bytes: &[u8]) -> io::Result<()> {
    use std::io::Write;
    let mut file = store_private::file_options()
        .write(true)
        .create_new(true)
        .open(path)?;
    file.write_all(bytes)?;
    file.sync_all()
}

/// Make `dir` itself owner-only.
pub(crate) fn restrict_dir(dir: &Path) -> io::Result<()> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(DIR_MODE))?;
    }
    #[cfg(not(unix))]
    let _ = dir;
    Ok(())
}

/// Make everything under `dir` (and `dir`) owner-only. Symbolic links are neither followed nor
/// changed: a backup holds none, and following one could change files outside it.
pub(crate) fn restrict_tree(dir: &Path) -> io::Result<()> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mut pending = vec![dir.to_path_buf()];
        while let Some(current) = pending.pop() {
            let meta = std::fs::symlink_metadata(&current)?;
            if meta.is_dir() {
                std::fs::set_permissions(&current, std::fs::Permissions::from_mode(DIR_MODE))?;
                for entry in std::fs::read_dir(&current)? {
                    pending.push(entry?.path());
                }
            } else if meta.is_file() {
                std::fs::set_permissions(&current, std::fs::Permissions::from_mode(FILE_MODE))?;
            }
        }
    }
    #[cfg(not(unix))]
    let _ = dir;
    Ok(())
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn mode(path: &Path) -> u32 {
        std::fs::symlink_metadata(path)
            .unwrap()
            .permissions()
            .mode()
            & 0o777
    }

    #[test]
    fn a_tree_written_with_open_permissions_ends_owner_only_except_what_links_point_to() {
        let root = tempfile::tempdir().unwrap();
        let backup = root.path().join("b");
        std::fs::create_dir_all(backup.join("bazaar")).unwrap();
        std::fs::write(backup.join("bazaar/orders.bson"), b"x").unwrap();
        let outside = root.path().join("outside.txt");
        std::fs::write(&outside, b"y").unwrap();
        for p in [
            &backup,
            &backup.join("bazaar"),
            &backup.join("bazaar/orders.bson"),
            &outside,
        ] {
            std::fs::set_permissions(p, std::fs::Permissions::from_mode(0o755)).unwrap();
        }
        std::os::unix::fs::symlink(&outside, backup.join("link")).unwrap();
        restrict_tree(&backup).unwrap();
        assert_eq!(mode(&backup), 0o700);
        assert_eq!(mode(&backup.join("bazaar")), 0o700);
        assert_eq!(mode(&backup.join("bazaar/orders.bson")), 0o600);
        assert_eq!(mode(&outside), 0o755);
    }

    #[test]
    fn new_directories_and_files_are_owner_only() {
        let root = tempfile::tempdir().unwrap();
        let deep = root.path().join("a/b");
        create_dir_all(&deep).unwrap();
        assert_eq!((mode(&root.path().join("a")), mode(&deep)), (0o700, 0o700));
        write_file(&deep.join("f"), b"z").unwrap();
        assert_eq!(mode(&deep.join("f")), 0o600);
        assert!(
            create_new_dir(&deep).is_err(),
            "an existing directory is not new"
        );
    }
}
