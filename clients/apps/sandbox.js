// The sandbox proxy (see sandbox.html). It trusts only the page that framed it, whose origin the
// host names in the `host` query parameter and the referrer confirms, and the view it made.
"use strict";

const HOST_ORIGIN = new URL(location.href).searchParams.get("host");
if (window.self === window.top || !HOST_ORIGIN || new URL(document.referrer).origin !== HOST_ORIGIN) {
  throw new Error("the sandbox runs only inside the host page that names itself");
}
const OWN_ORIGIN = location.origin;

// The view's frame: scripts run, it has this (foreign to the host) origin, and nothing else
// (no popups, no top navigation, no forms).
const inner = document.createElement("iframe");
inner.setAttribute("sandbox", "allow-scripts allow-same-origin");
document.body.appendChild(inner);

window.addEventListener("message", (event) => {
  const data = event.data;
  if (event.source === window.parent) {
    if (event.origin !== HOST_ORIGIN) return;
    if (data && data.method === "ui/notifications/sandbox-resource-ready") {
      // Written into the frame rather than given as srcdoc, as the reference host does: the
      // document keeps this page's origin and its CSP (the response header) applies to it.
      const html = data.params && data.params.html;
      if (typeof html !== "string") return;
      const doc = inner.contentDocument;
      doc.open();
      doc.write(html);
      doc.close();
    } else if (inner.contentWindow) {
      inner.contentWindow.postMessage(data, OWN_ORIGIN);
    }
  } else if (event.source === inner.contentWindow) {
    if (event.origin !== OWN_ORIGIN) return;
    if (data && typeof data.method === "string" && data.method.startsWith("ui/notifications/sandbox-")) return;
    window.parent.postMessage(data, HOST_ORIGIN);
  }
});

window.parent.postMessage({ jsonrpc: "2.0", method: "ui/notifications/sandbox-proxy-ready", params: {} }, HOST_ORIGIN);
