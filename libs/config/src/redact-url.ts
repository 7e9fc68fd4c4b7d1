/** A URL fit for a message: credentials removed (config may carry a password; never echo it). */
export function redactUrl(url: string): string {
  try {
    const parsed = new URL(url);
    if (parsed.username === '' && parsed.password === '') return url;
    parsed.username = '';
    parsed.password = '';
    return parsed.toString();
  } catch {
    return '(unparseable URL)';
  }
}
