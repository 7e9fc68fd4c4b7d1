import { EVENT_RECEIPT_SCHEMAS, isEventType } from '@cairn/contracts';
import type { EvidenceReceipt, EventType } from '@cairn/contracts';
import type { z } from 'zod';

/**
 * The receipt contracts compiled per type into plain predicates, for the projections' hot path.
 * zod spends most of a receipt's 4 µs on its per-node machinery (a payload and a result object
 * per field, issue plumbing, a key-ordered copy of every object), not on the checks. Here the
 * structure (objects, arrays, records, unions, …) is walked directly, and every check is still
 * zod's own (`_zod.check`), so a field's rules cannot drift from the contract.
 *
 * `true` means `parseEvidenceReceipt` accepts the receipt and returns it unchanged (the receipt
 * schemas have no transforms and no defaults, and every object is strict). `false` decides
 * nothing: the caller asks zod, for the verdict and its message. A schema kind or check kind
 * this does not know, or one that could change the value, makes its whole type fall back to zod.
 */
export function passesReceiptContract(value: object): value is EvidenceReceipt {
  // (`value` comes from JSON.parse: own enumerable string keys only, plain objects and arrays.)
  const type = 'type' in value ? value.type : undefined;
  if (typeof type !== 'string' || !isEventType(type)) return false;
  let predicate = compiled.get(type);
  if (predicate === undefined) {
    predicate = compileSchema(EVENT_RECEIPT_SCHEMAS[type]) ?? rejectAll;
    compiled.set(type, predicate);
  }
  try {
    return predicate(value);
  } catch {
    // A check that throws here throws in zod too; zod's answer is the one recorded.
    return false;
  }
}

type Predicate = (value: unknown) => boolean;

const compiled = new Map<EventType, Predicate>();
const rejectAll: Predicate = () => false;
/** Check kinds that judge the value; anything else (an `overwrite`, say) is left to zod. */
const PURE_CHECKS: ReadonlySet<string> = new Set([
  'less_than',
  'greater_than',
  'multiple_of',
  'number_format',
  'min_length',
  'max_length',
  'length_equals',
  'string_format',
  'custom',
]);

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** The schema as a predicate, or null when any part of it is not understood here. */
export function compileSchema(schema: z.core.$ZodType): Predicate | null {
  // A format schema (z.email(), z.int(), …) is itself a check, run before the others: as zod does.
  const own = schema._zod.traits.has('$ZodCheck') ? [schema as unknown as z.core.$ZodCheck<never>] : [];
  const checks = compileChecks([...own, ...(schema._zod.def.checks ?? [])]);
  const shape = checks === null ? null : compileShape(schema as z.core.$ZodTypes);
  if (shape === null || checks === null) return null;
  if (checks.length === 0) return shape;
  return (value) => {
    if (!shape(value)) return false;
    for (const check of checks) if (!check(value)) return false;
    return true;
  };
}

function compileChecks(checks: readonly z.core.$ZodCheck<never>[]): Predicate[] | null {
  const predicates: Predicate[] = [];
  for (const check of checks) {
    const internals = check._zod as unknown as z.core.$ZodCheckInternals<unknown>;
    const { when } = internals.def;
    if (!PURE_CHECKS.has(internals.def.check)) return null;
    const regex = regexOf(internals.def);
    if (regex !== null && when === undefined) {
      // The most common check (`.regex()`), run as zod runs it, without a payload per field.
      predicates.push((value) => {
        regex.lastIndex = 0;
        return regex.test(value as string);
      });
      continue;
    }
    predicates.push((value) => {
      const payload: z.core.ParsePayload = { value, issues: [] };
      if (when !== undefined && !when(payload)) return true;
      // An async check makes zod throw on a synchronous parse; zod answers for it. A check that
      // rewrote the value (a URL format trims) would make zod's result differ from the receipt.
      if (internals.check(payload) instanceof Promise) return false;
      return payload.issues.length === 0 && payload.value === value;
    });
  }
  return predicates;
}

