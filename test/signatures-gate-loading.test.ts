// The signature policies load beside the pull, not before it: a pull given its gate as a promise
// resolves the name and starts the layers while the policies load, and still records nothing before
// the verdict; a policy that cannot be used fails the pull with its own error (INVALID_ARGUMENT), as
// it did when the policies loaded first, also when the name does not resolve.
import { generateKeyPairSync } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { LocalService, loadSignatureVerifiers, openStore, pull, type PullEvent, type SignatureGate } from '@fastpull/core';
import { findDistributionBinary, pushImage, sampleImage, startDistribution, type DistributionRegistry } from '@fastpull/core/testing';
import { failure, tempDir } from './helpers.js';

if (findDistributionBinary() === undefined) throw new Error('signature tests need docker-registry (scripts/bootstrap.sh installs it)');

describe('signature policies that load while the pull starts', () => {
  const work = tempDir('gate-loading');
  let reg: DistributionRegistry;
  let requireKey: string;
  let broken: string;
  let seed = 300;

  async function image(repo: string): Promise<string> {
    await pushImage(reg.url, repo, '1', await sampleImage(seed++, { layers: 2 }));
    return `${reg.host}/${repo}:1`;
  }

  beforeAll(async () => {
    reg = await startDistribution();
    const { publicKey } = generateKeyPairSync('ec', { namedCurve: 'P-256' });
    writeFileSync(join(work.dir, 'key.pub'), publicKey.export({ type: 'spki', format: 'pem' }));
    requireKey = join(work.dir, 'policy.json');
    const requirement = { type: 'sigstoreSigned', keyPath: join(work.dir, 'key.pub'), signedIdentity: { type: 'matchRepository' } };
    writeFileSync(
      requireKey,
      JSON.stringify({ default: [{ type: 'insecureAcceptAnything' }], transports: { docker: { [`${reg.host}/gated`]: [requirement] } } }),
    );
    broken = join(work.dir, 'broken.json');
    writeFileSync(broken, '{"default": [{"type": "sigstoreSigned"}');
  });
  afterAll(async () => {
    await reg?.stop();
    work.cleanup();
  });

  it('the name resolves and a layer downloads before the policies have loaded; their refusal still records nothing', async () => {
    const ref = await image('gated/app');
    const root = join(work.dir, 'early');
    let load!: (gate: SignatureGate) => void;
    const loading = new Promise<SignatureGate | undefined>((resolve) => (load = resolve));
    const seen: string[] = [];
    let loaded = false;
    const onProgress = (e: PullEvent) => {
      seen.push(e.type);
      // The first layer bytes arrive while the gate is still pending; only then do the policies "finish loading".
      if (e.type === 'layer' && e.bytes > 0 && !loaded) {
        loaded = true;
        void loadSignatureVerifiers({ signaturePolicy: requireKey }).then((verifiers) => load({ verifiers }));
      }
    };
    const e = await failure(pull(ref, { root, signatures: loading, onProgress }));
    expect(e.code).toBe('SIGNATURE_MISSING');
    expect(seen[0]).toBe('resolved');
    expect(loaded).toBe(true);
    expect(await openStore(root).images.list()).toEqual([]);
  });

  it('policies that cover the image and accept it, or none at all, pull as a pull without a gate does', async () => {
    const ref = await image('open/app');
    const covered = await pull(ref, {
      root: join(work.dir, 'open'),
      signatures: loadSignatureVerifiers({ signaturePolicy: requireKey }).then((verifiers) => ({ verifiers })),
    });
    // The policy's default accepts anything outside gated/: no verdict is recorded, as with a loaded gate.
    expect(covered.image.signatures).toBeUndefined();
    const none = await pull(ref, { root: join(work.dir, 'none'), signatures: Promise.resolve(undefined) });
    expect(none.image.manifest.digest).toBe(covered.image.manifest.digest);
    expect(await openStore(join(work.dir, 'none')).images.list()).toHaveLength(1);
  });

  it('a policy that cannot be used fails the pull with INVALID_ARGUMENT naming it, nothing recorded, whether or not the name resolves', async () => {
    const ref = await image('gated/broken');
    for (const name of [ref, `${reg.host}/gated/none:1`]) {
      const root = join(work.dir, `broken-${name.endsWith('none:1') ? 'missing' : 'found'}`);
      const e = await failure(pull(name, { root, signatures: loadSignatureVerifiers({ signaturePolicy: broken }).then((verifiers) => ({ verifiers })) }));
      expect(e.code, name).toBe('INVALID_ARGUMENT');
      expect(e.message, name).toContain(broken);
      expect(await openStore(root).images.list()).toEqual([]);
      // Through the service, as the CLI and fastpulld pull: the same error, the settings loaded beside the pull.
      const service = new LocalService({ root, signatures: { signaturePolicy: broken } });
      try {
        const s = await failure(service.pull(name));
        expect(s.code, name).toBe('INVALID_ARGUMENT');
        expect(s.message, name).toContain(broken);
      } finally {
        await service.close();
      }
      expect(await openStore(root).images.list()).toEqual([]);
    }
  });
});
