/**
 * Text for a receipt that may carry what a workload chose (a file name in an error, say): no NUL,
 * at most `max` UTF-16 units, never a lone surrogate (canonical JSON refuses one, and the append
 * would fail) — a pair the cut would split is dropped whole.
 */
export function boundedText(text: string, max: number): string {
  let out = text.split('\u0000').join('').toWellFormed();
  if (out.length > max) out = out.slice(0, /[\uD800-\uDBFF]/.test(out.charAt(max - 1)) ? max - 1 : max);
  return out;
}
