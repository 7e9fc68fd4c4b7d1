export { PolicyServiceConfigSchema } from './policy.config.js';
export type { PolicyServiceConfig } from './policy.config.js';
export { loadPolicyDocument } from './policy-document.loader.js';
export { POLICY_DOCUMENT, PolicyDecisionHandler } from './policy-decision.handler.js';
export { POLICY_SERVICE, policyModule } from './policy.module.js';
