import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Ajv } from 'ajv';
import { describe, expect, it } from 'vitest';
import { parse, parseAllDocuments } from 'yaml';

/*
 * The deployment files, checked with no cluster and no network: every Kubernetes manifest in deploy/k8s
 * against the API's schemas (the `kubernetes-models` validators, generated from Kubernetes' OpenAPI
 * document), and docker-compose.yml with its overrides against the Compose Specification's JSON schema
 * (as `dclint` ships it). Then what the schemas cannot know: the compose stack runs the processes
 * `cairn up` runs, and no secret is in an environment.
 */

const ROOT = fileURLToPath(new URL('../../../', import.meta.url));
const K8S_DIR = join(ROOT, 'deploy/k8s');
const COMPOSE_FILES = ['docker-compose.yml', 'deploy/compose/cluster.yml'];

type Manifest = { apiVersion?: unknown; kind?: unknown; metadata?: { name?: unknown } } & Record<string, unknown>;
type ModelClass = new (data: Manifest) => { validate(): void };

function k8sManifests(): { file: string; doc: Manifest }[] {
  const found: { file: string; doc: Manifest }[] = [];
  for (const file of readdirSync(K8S_DIR).filter((name) => name.endsWith('.yaml')).sort()) {
    for (const document of parseAllDocuments(readFileSync(join(K8S_DIR, file), 'utf8'))) {
      if (document.errors.length > 0) throw new Error(`${file}: ${document.errors[0]?.message ?? 'YAML error'}`);
      const doc = document.toJS() as Manifest | null;
      if (doc !== null) found.push({ file, doc });
    }
  }
  return found;
}

/** The kubernetes-models class for a manifest's apiVersion and kind (`v1` is the core group). */
async function modelOf(doc: Manifest): Promise<ModelClass> {
  if (typeof doc.apiVersion !== 'string' || typeof doc.kind !== 'string' || !/^[A-Za-z]+$/.test(doc.kind)) throw new Error('a manifest without apiVersion and kind');
  const specifier = `kubernetes-models/${doc.apiVersion}/${doc.kind}`;
  const module = (await import(/* @vite-ignore */ specifier)) as Record<string, ModelClass>;
  const model = module[doc.kind];
  if (model === undefined) throw new Error(`no model for ${doc.apiVersion} ${doc.kind}`);
  return model;
}

async function k8sProblem(doc: Manifest): Promise<string | null> {
  try {
    new (await modelOf(doc))(doc).validate();
    return null;
  } catch (error) {
    return error instanceof Error ? error.message : String(error);
  }
}

// Its $schema names draft-07 by an address ajv does not know it by; the schema is draft-07 all the same.
const { $schema: _draft, ...composeSchema } = JSON.parse(readFileSync(join(ROOT, 'node_modules/dclint/schemas/compose.schema.json'), 'utf8')) as Record<string, unknown>;
const validateCompose = new Ajv({ allErrors: true, strict: false }).compile(composeSchema);

function composeFile(path: string): Record<string, unknown> {
  return parse(readFileSync(join(ROOT, path), 'utf8'), { merge: true }) as Record<string, unknown>;
}

function composeProblems(doc: unknown): string[] {
  return validateCompose(doc) ? [] : (validateCompose.errors ?? []).map((e) => `${e.instancePath} ${e.message ?? ''}`);
}

type ComposeService = { environment?: Record<string, string>; command?: string[]; entrypoint?: string[]; healthcheck?: unknown; image?: string };

