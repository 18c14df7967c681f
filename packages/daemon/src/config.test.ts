// fastpulld's inflater setting: the CLI's choices, from the file, a flag or $FASTPULL_INFLATER, checked
// at start (a value that is no choice, or a decoder that cannot run here, names the key). And
// containerd_socket: on by default only for a fastpulld that serves the node's containerd. And the
// health keys' defaults, values and errors.
import { describe, expect, it } from 'vitest';
import { INFLATER_CHOICES, type InflaterChoice } from '@fastpull/core';
import { resolveGunzip } from '@fastpull/core/unpack';
import { DEFAULT_CONTAINERD_SOCKET, DEFAULT_SNAPSHOTTER_SOCKET, resolveConfig } from './config.js';
import { notHere } from '@fastpull/core/testing';

/** The choices whose decoder can run on this machine, and those that cannot. */
const runs = (c: InflaterChoice): boolean => {
  try {
    resolveGunzip(c);
    return true;
  } catch {
    return false;
  }
};
const usable = INFLATER_CHOICES.filter(runs);
const unusable = INFLATER_CHOICES.filter((c) => !runs(c));
if (unusable.length === 0) console.warn('skipping the check of an inflater that cannot run: every decoder (isal, igzip, pigz) runs on this machine');

describe('inflater', () => {
  it('unset, the library decides (auto); $FASTPULL_INFLATER as the CLI reads it; the file; a flag over the file', () => {
    expect(resolveConfig({}, {}, {}, '/').inflater).toBeUndefined();
    expect(resolveConfig({}, {}, { FASTPULL_INFLATER: 'zlib' }, '/').inflater).toBe('zlib');
    expect(resolveConfig({ inflater: 'parallel' }, {}, { FASTPULL_INFLATER: 'zlib' }, '/').inflater).toBe('parallel');
    expect(resolveConfig({ inflater: 'parallel' }, { inflater: 'zlib' }, {}, '/').inflater).toBe('zlib');
    expect(resolveConfig({ inflater: '' }, {}, {}, '/').inflater).toBeUndefined();
    for (const choice of usable) expect(resolveConfig({ inflater: choice }, {}, {}, '/').inflater).toBe(choice);
  });

  it('anything else is INVALID_ARGUMENT naming the key and the choices', () => {
    for (const bad of ['gzip', 'ZLIB', 3, true, ['zlib']]) {
      expect(() => resolveConfig({ inflater: bad }, {}, {}, '/')).toThrow(
        expect.objectContaining({ code: 'INVALID_ARGUMENT', message: expect.stringMatching(/^inflater:? .*auto, igzip, pigz, zlib, parallel, isal/) }),
      );
    }
    expect(() => resolveConfig({}, {}, { FASTPULL_INFLATER: 'fast' }, '/')).toThrow(
      expect.objectContaining({ code: 'INVALID_ARGUMENT', message: expect.stringContaining('FASTPULL_INFLATER') }),
    );
  });

  it.skipIf(notHere(unusable.length === 0 ? 'every decoder runs here: this is the test of one that cannot' : undefined))(
    'a decoder that cannot run here stops the start, saying why',
    () => {
      for (const choice of unusable) {
        expect(() => resolveConfig({ inflater: choice }, {}, {}, '/')).toThrow(
          expect.objectContaining({ code: 'INVALID_ARGUMENT', message: expect.stringMatching(new RegExp(`^inflater ${choice} was asked for but`)) }),
        );
      }
    },
  );
});

