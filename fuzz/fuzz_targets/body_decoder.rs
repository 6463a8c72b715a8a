//! Fuzzes the body decoder: `json::parse` and every typed accessor never panic, and what
//! parses re-serialises to bytes that parse back to the same value.
#![no_main]

use dockwarden_policy::api::json::{self, Json};
use dockwarden_policy::api::model_view::{CreateShape, create_view};
use libfuzzer_sys::fuzz_target;

fn exercise(j: &Json) {
    for shape in [CreateShape::Modern, CreateShape::Legacy] {
        let _ = create_view(j, shape);
    }
    match j {
        Json::Object(o) => {
            for (k, v) in o.entries() {
                let _ = (
                    o.bool(k),
                    o.str(k),
                    o.int(k),
                    o.object(k),
                    o.str_list(k),
                    o.object_list(k),
                    o.str_map(k),
                );
                exercise(v);
            }
        }
        Json::Array(items) => items.iter().for_each(exercise),
        _ => {}
    }
}

fuzz_target!(|data: &[u8]| {
    if let Ok(j) = json::parse(data) {
        exercise(&j);
        assert_eq!(
            json::parse(&j.to_bytes()).as_ref(),
            Ok(&j),
            "canonical bytes must parse back"
        );
    }
});
