/**
 * What the OpenTelemetry variables ask of guidgate's export, read without loading the SDK (the command line checks
 * them before any command runs).
 */

/** The OTLP/HTTP encodings guidgate exports in: protobuf (the OpenTelemetry default, and the cheaper) or JSON. */
export type OtlpProtocol = 'http/protobuf' | 'http/json';

export const OTLP_PROTOCOLS: readonly OtlpProtocol[] = ['http/protobuf', 'http/json'];

const set = (env: NodeJS.ProcessEnv, name: string): boolean => (env[name] ?? '').trim() !== '';

/** Whether the environment asks for export: an OTLP endpoint set, and the SDK not disabled. */
export function exportRequested(env: NodeJS.ProcessEnv = process.env): boolean {
  if ((env.OTEL_SDK_DISABLED ?? '').trim().toLowerCase() === 'true') return false;
  if ((env.OTEL_TRACES_EXPORTER ?? '').trim().toLowerCase() === 'none') return false;
  return set(env, 'OTEL_EXPORTER_OTLP_TRACES_ENDPOINT') || set(env, 'OTEL_EXPORTER_OTLP_ENDPOINT');
}

/**
 * The encoding of the export: `OTEL_EXPORTER_OTLP_TRACES_PROTOCOL`, else `OTEL_EXPORTER_OTLP_PROTOCOL`, else
 * `http/protobuf`. Another value (`grpc`: guidgate exports over HTTP only) is a problem naming the variable.
 */
export function otlpProtocol(env: NodeJS.ProcessEnv = process.env): { protocol: OtlpProtocol } | { problem: string } {
  for (const name of ['OTEL_EXPORTER_OTLP_TRACES_PROTOCOL', 'OTEL_EXPORTER_OTLP_PROTOCOL'] as const) {
    if (!set(env, name)) continue;
    const value = env[name]!.trim();
    const protocol = OTLP_PROTOCOLS.find((p) => p === value);
    if (protocol !== undefined) return { protocol };
    return { problem: `environment variable ${name}='${value}' is not an OTLP protocol guidgate exports with (${OTLP_PROTOCOLS.join(', ')})` };
  }
  return { protocol: 'http/protobuf' };
}

/** The problem with the export's settings, if export is asked for and they cannot be followed (null: none). */
export function tracingSettingsProblem(env: NodeJS.ProcessEnv = process.env): string | null {
  if (!exportRequested(env)) return null;
  const p = otlpProtocol(env);
  return 'problem' in p ? p.problem : null;
}
