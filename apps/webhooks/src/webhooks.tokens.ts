/** The operator's keyring (from CAIRN_SECRETS_KEY_FILE), to open webhook signing secrets. */
export const WEBHOOK_KEYRING = Symbol('cairn.webhook-keyring');
