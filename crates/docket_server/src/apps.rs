//! MCP Apps (`io.modelcontextprotocol/ui`): the results view that hosts which
//! render views show `trino_query`'s and the exports' results in.
//!
//! The view is one static HTML file (`apps/results.html`, its script and style
//! inline, nothing fetched from anywhere) served as the `ui://docket/results`
//! resource. It reads the result the host pushes to it
//! (`ui/notifications/tool-result`, the call's `structuredContent`) and, for an
//! export, the asset's first rows through the host's `resources/read` when the
//! host offers that. A tool names the view in `_meta.ui.resourceUri` only for a
//! client that declared the extension (`ToolSpec::to_wire_for`); every other
//! client gets the tool list, the resource list and the results of before.

use docket_protocol::tools::ResourceContents;

use crate::features::{ResourceError, ResourceRead, ResourceSpec};

/// The URI of the results view.
pub(crate) const RESULTS_VIEW_URI: &str = "ui://docket/results";

/// The results view: a static document, compiled into the binary.
const RESULTS_VIEW_HTML: &str = include_str!("apps/results.html");

/// The results view as `resources/list` shows it.
pub(crate) fn results_view_spec() -> ResourceSpec {
    ResourceSpec::new(RESULTS_VIEW_URI, "Query results")
        .with_description(
            "A sortable, filterable table of a trino_query result with its column types, \
             and an export's first rows with its download button (MCP Apps view).",
        )
        .with_mime_type(docket_protocol::UI_MIME_TYPE)
}

/// `resources/read` of the results view: the document, and a CSP that allows no
/// other origin for anything (the view only talks to its host by `postMessage`).
pub(crate) async fn read_results_view(
    read: ResourceRead,
) -> Result<Vec<ResourceContents>, ResourceError> {
    let ui = docket_protocol::ui::ResourceUi {
        csp: docket_protocol::ui::Csp::default(),
        prefers_border: Some(true),
    };
    Ok(vec![ResourceContents {
        uri: read.uri,
        mime_type: Some(docket_protocol::UI_MIME_TYPE.to_owned()),
        text: Some(RESULTS_VIEW_HTML.to_owned()),
        blob: None,
        meta: Some(docket_protocol::ui::meta(&ui)),
    }])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_view_fetches_nothing_and_writes_data_only_as_text() {
        // The document's own policy allows no origin but its inline code, and its
        // script never parses data as markup.
        assert!(RESULTS_VIEW_HTML.contains("default-src 'none'"));
        assert!(!RESULTS_VIEW_HTML.contains("innerHTML"));
        assert!(!RESULTS_VIEW_HTML.contains("http://"));
        assert!(!RESULTS_VIEW_HTML.contains("https://"));
        assert!(!RESULTS_VIEW_HTML.contains("fetch("));
    }
}
