import { createServer, type IncomingMessage, type Server } from 'node:http';
import { listenOnLoopback } from './loopback.js';
import { decodeTraceRequest } from './otlpProtobuf.js';

/** One span as the OTLP payload has it (either encoding), its attributes flattened to values. */
export interface ReceivedSpan {
  readonly traceId: string;
  readonly spanId: string;
  readonly parentSpanId: string | undefined;
  readonly name: string;
  readonly kind: number;
  readonly attributes: Record<string, string | number | boolean>;
  readonly links: readonly { traceId: string; spanId: string }[];
  readonly resource: Record<string, string | number | boolean>;
  readonly startTimeUnixNano: string;
}

export interface OtlpReceiver {
  /** The base URL (what OTEL_EXPORTER_OTLP_ENDPOINT names); the exporter posts to `/v1/traces` under it. */
  readonly url: string;
  /** Every request body as it arrived, bytes untouched. */
  readonly payloads: Buffer[];
  /** The content type of each request, in the order of `payloads`. */
  readonly contentTypes: string[];
  /** The spans of every payload so far, decoded. */
  spans(): ReceivedSpan[];
  /** Connections accepted so far (a silent collector answers none of them). */
  connections(): number;
  close(): Promise<void>;
}

type AnyValue = { stringValue?: string; intValue?: string | number; boolValue?: boolean; doubleValue?: number };
type KeyValue = { key: string; value: AnyValue };

const flat = (kvs: readonly KeyValue[] | undefined): Record<string, string | number | boolean> =>
  Object.fromEntries((kvs ?? []).map(({ key, value }) => [key, value.stringValue ?? (value.intValue !== undefined ? Number(value.intValue) : undefined) ?? value.boolValue ?? value.doubleValue ?? '']));

/**
 * A collector on loopback that speaks OTLP/HTTP, protobuf (`application/x-protobuf`, what guidgate sends by default)
 * or JSON (`application/json`, OTEL_EXPORTER_OTLP_PROTOCOL=http/json) payloads: `answer` decides whether it answers
 * (200, an empty response in the request's encoding) or accepts each request and never answers (a collector that
 * hangs).
 */
export async function startOtlpReceiver(answer: 'ok' | 'never' = 'ok'): Promise<OtlpReceiver> {
  const payloads: Buffer[] = [];
  const contentTypes: string[] = [];
  const server: Server = createServer((req: IncomingMessage, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      payloads.push(Buffer.concat(chunks));
      contentTypes.push(req.headers['content-type'] ?? '');
      if (answer !== 'ok') return;
      // An empty ExportTraceServiceResponse in the request's encoding.
      if (req.headers['content-type'] === 'application/x-protobuf') res.writeHead(200, { 'content-type': 'application/x-protobuf' }).end();
      else res.writeHead(200, { 'content-type': 'application/json' }).end('{}');
    });
  });
  const listening = await listenOnLoopback(server);
  return {
    url: listening.url,
    payloads,
    contentTypes,
    spans() {
      const out: ReceivedSpan[] = [];
      for (const [i, p] of payloads.entries()) {
        const doc = (contentTypes[i] === 'application/x-protobuf' ? decodeTraceRequest(p) : JSON.parse(p.toString('utf8'))) as {
          resourceSpans?: { resource?: { attributes?: KeyValue[] }; scopeSpans?: { spans?: { traceId: string; spanId: string; parentSpanId?: string; name: string; kind: number; attributes?: KeyValue[]; links?: { traceId: string; spanId: string }[]; startTimeUnixNano: string }[] }[] }[];
        };
        for (const rs of doc.resourceSpans ?? []) {
          const resource = flat(rs.resource?.attributes);
          for (const ss of rs.scopeSpans ?? []) {
            for (const s of ss.spans ?? []) {
              out.push({
                traceId: s.traceId, spanId: s.spanId, parentSpanId: s.parentSpanId === '' ? undefined : s.parentSpanId, name: s.name, kind: s.kind,
                attributes: flat(s.attributes), links: s.links ?? [], resource, startTimeUnixNano: s.startTimeUnixNano,
              });
            }
          }
        }
      }
      return out;
    },
    connections: listening.accepted,
    close: listening.close,
  };
}

/** A request the account system got, as a spy in front of it saw it. */
export interface SeenCall {
  readonly method: string;
  readonly url: string;
  readonly traceparent: string | undefined;
  readonly tracestate: string | undefined;
}

/** The W3C form of a traceparent (version 00): its trace id, parent id and flags. */
export function parseTraceparent(header: string | undefined): { traceId: string; parentId: string; flags: string } | null {
  const m = /^00-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})$/.exec(header ?? '');
  if (m === null || /^0+$/.test(m[1]!) || /^0+$/.test(m[2]!)) return null;
  return { traceId: m[1]!, parentId: m[2]!, flags: m[3]! };
}
