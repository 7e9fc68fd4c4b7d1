export { canonicalJson, CanonicalJsonError } from './canonical-json.js';
export { LINK_FIELDS, receiptBody, receiptHash, receiptPreimage, sealReceipt, sha256Hex } from './receipt-hash.js';
export { ChainVerifier, verifyChain } from './verify-chain.js';
export type { ChainBreakReason, ChainVerification, VerifyOptions } from './verify-chain.js';
export { escapeLineSeparators, jsonLine, LineSplitter, LineTooLongError, readLines, splitLines } from './json-lines.js';
export { recordedBreakOf, recordedBreaksOf } from './recorded-breaks.js';
export type { RecordedBreak } from './recorded-breaks.js';
