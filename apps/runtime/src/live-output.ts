import type { Finding, OutputScanner } from '@cairn/secrets';

/*
 * Live output of a session's exec (docs/sandboxes.md, "Live output"): what the program writes is
 * redacted and handed on while it runs, and what is handed on, put together, is exactly what the
 * whole kept output scanned at once would be — so the receipt's sha256 covers the live stream.
 *
 * A piece is let out only up to a cut where nothing the scanner replaces can straddle, whatever
 * follows: the scanner's `heldTail` keeps back a tail that could still become a secret's spelling,
 * a key or a private key block; the cut sits after a character no key shape continues with, so the
 * rest scans the same on its own; and the piece before the cut, scanned alone, followed by the rest
 * scanned alone, must equal the pending bytes scanned whole (nothing found straddles it now).
 */

/** Characters a key shape's start may not follow (the key patterns' lookbehind): a cut only after another one. */
const TOKEN_CHAR = /[A-Za-z0-9_-]/;

export interface RedactedOutput {
  /** Everything let out, in order: the kept output, redacted. */
  bytes: Uint8Array;
  findings: Finding[];
}

/** One stream's live redaction: `push` what the program writes, `finish` once it has ended. */
export class LiveRedactor {
  /** Kept bytes not let out yet, as latin1 (one character per byte, as the scanner reads them). */
  private pending = '';
  private kept = 0;
  private readonly out: Uint8Array[] = [];
  private readonly tally = new Map<string, Finding>();
  /** The pending length when a cut last failed: try again once it has grown by a quarter. */
  private failedAt = -1;
  private finished = false;

  constructor(
    private readonly scanner: OutputScanner,
    /** Bytes kept (the rest is counted by the driver, not scanned nor let out). */
    private readonly limit: number,
    private readonly emit: (bytes: Uint8Array) => void,
  ) {}

  push(chunk: Uint8Array): void {
    if (this.finished) return;
    const room = this.limit - this.kept;
    if (room <= 0) return;
    const part = chunk.byteLength <= room ? chunk : chunk.subarray(0, room);
    this.kept += part.byteLength;
    this.pending += Buffer.from(part.buffer, part.byteOffset, part.byteLength).toString('latin1');
    if (this.failedAt >= 0 && this.pending.length < this.failedAt + Math.max(1, this.failedAt >> 2)) return;
    this.letOut();
  }

  /** Scans and lets out what was held back; returns all that was let out and what was found. */
  finish(): RedactedOutput {
    if (!this.finished) {
      this.finished = true;
      if (this.pending.length > 0) this.release(this.scanner.scan(latin1Bytes(this.pending)));
      this.pending = '';
    }
    const joined = Buffer.concat(this.out);
    // In the order a scan of the whole lists them.
    const findings = [...this.tally.values()].sort((a, b) => (a.secret ?? '').localeCompare(b.secret ?? '') || a.pattern.localeCompare(b.pattern));
    return { bytes: new Uint8Array(joined.buffer, joined.byteOffset, joined.byteLength), findings };
  }

  private letOut(): void {
    const cut = safeCut(this.pending, this.scanner.heldTail(this.pending));
    if (cut === 0) {
      this.failedAt = this.pending.length;
      return;
    }
    const head = this.scanner.scan(latin1Bytes(this.pending.slice(0, cut)));
    if (cut < this.pending.length) {
      const whole = this.scanner.scan(latin1Bytes(this.pending));
      const rest = this.scanner.scan(latin1Bytes(this.pending.slice(cut)));
      if (!Buffer.concat([head.bytes, rest.bytes]).equals(whole.bytes)) {
        // Something found straddles the cut: wait for more (or the end).
        this.failedAt = this.pending.length;
        return;
      }
    }
    this.release(head);
    this.pending = this.pending.slice(cut);
    this.failedAt = -1;
  }

  private release(scanned: { bytes: Uint8Array; findings: readonly Finding[] }): void {
    for (const finding of scanned.findings) {
      const key = `${finding.pattern}\u0000${finding.secret ?? ''}`;
      const seen = this.tally.get(key);
      this.tally.set(key, { ...finding, count: (seen?.count ?? 0) + finding.count });
    }
    if (scanned.bytes.byteLength === 0) return;
    this.out.push(scanned.bytes);
    this.emit(scanned.bytes);
  }
}

/** Where `pending` may be cut: before its held tail, after a character no key shape continues; 0 for nowhere. */
export function safeCut(pending: string, held: number): number {
  let cut = pending.length - held;
  while (cut > 0 && TOKEN_CHAR.test(pending[cut - 1]!)) cut--;
  return cut;
}

function latin1Bytes(text: string): Uint8Array {
  const buffer = Buffer.from(text, 'latin1');
  return new Uint8Array(buffer.buffer, buffer.byteOffset, buffer.byteLength);
}
