/*
 * A tolerant, non-validating XML tag scanner: enough to read test reports, nothing more.
 *
 * It reports start and end tags with their attributes and skips everything else (text, comments,
 * CDATA, processing instructions, DOCTYPE with its internal subset). It never resolves entities
 * beyond the five predefined ones and numeric character references, never fetches anything, and
 * never recurses, so a hostile document costs time linear in its length and nothing else. Junk is
 * skipped rather than fatal; `wellFormed` says whether the scanner had to skip any.
 */

export interface XmlStartTag {
  kind: 'start';
  /** Local name, without a namespace prefix. */
  name: string;
  attributes: ReadonlyMap<string, string>;
  selfClosing: boolean;
}

export interface XmlEndTag {
  kind: 'end';
  name: string;
}

export type XmlTag = XmlStartTag | XmlEndTag;

export interface XmlScan {
  tags: Iterable<XmlTag>;
  /** Read after iterating: false once anything malformed was skipped. */
  readonly wellFormed: boolean;
}

const NAME_START = /[A-Za-z_:\u00c0-\uffff]/;
const NAME_CHAR = /[A-Za-z0-9_:.\-\u00b7\u00c0-\uffff]/;
const PREDEFINED: Readonly<Record<string, string>> = { lt: '<', gt: '>', amp: '&', quot: '"', apos: "'" };

export function scanXml(text: string): XmlScan {
  const state = { wellFormed: true };
  return {
    tags: scanTags(text, state),
    get wellFormed() {
      return state.wellFormed;
    },
  };
}

function* scanTags(text: string, state: { wellFormed: boolean }): Generator<XmlTag> {
  let pos = 0;
  const skipPast = (terminator: string): void => {
    const end = text.indexOf(terminator, pos);
    if (end < 0) {
      state.wellFormed = false;
      pos = text.length;
    } else {
      pos = end + terminator.length;
    }
  };
  while (pos < text.length) {
    const open = text.indexOf('<', pos);
    if (open < 0) break;
    pos = open;
    if (text.startsWith('<!--', pos)) {
      skipPast('-->');
    } else if (text.startsWith('<![CDATA[', pos)) {
      skipPast(']]>');
    } else if (text.startsWith('<?', pos)) {
      skipPast('?>');
    } else if (text.startsWith('<!', pos)) {
      pos = skipDeclaration(text, pos, state);
    } else if (text.startsWith('</', pos)) {
      const nameEnd = readName(text, pos + 2);
      const close = text.indexOf('>', pos);
      if (nameEnd === pos + 2 || close < 0) {
        state.wellFormed = false;
        pos = close < 0 ? text.length : close + 1;
        continue;
      }
      yield { kind: 'end', name: localName(text.slice(pos + 2, nameEnd)) };
      pos = close + 1;
    } else {
      const tag = readStartTag(text, pos, state);
      pos = tag.next;
      if (tag.tag !== null) yield tag.tag;
    }
  }
}

/** `<!DOCTYPE …>` and friends, including a bracketed internal subset; nothing inside is acted on. */
function skipDeclaration(text: string, start: number, state: { wellFormed: boolean }): number {
  let depth = 0;
  let quote: string | null = null;
  for (let pos = start + 2; pos < text.length; pos++) {
    const c = text[pos];
    if (quote !== null) {
      if (c === quote) quote = null;
    } else if (c === '"' || c === "'") {
      quote = c;
    } else if (c === '[') {
      depth++;
    } else if (c === ']') {
      depth = Math.max(0, depth - 1);
    } else if (c === '>' && depth === 0) {
      return pos + 1;
    }
  }
  state.wellFormed = false;
  return text.length;
}

function readName(text: string, start: number): number {
  if (start >= text.length || !NAME_START.test(text[start]!)) return start;
  let pos = start + 1;
  while (pos < text.length && NAME_CHAR.test(text[pos]!)) pos++;
  return pos;
}

function localName(qualified: string): string {
  const colon = qualified.lastIndexOf(':');
  return colon < 0 ? qualified : qualified.slice(colon + 1);
}

function readStartTag(text: string, start: number, state: { wellFormed: boolean }): { tag: XmlStartTag | null; next: number } {
  const nameEnd = readName(text, start + 1);
  if (nameEnd === start + 1) {
    // A stray '<' in text: skip it.
    state.wellFormed = false;
    return { tag: null, next: start + 1 };
  }
  const attributes = new Map<string, string>();
  const name = localName(text.slice(start + 1, nameEnd));
  // A tag cut off by the end of the document still counts: a half-written <failure is a failure.
  const truncated = () => {
    state.wellFormed = false;
    return { tag: { kind: 'start' as const, name, attributes, selfClosing: false }, next: text.length };
  };
  let pos = nameEnd;
  for (;;) {
    while (pos < text.length && /\s/.test(text[pos]!)) pos++;
    if (pos >= text.length) return truncated();
    const c = text[pos];
    if (c === '>' || text.startsWith('/>', pos)) {
      const selfClosing = c === '/';
      return { tag: { kind: 'start', name, attributes, selfClosing }, next: pos + (selfClosing ? 2 : 1) };
    }
    const attrEnd = readName(text, pos);
    if (attrEnd === pos) {
      // Junk inside a tag: skip the character, keep the tag.
      state.wellFormed = false;
      pos++;
      continue;
    }
    const attrName = text.slice(pos, attrEnd);
    pos = attrEnd;
    while (pos < text.length && /\s/.test(text[pos]!)) pos++;
    if (text[pos] !== '=') {
      state.wellFormed = false;
      continue;
    }
    pos++;
    while (pos < text.length && /\s/.test(text[pos]!)) pos++;
    const quote = text[pos];
    if (quote !== '"' && quote !== "'") {
      state.wellFormed = false;
      continue;
    }
    const valueEnd = text.indexOf(quote, pos + 1);
    if (valueEnd < 0) return truncated();
    // First occurrence wins, as a conforming parser would refuse the repeat anyway.
    if (!attributes.has(attrName)) attributes.set(attrName, decodeReferences(text.slice(pos + 1, valueEnd)));
    pos = valueEnd + 1;
  }
}

/** The five predefined entities and numeric references; anything else is left as written. */
export function decodeReferences(value: string): string {
  if (!value.includes('&')) return value;
  return value.replace(/&(#x[0-9A-Fa-f]{1,6}|#[0-9]{1,7}|[A-Za-z]{2,4});/g, (whole, ref: string) => {
    if (ref.startsWith('#')) {
      const cp = ref[1] === 'x' ? parseInt(ref.slice(2), 16) : parseInt(ref.slice(1), 10);
      return cp <= 0x10ffff && !(cp >= 0xd800 && cp <= 0xdfff) ? String.fromCodePoint(cp) : whole;
    }
    return Object.hasOwn(PREDEFINED, ref) ? PREDEFINED[ref]! : whole;
  });
}
