export { KEY_PATTERNS, keyPatternDescription } from './key-patterns.js';
export type { KeyPattern } from './key-patterns.js';
export { OutputScanner, redactionMarker, SECRET_ENCODINGS } from './output-scanner.js';
export { redactJson } from './redact-json.js';
export type { FieldFinding, RedactedJson } from './redact-json.js';
export type { Finding, ScannedSecret, ScanOutcome, SecretEncoding } from './output-scanner.js';
export {
  formatSecretKeyring,
  generateSecretKey,
  openSecret,
  parseSecretKeyring,
  sealedKeyId,
  sealSecret,
  SECRET_KEY_BYTES,
  secretKey,
  secretKeyId,
} from './secret-cipher.js';
export type { SecretKey, SecretKeyring, SecretRef } from './secret-cipher.js';
export { checkSecretName, checkSecretValue, lastFour, MAX_SECRET_BYTES, MIN_SECRET_BYTES, withoutTrailingNewline } from './secret-value.js';
export { assertNoLiteralKeys, findLiteralKeys } from './spec-scan.js';
export type { LiteralKey } from './spec-scan.js';
export {
  BOX_VERSION,
  boxKeyId,
  boxKeyIdOf,
  boxPrivateKey,
  boxPublicKey,
  formatBoxKeyring,
  formatBoxPublicKeys,
  generateBoxKey,
  openSealedBox,
  parseBoxKeyring,
  parseBoxPublicKeys,
  sealToPublicKey,
} from './sealed-box.js';
export type { BoxKeyring, BoxPrivateKey, BoxPublicKey } from './sealed-box.js';
