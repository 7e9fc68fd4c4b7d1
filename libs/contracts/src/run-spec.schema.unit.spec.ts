import { describe, expect, it } from 'vitest';
import { isCairnError } from './error-codes.js';
import { FROZEN_CAPS } from './frozen-caps.constants.js';
import { AnySandboxPathSchema, parseRunSpec, RunSpecSchema } from './run-spec.schema.js';
import { parseSandboxSpec } from './sandbox-spec.schema.js';

const minimal = { name: 'hello', steps: [{ argv: ['echo', 'hi'] }] };

const full = {
  name: 'pytest suite',
  image: 'cairn/sandbox-python:1',
  job: 'nightly-42',
  steps: [
    { name: 'install', argv: ['pip', 'install', '-r', 'requirements.txt'], workdir: '/work', env: { PIP_NO_INPUT: '1' }, timeoutSeconds: 120 },
    { argv: ['pytest', '--junitxml=/out/junit.xml'], workdir: '/work/src', env: { PYTHONHASHSEED: '0' } },
    { name: 'apply', argv: ['sh', '-c', 'echo applied > /out/applied'], apply: true },
  ],
  files: [
    { path: '/work/requirements.txt', content: 'pytest\n' },
    { path: '/work/src/test_x.py', content: 'ZGVmIHRlc3RfeCgpOiBhc3NlcnQgVHJ1ZQo=', encoding: 'base64', mode: 0o644 },
  ],
  outputs: ['/out', '/work/src/report.txt'],
  caps: { wallSeconds: 300, memoryMiB: 2048, pids: 128, diskMiB: 1024, cpus: 1.5 },
  network: { egress: ['pypi.org:443', 'files.pythonhosted.org:443'] },
  secrets: ['PYPI_TOKEN'],
  checks: [
    { id: 'tests-pass', source: 'steps[1].exit_code', op: 'eq', value: 0, weight: 3 },
    { id: 'no-failures', source: 'facts.junit.failed', op: 'lte', value: 0, weight: 1 },
    { id: 'junit', source: 'artifacts["/out/junit.xml"]', op: 'exists', weight: 1 },
    { id: 'report', source: 'artifacts["/work/src/report.txt"].sha256', op: 'sha256_eq', value: 'a'.repeat(64), weight: 1 },
    { id: 'says-ok', source: 'steps[1].stdout', op: 'matches', value: '\\d+ passed', weight: 0.5 },
  ],
  claim: { statement: 'the suite passes', checks: [{ id: 'exit', source: 'steps[1].exit_code', op: 'eq', value: 0 }] },
};

/** The E_INPUT message parseRunSpec throws for `input`. */
function inputError(input: unknown): string {
  try {
    parseRunSpec(input);
  } catch (error) {
    if (isCairnError(error) && error.code === 'E_INPUT') return error.message;
    throw error;
  }
  throw new Error('expected E_INPUT, the spec was accepted');
}

describe('RunSpec: accepted', () => {
  it('accepts a minimal spec and returns it unchanged (no defaults added)', () => {
    expect(parseRunSpec(minimal)).toEqual(minimal);
  });

  it('accepts a spec using every field, and it survives a JSON round trip', () => {
    const parsed = parseRunSpec(full);
    expect(parsed).toEqual(full);
    expect(parseRunSpec(JSON.parse(JSON.stringify(parsed)))).toEqual(full);
  });

  it('accepts retries 0 to 3 as given; absent stays absent (0)', () => {
    for (const retries of [0, 1, 2, 3]) expect(parseRunSpec({ ...minimal, retries }).retries).toBe(retries);
    expect(parseRunSpec(minimal)).not.toHaveProperty('retries');
  });

  it('accepts caps above the frozen maxima: refusing them is policy’s job, not the schema’s', () => {
    const over = { ...minimal, caps: { wallSeconds: FROZEN_CAPS.wallSeconds + 1, memoryMiB: FROZEN_CAPS.memoryMiB * 2 } };
    expect(parseRunSpec(over).caps).toEqual(over.caps);
  });

  it('keeps FROZEN_CAPS frozen (I-6)', () => {
    expect(Object.isFrozen(FROZEN_CAPS)).toBe(true);
    expect(FROZEN_CAPS).toEqual({ wallSeconds: 600, memoryMiB: 4096, pids: 256, diskMiB: 8192, runsPerJob: 6, jobMinutes: 90 });
    expect(() => Object.assign(FROZEN_CAPS, { wallSeconds: 6000 })).toThrow(TypeError);
  });
});