describe('containerd_socket', () => {
  it('defaults to containerd’s socket only with the default snapshotter socket; "" turns it off; a path is taken as given', () => {
    expect(resolveConfig({ snapshotter_socket: DEFAULT_SNAPSHOTTER_SOCKET }, {}, {}, '/').containerdSocket).toBe(DEFAULT_CONTAINERD_SOCKET);
    expect(resolveConfig({ snapshotter_socket: '/tmp/x/snapshotter.sock' }, {}, {}, '/').containerdSocket).toBeUndefined();
    expect(resolveConfig({ snapshotter_socket: '' }, {}, {}, '/').containerdSocket).toBeUndefined();
    expect(resolveConfig({ snapshotter_socket: DEFAULT_SNAPSHOTTER_SOCKET, containerd_socket: '' }, {}, {}, '/').containerdSocket).toBeUndefined();
    expect(resolveConfig({ containerd_socket: '/run/k3s/containerd/containerd.sock' }, {}, {}, '/').containerdSocket).toBe(
      '/run/k3s/containerd/containerd.sock',
    );
    expect(resolveConfig({ containerd_socket: 'c.sock' }, { containerd_socket: 'd.sock' }, {}, '/srv/node').containerdSocket).toBe('/srv/node/d.sock');
    expect(() => resolveConfig({ containerd_socket: 7 }, {}, {}, '/')).toThrow(
      expect.objectContaining({ code: 'INVALID_ARGUMENT', message: expect.stringMatching(/^containerd_socket 7: /) }),
    );
  });
});

describe('signature_policy and notation_config', () => {
  it('the file, a flag over it, else the environment the CLI reads; "" turns a kind off; relative paths from cwd', () => {
    expect(resolveConfig({}, {}, {}, '/').signaturePolicy).toBeUndefined();
    expect(resolveConfig({}, {}, {}, '/').notationConfig).toBeUndefined();
    const env = { FASTPULL_SIGNATURE_POLICY: '/etc/containers/policy.json', FASTPULL_NOTATION_CONFIG: 'notation' };
    expect(resolveConfig({}, {}, env, '/srv')).toMatchObject({ signaturePolicy: '/etc/containers/policy.json', notationConfig: '/srv/notation' });
    expect(resolveConfig({ signature_policy: 'p.json', notation_config: '/n' }, { signature_policy: 'q.json' }, env, '/srv')).toMatchObject({
      signaturePolicy: '/srv/q.json',
      notationConfig: '/n',
    });
    const off = resolveConfig({ signature_policy: '', notation_config: '' }, {}, env, '/');
    expect(off.signaturePolicy).toBeUndefined();
    expect(off.notationConfig).toBeUndefined();
    expect(() => resolveConfig({ signature_policy: 3 }, {}, {}, '/')).toThrow(
      expect.objectContaining({ code: 'INVALID_ARGUMENT', message: expect.stringMatching(/^signature_policy 3: want a path/) }),
    );
  });
});

describe('min_free_space and health_interval', () => {
  it('default to 1GiB and 10s; take sizes and durations as the other keys do; 0 turns either off', () => {
    const c = resolveConfig({}, {}, {}, '/');
    expect(c.minFreeSpace).toBe(1024 ** 3);
    expect(c.healthIntervalMs).toBe(10_000);
    expect(resolveConfig({ min_free_space: '512MiB', health_interval: '1m' }, {}, {}, '/')).toMatchObject({
      minFreeSpace: 512 * 1024 ** 2,
      healthIntervalMs: 60_000,
    });
    expect(resolveConfig({ min_free_space: '2GB' }, { min_free_space: '8MiB' }, {}, '/').minFreeSpace).toBe(8 * 1024 ** 2);
    expect(resolveConfig({ min_free_space: 0, health_interval: 0 }, {}, {}, '/')).toMatchObject({ minFreeSpace: 0, healthIntervalMs: 0 });
    expect(resolveConfig({}, { min_free_space: '0', health_interval: '0' }, {}, '/')).toMatchObject({ minFreeSpace: 0, healthIntervalMs: 0 });
  });

  it('a bad value is INVALID_ARGUMENT naming the key', () => {
    for (const [key, bad] of [
      ['min_free_space', '-1'],
      ['min_free_space', 'lots'],
      ['health_interval', 'often'],
      ['health_interval', '48h'],
    ] as const) {
      expect(() => resolveConfig({ [key]: bad }, {}, {}, '/')).toThrow(
        expect.objectContaining({ code: 'INVALID_ARGUMENT', message: expect.stringContaining(key) }),
      );
    }
  });
});
