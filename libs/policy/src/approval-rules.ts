import { DEFAULT_APPROVAL_TIMEOUT_SECONDS } from '@cairn/contracts';
import type { ApprovalRule } from '@cairn/contracts';

/** What approval rules are matched against: facts about the run that policy has already resolved. */
export interface ApprovalFacts {
  /** The image the run will use, without its digest. */
  image: string;
  /** Hosts the run asks to reach; empty when its network is `none`. */
  egress: readonly string[];
  /** Indices of the steps marked `apply`. */
  applySteps: readonly number[];
}

/**
 * One approval a person must give, shaped for `approval.requested`. `run` scope holds the run
 * before scheduling (`AWAITING_APPROVAL`); `step` scope holds it before that step (PRODUCT.md
 * "Jobs and approvals"). The id is a token stable within the run (`egress`, `image`, `step-2`),
 * so a grant can name it and a repeated decision requests the same approval.
 */
export interface ApprovalRequirement {
  approval_id: string;
  scope: 'run' | 'step';
  step_index: number | null;
  trigger: 'egress' | 'image' | 'apply_step';
  reason: string;
  timeout_seconds: number;
  granted: boolean;
}

type Requirement = Omit<ApprovalRequirement, 'granted'>;

/**
 * The approvals the rules require for these facts, run scope first, then steps by index. Several
 * rules requiring the same approval yield it once, with the shortest timeout.
 */
export function matchApprovalRules(
  rules: readonly ApprovalRule[],
  facts: ApprovalFacts,
  granted: readonly string[] = [],
): ApprovalRequirement[] {
  const byId = new Map<string, Requirement>();
  const require = (req: Requirement) => {
    const seen = byId.get(req.approval_id);
    if (seen === undefined || req.timeout_seconds < seen.timeout_seconds) byId.set(req.approval_id, req);
  };

  for (const rule of rules) {
    const timeout_seconds = rule.timeoutSeconds ?? DEFAULT_APPROVAL_TIMEOUT_SECONDS;
    const when = rule.when;
    if (when === 'egress') {
      if (facts.egress.length > 0) {
        const reason = `egress to ${facts.egress.join(', ')} needs approval`;
        require({ approval_id: 'egress', scope: 'run', step_index: null, trigger: 'egress', reason, timeout_seconds });
      }
    } else if (when === 'apply_step') {
      for (const step of facts.applySteps) {
        const reason = `step ${step} is marked apply`;
        require({ approval_id: `step-${step}`, scope: 'step', step_index: step, trigger: 'apply_step', reason, timeout_seconds });
      }
    } else if (when.image === facts.image) {
      const reason = `image ${facts.image} needs approval`;
      require({ approval_id: 'image', scope: 'run', step_index: null, trigger: 'image', reason, timeout_seconds });
    }
  }

  const grantedIds = new Set(granted);
  return [...byId.values()]
    .sort((a, b) => (a.step_index ?? -1) - (b.step_index ?? -1) || compare(a.approval_id, b.approval_id))
    .map((req) => ({ ...req, granted: grantedIds.has(req.approval_id) }));
}

function compare(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}