describe('RunSpec: refused with E_INPUT naming the field', () => {
  it.each([
    ['a shell string instead of argv (I-3)', { ...minimal, steps: [{ argv: 'rm -rf / --no-preserve-root' }] }, /steps\[0\]\.argv: argv must be an array of strings, not a shell string \(I-3\)/],
    ['NUL in an argument', { ...minimal, steps: [{ argv: ['echo', 'a\u0000b'] }] }, /steps\[0\]\.argv\[1\]: an argument may not contain NUL/],
    ['an empty argv', { ...minimal, steps: [{ argv: [] }] }, /steps\[0\]\.argv: argv needs at least the program/],
    ['an empty program', { ...minimal, steps: [{ argv: [''] }] }, /steps\[0\]\.argv: argv\[0\]/],
    ['unknown key privileged at the top', { ...minimal, privileged: true }, /privileged: unknown field/],
    ['unknown key mounts in a step', { ...minimal, steps: [{ argv: ['ls'], mounts: ['/:/host'] }] }, /steps\[0\]\.mounts: unknown field/],
    ['unknown key capabilities in caps', { ...minimal, caps: { capabilities: ['SYS_ADMIN'] } }, /caps\.capabilities: unknown field/],
    ['an input file outside /work', { ...minimal, files: [{ path: '/etc/passwd', content: 'x' }] }, /files\[0\]\.path: an absolute normalised path under \/work/],
    ['a path escaping with ..', { ...minimal, files: [{ path: '/work/../etc/shadow', content: 'x' }] }, /files\[0\]\.path/],
    ['a relative workdir', { ...minimal, steps: [{ argv: ['ls'], workdir: 'work' }] }, /steps\[0\]\.workdir/],
    ['a workdir under /etc', { ...minimal, steps: [{ argv: ['ls'], workdir: '/etc' }] }, /steps\[0\]\.workdir/],
    ['an output outside /work and /out', { ...minimal, outputs: ['/tmp/x'] }, /outputs\[0\]/],
    ['an output with a trailing slash', { ...minimal, outputs: ['/out/'] }, /outputs\[0\]/],
    ['a lower-case env name', { ...minimal, steps: [{ argv: ['ls'], env: { path: '/bin' } }] }, /steps\[0\]\.env\.path/],
    ['invalid base64', { ...minimal, files: [{ path: '/work/a', content: 'not base64!', encoding: 'base64' }] }, /files\[0\]\.content: content is not valid base64/],
    ['an unknown encoding', { ...minimal, files: [{ path: '/work/a', content: 'x', encoding: 'latin1' }] }, /files\[0\]\.encoding/],
    ['a negative memory cap', { ...minimal, caps: { memoryMiB: -1 } }, /caps\.memoryMiB/],
    ['a fractional pid cap', { ...minimal, caps: { pids: 1.5 } }, /caps\.pids/],
    ['retries over the frozen 3', { ...minimal, retries: 4 }, /^invalid RunSpec: retries: /],
    ['negative retries', { ...minimal, retries: -1 }, /^invalid RunSpec: retries: /],
    ['fractional retries', { ...minimal, retries: 1.5 }, /^invalid RunSpec: retries: /],
    ['retries as a string', { ...minimal, retries: '1' }, /^invalid RunSpec: retries: /],
    ['network as a bare host list', { ...minimal, network: ['pypi.org:443'] }, /network/],
    ['an egress entry without a port', { ...minimal, network: { egress: ['pypi.org'] } }, /network\.egress\[0\]/],
    ['an egress port out of range', { ...minimal, network: { egress: ['pypi.org:70000'] } }, /network\.egress\[0\]: the port is 1\.\.65535/],
    ['a secret given by value', { ...minimal, secrets: [{ name: 'TOKEN', value: 'hunter2' }] }, /secrets\[0\]/],
    ['an env var that shadows a secret', { ...minimal, secrets: ['TOKEN'], steps: [{ argv: ['ls'], env: { TOKEN: 'x' } }] }, /steps\[0\]\.env\.TOKEN: TOKEN is a secret/],
    ['an unknown check op', { ...minimal, checks: [{ id: 'a', source: 'steps[0].exit_code', op: 'eval', value: 'x', weight: 1 }] }, /checks\[0\]\.op/],
    ['a bad source', { ...minimal, checks: [{ id: 'a', source: 'process.env.SECRET', op: 'exists', weight: 1 }] }, /checks\[0\]\.source: a source is/],
    ['a source naming a missing step', { ...minimal, checks: [{ id: 'a', source: 'steps[3].exit_code', op: 'eq', value: 0, weight: 1 }] }, /checks\[0\]\.source: steps\[3\]\.exit_code names a step the spec does not have/],
    ['an artifact that is not collected', { ...minimal, checks: [{ id: 'a', source: 'artifacts["/out/x"]', op: 'exists', weight: 1 }] }, /checks\[0\]\.source: .* is not under any collected output/],
    ['lt without a number', { ...minimal, checks: [{ id: 'a', source: 'steps[0].exit_code', op: 'lt', value: 'x', weight: 1 }] }, /checks\[0\]\.value: lt needs a finite number value/],
    ['matches with a broken regex', { ...minimal, checks: [{ id: 'a', source: 'steps[0].stdout', op: 'matches', value: '(', weight: 1 }] }, /checks\[0\]\.value: matches needs a valid regular expression/],
    ['a zero weight', { ...minimal, checks: [{ id: 'a', source: 'steps[0].exit_code', op: 'exists', weight: 0 }] }, /checks\[0\]\.weight/],
    ['duplicate check ids', { ...minimal, checks: [{ id: 'a', source: 'steps[0].exit_code', op: 'exists', weight: 1 }, { id: 'a', source: 'steps[0].stdout', op: 'exists', weight: 1 }] }, /checks: duplicate check id a/],
    ['a claim check with a weight-less unknown key', { ...minimal, claim: { checks: [{ id: 'a', source: 'steps[0].exit_code', op: 'exists', weight: 1 }] } }, /claim\.checks\[0\]\.weight: unknown field/],
    ['65 steps', { ...minimal, steps: Array.from({ length: 65 }, () => ({ argv: ['true'] })) }, /steps: Too big/],
    ['no steps', { name: 'x', steps: [] }, /steps: Too small/],
    ['a missing name', { steps: [{ argv: ['ls'] }] }, /name: /],
    ['a name with a newline', { ...minimal, name: 'a\nb' }, /name: no control characters/],
    ['an image with upper case', { ...minimal, image: 'Ubuntu:latest' }, /image: an image reference/],
    ['nested junk', { ...minimal, steps: [{ argv: ['ls'], env: { A: { nested: ['junk'] } } }] }, /steps\[0\]\.env\.A/],
    ['not an object at all', 'name: x', /\(root\)/],
    ['null', null, /\(root\)/],
  ])('refuses %s', (_what, input, message) => {
    expect(inputError(input)).toMatch(message);
  });

  it('lists every problem, each with its path, in the error details', () => {
    try {
      parseRunSpec({ name: '', steps: [{ argv: 'ls -l' }], privileged: true });
      expect.fail('accepted');
    } catch (error) {
      if (!isCairnError(error)) throw error;
      expect(error.code).toBe('E_INPUT');
      const paths = (error.details?.['issues'] as { path: string }[]).map((issue) => issue.path);
      expect(paths).toEqual(expect.arrayContaining(['name', 'steps[0].argv', 'privileged']));
    }
  });

  it('refuses every key outside the contract, not only the known-dangerous ones', () => {
    for (const key of ['privileged', 'mounts', 'capabilities', 'devices', 'user', 'hostNetwork', 'volumes']) {
      expect(RunSpecSchema.safeParse({ ...minimal, [key]: true }).success).toBe(false);
    }
  });
});

