export { FsArtifactStore } from './artifact-store.adapter.js';
export type { ArtifactState, ArtifactStore } from './artifact-store.adapter.js';
