export { PROJECTOR_CONFIG, ProjectorConfigSchema } from './projector.config.js';
export type { ProjectorConfig } from './projector.config.js';
export { openProjectorConnections } from './projector.connections.js';
export type { ProjectorConnections } from './projector.connections.js';
export { ProjectorModule } from './projector.module.js';
export { ProjectorService } from './projector.service.js';
export type { ProjectorStats } from './projector.service.js';
export { startProjector } from './start-projector.js';
export type { RunningProjector, StartProjectorOptions } from './start-projector.js';
