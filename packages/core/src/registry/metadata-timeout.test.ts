// The deadline on a registry's small documents: a manifest, index, config or referrers list that a
// registry trickles (bytes keep coming, so no idle timeout fires) fails NETWORK_ERROR once the
// metadata timeout passes, through the client and through a pull. The loopback registry trickles;
// the deadline is set small by the test.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { FastpullError, isFastpullError } from '../errors.js';
import { parseReference } from '../oci/reference.js';
import { pull } from '../pull/pull.js';
import { workDir } from '../pull/pull.testkit.js';
import { buildImage, buildIndex, type BuiltImage } from '../testing/builder.js';
import { startLoopbackRegistry, type LoopbackRegistry } from '../testing/registry.js';
import { RegistryClient } from './client.js';
import { openStore } from '../store/root.js';

/** What `p` rejects with; fails the test when it resolves. */
async function failure(p: Promise<unknown>): Promise<FastpullError> {
  try {
    await p;
  } catch (e) {
    if (isFastpullError(e)) return e;
    throw e;
  }
  throw new Error('expected a FastpullError, and the call succeeded');
}

/** A trickle slow enough that a document takes many seconds; the deadlines below are far shorter. */
const TRICKLE = 20;
const DEADLINE_MS = 300;

let reg: LoopbackRegistry;
let image: BuiltImage;
const work = workDir('metadata-timeout');

beforeAll(async () => {
  reg = await startLoopbackRegistry({ referrers: true });
  image = await buildImage({ layers: [[{ type: 'file', path: 'etc/motd', content: 'slow\n' }]] });
  reg.addImage('slow/app', '1', image);
  reg.addIndex('slow/multi', '1', buildIndex([image]));
});
afterAll(async () => {
  await reg?.close();
  work.cleanup();
});

describe('metadata timeout', () => {
  const expectTimeout = (e: FastpullError, what: RegExp): void => {
    expect(e.code).toBe('NETWORK_ERROR');
    expect(e.details.timeoutMs).toBe(DEADLINE_MS);
    expect(e.message).toMatch(what);
    expect(e.message).toMatch(/metadata timeout/);
  };

  it('fails a manifest the registry trickles, once the deadline passes (NETWORK_ERROR)', async () => {
    reg.faults.trickle = { path: /\/manifests\//, bytesPerSecond: TRICKLE };
    const client = new RegistryClient({ plainHttp: true, metadataTimeoutMs: DEADLINE_MS });
    try {
      expectTimeout(await failure(client.resolve(parseReference(`${reg.host}/slow/app:1`))), /manifest/);
      // An index, and the platform manifest it leads to, alike.
      expectTimeout(await failure(client.resolve(parseReference(`${reg.host}/slow/multi:1`))), /manifest/);
    } finally {
      delete reg.faults.trickle;
      await client.close();
    }
  });

  it('fails a config the registry trickles', async () => {
    reg.faults.trickle = { path: new RegExp(`/blobs/${image.configDigest}`), bytesPerSecond: TRICKLE };
    const client = new RegistryClient({ plainHttp: true, metadataTimeoutMs: DEADLINE_MS });
    try {
      expectTimeout(await failure(client.resolve(parseReference(`${reg.host}/slow/app:1`))), /blob/);
    } finally {
      delete reg.faults.trickle;
      await client.close();
    }
  });

  it('fails a referrers list the registry trickles', async () => {
    reg.faults.trickle = { path: /\/referrers\//, bytesPerSecond: TRICKLE };
    const client = new RegistryClient({ plainHttp: true, metadataTimeoutMs: DEADLINE_MS });
    try {
      expectTimeout(await failure(client.fetchReferrers(parseReference(`${reg.host}/slow/app:1`), image.manifestDigest)), /referrers/);
    } finally {
      delete reg.faults.trickle;
      await client.close();
    }
  });

  it('reads a trickled manifest that arrives within the deadline', async () => {
    // The same trickle, a thousand times faster: the document is whole long before a minute.
    reg.faults.trickle = { path: /\/manifests\//, bytesPerSecond: TRICKLE * 1000 };
    const client = new RegistryClient({ plainHttp: true, metadataTimeoutMs: 60_000 });
    try {
      const resolved = await client.resolve(parseReference(`${reg.host}/slow/app:1`));
      expect(resolved.manifestDescriptor.digest).toBe(image.manifestDigest);
    } finally {
      delete reg.faults.trickle;
      await client.close();
    }
  });

  it("a pull's metadataTimeoutMs bounds its manifest read, and the pull fails without recording the image", async () => {
    reg.faults.trickle = { path: /\/manifests\//, bytesPerSecond: TRICKLE };
    try {
      const e = await failure(pull(`${reg.host}/slow/app:1`, { root: work.dir, metadataTimeoutMs: DEADLINE_MS }));
      expectTimeout(e, /manifest/);
      expect(await openStore(work.dir).images.list()).toEqual([]);
    } finally {
      delete reg.faults.trickle;
    }
  });

  it('refuses a metadata timeout that is not a positive number of milliseconds', () => {
    for (const bad of [0, -1, Number.NaN, Infinity]) expect(() => new RegistryClient({ metadataTimeoutMs: bad }), String(bad)).toThrow(/metadataTimeoutMs/);
  });
});
