export { checkpointOfNote, TransparencyLog } from './tlog.adapter.js';
export type { CheckpointAnswer, Leaf, StoredCheckpoint } from './tlog.adapter.js';
export { checkpointRequestSubject, leafSubject, leafSubjects, MAX_LEAF_BYTES, resolveTlogOptions, tlogStreamConfig, tlogStreamProblems } from './tlog-stream.config.js';
export type { ResolvedTlogOptions, TlogOptions } from './tlog-stream.config.js';
