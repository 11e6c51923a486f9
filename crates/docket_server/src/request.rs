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

impl RequestContext {
    /// A request made inside the server as `identity` (a script run's
    /// `platform.*` calls, named by `run_id`, and the portal's pages): the
    /// current revision, declaring nothing, asking for no progress.
    pub(crate) fn in_process(identity: Arc<Identity>, run_id: Option<&str>) -> Self {
        Self {
            identity,
            meta: RequestMeta {
                protocol_version: docket_protocol::PROTOCOL_VERSION.to_owned(),
                client_capabilities: docket_protocol::meta::ClientCapabilities::default(),
                client_info: None,
                progress_token: None,
                log_level: None,
            },
            headers: HeaderMap::new(),
            run_id: run_id.map(str::to_owned),
        }
    }
}
