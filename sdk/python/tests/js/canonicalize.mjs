// Reads a JSON array of JSON texts on stdin; prints, for each, what libs/evidence's canonicalJson
// makes of JSON.parse(text): {"ok": canonical} or {"error": message}. The Python tests compare.
import { canonicalJson } from '../../../../libs/evidence/dist/index.js';

let input = '';
process.stdin.setEncoding('utf8');
for await (const chunk of process.stdin) input += chunk;
const out = JSON.parse(input).map((text) => {
  try {
    return { ok: canonicalJson(JSON.parse(text)) };
  } catch (error) {
    return { error: error instanceof Error ? error.message : String(error) };
  }
});
// ASCII-only output, so no code unit is lost or re-encoded on the way back.
process.stdout.write(JSON.stringify(out).replace(/[\u007f-\uffff]/g, (ch) => `\\u${ch.charCodeAt(0).toString(16).padStart(4, '0')}`));
