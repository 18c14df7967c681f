import { describe, expect, it } from 'vitest';
import { hostPlatform, normalizePlatform, parsePlatform, platformMatches, selectPlatform } from './platform.js';

describe('platforms', () => {
  it('normalises arm64 to v8 and arm to v7', () => {
    expect(normalizePlatform({ os: 'linux', architecture: 'arm64' })).toEqual({ os: 'linux', architecture: 'arm64', variant: 'v8' });
    expect(normalizePlatform({ os: 'linux', architecture: 'aarch64' })).toEqual({ os: 'linux', architecture: 'arm64', variant: 'v8' });
    expect(normalizePlatform({ os: 'linux', architecture: 'arm' })).toEqual({ os: 'linux', architecture: 'arm', variant: 'v7' });
    expect(normalizePlatform({ os: 'Linux', architecture: 'x86_64' })).toEqual({ os: 'linux', architecture: 'amd64' });
  });

  it('parses os/arch/variant and rejects nonsense', () => {
    expect(parsePlatform('linux/arm/v6')).toEqual({ os: 'linux', architecture: 'arm', variant: 'v6' });
    expect(() => parsePlatform('linux')).toThrowError(expect.objectContaining({ code: 'INVALID_ARGUMENT' }) as Error);
    expect(() => parsePlatform('linux/amd64/v2/x')).toThrow();
  });

  it('matches variants after normalisation', () => {
    expect(platformMatches({ os: 'linux', architecture: 'arm64' }, { os: 'linux', architecture: 'arm64', variant: 'v8' })).toBe(true);
    expect(platformMatches({ os: 'linux', architecture: 'arm', variant: 'v6' }, { os: 'linux', architecture: 'arm' })).toBe(false);
    expect(platformMatches({ os: 'linux', architecture: 'amd64' }, { os: 'windows', architecture: 'amd64' })).toBe(false);
    expect(platformMatches({ os: 'linux', architecture: 'amd64' }, { os: 'linux', architecture: 'arm64' })).toBe(false);
  });

  it('selects the best index entry', () => {
    const entries = [
      { name: 'amd', platform: { os: 'linux', architecture: 'amd64' } },
      { name: 'arm6', platform: { os: 'linux', architecture: 'arm', variant: 'v6' } },
      { name: 'arm7', platform: { os: 'linux', architecture: 'arm', variant: 'v7' } },
      { name: 'arm64', platform: { os: 'linux', architecture: 'arm64', variant: 'v8' } },
      { name: 'none' },
    ];
    expect(selectPlatform({ os: 'linux', architecture: 'arm' }, entries)?.name).toBe('arm7');
    expect(selectPlatform({ os: 'linux', architecture: 'arm', variant: 'v6' }, entries)?.name).toBe('arm6');
    expect(selectPlatform({ os: 'linux', architecture: 'aarch64' }, entries)?.name).toBe('arm64');
    expect(selectPlatform({ os: 'linux', architecture: 's390x' }, entries)).toBeUndefined();
  });

  it('defaults to the host', () => {
    const h = hostPlatform();
    expect(h.os).toBe(process.platform);
    expect(['amd64', 'arm64', 'arm', '386', 'ppc64', 's390x', 'riscv64', 'ppc64le'].includes(h.architecture) || h.architecture === process.arch).toBe(true);
  });
});
