export {
  DEFAULT_SANDBOX_USER,
  hardenedContainerOptions,
  MASKED_PATHS,
  NO_RESOLVER,
  READONLY_PATHS,
  SANDBOX_ENV,
  SANDBOX_HOSTNAME,
  sandboxUserProblem,
  SECRETS_DIR,
  SECRETS_TMPFS_MIB,
  secretsTmpfsOptions,
  tmpfsOptions,
  warmContainerOptions,
} from './container-config.js';
export type { SandboxNetwork, SandboxUser } from './container-config.js';
export { createDockerClient, DEFAULT_DOCKER_SOCKET, DOCKER_API_VERSION, engineError, engineStatus, isEngineUnreachable } from './docker-client.js';
export { DockerSandboxDriver } from './docker-sandbox.driver.js';
export { engineUserns, hostIdsOf, parseEngineUserns } from './engine-userns.js';
export type { EngineUserns } from './engine-userns.js';
export type { DockerCreateOptions, DockerSandboxDriverOptions, SandboxEgress } from './docker-sandbox.driver.js';
export { addressAllowed, canonicalAddress, classifyAddress } from './egress-address.js';
export type { AddressClass } from './egress-address.js';
export { egressRules, IptablesFirewall, parseRuleComment, ruleComment } from './egress-firewall.js';
export type { EgressFirewall, EgressRuleSet } from './egress-firewall.js';
export { EGRESS_LABEL, egressBridgeName, egressNetworkName, EgressNetworks, proxyEnv } from './egress-network.js';
export type { EgressNetworksOptions, EgressRequest, EgressSession } from './egress-network.js';
export { EgressProxy, resolverFor } from './egress-proxy.js';
export type { EgressDenial, EgressDenialReason, EgressProxyOptions, ResolveHost } from './egress-proxy.js';
export { DEFAULT_EGRESS_PROXY_USER, EGRESS_PROXY_ENTRY, EgressProxyProcess } from './egress-proxy-process.js';
export type { EgressProxyProcessOptions } from './egress-proxy-process.js';
export { BoundedLines, parseProxyMessage, wireResolver } from './egress-proxy-wire.js';
export type { ProxyConfig, ProxyMessage } from './egress-proxy-wire.js';
export { normaliseHost, parseConnectTarget, parseHttpTarget } from './egress-request.js';
export type { EgressTarget, HttpTarget } from './egress-request.js';
export { parseEgressHosts, staticResolver, systemResolver } from './egress-resolver.js';
export type { EgressResolver } from './egress-resolver.js';
export {
  AGENT_DIR_IN_SANDBOX,
  AGENT_PATH_IN_SANDBOX,
  AGENT_SOCKET_IN_SANDBOX,
  AgentChannel,
  AgentEndpoint,
  agentBinds,
  BUNDLED_AGENT_BINARY,
  bundledExecAgent,
  defaultAgentSocketRoot,
  withExecAgent,
} from './exec-agent.js';
export type { AgentCommand, ExecAgentOptions } from './exec-agent.js';
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
export {
  BUILD_BASES_LABEL,
  BUILD_DIGEST_LABEL,
  BUILD_DOCKERFILE_LABEL,
  BUILD_STEP_CPUS,
  BUILD_STEP_MEMORY_BYTES,
  BUILT_IMAGE_KIND,
  BUILT_IMAGE_REPOSITORY,
  buildContextTar,
  buildDockerfileImage,
} from './dockerfile-build.js';
export { dockerfileBases } from '@cairn/sandbox';
export type { BaseImage, ContextFile, DockerfileBuild, DockerfileBuildOptions } from './dockerfile-build.js';
export {
  buildStackBaseImage,
  buildStackDockerfileImage,
  listStackImages,
  removeStackImages,
  STACK_BASE_PACKAGES,
  STACK_IMAGE_LABEL,
  STACK_IMAGE_NAMES,
  STACK_USERS,
} from './stack-images.js';
export type { StackBaseOptions, StackDockerfileOptions, StackImage, StackImageInfo, StackImageName } from './stack-images.js';
export { FLAG_FILTERED_SYSCALLS, REFUSED_SYSCALLS, SECCOMP_PROBE_BINARY, sandboxSeccomp } from './seccomp-profile.js';
export type { SandboxSeccomp, SeccompProfile, SeccompRule } from './seccomp-profile.js';
export { elfNeedsLoader } from './static-elf.js';
export { WarmPoolBook, warmProfileId } from './warm-pool.js';
export type { WarmEntry, WarmPoolLimits, WarmProfile, WarmRecipe } from './warm-pool.js';
export { packSecrets, SECRET_FILE_MODE } from './file-transfer.js';
export type { SandboxSecretIn } from './file-transfer.js';