describe('deploy/k8s against the Kubernetes API schemas', () => {
  const manifests = k8sManifests();

  it('given every manifest in deploy/k8s, when validated, then each is a valid object of its kind', async () => {
    expect(manifests.length).toBeGreaterThanOrEqual(15);
    const problems: string[] = [];
    for (const { file, doc } of manifests) {
      const problem = await k8sProblem(doc);
      if (problem !== null) problems.push(`${file} ${String(doc.kind)}/${String(doc.metadata?.name)}: ${problem}`);
    }
    expect(problems).toEqual([]);
  });

  it('given a Deployment whose replicas is a word, or a container without an image name, when validated, then it is refused', async () => {
    const deployment = manifests.find((m) => m.doc.kind === 'Deployment')!.doc;
    expect(await k8sProblem({ ...deployment, spec: { ...(deployment.spec as object), replicas: 'three' } })).toMatch(/replicas/);
    const spec = structuredClone(deployment.spec) as { template: { spec: { containers: Record<string, unknown>[] } } };
    delete spec.template.spec.containers[0]!.name;
    expect(await k8sProblem({ ...deployment, spec })).toMatch(/name/);
  });

  it('given the manifests, when listed, then every Cairn process runs, the runtime once per node, and all in the cairn namespace', () => {
    const workloads = manifests.filter((m) => ['Deployment', 'DaemonSet', 'StatefulSet'].includes(String(m.doc.kind)));
    const names = workloads.map((m) => String(m.doc.metadata?.name)).sort();
    expect(names).toEqual([...stackServices(), 'nats', 'postgres'].sort());
    expect(workloads.find((m) => m.doc.metadata?.name === 'runtime')?.doc.kind).toBe('DaemonSet');
    for (const { doc } of manifests.filter((m) => m.doc.kind !== 'Namespace')) expect((doc.metadata as { namespace?: string }).namespace).toBe('cairn');
  });
});

/** The processes `cairn up` starts (apps/cli/src/stack/stack-config.ts), read from its source: a tool may not import an app. */
function stackServices(): string[] {
  const source = readFileSync(join(ROOT, 'apps/cli/src/stack/stack-config.ts'), 'utf8');
  const list = /export const STACK_SERVICES = \[([^\]]+)\]/.exec(source)?.[1];
  if (list === undefined) throw new Error('STACK_SERVICES not found in stack-config.ts');
  return [...list.matchAll(/'([a-z-]+)'/g)].map((m) => m[1]!);
}

describe('docker-compose.yml and its overrides against the Compose Specification', () => {
  it('given docker-compose.yml and deploy/compose/cluster.yml, when validated, then both are valid compose files', () => {
    for (const file of COMPOSE_FILES) expect({ file, problems: composeProblems(composeFile(file)) }).toEqual({ file, problems: [] });
  });

  it('given a service with an unknown key or a healthcheck without a test, when validated, then it is refused', () => {
    const doc = composeFile('docker-compose.yml') as { services: Record<string, Record<string, unknown>> };
    expect(composeProblems({ ...doc, services: { ...doc.services, nats: { ...doc.services.nats, restart_policy: 'always' } } }).join()).toMatch(/additional properties/);
    expect(composeProblems({ ...doc, services: { ...doc.services, nats: { ...doc.services.nats, healthcheck: { interval: 3 } } } }).join()).toMatch(/interval/);
  });

  it('given the compose stack, when listed, then it runs every process `cairn up` runs, each with a healthcheck, besides NATS and PostgreSQL', () => {
    const services = (composeFile('docker-compose.yml') as { services: Record<string, ComposeService> }).services;
    const running = Object.keys(services).filter((name) => !['keys', 'migrate'].includes(name));
    expect(running.sort()).toEqual([...stackServices(), 'nats', 'postgres'].sort());
    for (const name of running) expect({ name, healthcheck: services[name]?.healthcheck !== undefined }).toEqual({ name, healthcheck: true });
  });

  it('given every service of both files, when its environment is read, then no secret is in it: keys and passwords are files', () => {
    for (const file of COMPOSE_FILES) {
      const services = (composeFile(file) as { services: Record<string, ComposeService> }).services;
      for (const [name, service] of Object.entries(services)) {
        for (const [key, value] of Object.entries(service.environment ?? {})) {
          expect({ file, name, key, secret: /^CAIRN_(API_KEY|SECRETS_KEY|SEAL_KEY)$|PASSWORD$/.test(key) }).toEqual({ file, name, key, secret: false });
          // A URL with credentials (user:password@) would put one there.
          expect({ file, name, key, credentials: /:\/\/[^/@\s]+:[^/@\s]+@/.test(String(value)) }).toEqual({ file, name, key, credentials: false });
        }
      }
    }
  });
});
