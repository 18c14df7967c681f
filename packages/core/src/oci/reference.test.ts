import { describe, expect, it } from 'vitest';
import { formatReference, parseReference } from './reference.js';

const D = `sha256:${'ab'.repeat(32)}`;

describe('parseReference', () => {
  it.each([
    ['ubuntu', { registry: 'docker.io', repository: 'library/ubuntu', tag: 'latest' }],
    ['ubuntu:24.04', { registry: 'docker.io', repository: 'library/ubuntu', tag: '24.04' }],
    ['bitnami/redis', { registry: 'docker.io', repository: 'bitnami/redis', tag: 'latest' }],
    ['docker.io/ubuntu', { registry: 'docker.io', repository: 'library/ubuntu', tag: 'latest' }],
    ['index.docker.io/library/ubuntu:22.04', { registry: 'docker.io', repository: 'library/ubuntu', tag: '22.04' }],
    ['localhost/app', { registry: 'localhost', repository: 'app', tag: 'latest' }],
    ['localhost:5000/team/app:v1.2', { registry: 'localhost:5000', repository: 'team/app', tag: 'v1.2' }],
    ['127.0.0.1:5000/a/b/c:t', { registry: '127.0.0.1:5000', repository: 'a/b/c', tag: 't' }],
    ['[::1]:5000/app:1', { registry: '[::1]:5000', repository: 'app', tag: '1' }],
    ['ghcr.io/org/img', { registry: 'ghcr.io', repository: 'org/img', tag: 'latest' }],
    ['my_registry.example.com/app', { registry: 'my_registry.example.com', repository: 'app', tag: 'latest' }],
    [`app@${D}`, { registry: 'docker.io', repository: 'library/app', digest: D }],
    [`host:5000/app:1.0@${D}`, { registry: 'host:5000', repository: 'app', tag: '1.0', digest: D }],
    ['a/b__c/d-e--f.g', { registry: 'docker.io', repository: 'a/b__c/d-e--f.g', tag: 'latest' }],
  ])('%s', (input, want) => {
    if (input.startsWith('my_registry')) {
      // Underscores are not valid in host names, so this is not a registry at all.
      expect(() => parseReference(input)).toThrow(/INVALID|bad/);
      return;
    }
    expect(parseReference(input)).toEqual(want);
  });

  it.each([
    ['', 'empty'],
    ['Ubuntu', 'uppercase repository'],
    ['ubuntu:', 'empty tag'],
    ['ubuntu:-bad', 'tag must start with a word character'],
    [`ubuntu:${'a'.repeat(129)}`, 'tag longer than 128'],
    ['ubuntu@sha256:abc', 'short digest'],
    [`ubuntu@md5:${'a'.repeat(32)}`, 'unknown algorithm'],
    [`ubuntu@sha256:${'A'.repeat(64)}`, 'uppercase hex'],
    ['a//b', 'empty component'],
    ['a/b/', 'trailing slash'],
    ['host:99999/app', 'port out of range'],
    ['-host.com/app', 'host label starts with a dash'],
    ['app name', 'whitespace'],
    ['a/..b', 'leading separator'],
    [`host.com/${'a'.repeat(260)}`, 'name too long'],
  ])('rejects %j (%s) with INVALID_REFERENCE', (input) => {
    expect(() => parseReference(input)).toThrowError(expect.objectContaining({ code: 'INVALID_REFERENCE' }) as Error);
  });

  it('formats the canonical form', () => {
    expect(formatReference(parseReference('ubuntu'))).toBe('docker.io/library/ubuntu:latest');
    expect(formatReference(parseReference(`h:1/x:t@${D}`))).toBe(`h:1/x:t@${D}`);
    expect(formatReference(parseReference(`x@${D}`))).toBe(`docker.io/library/x@${D}`);
  });
});
