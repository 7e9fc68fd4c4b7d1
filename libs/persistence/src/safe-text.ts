/**
 * PostgreSQL text holds no NUL and no lone surrogate. Poison details and subjects can carry
 * either (a JSON parse error quotes the bad input), so they are made storable, visibly.
 */
export function safeText(text: string): string {
  return text.toWellFormed().replaceAll('\u0000', '\uFFFD');
}
