//! Arbitrary JSON for the property tests at this crate's parsers (tests only).

use proptest::prelude::*;
use serde_json::{Map, Value, json};

/// Arbitrary JSON nested a few levels, whose object keys come from `keys` (so a test
/// can make the keys its parser looks for likely).
pub(crate) fn json_value(
    keys: impl Strategy<Value = String> + Clone + 'static,
) -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(|n| json!(n)),
        any::<f64>().prop_map(|n| json!(n)),
        "\\PC{0,12}".prop_map(Value::String),
        Just(json!("2025-06-18")),
    ];
    leaf.prop_recursive(4, 48, 6, move |inner| {
        prop_oneof![
            proptest::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            proptest::collection::btree_map(keys.clone(), inner, 0..5)
                .prop_map(|map| Value::Object(map.into_iter().collect::<Map<_, _>>())),
        ]
    })
}
