export { ensureSecretKeyFile, readSecretKeyFile, SECRET_KEY_FILE } from './secret-key.file.js';
export { SecretStore } from './secret-store.adapter.js';
export type { PutOptions, PutOutcome, SecretAccess, SecretGrant, SecretListing, SecretStoreOptions } from './secret-store.adapter.js';
export { SecretValuesReader } from './secret-values.reader.js';
