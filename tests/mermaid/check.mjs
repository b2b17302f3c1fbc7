// Parse one Mermaid diagram from stdin with Mermaid's own parser (the one GitHub runs),
// under jsdom. Prints {"ok": true, "type": ...} or {"ok": false, "error": ...}; exit 1 on error.
import { JSDOM } from "jsdom";

const dom = new JSDOM("<!doctype html><html><body></body></html>");
globalThis.window = dom.window;
globalThis.document = dom.window.document;
const { default: mermaid } = await import("mermaid");
mermaid.initialize({ startOnLoad: false });

let text = "";
for await (const chunk of process.stdin) text += chunk;
try {
  const result = await mermaid.parse(text);
  console.log(JSON.stringify({ ok: true, type: result.diagramType }));
} catch (err) {
  console.log(JSON.stringify({ ok: false, error: String(err.message || err) }));
  process.exitCode = 1;
}
