import { describe, expect, it } from 'vitest';
import { dockerfileBases } from './dockerfile-bases.js';

describe('the images a Dockerfile builds from', () => {
  it('given stages, scratch, flags and continuations, then it names each outside image once, in order', () => {
    const dockerfile = ['# a comment', 'FROM --platform=linux/amd64 cairn/sandbox-busybox:1 AS build', 'RUN true \\', '  && true', 'FROM build', 'FROM scratch', 'FROM cairn/sandbox-debian:1', 'FROM cairn/sandbox-busybox:1'].join('\n');
    expect(dockerfileBases(dockerfile)).toEqual(['cairn/sandbox-busybox:1', 'cairn/sandbox-debian:1']);
  });

  it.each([
    ['ARG BASE\nFROM ${BASE}\n', 'uses a variable'],
    ['RUN true\n', 'no FROM'],
    ['FROM a b c\n', 'cannot read'],
  ])('given %j, then it is E_INPUT saying %s', (dockerfile, text) => {
    expect(() => dockerfileBases(dockerfile)).toThrow(expect.objectContaining({ code: 'E_INPUT', message: expect.stringContaining(text) as unknown }));
  });
});
