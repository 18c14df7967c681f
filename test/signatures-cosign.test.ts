// Sigstore/cosign signatures made by the real cosign (offline: key pairs, no transparency log) in the
// loopback distribution registry, verified by fastpull's gate under a containers policy.json; `cosign
// verify` must agree with fastpull on every case. Hostile cases are hand-made from real signatures.
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadSignatureVerifiers, openStore, pull, type Digest, type ImageRecord, type SignatureVerdict } from '@fastpull/core';
import { findDistributionBinary, pushImage, sampleImage, startDistribution, type DistributionRegistry } from '@fastpull/core/testing';
import { cosign, cosignMissing, cosignSign, cosignVerify, generateKeyPair, getBlob, getManifest, putBlob, putManifest } from './cosign.js';
import { failure, runCliAsync, tempDir } from './helpers.js';

const missing = findDistributionBinary() === undefined ? 'docker-registry is not installed (scripts/bootstrap.sh installs it)' : cosignMissing();
if (missing) throw new Error(`signature tests need their peers: ${missing}`);

describe('cosign signatures (tag scheme) under a policy.json', () => {
  const work = tempDir('cosign');
  let reg: DistributionRegistry;
  let policyFor: (requirement: object, scope?: string) => string;
  let policies = 0;
  /** Each test image: a fresh repository with one image, its digest. */
  const images = new Map<string, Digest>();
  let seed = 100;

  async function push(repo: string): Promise<Digest> {
    const digest = await pushImage(reg.url, repo, '1', await sampleImage(seed++, { layers: 2 }));
    images.set(repo, digest);
    return digest;
  }

  async function gatedPull(root: string, ref: string, policy: string) {
    const verifiers = await loadSignatureVerifiers({ signaturePolicy: policy });
    return pull(ref, { root, signatures: { verifiers } });
  }

  function verdicts(e: { details: Readonly<Record<string, unknown>> }): SignatureVerdict[] {
    return e.details.verdicts as SignatureVerdict[];
  }

  beforeAll(async () => {
    reg = await startDistribution();
    await generateKeyPair(work.dir, 'good');
    await generateKeyPair(work.dir, 'other');
    policyFor = (requirement, scope) => {
      const file = join(work.dir, `policy-${policies++}.json`);
      const doc = { default: [{ type: 'insecureAcceptAnything' }], transports: { docker: { [scope ?? `${reg.host}/signed`]: [requirement] } } };
      writeFileSync(file, JSON.stringify(doc));
      return file;
    };
  });
  afterAll(async () => {
    await reg?.stop();
    work.cleanup();
  });

  const keyed = (key = 'good.pub', identity: object = { type: 'matchRepository' }) => ({ type: 'sigstoreSigned', keyPath: key, signedIdentity: identity });

  it('a signed image is pulled and its verdict recorded; cosign verify agrees', async () => {
    const digest = await push('signed/app');
    await cosignSign(work.dir, 'good.key', `${reg.host}/signed/app@${digest}`, 'tag');
    const root = join(work.dir, 'ok');
    const { image } = await gatedPull(root, `${reg.host}/signed/app:1`, policyFor(keyed('good.pub'), `${reg.host}/signed`));
    expect(image.signatures?.outcome).toBe('verified');
    const [v] = image.signatures!.verdicts;
    expect(v).toMatchObject({ kind: 'sigstore', level: 'strict', outcome: 'verified', scope: `${reg.host}/signed` });
    expect(v!.checks.map((c) => `${c.check}:${c.ok}`)).toEqual(['authenticity:true', 'integrity:true', 'identity:true']);
    const stored = (await openStore(root).images.list())[0] as ImageRecord;
    expect(stored.signatures?.verdicts[0]?.signature).toBe(v!.signature);
    expect((await cosignVerify(work.dir, 'good.pub', `${reg.host}/signed/app:1`)).status).toBe(0);
  });

  it('an unsigned image under a policy that requires a signature: SIGNATURE_MISSING, nothing recorded; one no scope covers pulls as before', async () => {
    await push('signed/bare');
    const root = join(work.dir, 'missing');
    const policy = policyFor(keyed('good.pub'), `${reg.host}/signed`);
    const e = await failure(gatedPull(root, `${reg.host}/signed/bare:1`, policy));
    expect(e.code).toBe('SIGNATURE_MISSING');
    expect(verdicts(e)[0]).toMatchObject({ kind: 'sigstore', outcome: 'missing' });
    expect(await openStore(root).images.list()).toEqual([]);
    expect((await cosignVerify(work.dir, 'good.pub', `${reg.host}/signed/bare:1`)).status).not.toBe(0);
    // The default scope accepts anything: no verdict is recorded for an image it alone covers.
    await push('plain/bare');
    const { image } = await gatedPull(root, `${reg.host}/plain/bare:1`, policy);
    expect(image.signatures).toBeUndefined();
  });

  it('a signature by another key: SIGNATURE_INVALID (authenticity); cosign verify refuses too', async () => {
    const digest = await push('signed/otherkey');
    await cosignSign(work.dir, 'other.key', `${reg.host}/signed/otherkey@${digest}`, 'tag');
    const e = await failure(gatedPull(join(work.dir, 'wrongkey'), `${reg.host}/signed/otherkey:1`, policyFor(keyed('good.pub'))));
    expect(e.code).toBe('SIGNATURE_INVALID');
    expect(verdicts(e)[0]!.checks[0]).toMatchObject({ check: 'authenticity', ok: false });
    expect((await cosignVerify(work.dir, 'good.pub', `${reg.host}/signed/otherkey:1`)).status).not.toBe(0);
    expect((await cosignVerify(work.dir, 'other.pub', `${reg.host}/signed/otherkey:1`)).status).toBe(0);
  });

  it("another image's signature under this digest's tag: SIGNATURE_INVALID (integrity); cosign verify refuses too", async () => {
    const signed = images.get('signed/app')!;
    const target = await push('signed/app-copy');
    // The real signature of signed/app, served as the signature of another image.
    const sig = await getManifest(reg.url, 'signed/app', `${signed.replace(':', '-')}.sig`);
    const layers = sig.layers as { digest: string }[];
    for (const d of [(sig.config as { digest: string }).digest, ...layers.map((l) => l.digest)])
      await putBlob(reg.url, 'signed/app-copy', await getBlob(reg.url, 'signed/app', d));
    await putManifest(reg.url, 'signed/app-copy', `${target.replace(':', '-')}.sig`, sig);
    const e = await failure(gatedPull(join(work.dir, 'otherdigest'), `${reg.host}/signed/app-copy:1`, policyFor(keyed('good.pub'))));
    expect(e.code).toBe('SIGNATURE_INVALID');
    expect(verdicts(e)[0]!.checks[0]).toMatchObject({ check: 'integrity', ok: false });
    expect(e.message).toContain(`signs ${signed}, not ${target}`);
    expect((await cosignVerify(work.dir, 'good.pub', `${reg.host}/signed/app-copy:1`)).status).not.toBe(0);
  });

  it('a tampered payload: SIGNATURE_INVALID (authenticity); cosign verify refuses too', async () => {
    const digest = await push('signed/tampered');
    await cosignSign(work.dir, 'good.key', `${reg.host}/signed/tampered@${digest}`, 'tag');
    const tag = `${digest.replace(':', '-')}.sig`;
    const sig = await getManifest(reg.url, 'signed/tampered', tag);
    const layer = (sig.layers as { digest: string; size: number }[])[0]!;
    const payload = JSON.parse((await getBlob(reg.url, 'signed/tampered', layer.digest)).toString()) as { optional: unknown };
    payload.optional = { added: 'after signing' };
    const forged = await putBlob(reg.url, 'signed/tampered', Buffer.from(JSON.stringify(payload)));
    await putManifest(reg.url, 'signed/tampered', tag, { ...sig, layers: [{ ...layer, ...forged }] });
    const e = await failure(gatedPull(join(work.dir, 'tampered'), `${reg.host}/signed/tampered:1`, policyFor(keyed('good.pub'))));
    expect(e.code).toBe('SIGNATURE_INVALID');
    expect(verdicts(e)[0]!.checks[0]).toMatchObject({ check: 'authenticity', ok: false });
    expect((await cosignVerify(work.dir, 'good.pub', `${reg.host}/signed/tampered:1`)).status).not.toBe(0);
  });

  it('signedIdentity: cosign signs the repository, so matchRepoDigestOrExact takes a pull by digest and refuses one by tag', async () => {
    const digest = images.get('signed/app')!;
    const policy = policyFor(keyed('good.pub', { type: 'matchRepoDigestOrExact' }));
    const byTag = await failure(gatedPull(join(work.dir, 'ident-tag'), `${reg.host}/signed/app:1`, policy));
    expect(byTag.code).toBe('SIGNATURE_INVALID');
    expect(verdicts(byTag)[0]!.checks[0]).toMatchObject({ check: 'identity', ok: false });
    const { image } = await gatedPull(join(work.dir, 'ident-digest'), `${reg.host}/signed/app@${digest}`, policy);
    expect(image.signatures?.outcome).toBe('verified');
    // exactRepository of another repository refuses; cosign's own check prints the identity it saw.
    const other = await failure(
      gatedPull(
        join(work.dir, 'ident-other'),
        `${reg.host}/signed/app:1`,
        policyFor(keyed('good.pub', { type: 'exactRepository', dockerRepository: `${reg.host}/signed/else` })),
      ),
    );
    expect(verdicts(other)[0]!.checks[0]).toMatchObject({ check: 'identity', ok: false });
    const seen = await cosignVerify(work.dir, 'good.pub', `${reg.host}/signed/app:1`);
    expect(seen.out).toContain(`"docker-reference":"${reg.host}/signed/app"`);
  });

  it('an oversized payload is refused before it is read: SIGNATURE_INVALID', async () => {
    const digest = await push('signed/big');
    await cosignSign(work.dir, 'good.key', `${reg.host}/signed/big@${digest}`, 'tag');
    const tag = `${digest.replace(':', '-')}.sig`;
    const sig = await getManifest(reg.url, 'signed/big', tag);
    const layer = (sig.layers as { digest: string; size: number; annotations: object }[])[0]!;
    const big = await putBlob(reg.url, 'signed/big', Buffer.alloc(2 * 1024 * 1024, 0x20));
    await putManifest(reg.url, 'signed/big', tag, { ...sig, layers: [{ ...layer, ...big }] });
    const e = await failure(gatedPull(join(work.dir, 'big'), `${reg.host}/signed/big:1`, policyFor(keyed('good.pub'))));
    expect(e.code).toBe('SIGNATURE_INVALID');
    expect(e.message).toContain('over the 1048576-byte limit');
    expect((await cosignVerify(work.dir, 'good.pub', `${reg.host}/signed/big:1`)).status).not.toBe(0);
  });

  it('the CLI: verify prints the verdict (and --json), pull --signature-policy refuses with the one-line error, env turns it on', async () => {
    const policy = policyFor(keyed('good.pub'));
    const ok = await runCliAsync(['verify', '--signature-policy', policy, `${reg.host}/signed/app:1`]);
    expect(ok.status, ok.stderr).toBe(0);
    expect(ok.stdout).toContain(`${reg.host}/signed/app:1 (${images.get('signed/app')}): verified`);
    expect(ok.stdout).toMatch(/ok {3}authenticity sha256:[0-9a-f]{64}: /);
    const json = await runCliAsync(['verify', '--json', `${reg.host}/signed/otherkey:1`], { FASTPULL_SIGNATURE_POLICY: policy });
    expect(json.status).toBe(1);
    expect(JSON.parse(json.stdout)).toMatchObject({
      outcome: 'refused',
      verdicts: [{ kind: 'sigstore', outcome: 'invalid' }],
      error: { code: 'SIGNATURE_INVALID' },
    });
    expect(json.stderr.trim()).toMatch(
      /^fastpull: verifying .*signed\/otherkey:1: signature check of .* refused it: sigstore: sha256:[0-9a-f]{12}: authenticity: .* \(SIGNATURE_INVALID\)$/,
    );
    const root = join(work.dir, 'cli');
    const refused = await runCliAsync(['pull', '--root', root, '--signature-policy', policy, `${reg.host}/signed/bare:1`]);
    expect(refused.status).toBe(1);
    expect(refused.stderr.trim().split('\n').at(-1)).toMatch(
      /^fastpull: pulling .*signed\/bare:1: signature check of .* refused it: sigstore: no cosign signature .* \(SIGNATURE_MISSING\)$/,
    );
    const pulled = await runCliAsync(['pull', '--root', root, `${reg.host}/signed/app:1`], { FASTPULL_SIGNATURE_POLICY: policy });
    expect(pulled.status, pulled.stderr).toBe(0);
    expect(pulled.stdout).toMatch(/signature: sigstore verified by sha256:[0-9a-f]{64}/);
    const listed = await runCliAsync(['images', '--root', root, '--json']);
    expect(JSON.stringify(JSON.parse(listed.stdout))).toContain('"outcome":"verified"');
    const bad = await runCliAsync(['verify', `${reg.host}/signed/app:1`]);
    expect(bad.status).toBe(2);
    const none = await runCliAsync(['pull', '--root', root, '--signature-policy', join(work.dir, 'nope.json'), `${reg.host}/signed/app:1`]);
    expect(none.status).toBe(1);
    expect(none.stderr).toContain('nope.json');
    expect(none.stderr).toContain('(INVALID_ARGUMENT)');
  });

  it('cosign is the version the peers pin', async () => {
    const v = await cosign(work.dir, ['version']);
    expect(v.out).toMatch(/GitVersion:\s+v?3\./);
  });
});
