import { describe, expect, it } from 'vitest';
import { redactUrl } from './redact-url.js';

describe('redactUrl', () => {
  it('drops credentials and keeps where the server is', () => {
    expect(redactUrl('postgres://cairn:secret@127.0.0.1:5432/cairn')).toBe('postgres://127.0.0.1:5432/cairn');
    expect(redactUrl('nats://127.0.0.1:4222')).toBe('nats://127.0.0.1:4222');
  });

  it('keeps a server written without a scheme, less its credentials', () => {
    expect(redactUrl('127.0.0.1:4222')).toBe('127.0.0.1:4222');
    expect(redactUrl('svc:s3cret@127.0.0.1:4222')).toBe('127.0.0.1:4222');
    expect(redactUrl('a b c:pw@host')).not.toContain('pw');
  });
});
