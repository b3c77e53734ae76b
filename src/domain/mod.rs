//! Types and rules of the crawl domain: no I/O here.

pub mod failure;
mod field_error;
pub mod keyword;
pub mod run;
pub mod site;
pub mod target;
pub mod text;

pub use field_error::FieldError;
