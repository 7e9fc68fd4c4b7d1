/** A URL fit for a message: credentials removed (config may carry a password; never echo it). */
export function redactUrl(url: string): string {
  let parsed: URL | null = null;
  try {
    parsed = new URL(url);
  } catch {
    // `host:port` (NATS takes servers without a scheme) is no URL at all.
  }
  if (parsed === null || parsed.host === '') {
    // No authority (`host:port`, `user:pw@host:port` read as a scheme): keep it, less anything before an `@`.
    const at = url.lastIndexOf('@');
    return at === -1 ? url : url.slice(at + 1);
  }
  if (parsed.username === '' && parsed.password === '') return url;
  parsed.username = '';
  parsed.password = '';
  return parsed.toString();
}
