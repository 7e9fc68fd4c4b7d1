import { createHash } from 'node:crypto';

/** The sha256 of bytes read a chunk at a time, and whether they are well-formed UTF-8 (what a reader may show as text). */
export class DigestCheck {
  private readonly hash = createHash('sha256');
  private readonly utf8 = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true });
  private wellFormed = true;

  update(chunk: Uint8Array): void {
    this.hash.update(chunk);
    if (!this.wellFormed) return;
    try {
      this.utf8.decode(chunk, { stream: true });
    } catch {
      this.wellFormed = false;
    }
  }

  finish(): { sha256: string; wellFormed: boolean } {
    if (this.wellFormed) {
      try {
        this.utf8.decode();
      } catch {
        this.wellFormed = false;
      }
    }
    return { sha256: this.hash.digest('hex'), wellFormed: this.wellFormed };
  }
}
