/*
 * For the contracts' own tests: every place a JSON value holds text (a string, or a member name),
 * and a copy of the value with the text at one place changed, to show that no field is left out.
 */

export type JsonPath = readonly (string | number)[];

/** One place that holds text: a string value at `path`, or the name of the member at `path`. */
export type StringPosition = { kind: 'value'; path: JsonPath; text: string } | { kind: 'name'; path: JsonPath; text: string };

export function stringPositions(value: unknown, path: JsonPath = []): StringPosition[] {
  if (typeof value === 'string') return [{ kind: 'value', path, text: value }];
  if (Array.isArray(value)) return value.flatMap((item, i) => stringPositions(item, [...path, i]));
  if (typeof value === 'object' && value !== null) {
    return Object.entries(value).flatMap(([key, child]) => [{ kind: 'name' as const, path: [...path, key], text: key }, ...stringPositions(child, [...path, key])]);
  }
  return [];
}

/** `value` with the text at `position` replaced by `change(text)`; member order is kept. */
export function withChangedText(value: unknown, position: StringPosition, change: (text: string) => string): unknown {
  const walk = (node: unknown, depth: number): unknown => {
    if (depth === position.path.length) return position.kind === 'value' ? change(node as string) : node;
    const step = position.path[depth]!;
    if (Array.isArray(node)) return (node as unknown[]).map((item, i) => (i === step ? walk(item, depth + 1) : item));
    const renamed = position.kind === 'name' && depth === position.path.length - 1;
    return Object.fromEntries(
      Object.entries(node as Record<string, unknown>).map(([key, child]) => (key === step ? [renamed ? change(key) : key, renamed ? child : walk(child, depth + 1)] : [key, child])),
    );
  };
  return walk(value, 0);
}