describe('SandboxSpec', () => {
  it('accepts an empty spec and a full one', () => {
    expect(parseSandboxSpec({})).toEqual({});
    const spec = { image: 'cairn/sandbox:1', ttlSeconds: 600, network: 'none', secrets: ['GH_TOKEN'], env: { CI: '1' } };
    expect(parseSandboxSpec(spec)).toEqual(spec);
  });

  it('refuses unknown keys and a zero TTL with E_INPUT', () => {
    expect(() => parseSandboxSpec({ privileged: true })).toThrow(/privileged: unknown field/);
    expect(() => parseSandboxSpec({ ttlSeconds: 0 })).toThrow(/ttlSeconds/);
  });
});

describe('AnySandboxPathSchema (a session exec workdir, a session read)', () => {
  it.each(['/usr/bin', '/etc/os-release', '/work/a', '/running', '/var/runner', '/procfs'])('accepts %s', (path) => {
    expect(AnySandboxPathSchema.safeParse(path).success).toBe(true);
  });
  it.each(['/', 'work', '/work/../etc', '/work//a', '/proc', '/proc/self/fd/3', '/sys/kernel/notes', '/dev/mem', '/run/secrets/X', '/var/run/docker.sock'])('refuses %s', (path) => {
    expect(AnySandboxPathSchema.safeParse(path).success).toBe(false);
  });
});
