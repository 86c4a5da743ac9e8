//! Bazaar: storefront, CMS and tumblelog. The web application arrives with the foundation issue;
//! for now the crate only re-exports the embedded store it will run on.

pub use docstore;
