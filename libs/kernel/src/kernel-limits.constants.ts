/**
 * Input bounds of the kernel's operations. Everything a run produced is untrusted; each operation
 * refuses (or reports as unreadable) input past these sizes instead of working on it without end.
 */
export const KERNEL_LIMITS = Object.freeze({
  /** Largest text searched by `text_contains` or decoded for a check, in bytes. */
  maxTextBytes: 16 * 1024 * 1024,
  /** Largest JSON document parsed by `json_path`, in bytes. */
  maxJsonBytes: 16 * 1024 * 1024,
  /** Largest JUnit XML or TAP report summarised, in bytes. */
  maxReportBytes: 32 * 1024 * 1024,
  /** Longest JSON path or source expression, in characters. */
  maxPathLength: 2048,
  /** Most lines on either side of a line diff. */
  maxDiffLines: 50_000,
  /** Most edits a line diff searches before giving up (Myers' D). */
  maxDiffEdits: 2_000,
  /** Most edit lines a line diff lists (the counts are always complete). */
  maxDiffListed: 200,
  /** Longest line kept in a diff listing, in characters. */
  maxDiffLineLength: 400,
});
