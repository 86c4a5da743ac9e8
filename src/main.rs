//! Bazaar's entry point. The web application is not built yet (see README); this starts the
//! embedded docstore so the data layer can be explored with any MongoDB client.

fn main() {
    eprintln!("bazaar: the web application is not implemented yet; run `cargo run -p docstore -- --in-memory` for the embedded store");
    std::process::exit(2);
}
