/*
 * Credentials recognisable by their shape alone, found in output and in RunSpecs whether or not
 * the store holds them. Only high-confidence shapes: a fixed, documented prefix and a fixed
 * alphabet and length (or, for PEM, the armour itself). Generic "looks random" or
 * `password=…` rules would flag ordinary output (hashes, ids) and stop honest runs, so there are
 * none. Each `id` is what receipts name (`secret.redacted.pattern`); never the text matched.
 */

export interface KeyPattern {
  /** A token (`[a-z0-9][a-z0-9_.-]*`): what receipts and errors name. */
  readonly id: string;
  /** For people: what the pattern finds. */
  readonly description: string;
  /** Global, and written so that no input makes it backtrack badly. */
  readonly regex: RegExp;
}

/** Not preceded by a character the credential's alphabet continues with. */
const START = '(?<![A-Za-z0-9_-])';
/** Not followed by one either: a longer run of such characters is something else. */
const END = '(?![A-Za-z0-9_-])';

export const KEY_PATTERNS: readonly KeyPattern[] = Object.freeze([
  {
    id: 'aws-access-key-id',
    description: 'an AWS access key id (AKIA…, ASIA…, base32, 20 characters)',
    regex: new RegExp(`${START}(?:A3T[A-Z0-9]|AKIA|ASIA|ABIA|ACCA)[A-Z2-7]{16}${END}`, 'g'),
  },
  {
    id: 'github-token',
    description: 'a GitHub token (ghp_, gho_, ghu_, ghs_, ghr_ and 36 characters)',
    regex: new RegExp(`${START}gh[pousr]_[A-Za-z0-9]{36}${END}`, 'g'),
  },
  {
    id: 'github-pat',
    description: 'a fine-grained GitHub personal access token (github_pat_ and 82 characters)',
    regex: new RegExp(`${START}github_pat_[A-Za-z0-9_]{82}${END}`, 'g'),
  },
  {
    id: 'openai-key',
    // Every OpenAI key carries "T3BlbkFJ" (base64 of "OpenAI") between two random halves.
    description: 'an OpenAI API key (sk-…T3BlbkFJ…, or a legacy sk- and 48 characters)',
    regex: new RegExp(`${START}sk-(?:(?:proj|svcacct|admin)-)?[A-Za-z0-9_-]{16,200}T3BlbkFJ[A-Za-z0-9_-]{16,200}${END}|${START}sk-[A-Za-z0-9]{48}${END}`, 'g'),
  },
  {
    id: 'anthropic-key',
    description: 'an Anthropic API key (sk-ant-api03-… or sk-ant-admin01-…)',
    regex: new RegExp(`${START}sk-ant-(?:api|admin)[0-9]{2}-[A-Za-z0-9_-]{80,120}${END}`, 'g'),
  },
  {
    id: 'slack-token',
    description: 'a Slack token (xoxb-, xoxp-, xoxa-, xoxo-, xoxr-, xoxs- with its numeric parts)',
    regex: new RegExp(`${START}xox[abposr]-[0-9]{6,16}-[A-Za-z0-9-]{8,120}${END}`, 'g'),
  },
  {
    id: 'slack-webhook',
    description: 'a Slack incoming-webhook URL',
    regex: /https:\/\/hooks\.slack\.com\/(?:services|workflows|triggers)\/T[A-Z0-9]{6,12}\/[A-Z0-9]{6,14}\/[A-Za-z0-9]{16,64}/g,
  },
  {
    id: 'stripe-secret-key',
    description: 'a Stripe live secret or restricted key (sk_live_…, rk_live_…)',
    regex: new RegExp(`${START}[sr]k_live_[0-9A-Za-z]{24,99}${END}`, 'g'),
  },
  {
    id: 'google-api-key',
    description: 'a Google API key (AIza and 35 characters)',
    regex: new RegExp(`${START}AIza[0-9A-Za-z_-]{35}${END}`, 'g'),
  },
  {
    id: 'gitlab-token',
    description: 'a GitLab personal access token (glpat- and 20 characters)',
    regex: new RegExp(`${START}glpat-[0-9A-Za-z_-]{20}${END}`, 'g'),
  },
  {
    id: 'npm-token',
    description: 'an npm access token (npm_ and 36 characters)',
    regex: new RegExp(`${START}npm_[A-Za-z0-9]{36}${END}`, 'g'),
  },
  {
    id: 'cairn-api-key',
    description: "a Cairn API key (cairn_<prefix>_<secret>): Cairn's own credential",
    regex: new RegExp(`${START}cairn_[a-z2-7]{8}_[A-Za-z0-9_-]{43}${END}`, 'g'),
  },
  {
    id: 'private-key',
    // The whole block, armour included; a block cut off before its END line to the end of the text.
    description: 'a PEM or PGP private key block (-----BEGIN … PRIVATE KEY-----)',
    regex: /-----BEGIN[A-Z0-9 ]{0,40} PRIVATE KEY(?: BLOCK)?-----(?:[^-]|-(?!----END))*(?:-----END[A-Z0-9 ]{0,40} PRIVATE KEY(?: BLOCK)?-----)?/g,
  },
]);

/** The description of a pattern id, for messages. */
export function keyPatternDescription(id: string): string {
  return KEY_PATTERNS.find((p) => p.id === id)?.description ?? id;
}
