import type { GrantedCaps, StepSpec } from '@cairn/contracts';
import { boundedText } from './receipt-text.js';

/** Where a step runs when its spec names no workdir: the images' own working directory. */
export const DEFAULT_WORKDIR = '/work';
const MAX_TOOL_CHARS = 256;

/** One step as the runtime will run it and record it. */
export interface PlannedStep {
  index: number;
  /** I-3: passed to the kernel as it is. */
  argv: string[];
  /** argv[0]'s base name, for people reading receipts. */
  tool: string;
  workdir: string;
  env: Record<string, string>;
  /** Sorted; the receipt records names only (values may be secrets, I-7). */
  envNames: string[];
  timeoutMs: number;
}

export type StepPlan = { ok: true; steps: PlannedStep[] } | { ok: false; message: string; stepIndex: number };

/** The program as receipts name it: the last path segment of argv[0] (`/usr/bin/python3` → `python3`). */
export function toolName(program: string): string {
  const base = program.split('/').filter((segment) => segment !== '').at(-1) ?? program;
  return boundedText(base === '' ? program : base, MAX_TOOL_CHARS);
}

/**
 * A step's wall time: its own `timeoutSeconds` when it has one, else the run's wall cap. A step
 * asking for more than the cap is refused, never clamped (I-6): policy should have denied it.
 */
export function stepTimeoutMs(step: Pick<StepSpec, 'timeoutSeconds'>, caps: Pick<GrantedCaps, 'wall_seconds'>): number | null {
  const seconds = step.timeoutSeconds ?? caps.wall_seconds;
  return seconds > caps.wall_seconds ? null : seconds * 1000;
}

export function planSteps(steps: readonly StepSpec[], caps: GrantedCaps): StepPlan {
  const planned: PlannedStep[] = [];
  for (const [index, step] of steps.entries()) {
    const timeoutMs = stepTimeoutMs(step, caps);
    if (timeoutMs === null) {
      return { ok: false, stepIndex: index, message: `steps[${index}].timeoutSeconds ${step.timeoutSeconds ?? '?'} exceeds the granted wall time of ${caps.wall_seconds} s` };
    }
    const env = { ...(step.env ?? {}) };
    planned.push({
      index,
      argv: [...step.argv],
      tool: toolName(step.argv[0] ?? ''),
      workdir: step.workdir ?? DEFAULT_WORKDIR,
      env,
      envNames: Object.keys(env).sort(),
      timeoutMs,
    });
  }
  return { ok: true, steps: planned };
}

/**
 * How long the sandbox's PID 1 idles before the sandbox stops by itself: every step's time plus
 * room for moving files, so an orphan of a dead runtime does not outlive its run by a day.
 */
export function sandboxLifetimeSeconds(steps: readonly PlannedStep[], marginSeconds = 600): number {
  const stepSeconds = steps.reduce((sum, step) => sum + Math.ceil(step.timeoutMs / 1000), 0);
  return Math.min(86_400, stepSeconds + marginSeconds);
}
