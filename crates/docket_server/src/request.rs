//! What the transport learned about a request before dispatch: who is calling,
//! the request's `_meta` and headers, and the script run making it, if any.

use std::sync::Arc;

use docket_protocol::meta::RequestMeta;
use http::HeaderMap;

use crate::auth::Identity;

/// What the transport learned about a request before dispatch.
pub(crate) struct RequestContext {
    /// Who is calling.
    pub(crate) identity: Arc<Identity>,
    /// The request's `_meta`.
    pub(crate) meta: RequestMeta,
    /// The request headers (for `Mcp-Param-*`).
    pub(crate) headers: HeaderMap,
    /// The script run making this call, for a call from inside a run (see
    /// `call::call_in_process`); `None` for every HTTP request.
    pub(crate) run_id: Option<String>,
}
