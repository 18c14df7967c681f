// Sigstore bundles (the referrers cosign 3 writes by default) made by the real cosign with a key pair,
// offline, in the loopback distribution registry, verified by fastpull under a containers policy.json;
// `cosign verify` must agree on every case. Hostile cases are hand-made from real bundles.
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadSignatureVerifiers, pull, type Digest, type SignatureVerdict } from '@fastpull/core';
import { findDistributionBinary, pushImage, sampleImage, startDistribution, type DistributionRegistry } from '@fastpull/core/testing';
import { bundleReferrers, cosign, cosignMissing, cosignSign, cosignVerify, generateKeyPair, putBundleReferrer } from './cosign.js';
import { failure, runCliAsync, tempDir } from './helpers.js';

const missing = findDistributionBinary() === undefined ? 'docker-registry is not installed (scripts/bootstrap.sh installs it)' : cosignMissing();
if (missing) throw new Error(`signature tests need their peers: ${missing}`);

describe('Sigstore bundles signed with a key under a policy.json', () => {
  const work = tempDir('bundle');
  let reg: DistributionRegistry;
  let policies = 0;
  let seed = 300;

  async function push(repo: string): Promise<{ digest: Digest; size: number; mediaType: string }> {
    const digest = await pushImage(reg.url, repo, '1', await sampleImage(seed++, { layers: 1 }));
    const res = await fetch(`${reg.url}/v2/${repo}/manifests/${digest}`, { headers: { accept: 'application/vnd.oci.image.manifest.v1+json' } });
    return { digest, size: (await res.arrayBuffer()).byteLength, mediaType: res.headers.get('content-type')! };
  }

  function policyFor(requirement: object): string {
    const file = join(work.dir, `policy-${policies++}.json`);
    writeFileSync(file, JSON.stringify({ default: [{ type: 'insecureAcceptAnything' }], transports: { docker: { [`${reg.host}/signed`]: [requirement] } } }));
    return file;
  }
  const keyed = (key = 'good.pub', identity: object = { type: 'matchRepository' }) => ({ type: 'sigstoreSigned', keyPath: key, signedIdentity: identity });

  async function gatedPull(name: string, ref: string, policy: string) {
    const verifiers = await loadSignatureVerifiers({ signaturePolicy: policy });
    return pull(ref, { root: join(work.dir, name), signatures: { verifiers } });
  }
  const first = (e: { details: Readonly<Record<string, unknown>> }) => (e.details.verdicts as SignatureVerdict[])[0]!;
  const bundleVerify = (pub: string, ref: string) => cosignVerify(work.dir, pub, ref, 'bundle');

  beforeAll(async () => {
    reg = await startDistribution();
    await generateKeyPair(work.dir, 'good');
    await generateKeyPair(work.dir, 'other');
  });
  afterAll(async () => {
    await reg?.stop();
    work.cleanup();
  });

  it("cosign's default bundle (a DSSE in-toto statement, no log entry) is found as a referrer and verifies; cosign verify agrees", async () => {
    const { digest } = await push('signed/app');
    await cosignSign(work.dir, 'good.key', `${reg.host}/signed/app@${digest}`, 'bundle');
    const [written] = await bundleReferrers(reg.url, 'signed/app', digest);
    // What cosign wrote: a DSSE envelope signed by the key (named by its hint), no certificate, no Rekor entry.
    expect(written!.manifest).toMatchObject({ artifactType: 'application/vnd.dev.sigstore.bundle.v0.3+json', subject: { digest } });
    expect(written!.bundle).toMatchObject({
      verificationMaterial: { publicKey: { hint: expect.any(String) } },
      dsseEnvelope: { payloadType: 'application/vnd.in-toto+json' },
    });
    expect((written!.bundle.verificationMaterial as { tlogEntries?: unknown[] }).tlogEntries ?? []).toEqual([]);
    const { image } = await gatedPull('ok', `${reg.host}/signed/app:1`, policyFor(keyed()));
    expect(image.signatures?.outcome).toBe('verified');
    const v = image.signatures!.verdicts[0]!;
    expect(v).toMatchObject({ kind: 'sigstore', outcome: 'verified', signature: written!.manifestDigest });
    expect(v.checks.map((c) => `${c.check}:${c.ok}`)).toEqual(['authenticity:true', 'integrity:true', 'identity:true']);
    expect((await bundleVerify('good.pub', `${reg.host}/signed/app:1`)).status).toBe(0);
    const cli = await runCliAsync(['verify', '--signature-policy', policyFor(keyed()), `${reg.host}/signed/app:1`]);
    expect(cli.status, cli.stderr).toBe(0);
    expect(cli.stdout).toContain(`sigstore verified by ${written!.manifestDigest}`);
  });

  it('a bundle by another key: SIGNATURE_INVALID (authenticity); cosign verify refuses too', async () => {
    const { digest } = await push('signed/otherkey');
    await cosignSign(work.dir, 'other.key', `${reg.host}/signed/otherkey@${digest}`, 'bundle');
    const e = await failure(gatedPull('otherkey', `${reg.host}/signed/otherkey:1`, policyFor(keyed())));
    expect(e.code).toBe('SIGNATURE_INVALID');
    expect(first(e).checks[0]).toMatchObject({ check: 'authenticity', ok: false, message: 'the signature does not verify with the policy key' });
    expect((await bundleVerify('good.pub', `${reg.host}/signed/otherkey:1`)).status).not.toBe(0);
    // Either of two policy keys will do.
    const file = join(work.dir, 'two-keys.json');
    writeFileSync(
      file,
      JSON.stringify({
        default: [{ type: 'reject' }],
        transports: {
          docker: { [`${reg.host}/signed`]: [{ type: 'sigstoreSigned', keyPaths: ['good.pub', 'other.pub'], signedIdentity: { type: 'matchRepository' } }] },
        },
      }),
    );
    expect((await gatedPull('twokeys', `${reg.host}/signed/otherkey:1`, file)).image.signatures?.outcome).toBe('verified');
  });

  it("another image's bundle made a referrer of this one: SIGNATURE_INVALID (integrity); cosign verify refuses too", async () => {
    const signed = (
      await bundleReferrers(
        reg.url,
        'signed/app',
        (
          await fetch(`${reg.url}/v2/signed/app/manifests/1`, { method: 'HEAD', headers: { accept: 'application/vnd.oci.image.manifest.v1+json' } })
        ).headers.get('docker-content-digest')!,
      )
    )[0]!;
    const target = await push('signed/copy');
    await putBundleReferrer(reg.url, 'signed/copy', target, signed.bundle);
    const e = await failure(gatedPull('copy', `${reg.host}/signed/copy:1`, policyFor(keyed())));
    expect(e.code).toBe('SIGNATURE_INVALID');
    expect(first(e).checks[0]).toMatchObject({ check: 'integrity', ok: false });
    expect(first(e).checks[0]!.message).toMatch(new RegExp(`the statement signs sha256:[0-9a-f]{64}, not ${target.digest}`));
    expect((await bundleVerify('good.pub', `${reg.host}/signed/copy:1`)).status).not.toBe(0);
  });

  it('a tampered bundle (its statement rewritten to name this image): SIGNATURE_INVALID (authenticity); cosign verify refuses too', async () => {
    const { digest } = await push('signed/tampered');
    await cosignSign(work.dir, 'good.key', `${reg.host}/signed/tampered@${digest}`, 'bundle');
    const [real] = await bundleReferrers(reg.url, 'signed/tampered', digest);
    const target = await push('signed/tampered2');
    const env = real!.bundle.dsseEnvelope as { payload: string };
    const statement = JSON.parse(Buffer.from(env.payload, 'base64').toString()) as { subject: { digest: { sha256: string } }[] };
    statement.subject[0]!.digest.sha256 = target.digest.slice('sha256:'.length);
    const forged = { ...real!.bundle, dsseEnvelope: { ...env, payload: Buffer.from(JSON.stringify(statement)).toString('base64') } };
    await putBundleReferrer(reg.url, 'signed/tampered2', target, forged);
    const e = await failure(gatedPull('tampered', `${reg.host}/signed/tampered2:1`, policyFor(keyed())));
    expect(e.code).toBe('SIGNATURE_INVALID');
    expect(first(e).checks[0]).toMatchObject({ check: 'authenticity', ok: false });
    expect((await bundleVerify('good.pub', `${reg.host}/signed/tampered2:1`)).status).not.toBe(0);
    // Not a bundle at all: refused by its format, not read as anything.
    const junk = await push('signed/junk');
    await putBundleReferrer(reg.url, 'signed/junk', junk, { mediaType: 'application/vnd.dev.sigstore.bundle.v0.3+json', nonsense: true });
    const j = await failure(gatedPull('junk', `${reg.host}/signed/junk:1`, policyFor(keyed())));
    expect(j.code).toBe('SIGNATURE_INVALID');
    expect(first(j).checks[0]!.message).toMatch(/^not a Sigstore bundle: /);
  });

  it('a bundle names no reference: exactRepository cannot be met by it; an attestation bundle is not a signature (cosign takes it); a Rekor key wants a log entry', async () => {
    const exact = await failure(
      gatedPull('exact', `${reg.host}/signed/app:1`, policyFor(keyed('good.pub', { type: 'exactRepository', dockerRepository: `${reg.host}/signed/app` }))),
    );
    expect(exact.code).toBe('SIGNATURE_INVALID');
    expect(first(exact).checks[0]).toMatchObject({ check: 'identity', ok: false });
    // cosign attest writes a bundle referrer of the same type whose statement is an attestation.
    const { digest } = await push('signed/attested');
    writeFileSync(join(work.dir, 'predicate.json'), JSON.stringify({ built: 'by a test' }));
    const attest = await cosign(work.dir, [
      'attest',
      '--key',
      'good.key',
      '--predicate',
      'predicate.json',
      '--type',
      'https://example.com/test/v1',
      '--use-signing-config=false',
      '--tlog-upload=false',
      '--allow-http-registry',
      '--new-bundle-format=true',
      '-y',
      `${reg.host}/signed/attested@${digest}`,
    ]);
    expect(attest.status, attest.out).toBe(0);
    const e = await failure(gatedPull('attested', `${reg.host}/signed/attested:1`, policyFor(keyed())));
    expect(e.code).toBe('SIGNATURE_INVALID');
    expect(first(e).checks[0]).toMatchObject({
      check: 'integrity',
      ok: false,
      message: 'the statement is an attestation (predicate "https://example.com/test/v1"), not a cosign signature',
    });
    // The one place fastpull is stricter than cosign 3, whose verify takes any statement naming the
    // digest: an attestation (an SBOM, a scan result) signed by the same key does not approve the image.
    expect((await bundleVerify('good.pub', `${reg.host}/signed/attested:1`)).status).toBe(0);
    // The policy names a Rekor key: a bundle signed without the log is refused, as cosign refuses it without --insecure-ignore-tlog.
    const rekor = await failure(gatedPull('rekor', `${reg.host}/signed/app:1`, policyFor({ ...keyed(), rekorPublicKeyPath: 'other.pub' })));
    expect(rekor.code).toBe('SIGNATURE_INVALID');
    expect(first(rekor).checks[0]).toMatchObject({ check: 'transparency', ok: false });
    const strict = await cosign(work.dir, [
      'verify',
      '--key',
      'good.pub',
      '--allow-http-registry',
      '--new-bundle-format=true',
      '--offline=true',
      `${reg.host}/signed/app:1`,
    ]);
    expect(strict.status).not.toBe(0);
  });
});
