//! The `bazaar` command: serve the site, seed demo data, or hash an admin password.

fn main() -> std::process::ExitCode {
    bazaar::cli::run(std::env::args().skip(1).collect())
}
