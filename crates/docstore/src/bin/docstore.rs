//! `docstore --dbpath DIR [--port 27017] [--bind 127.0.0.1] [--in-memory]`. STUB.
fn main() {}
