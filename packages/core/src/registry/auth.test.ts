import { describe, expect, it } from 'vitest';
import { parseChallenges } from './auth.js';
import { isLoopbackHost, registryEndpoint } from './hosts.js';

describe('parseChallenges', () => {
  it('parses a Bearer challenge with quoted params', () => {
    const [c] = parseChallenges('Bearer realm="https://auth.example/token",service="registry.example",scope="repository:a/b:pull"');
    expect(c).toEqual({ scheme: 'bearer', params: { realm: 'https://auth.example/token', service: 'registry.example', scope: 'repository:a/b:pull' } });
  });

  it('keeps commas and escaped quotes inside quoted strings, and parses several challenges', () => {
    const cs = parseChallenges('Basic realm="a, \\"b\\"", Bearer realm="https://t/x",scope="repository:x:pull,push"');
    expect(cs).toHaveLength(2);
    expect(cs[0]).toEqual({ scheme: 'basic', params: { realm: 'a, "b"' } });
    expect(cs[1]?.params.scope).toBe('repository:x:pull,push');
  });

  it('accepts unquoted values and odd spacing', () => {
    expect(parseChallenges('bearer  realm=https://t/x , service=s')).toEqual([{ scheme: 'bearer', params: { realm: 'https://t/x', service: 's' } }]);
  });

  it('survives garbage without throwing', () => {
    for (const h of ['', '=', '"', 'Bearer realm="unterminated', ',,,', 'Bearer =x']) expect(() => parseChallenges(h)).not.toThrow();
  });
});

describe('registry endpoints', () => {
  it('uses TLS except for loopback or when asked', () => {
    expect(registryEndpoint('ghcr.io').origin).toBe('https://ghcr.io');
    expect(registryEndpoint('docker.io').origin).toBe('https://registry-1.docker.io');
    expect(registryEndpoint('127.0.0.1:5000').origin).toBe('http://127.0.0.1:5000');
    expect(registryEndpoint('localhost:5000').origin).toBe('http://localhost:5000');
    expect(registryEndpoint('[::1]:5000').origin).toBe('http://[::1]:5000');
    expect(registryEndpoint('10.0.0.1:5000').origin).toBe('https://10.0.0.1:5000');
    expect(registryEndpoint('myreg:5000', { plainHttp: true }).origin).toBe('http://myreg:5000');
  });

  it('knows loopback hosts', () => {
    expect(isLoopbackHost('127.1.2.3:80')).toBe(true);
    expect(isLoopbackHost('128.0.0.1')).toBe(false);
    expect(isLoopbackHost('localhost.evil.com')).toBe(false);
    expect(isLoopbackHost('127.0.0.1.nip.io:5000')).toBe(false);
  });
});
