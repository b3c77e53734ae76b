//! Types and rules of the crawl domain: sites, keywords, runs and their
//! state machine, failures, pages, outbound targets. No I/O here: imports no
//! other module of the crate, and no database, network or runtime crate.

pub mod action;
pub mod bounds;
pub mod change;
pub mod failure;
mod field_error;
pub mod item;
pub mod keyword;
pub mod learn;
pub mod page;
pub mod paging;
pub mod preview;
pub mod repair;
pub mod replay;
pub mod robots;
pub mod run;
pub mod saved_page;
pub mod schedule;
pub mod site;
pub mod target;
pub mod text;
pub mod text_enum;
pub mod url_list;
pub mod value;
pub mod webhook;

pub use field_error::FieldError;
