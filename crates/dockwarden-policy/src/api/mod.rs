//! The Engine API as dockerd sees it: canonical paths, versions, routes, query strings and
//! a Go-faithful JSON reader.

pub mod json;
pub mod model_view;
pub mod path;
pub mod pct;
pub mod query;
pub mod route;
pub mod version;
