//! The parts every result shares: the `resultType` discriminator, the
//! `serverInfo` in `_meta`, and the caching hints of cacheable results.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::meta::{Implementation, SERVER_INFO_KEY};

/// What kind of result a response carries.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ResultType {
    /// A final result.
    #[default]
    Complete,
    /// An interim result asking the client for input (multi round-trip requests).
    InputRequired,
    /// A task handle (tasks extension).
    Task,
}

/// Who may reuse a cacheable result.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum CacheScope {
    /// Any client may reuse it.
    Public,
    /// Only the client that asked (it depends on who asked).
    Private,
}

/// An empty acknowledgement: `{"resultType":"complete"}`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct EmptyResult {
    /// Always [`ResultType::Complete`].
    pub result_type: ResultType,
}

/// Adds `_meta["io.modelcontextprotocol/serverInfo"]` to a result object, keeping any
/// `_meta` it already has, and a `resultType` of `complete` when it has none.
/// Non-object values are returned unchanged.
pub fn stamp_server_info(result: Value, server_info: &Implementation) -> Value {
    match serde_json::to_value(server_info) {
        Ok(info) => stamp_encoded_server_info(result, &info),
        Err(_) => result,
    }
}

/// A typed result with `_meta["io.modelcontextprotocol/serverInfo"]` added, so it is
/// encoded in one pass, with no [`Value`] built in between (the hot answers, `tasks/get`
/// and a created task, go this way). Only for result types that have no `_meta` and
/// always a `resultType` of their own; everything else goes through [`stamp_server_info`].
#[derive(Debug, Serialize)]
pub struct WithServerInfo<'a, T> {
    /// The result.
    #[serde(flatten)]
    pub result: &'a T,
    /// The `_meta` object holding the server's info.
    #[serde(rename = "_meta")]
    pub meta: ServerInfoMeta<'a>,
}

impl<'a, T> WithServerInfo<'a, T> {
    /// `result` stamped with `server_info`.
    pub fn new(result: &'a T, server_info: &'a Implementation) -> Self {
        Self {
            result,
            meta: ServerInfoMeta { server_info },
        }
    }
}

/// `_meta` with only the server's info in it (see [`WithServerInfo`]).
#[derive(Debug, Serialize)]
pub struct ServerInfoMeta<'a> {
    /// Under [`SERVER_INFO_KEY`].
    #[serde(rename = "io.modelcontextprotocol/serverInfo")]
    pub server_info: &'a Implementation,
}

/// [`stamp_server_info`] with the server's [`Implementation`] already encoded,
/// for a server that stamps every result with the same one.
pub fn stamp_encoded_server_info(mut result: Value, server_info: &Value) -> Value {
    if let Value::Object(object) = &mut result {
        object
            .entry("resultType")
            .or_insert_with(|| Value::String("complete".into()));
        let meta = object
            .entry("_meta")
            .or_insert_with(|| Value::Object(Default::default()));
        if let Value::Object(meta) = meta {
            meta.insert(SERVER_INFO_KEY.to_owned(), server_info.clone());
        }
    }
    result
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn stamping_in_one_pass_writes_what_stamping_a_value_writes() -> Result<(), serde_json::Error> {
        let info = Implementation::new("docket", "1.2.3");
        let result = EmptyResult::default();
        let one_pass = serde_json::to_value(WithServerInfo::new(&result, &info))?;
        let stamped = stamp_server_info(serde_json::to_value(&result)?, &info);
        assert_eq!(one_pass, stamped);
        assert_eq!(
            one_pass,
            json!({
                "resultType": "complete",
                "_meta": {SERVER_INFO_KEY: {"name": "docket", "version": "1.2.3"}},
            })
        );
        Ok(())
    }
}
