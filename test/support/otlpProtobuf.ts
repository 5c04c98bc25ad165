/**
 * The OTLP/HTTP protobuf payload of a trace export (`ExportTraceServiceRequest`, opentelemetry-proto's
 * trace/v1/trace.proto), decoded into the shape of its JSON form (ids as hex, times as decimal strings), so that the
 * test receiver reads both encodings the same way. Only the fields the tests look at; the rest are skipped.
 */

interface Field {
  readonly no: number;
  /** Varint fields: the value; fixed64: the 8 bytes; length-delimited: the bytes. */
  readonly varint?: bigint;
  readonly bytes?: Buffer;
}

function* fields(buf: Buffer): Generator<Field> {
  let at = 0;
  const varint = (): bigint => {
    let v = 0n;
    for (let shift = 0n; ; shift += 7n) {
      if (at >= buf.length) throw new Error('protobuf: a varint runs past the end');
      const b = buf[at++]!;
      v |= BigInt(b & 0x7f) << shift;
      if ((b & 0x80) === 0) return v;
    }
  };
  while (at < buf.length) {
    const key = Number(varint());
    const no = key >>> 3;
    switch (key & 7) {
      case 0:
        yield { no, varint: varint() };
        break;
      case 1:
        yield { no, bytes: buf.subarray(at, (at += 8)) };
        break;
      case 2: {
        const len = Number(varint());
        yield { no, bytes: buf.subarray(at, (at += len)) };
        break;
      }
      case 5:
        yield { no, bytes: buf.subarray(at, (at += 4)) };
        break;
      default:
        throw new Error(`protobuf: wire type ${key & 7} of field ${no} is not one OTLP uses`);
    }
  }
}

type AnyValue = { stringValue?: string; intValue?: string; boolValue?: boolean; doubleValue?: number };
type KeyValue = { key: string; value: AnyValue };

function anyValue(buf: Buffer): AnyValue {
  for (const f of fields(buf)) {
    if (f.no === 1) return { stringValue: f.bytes!.toString('utf8') };
    if (f.no === 2) return { boolValue: f.varint !== 0n };
    if (f.no === 3) return { intValue: BigInt.asIntN(64, f.varint!).toString() };
    if (f.no === 4) return { doubleValue: f.bytes!.readDoubleLE(0) };
  }
  return {};
}

function keyValue(buf: Buffer): KeyValue {
  let key = '';
  let value: AnyValue = {};
  for (const f of fields(buf)) {
    if (f.no === 1) key = f.bytes!.toString('utf8');
    if (f.no === 2) value = anyValue(f.bytes!);
  }
  return { key, value };
}

function link(buf: Buffer): { traceId: string; spanId: string } {
  let traceId = '';
  let spanId = '';
  for (const f of fields(buf)) {
    if (f.no === 1) traceId = f.bytes!.toString('hex');
    if (f.no === 2) spanId = f.bytes!.toString('hex');
  }
  return { traceId, spanId };
}

function span(buf: Buffer) {
  const s = { traceId: '', spanId: '', parentSpanId: '', name: '', kind: 0, startTimeUnixNano: '0', attributes: [] as KeyValue[], links: [] as { traceId: string; spanId: string }[] };
  for (const f of fields(buf)) {
    if (f.no === 1) s.traceId = f.bytes!.toString('hex');
    else if (f.no === 2) s.spanId = f.bytes!.toString('hex');
    else if (f.no === 4) s.parentSpanId = f.bytes!.toString('hex');
    else if (f.no === 5) s.name = f.bytes!.toString('utf8');
    else if (f.no === 6) s.kind = Number(f.varint!);
    else if (f.no === 7) s.startTimeUnixNano = f.bytes!.readBigUInt64LE(0).toString();
    else if (f.no === 9) s.attributes.push(keyValue(f.bytes!));
    else if (f.no === 13) s.links.push(link(f.bytes!));
  }
  return s;
}

/** An `ExportTraceServiceRequest` as its JSON form has it (`resourceSpans` … `spans`). */
export function decodeTraceRequest(buf: Buffer) {
  const resourceSpans = [];
  for (const rs of fields(buf)) {
    if (rs.no !== 1) continue;
    const attributes: KeyValue[] = [];
    const scopeSpans = [];
    for (const f of fields(rs.bytes!)) {
      if (f.no === 1) for (const r of fields(f.bytes!)) if (r.no === 1) attributes.push(keyValue(r.bytes!));
      if (f.no === 2) scopeSpans.push({ spans: [...fields(f.bytes!)].filter((s) => s.no === 2).map((s) => span(s.bytes!)) });
    }
    resourceSpans.push({ resource: { attributes }, scopeSpans });
  }
  return { resourceSpans };
}
