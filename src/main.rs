//! The `bazaar` command: serve the site, seed demo data, back up, restore, migrate … (see
//! `bazaar --help` and src/cli.rs).

/// mimalloc rather than the system allocator: a page allocates and frees many small and
/// medium buffers on several threads (the HTTP workers, the driver, the embedded store), where
/// glibc's malloc spent about a fifth of the server's CPU time under load and kept freed memory
/// in per-thread arenas (higher resident memory after a burst).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> std::process::ExitCode {
    bazaar::cli::run(std::env::args_os())
}
