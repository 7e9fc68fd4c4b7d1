export { DEFAULT_SANDBOX_USER, hardenedContainerOptions, SANDBOX_ENV, tmpfsOptions, warmContainerOptions } from './container-config.js';
export type { SandboxUser } from './container-config.js';
export { createDockerClient, DEFAULT_DOCKER_SOCKET, DOCKER_API_VERSION, engineError, engineStatus, isEngineUnreachable } from './docker-client.js';
export { DockerSandboxDriver } from './docker-sandbox.driver.js';
export type { DockerSandboxDriverOptions } from './docker-sandbox.driver.js';
export type { ProbeCoverage, ProbeMode } from './limit-probe.js';
export {
  BUSYBOX_APPLETS,
  BUSYBOX_IMAGE_TAG,
  buildBusyboxImage,
  buildDebianImage,
  DEBIAN_IMAGE_TAG,
  DEFAULT_DEBIAN_PACKAGES,
  ensureBusyboxImage,
  IMAGE_LABEL,
  imageDigest,
  listCairnImages,
} from './images.js';
export type { BuiltImage, BusyboxImageOptions, CairnImage, DebianImageOptions, ImageBuildOptions } from './images.js';
export { elfNeedsLoader } from './static-elf.js';
export { WarmPoolBook, warmProfileId } from './warm-pool.js';
export type { WarmEntry, WarmPoolLimits, WarmProfile, WarmRecipe } from './warm-pool.js';
