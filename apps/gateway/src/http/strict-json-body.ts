import { CairnError, checkJsonText } from '@cairn/contracts';

type ParserDone = (error: Error | null, body?: unknown) => void;

const UTF8 = new TextDecoder('utf-8', { fatal: true });

/**
 * A JSON request body as the gateway accepts it: valid UTF-8 (a lossy decode would turn bad bytes
 * into U+FFFD and accept them), parsed by `parse` (Fastify's own parser, which refuses
 * `__proto__` and `constructor.prototype`), then checked for duplicate member names and depth
 * (`checkJsonText`): `JSON.parse` would silently keep the last of two `argv`s. Any of these is
 * `E_INPUT` before a route sees the body. An empty body is "no body", which each route judges.
 */
export function parseStrictJsonBody(body: Buffer, done: ParserDone, parse: (text: string, done: ParserDone) => void): void {
  let text: string;
  try {
    text = UTF8.decode(body);
  } catch {
    done(new CairnError('E_INPUT', 'the request body is not valid UTF-8'));
    return;
  }
  if (text === '') {
    done(null, undefined);
    return;
  }
  parse(text, (error, value) => {
    if (error !== null) {
      done(error);
      return;
    }
    try {
      checkJsonText(text);
    } catch (refusal) {
      done(refusal as Error);
      return;
    }
    done(null, value);
  });
}
