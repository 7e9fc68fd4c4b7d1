/*
 * How an output goes out over HTTP. The bytes are the run's, so nothing they hold may act in the
 * gateway's origin (the dashboard's too): never HTML, SVG or XML as such; `nosniff`, a CSP that
 * allows nothing, and files as attachments. A media type comes from a short list of names, and a
 * text type only for bytes that are UTF-8.
 */

const TEXT = 'text/plain; charset=utf-8';
const OCTETS = 'application/octet-stream';

const BY_EXTENSION: Readonly<Record<string, { type: string; text: boolean }>> = {
  json: { type: 'application/json', text: true },
  jsonl: { type: TEXT, text: true },
  ndjson: { type: TEXT, text: true },
  txt: { type: TEXT, text: true },
  log: { type: TEXT, text: true },
  md: { type: TEXT, text: true },
  csv: { type: TEXT, text: true },
  tsv: { type: TEXT, text: true },
  tap: { type: TEXT, text: true },
  diff: { type: TEXT, text: true },
  patch: { type: TEXT, text: true },
  yaml: { type: TEXT, text: true },
  yml: { type: TEXT, text: true },
  // Markup served as text: a browser shows it, never runs it.
  xml: { type: TEXT, text: true },
  html: { type: TEXT, text: true },
  svg: { type: TEXT, text: true },
  png: { type: 'image/png', text: false },
  jpg: { type: 'image/jpeg', text: false },
  jpeg: { type: 'image/jpeg', text: false },
  gif: { type: 'image/gif', text: false },
  webp: { type: 'image/webp', text: false },
  pdf: { type: 'application/pdf', text: false },
  gz: { type: 'application/gzip', text: false },
  tgz: { type: 'application/gzip', text: false },
  zip: { type: 'application/zip', text: false },
  tar: { type: 'application/x-tar', text: false },
};

/** A stream's media type: text when its bytes are UTF-8. */
export function streamMediaType(utf8: boolean): string {
  return utf8 ? TEXT : OCTETS;
}

/** A file's media type from its name; a text type only when its bytes are UTF-8. */
export function fileMediaType(path: string, utf8: boolean): string {
  const name = path.slice(path.lastIndexOf('/') + 1);
  const dot = name.lastIndexOf('.');
  const known = dot <= 0 ? undefined : BY_EXTENSION[name.slice(dot + 1).toLowerCase()];
  if (known === undefined) return utf8 ? TEXT : OCTETS;
  if (known.text && !utf8) return OCTETS;
  return known.type;
}

/** `attachment; filename="…"; filename*=UTF-8''…` (RFC 6266): the quoted name ASCII only, the other exact. */
export function attachmentDisposition(path: string): string {
  const name = path.slice(path.lastIndexOf('/') + 1) || 'artifact';
  const ascii = name.replace(/[^\x20-\x7e]|["\\%]/g, '_');
  const encoded = encodeURIComponent(name).replace(/['()*]/g, (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`);
  return `attachment; filename="${ascii}"; filename*=UTF-8''${encoded}`;
}

/** What every output answer carries besides its type. */
export const OUTPUT_SECURITY_HEADERS: Readonly<Record<string, string>> = {
  'x-content-type-options': 'nosniff',
  'content-security-policy': "default-src 'none'; sandbox",
  'cache-control': 'private, no-store',
};
