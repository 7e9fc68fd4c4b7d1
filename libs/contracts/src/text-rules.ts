/** Text with no control characters at all (C0, DEL, C1): names, paths, labels. */
export const NO_CONTROL_CHARS = /^\P{Cc}*$/u;

/** NUL cannot cross exec, C strings or PostgreSQL text; every other character may. */
export function hasNoNul(text: string): boolean {
  return !text.includes('\u0000');
}
