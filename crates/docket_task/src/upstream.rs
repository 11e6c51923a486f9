//! Who a call ran as at the upstream engine and which upstream queries it caused,
//! as the server hands it to the store: [`Upstream`], carried in a
//! `CallToolResult`'s `_meta` under [`UPSTREAM_META_KEY`]. A task's audit row is
//! written by the store when the task ends, from the result alone
//! ([`AuditEntry::for_outcome`](crate::store::AuditEntry::for_outcome)), so the
//! attribution travels in the result.
//!
//! Reading it is tolerant: a result written by anything is read, and whatever
//! does not have the shape [`Upstream::to_meta_value`] writes is ignored, value by
//! value, never an error. The bounds below hold for every value read.

use serde_json::{Map, Value};

/// The key of a `CallToolResult`'s `_meta` object that holds a call's
/// [`Upstream`] (as [`Upstream::to_meta_value`] writes it).
pub const UPSTREAM_META_KEY: &str = "io.docket/upstream";

/// The most upstream query ids one call keeps: the first ones, in order.
pub const MAX_UPSTREAM_IDS: usize = 32;

/// The longest upstream query id kept, in bytes; a longer one is ignored.
pub const MAX_UPSTREAM_ID_BYTES: usize = 128;

/// The longest call id kept, in bytes; a longer one is ignored.
pub const MAX_CALL_ID_BYTES: usize = 128;

/// The longest engine user kept, in bytes; a longer one is ignored.
pub const MAX_ENGINE_USER_BYTES: usize = 256;

/// Who a call ran as at the upstream engine (Trino) and which queries it caused
/// there, so a line of the engine's query log leads to the Docket call and back.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Upstream {
    /// Docket's id of the call, when the result names it (for a task, the store
    /// falls back to the task id). At most [`MAX_CALL_ID_BYTES`], never empty.
    pub call_id: Option<String>,
    /// The Trino session user the call ran as, when it reached Trino. At most
    /// [`MAX_ENGINE_USER_BYTES`], never empty.
    pub engine_user: Option<String>,
    /// The Trino query ids the call caused, in the order it submitted them: at
    /// most [`MAX_UPSTREAM_IDS`], each at most [`MAX_UPSTREAM_ID_BYTES`] and never
    /// empty.
    pub query_ids: Vec<String>,
}

impl Upstream {
    /// The attribution a `CallToolResult` (as JSON) carries in
    /// `_meta["io.docket/upstream"]`; empty when it carries none. Tolerant:
    /// a value of the wrong type, an empty or oversized string, or a query id
    /// that is not a string is ignored (the rest is kept), and only the first
    /// [`MAX_UPSTREAM_IDS`] query ids that are kept count.
    pub fn from_result(result: &Value) -> Upstream {
        let Some(meta) = result
            .get("_meta")
            .and_then(|meta| meta.get(UPSTREAM_META_KEY))
            .and_then(Value::as_object)
        else {
            return Upstream::default();
        };
        Upstream {
            call_id: bounded_string(meta, "call_id", MAX_CALL_ID_BYTES),
            engine_user: bounded_string(meta, "engine_user", MAX_ENGINE_USER_BYTES),
            query_ids: meta
                .get("query_ids")
                .and_then(Value::as_array)
                .map(|ids| {
                    ids.iter()
                        .filter_map(|id| bounded(id, MAX_UPSTREAM_ID_BYTES))
                        .take(MAX_UPSTREAM_IDS)
                        .collect()
                })
                .unwrap_or_default(),
        }
    }

    /// The value to put in a result's `_meta` under [`UPSTREAM_META_KEY`]:
    /// `{"call_id": …, "engine_user": …, "query_ids": […]}`, a missing value as
    /// `null`. [`Upstream::from_result`] reads it back as it was, when it keeps
    /// to the bounds.
    pub fn to_meta_value(&self) -> Value {
        let text = |value: &Option<String>| value.clone().map_or(Value::Null, Value::String);
        let mut meta = Map::new();
        meta.insert("call_id".to_owned(), text(&self.call_id));
        meta.insert("engine_user".to_owned(), text(&self.engine_user));
        meta.insert(
            "query_ids".to_owned(),
            Value::Array(self.query_ids.iter().cloned().map(Value::String).collect()),
        );
        Value::Object(meta)
    }
}

/// `object[key]` when it is a string within the bounds.
fn bounded_string(object: &Map<String, Value>, key: &str, max_bytes: usize) -> Option<String> {
    object.get(key).and_then(|value| bounded(value, max_bytes))
}

