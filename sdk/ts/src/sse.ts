// A reader of Server-Sent Events over a web stream: what Paddock's exec,
// job and ledger streams send (id:, event: and one data: line of JSON).

/** One event as sent; data is the data lines joined by newlines. */
export interface SSEEvent {
  id?: string;
  event: string;
  data: string;
}

/** The longest line the reader accepts (a job's output chunk is far less). */
export const MAX_SSE_LINE = 32 << 20;

/** parseSSE yields the events of a text/event-stream body as they arrive. */
export async function* parseSSE(body: ReadableStream<Uint8Array>): AsyncGenerator<SSEEvent> {
  const reader = body.getReader();
  const dec = new TextDecoder();
  let buf = "";
  let ev: { id?: string; event: string; data: string[] } = { event: "message", data: [] };
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (value) buf += dec.decode(value, { stream: true });
      if (done) buf += dec.decode();
      let nl: number;
      while ((nl = buf.search(/\r\n|\r|\n/)) >= 0) {
        let line = buf.slice(0, nl);
        const sep = buf[nl] === "\r" && buf[nl + 1] === "\n" ? 2 : 1;
        if (buf[nl] === "\r" && nl + 1 === buf.length && !done) break; // a \r\n split across chunks
        buf = buf.slice(nl + sep);
        if (line === "") {
          if (ev.data.length > 0 || ev.id !== undefined) {
            yield { id: ev.id, event: ev.event, data: ev.data.join("\n") };
          }
          ev = { event: "message", data: [] };
          continue;
        }
        if (line.startsWith(":")) continue; // a comment (keep-alive)
        const colon = line.indexOf(":");
        const field = colon < 0 ? line : line.slice(0, colon);
        let val = colon < 0 ? "" : line.slice(colon + 1);
        if (val.startsWith(" ")) val = val.slice(1);
        line = "";
        if (field === "data") ev.data.push(val);
        else if (field === "event") ev.event = val;
        else if (field === "id") ev.id = val;
      }
      if (buf.length > MAX_SSE_LINE) throw new Error("event stream: a line is longer than 32 MiB");
      if (done) return;
    }
  } finally {
    reader.cancel().catch(() => {});
  }
}
