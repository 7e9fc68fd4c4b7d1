import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseSpecText, readRunSpec } from './run-spec.reader.js';

let dir: string;
beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'cairn-spec-'));
});
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

const YAML_SPEC = `
name: hello
steps:
  - argv: [echo, "hi there"]
checks:
  - { id: says-hi, source: "steps[0].stdout", op: contains, value: hi, weight: 1 }
`;

describe('readRunSpec', () => {
  it('reads YAML and JSON into the same document, as written', async () => {
    const yamlPath = join(dir, 'spec.yaml');
    const jsonPath = join(dir, 'spec.json');
    await writeFile(yamlPath, YAML_SPEC);
    const fromYaml = await readRunSpec(yamlPath);
    await writeFile(jsonPath, JSON.stringify(fromYaml));
    expect(await readRunSpec(jsonPath)).toEqual(fromYaml);
    expect(fromYaml).toMatchObject({ name: 'hello', steps: [{ argv: ['echo', 'hi there'] }] });
  });

  it('refuses a spec that breaks the contracts, naming the file and the field (E_INPUT)', async () => {
    const path = join(dir, 'bad.yaml');
    await writeFile(path, 'name: bad\nsteps:\n  - argv: "rm -rf /"\n');
    await expect(readRunSpec(path)).rejects.toMatchObject({ code: 'E_INPUT', message: expect.stringMatching(/bad\.yaml: invalid RunSpec: steps\[0\]\.argv: .*not a shell string/) as string });
  });

  it('reads retries as a number, and refuses one quoted as a string or over 3, naming retries (E_INPUT)', async () => {
    const path = join(dir, 'retries.yaml');
    await writeFile(path, 'name: r\nretries: 1\nsteps:\n  - argv: [echo, hi]\n');
    expect(await readRunSpec(path)).toMatchObject({ retries: 1 });
    for (const bad of ['"1"', '4', '-1', '1.5']) {
      await writeFile(path, `name: r\nretries: ${bad}\nsteps:\n  - argv: [echo, hi]\n`);
      await expect(readRunSpec(path)).rejects.toMatchObject({ code: 'E_INPUT', message: expect.stringMatching(/retries\.yaml: invalid RunSpec: retries: /) as string });
    }
  });

  it('refuses what is not YAML, or not there', async () => {
    expect(() => parseSpecText('a: [1,\n', 'x.yaml')).toThrow(expect.objectContaining({ code: 'E_INPUT', message: expect.stringContaining('x.yaml is not valid YAML') as string }) as Error);
    expect(() => parseSpecText('{"a":', 'x.json')).toThrow(expect.objectContaining({ code: 'E_INPUT', message: expect.stringContaining('not valid JSON') as string }) as Error);
    await expect(readRunSpec(join(dir, 'missing.yaml'))).rejects.toMatchObject({ code: 'E_INPUT', message: expect.stringContaining('ENOENT') as string });
  });

  it('refuses ambiguous documents: a key given twice (JSON or YAML), a YAML tag it does not know', () => {
    const twice = '{"name":"a","steps":[{"argv":["true"],"argv":["rm","-rf","/"]}]}';
    expect(() => parseSpecText(twice, 'x.json')).toThrow(expect.objectContaining({ code: 'E_INPUT', message: 'x.json: steps[0].argv: duplicate key (ambiguous JSON is refused)' }) as Error);
    expect(() => parseSpecText('name: a\nname: b\n', 'x.yaml')).toThrow(expect.objectContaining({ message: expect.stringContaining('Map keys must be unique') as string }) as Error);
    expect(() => parseSpecText('name: !!js/function "f(){}"\n', 'x.yaml')).toThrow(expect.objectContaining({ code: 'E_INPUT', message: expect.stringContaining('Unresolved tag') as string }) as Error);
    expect(() => parseSpecText('name: a\n---\nname: b\n', 'x.yaml')).toThrow(expect.objectContaining({ code: 'E_INPUT', message: expect.stringContaining('multiple documents') as string }) as Error);
  });

  it('refuses what is not a regular file before reading it: a device never ends, a FIFO blocks', async () => {
    await expect(readRunSpec('/dev/zero')).rejects.toMatchObject({ code: 'E_INPUT', message: '/dev/zero is not a regular file' });
    await expect(readRunSpec(dir)).rejects.toMatchObject({ code: 'E_INPUT' });
  });
});
