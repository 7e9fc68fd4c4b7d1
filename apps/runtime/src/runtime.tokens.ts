/** Injection tokens of the runtime's own providers (the shared ones come from @cairn/service-kit). */
export const SANDBOX_ENGINE = Symbol('cairn.runtime.sandbox-engine');
export const ARTIFACT_STORE = Symbol('cairn.runtime.artifact-store');
export const LEASE_STORE = Symbol('cairn.runtime.lease-store');
export const WORKER_REGISTRY = Symbol('cairn.runtime.worker-registry');

/** The runtime's `SecretValuesReader` (@cairn/secret-store): the values a run or session is given. */
export const RUNTIME_SECRETS = Symbol('cairn.runtime-secrets');
