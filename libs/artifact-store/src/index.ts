export { FsArtifactStore } from './artifact-store.adapter.js';
export type { ArtifactState, ArtifactStore, VerifiedArtifact } from './artifact-store.adapter.js';
export { importArtifactDir } from './artifact-import.js';
export type { ArtifactImport } from './artifact-import.js';
export { digestHex, NatsArtifactStore, objectStoreStreamName } from './nats-artifact-store.adapter.js';
export type { NatsArtifactStoreOptions } from './nats-artifact-store.adapter.js';
