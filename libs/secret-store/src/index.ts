export { checkKeyFileMode, ensureSecretKeyFile, readSecretKeyFile, SECRET_KEY_FILE } from './secret-key.file.js';
export { SecretStore } from './secret-store.adapter.js';
export type { PutOptions, PutOutcome, SecretAccess, SecretGrant, SecretListing, SecretStoreOptions } from './secret-store.adapter.js';
export { SecretValuesReader } from './secret-values.reader.js';
export { ensureSealKeyFile, readPublicKeysFile, readSealKeyFile, rotateSealKeyFile, SEAL_KEY_FILE, SEAL_PUBLIC_KEYS_FILE } from './seal-key.file.js';
export type { PublishedKey } from './seal-key.file.js';
