import { readFileSync, writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { deriveSandboxProfile, formatProfile, SANDBOX_PROFILE_FILE, UPSTREAM_PROFILE_FILE, type SeccompProfile } from '../seccomp-profile.js';

/*
 * `npm run seccomp`: writes seccomp/cairn-sandbox.json from the committed copy of Docker's default
 * profile (seccomp/README.md). seccomp-profile.unit.spec.ts fails while the committed file is stale.
 */
const upstream = JSON.parse(readFileSync(UPSTREAM_PROFILE_FILE, 'utf8')) as SeccompProfile;
writeFileSync(SANDBOX_PROFILE_FILE, formatProfile(deriveSandboxProfile(upstream)));
process.stdout.write(`wrote ${fileURLToPath(SANDBOX_PROFILE_FILE)}\n`);