/// `value` when it is a non-empty string of at most `max_bytes`.
fn bounded(value: &Value, max_bytes: usize) -> Option<String> {
    value
        .as_str()
        .filter(|text| !text.is_empty() && text.len() <= max_bytes)
        .map(str::to_owned)
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;
    use serde_json::json;

    use super::*;

    fn result_with(upstream: Value) -> Value {
        json!({
            "content": [{"type": "text", "text": "done"}],
            "_meta": {UPSTREAM_META_KEY: upstream, "other.example/key": 1}
        })
    }

    #[test]
    fn what_the_server_writes_reads_back() {
        let upstream = Upstream {
            call_id: Some("call-1".into()),
            engine_user: Some("alice@example.com".into()),
            query_ids: vec![
                "20261210_101500_00001_abcde".into(),
                "20261210_101501_00002_abcde".into(),
            ],
        };
        assert_eq!(
            upstream.to_meta_value(),
            json!({
                "call_id": "call-1",
                "engine_user": "alice@example.com",
                "query_ids": ["20261210_101500_00001_abcde", "20261210_101501_00002_abcde"]
            })
        );
        assert_eq!(
            Upstream::from_result(&result_with(upstream.to_meta_value())),
            upstream
        );
        let empty = Upstream::default();
        assert_eq!(
            empty.to_meta_value(),
            json!({"call_id": null, "engine_user": null, "query_ids": []})
        );
        assert_eq!(
            Upstream::from_result(&result_with(empty.to_meta_value())),
            empty
        );
    }

    #[test]
    fn a_result_without_the_key_carries_nothing() {
        for result in [
            json!({"content": []}),
            json!({"content": [], "_meta": {}}),
            json!({"content": [], "_meta": null}),
            json!({"content": [], "_meta": "io.docket/upstream"}),
            json!({"content": [], "_meta": {"io.docket/other": {"engine_user": "x"}}}),
            json!(null),
            json!([1, 2]),
            json!("text"),
        ] {
            assert_eq!(
                Upstream::from_result(&result),
                Upstream::default(),
                "{result}"
            );
        }
    }

    #[test]
    fn malformed_values_are_ignored_one_by_one() {
        let read = Upstream::from_result(&result_with(json!({
            "call_id": 7,
            "engine_user": "bob",
            "query_ids": ["q1", 2, null, "", {"id": "q"}, "q2", "x".repeat(129), "q3"]
        })));
        assert_eq!(
            read,
            Upstream {
                call_id: None,
                engine_user: Some("bob".into()),
                query_ids: vec!["q1".into(), "q2".into(), "q3".into()],
            }
        );
        let read = Upstream::from_result(&result_with(json!({
            "call_id": "",
            "engine_user": "u".repeat(MAX_ENGINE_USER_BYTES + 1),
            "query_ids": "q1"
        })));
        assert_eq!(read, Upstream::default());
        assert_eq!(
            Upstream::from_result(&result_with(json!(["q1"]))),
            Upstream::default()
        );
        let at_the_bounds = Upstream::from_result(&result_with(json!({
            "engine_user": "u".repeat(MAX_ENGINE_USER_BYTES),
            "query_ids": ["x".repeat(MAX_UPSTREAM_ID_BYTES)]
        })));
        assert_eq!(
            at_the_bounds.engine_user.map(|user| user.len()),
            Some(MAX_ENGINE_USER_BYTES)
        );
        assert_eq!(at_the_bounds.query_ids.len(), 1);
    }

    #[test]
    fn the_first_32_ids_are_kept_in_order() {
        let ids: Vec<String> = (0..40).map(|n| format!("q{n:02}")).collect();
        let read = Upstream::from_result(&result_with(json!({"query_ids": ids})));
        assert_eq!(read.query_ids, ids[..MAX_UPSTREAM_IDS]);
    }

    /// Any JSON value, a few levels deep, with strings around the bounds.
    fn any_json() -> impl Strategy<Value = Value> {
        let text = prop_oneof![
            ".{0,8}",
            Just("x".repeat(MAX_UPSTREAM_ID_BYTES)),
            Just("x".repeat(MAX_UPSTREAM_ID_BYTES + 1)),
            Just("é".repeat(MAX_ENGINE_USER_BYTES / 2 + 1)),
            Just(UPSTREAM_META_KEY.to_owned()),
            Just("query_ids".to_owned()),
        ];
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            any::<i64>().prop_map(Value::from),
            any::<f64>().prop_map(Value::from),
            text.clone().prop_map(Value::String),
        ];
        let key = prop_oneof![
            Just("_meta".to_owned()),
            Just(UPSTREAM_META_KEY.to_owned()),
            Just("call_id".to_owned()),
            Just("engine_user".to_owned()),
            Just("query_ids".to_owned()),
            ".{0,4}",
        ];
        leaf.prop_recursive(4, 96, 48, move |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..48).prop_map(Value::Array),
                prop::collection::btree_map(key.clone(), inner, 0..6)
                    .prop_map(|map| Value::Object(map.into_iter().collect())),
            ]
        })
    }

    /// An attribution of arbitrary shape in the right place, so the bounds are
    /// exercised and not only the early returns.
    fn any_result() -> impl Strategy<Value = Value> {
        prop_oneof![
            any_json(),
            any_json().prop_map(result_with),
            (
                any_json(),
                any_json(),
                prop::collection::vec(any_json(), 0..80)
            )
                .prop_map(|(call_id, engine_user, query_ids)| {
                    result_with(json!({
                        "call_id": call_id,
                        "engine_user": engine_user,
                        "query_ids": query_ids,
                    }))
                }),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

        /// Whatever the result, reading it does not panic and the bounds hold;
        /// what was read writes and reads back as itself.
        #[test]
        fn reading_any_result_keeps_the_bounds(result in any_result()) {
            let read = Upstream::from_result(&result);
            prop_assert!(read.query_ids.len() <= MAX_UPSTREAM_IDS);
            prop_assert!(read
                .query_ids
                .iter()
                .all(|id| !id.is_empty() && id.len() <= MAX_UPSTREAM_ID_BYTES));
            prop_assert!(read
                .engine_user
                .as_ref()
                .is_none_or(|user| !user.is_empty() && user.len() <= MAX_ENGINE_USER_BYTES));
            prop_assert!(read
                .call_id
                .as_ref()
                .is_none_or(|id| !id.is_empty() && id.len() <= MAX_CALL_ID_BYTES));
            prop_assert_eq!(Upstream::from_result(&result_with(read.to_meta_value())), read);
        }
    }
}