function regexOf(def: z.core.$ZodCheckDef): RegExp | null {
  if (def.check !== 'string_format') return null;
  const format = def as z.core.$ZodCheckStringFormatDef;
  return format.format === 'regex' && format.pattern instanceof RegExp ? format.pattern : null;
}

function compileShape(schema: z.core.$ZodTypes): Predicate | null {
  const def = schema._zod.def;
  switch (def.type) {
    case 'string':
      return def.coerce === true ? null : (value) => typeof value === 'string';
    case 'number':
      return def.coerce === true ? null : (value) => typeof value === 'number' && Number.isFinite(value);
    case 'boolean':
      return def.coerce === true ? null : (value) => typeof value === 'boolean';
    case 'null':
      return (value) => value === null;
    case 'never':
      return () => false;
    case 'unknown':
    case 'any':
      return () => true;
    case 'literal':
    case 'enum': {
      const values: ReadonlySet<unknown> | undefined = schema._zod.values;
      return values === undefined ? null : (value) => values.has(value);
    }
    case 'nullable': {
      const inner = compileSchema(def.innerType);
      return inner === null ? null : (value) => value === null || inner(value);
    }
    case 'optional': {
      const inner = compileSchema(def.innerType);
      return inner === null ? null : (value) => value === undefined || inner(value);
    }
    case 'lazy': {
      // Compiled on first use: a lazy schema may contain itself.
      let inner: Predicate | null | undefined;
      const lazy = schema as z.core.$ZodLazy;
      return (value) => (inner ??= compileSchema(lazy._zod.innerType)) !== null && inner(value);
    }
    case 'array': {
      const element = compileSchema(def.element);
      if (element === null) return null;
      return (value) => {
        if (!Array.isArray(value)) return false;
        for (const item of value) if (!element(item)) return false;
        return true;
      };
    }
    case 'object':
      return compileObject(def);
    case 'record':
      return compileRecord(def);
    case 'union': {
      // Exclusive unions (xor) answer differently when several options match.
      if (schema._zod.traits.has('$ZodXor')) return null;
      const options = def.options.map((option) => compileSchema(option));
      if (options.some((option) => option === null)) return null;
      const known = options.filter((option) => option !== null);
      // Every option is strict and unchanging, so any match is what zod's first match returns.
      return (value) => known.some((option) => option(value));
    }
    default:
      return null;
  }
}

function compileObject(def: z.core.$ZodObjectDef): Predicate | null {
  // A catchall other than never (strict) or none (strip, and then no key may be unknown) is left to zod.
  if (def.catchall !== undefined && def.catchall._zod.def.type !== 'never') return null;
  const fields: { key: string; optional: boolean; check: Predicate }[] = [];
  for (const [key, field] of Object.entries(def.shape)) {
    const check = compileSchema(field);
    if (check === null || key === '__proto__') return null;
    fields.push({ key, optional: field._zod.optin === 'optional' && field._zod.optout === 'optional', check });
  }
  const known: ReadonlySet<string> = new Set(fields.map((f) => f.key));
  return (value) => {
    if (!isObject(value)) return false;
    for (const { key, optional, check } of fields) {
      if (!(key in value)) {
        if (optional) continue;
        return false;
      }
      if (!check(value[key])) return false;
    }
    for (const key in value) if (!known.has(key)) return false;
    return true;
  };
}

function compileRecord(def: z.core.$ZodRecordDef): Predicate | null {
  // Records keyed by an enum or literal check keys exhaustively: left to zod.
  if (def.keyType._zod.values !== undefined) return null;
  const keyCheck = compileSchema(def.keyType);
  const valueCheck = compileSchema(def.valueType);
  if (keyCheck === null || valueCheck === null) return null;
  return (value) => {
    if (!isObject(value)) return false;
    for (const key in value) {
      // zod drops a `__proto__` key from what it returns: not the receipt unchanged.
      if (key === '__proto__' || !keyCheck(key) || !valueCheck(value[key])) return false;
    }
    return true;
  };
}
