export { FsArtifactStore } from './artifact-store.adapter.js';
export type { ArtifactState, ArtifactStore, VerifiedArtifact } from './artifact-store.adapter.js';
