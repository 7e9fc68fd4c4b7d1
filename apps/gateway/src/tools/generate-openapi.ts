import { writeFileSync } from 'node:fs';
import { renderOpenApi } from '../openapi/openapi.builder.js';

// `npm run openapi -w @cairn/gateway` runs dist/tools/generate-openapi.js; ../../openapi.json is apps/gateway/openapi.json.
if (import.meta.main) {
  const target = new URL('../../openapi.json', import.meta.url);
  writeFileSync(target, renderOpenApi());
  process.stdout.write('wrote apps/gateway/openapi.json\n');
}
