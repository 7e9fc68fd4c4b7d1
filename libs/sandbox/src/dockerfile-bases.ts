import { CairnError } from '@cairn/contracts';

/*
 * What a Dockerfile builds from, read before anything is built (docs/adr/0018): the CLI and a
 * worker check each base against their engine, and the gateway prefers a worker that reports them
 * (docs/adr/0038). Pure: the same reading wherever a Dockerfile is.
 */

function inputError(message: string, details: Record<string, unknown> = {}): CairnError {
  return new CairnError('E_INPUT', message, details);
}

/** The Dockerfile's instructions, one per logical line (continuations joined, comments and blanks dropped). */
function instructions(dockerfile: string): string[] {
  const out: string[] = [];
  let current = '';
  for (const raw of dockerfile.split(/\r?\n/)) {
    const line = raw.trim();
    if (current === '' && (line === '' || line.startsWith('#'))) continue;
    if (line.endsWith('\\')) {
      current += `${line.slice(0, -1)} `;
      continue;
    }
    current += line;
    if (current.trim() !== '') out.push(current.trim());
    current = '';
  }
  if (current.trim() !== '') out.push(current.trim());
  return out;
}

/**
 * The images the Dockerfile's FROM lines name, in order, without the stages it defines itself
 * (`FROM build AS …` after `… AS build`) or `scratch`. A FROM with a variable (`${BASE}`) is refused:
 * which image it names would depend on build arguments, and it must be checked before the build.
 */
export function dockerfileBases(dockerfile: string): string[] {
  const stages = new Set<string>();
  const bases: string[] = [];
  let froms = 0;
  for (const instruction of instructions(dockerfile)) {
    const match = /^FROM\s+(.*)$/i.exec(instruction);
    if (match === null) continue;
    froms += 1;
    const words = (match[1] ?? '').split(/\s+/).filter((word) => !word.startsWith('--'));
    const ref = words[0];
    if (ref === undefined) throw inputError(`Dockerfile: FROM names no image (${instruction})`, { instruction });
    if (ref.includes('$')) throw inputError(`Dockerfile: FROM ${ref} uses a variable; name a local image`, { instruction });
    const alias = words.length === 3 && words[1]?.toLowerCase() === 'as' ? words[2]?.toLowerCase() : undefined;
    if (alias === undefined && words.length !== 1) throw inputError(`Dockerfile: cannot read ${JSON.stringify(instruction)} (FROM <image> [AS <name>])`, { instruction });
    // An earlier stage or scratch is no image to look up.
    if (ref.toLowerCase() !== 'scratch' && !stages.has(ref.toLowerCase()) && !bases.includes(ref)) bases.push(ref);
    if (alias !== undefined) stages.add(alias);
  }
  if (froms === 0) throw inputError('Dockerfile: no FROM instruction');
  return bases;
}
