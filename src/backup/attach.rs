//! How `bazaar backup` and `bazaar migrate` reach the embedded store of a Bazaar that is already
//! serving the data directory (which only one process may open): the serving process writes its
//! store's address, with the generated credentials, to a file in the data directory that only its
//! owner may read, and removes it when it stops. Whoever can read that file can read the data
//! files beside it anyway, so it grants nothing new.

use std::path::{Path, PathBuf};

use anyhow::Context;

/// The address file's name inside `database.path`.
pub const ADDRESS_FILE: &str = "bazaar-store.uri";

fn address_file(data_dir: &Path) -> PathBuf {
    data_dir.join(ADDRESS_FILE)
}

/// Write the running store's URI (with credentials) for local tools; failure is only logged,
/// since serving does not depend on it.
pub(crate) fn publish(data_dir: &Path, uri: &str) {
    if let Err(e) = write_private(&address_file(data_dir), uri) {
        tracing::warn!(
            "cannot write {} ({e}): `bazaar backup` and `bazaar migrate` will not reach this \
             running Bazaar's store",
            address_file(data_dir).display()
        );
    }
}

fn write_private(path: &Path, contents: &str) -> std::io::Result<()> {
    use std::io::Write;
    let tmp = path.with_extension("uri.tmp");
    let _ = std::fs::remove_file(&tmp);
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(0o600);
    }
    let mut file = options.open(&tmp)?;
    file.write_all(contents.as_bytes())?;
    file.sync_all()?;
    std::fs::rename(&tmp, path)
}

/// Remove the address file at shutdown.
pub(crate) fn withdraw(data_dir: &Path) {
    let _ = std::fs::remove_file(address_file(data_dir));
}

/// Whether a serving Bazaar has published its store's address here.
pub(crate) fn exists(data_dir: &Path) -> bool {
    address_file(data_dir).is_file()
}

/// The published URI.
pub(crate) fn read(data_dir: &Path) -> anyhow::Result<String> {
    let path = address_file(data_dir);
    let uri = std::fs::read_to_string(&path)
        .with_context(|| format!("cannot read {} (is Bazaar running?)", path.display()))?;
    Ok(uri.trim().to_string())
}
