import { describe, expect, it } from 'vitest';
import { imageBuildRequestOf } from './images.controller.js';

const b64 = (text: string) => Buffer.from(text).toString('base64');

describe('an image build request', () => {
  it('given a Dockerfile and files, when read, then the files are decoded with their modes and the bases named', () => {
    const request = imageBuildRequestOf({ dockerfile: 'FROM cairn/sandbox-busybox:1\nCOPY a.sh /a.sh\n', files: [{ path: 'a.sh', content: b64('#!/bin/sh\n'), mode: 0o755 }, { path: 'b/c.txt', content: b64('c') }], timeoutSeconds: 30 });
    expect(request.files.map((f) => [f.path, Buffer.from(f.content).toString(), f.mode])).toEqual([['a.sh', '#!/bin/sh\n', 0o755], ['b/c.txt', 'c', 0o644]]);
    expect(request.bases).toEqual(['cairn/sandbox-busybox:1']);
    expect(request.timeoutSeconds).toBe(30);
  });

  it.each([
    [{ dockerfile: 'FROM x\n', tag: 'cairn/sandbox-busybox:1' }, 'tag: unknown field'],
    [{ dockerfile: 'FROM x\n', files: [{ path: '../up', content: '' }] }, 'files[0].path'],
    [{ dockerfile: 'FROM x\n', files: [{ path: 'a', content: '' }, { path: 'a', content: '' }] }, 'given twice'],
    [{ dockerfile: 'FROM x\n', files: [{ path: 'a', content: '', mode: 0o120777 }] }, 'only regular files'],
    [{ dockerfile: 'FROM x\n', timeoutSeconds: 7200 }, 'timeoutSeconds'],
    [{ dockerfile: 'ARG B\nFROM ${B}\n' }, 'uses a variable'],
    [{ dockerfile: 'FROM x\nENV TOKEN=AKIAIOSFODNN7EXAMPLE\n' }, 'Dockerfile'],
    [{ dockerfile: 'FROM x\n', files: [{ path: 'big', content: Buffer.alloc(800 * 1024).toString('base64') }] }, 'files[0].content'],
  ])('given %j, when read, then it is E_INPUT naming %s, and nothing is sent', (body, text) => {
    expect(() => imageBuildRequestOf(body)).toThrow(expect.objectContaining({ code: 'E_INPUT', message: expect.stringContaining(text) as unknown }));
  });
});
