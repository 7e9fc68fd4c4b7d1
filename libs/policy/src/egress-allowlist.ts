/*
 * Matching a RunSpec's egress request (`host:port`) against the operator's allowlist entries
 * (`host:port` or `*.domain:port`, see `EgressPatternSchema`). Pure string rules: names are
 * compared as written (both sides are lower-case by their schemas), never resolved here.
 */

const IPV4_LITERAL = /^[0-9]+(\.[0-9]+){3}$/;

function splitHostPort(entry: string): { host: string; port: string } | null {
  const colon = entry.lastIndexOf(':');
  if (colon <= 0 || colon === entry.length - 1) return null;
  return { host: entry.slice(0, colon), port: entry.slice(colon + 1) };
}

/**
 * Whether `pattern` admits `requested`. The ports must be equal. `*.example.com` admits any name
 * below `example.com` (`a.example.com`, `a.b.example.com`), never `example.com` itself, and never an
 * IPv4 literal (`*.0.1` must not admit `10.0.0.1`): an address is admitted only when listed exactly.
 */
export function egressPatternMatches(pattern: string, requested: string): boolean {
  const want = splitHostPort(pattern);
  const got = splitHostPort(requested);
  if (want === null || got === null || want.port !== got.port) return false;
  if (!want.host.startsWith('*.')) return want.host === got.host;
  if (IPV4_LITERAL.test(got.host)) return false;
  const suffix = want.host.slice(1); // ".example.com"
  return got.host.length > suffix.length && got.host.endsWith(suffix);
}

/** The requested entries no pattern admits, in the order asked (each once). */
export function egressNotAllowed(allow: readonly string[], requested: readonly string[]): string[] {
  const refused = requested.filter((entry) => !allow.some((pattern) => egressPatternMatches(pattern, entry)));
  return [...new Set(refused)];
}
