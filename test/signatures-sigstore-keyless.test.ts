// Keyless Sigstore bundles, offline: cosign signs with a certificate from a private test CA that
// carries Fulcio's issuer extensions and an email SAN (`cosign sign --key --certificate`), a test
// transparency log gives the bundle a Rekor v1 entry (SET, inclusion proof, checkpoint), and
// fastpull verifies under policy.json's `sigstoreSigned.fulcio` with `rekorPublicKeyPath`.
// `cosign verify` with a trusted root naming the same CA and log must agree on every case.
import { X509Certificate } from 'node:crypto';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadSignatureVerifiers, pull, type Digest, type SignatureVerdict } from '@fastpull/core';
import { findDistributionBinary, pushImage, sampleImage, startDistribution, type DistributionRegistry } from '@fastpull/core/testing';
import { bundleReferrers, cosign, cosignMissing, cosignSign, generateKeyPair, getBlob, getManifest, putBundleReferrer, putManifest } from './cosign.js';
import { failure, runCliAsync, tempDir } from './helpers.js';
import { issueSigningCert, makeCA, TestRekor } from './sigstore-pki.js';

const missing = findDistributionBinary() === undefined ? 'docker-registry is not installed (scripts/bootstrap.sh installs it)' : cosignMissing();
if (missing) throw new Error(`signature tests need their peers: ${missing}`);

const EMAIL = 'signer@example.com';
const ISSUER = 'https://issuer.example.com';

describe('keyless Sigstore bundles (a private Fulcio CA and a test Rekor) under a policy.json', () => {
  const work = tempDir('keyless');
  const rekor = new TestRekor();
  const otherRekor = new TestRekor('rekor.elsewhere.test');
  let reg: DistributionRegistry;
  let policies = 0;
  let seed = 500;
  /** The image signed keylessly, and cosign's bundle for it (no log entry). */
  let app: { digest: Digest; size: number; mediaType: string };
  let signed: Record<string, unknown>;
  /** Seconds: a time inside the signing certificate's validity, and its bounds. */
  let now = 0;
  let notBefore = 0;
  let notAfter = 0;

  async function push(repo: string) {
    const digest = await pushImage(reg.url, repo, '1', await sampleImage(seed++, { layers: 1 }));
    const res = await fetch(`${reg.url}/v2/${repo}/manifests/${digest}`, { headers: { accept: 'application/vnd.oci.image.manifest.v1+json' } });
    return { digest, size: (await res.arrayBuffer()).byteLength, mediaType: res.headers.get('content-type')! };
  }
  function file(name: string, text: string): string {
    writeFileSync(join(work.dir, name), text);
    return name;
  }
  function policyFor(requirement: object): string {
    const path = join(work.dir, `policy-${policies++}.json`);
    writeFileSync(path, JSON.stringify({ default: [{ type: 'insecureAcceptAnything' }], transports: { docker: { [`${reg.host}/signed`]: [requirement] } } }));
    return path;
  }
  const keyless = (over: { caPath?: string; oidcIssuer?: string; subjectEmail?: string; rekorPublicKeyPath?: string } = {}) => ({
    type: 'sigstoreSigned',
    fulcio: { caPath: over.caPath ?? 'ca.pem', oidcIssuer: over.oidcIssuer ?? ISSUER, subjectEmail: over.subjectEmail ?? EMAIL },
    rekorPublicKeyPath: over.rekorPublicKeyPath ?? 'rekor.pub',
    signedIdentity: { type: 'matchRepository' },
  });
  async function gatedPull(name: string, ref: string, policy: string) {
    const verifiers = await loadSignatureVerifiers({ signaturePolicy: policy });
    return pull(ref, { root: join(work.dir, name), signatures: { verifiers } });
  }
  const first = (e: { details: Readonly<Record<string, unknown>> }) => (e.details.verdicts as SignatureVerdict[])[0]!;
  /** cosign verify, keyless, offline, against a trusted root file (its ctlog list is empty: no SCT is asked for). */
  const cosignKeyless = (image: string, root = 'trusted_root.json', identity = EMAIL, issuer = ISSUER, bundle = true) =>
    cosign(work.dir, [
      'verify',
      '--trusted-root',
      root,
      '--certificate-identity',
      identity,
      '--certificate-oidc-issuer',
      issuer,
      '--insecure-ignore-sct',
      '--allow-http-registry',
      `--new-bundle-format=${bundle}`,
      image,
    ]);
  /** Makes `bundle` the image's one Sigstore referrer. */
  const attach = (bundle: Record<string, unknown>, subject = app, repo = 'signed/app') => putBundleReferrer(reg.url, repo, subject, bundle, true);

  beforeAll(async () => {
    reg = await startDistribution();
    makeCA(work.dir, 'ca');
    makeCA(work.dir, 'other-ca');
    const leaf = new X509Certificate(readFileSync(issueSigningCert(work.dir, 'ca', 'leaf', EMAIL, ISSUER)));
    notBefore = Date.parse(leaf.validFrom) / 1000;
    notAfter = Date.parse(leaf.validTo) / 1000;
    now = notBefore + 60;
    file('rekor.pub', rekor.pem());
    file('other-rekor.pub', otherRekor.pem());
    file('trusted_root.json', rekor.trustedRoot(join(work.dir, 'ca.pem')));
    file('other_ca_root.json', rekor.trustedRoot(join(work.dir, 'other-ca.pem')));
    file('other_rekor_root.json', otherRekor.trustedRoot(join(work.dir, 'ca.pem')));
    // cosign signs with the certificate's key imported into its own key format.
    const imported = await cosign(work.dir, ['import-key-pair', '--key', 'leaf.key', '--output-key-prefix', 'leaf-cosign']);
    if (imported.status !== 0) throw new Error(`cosign import-key-pair: ${imported.out}`);
    await generateKeyPair(work.dir, 'plain');
    app = await push('signed/app');
    const sign = await cosign(work.dir, [
      'sign',
      '--key',
      'leaf-cosign.key',
      '--certificate',
      'leaf.pem',
      '--use-signing-config=false',
      '--tlog-upload=false',
      '--allow-http-registry',
      '--new-bundle-format=true',
      '-y',
      `${reg.host}/signed/app@${app.digest}`,
    ]);
    if (sign.status !== 0) throw new Error(`cosign sign: ${sign.out}`);
    signed = (await bundleReferrers(reg.url, 'signed/app', app.digest))[0]!.bundle;
  });
  afterAll(async () => {
    await reg?.stop();
    work.cleanup();
  });

  it('a bundle whose certificate chains to the CA, names the issuer and email, and was logged while valid: verified; cosign verify agrees', async () => {
    // What cosign wrote: the certificate alone (bundle v0.3), no log entry.
    expect(signed).toMatchObject({
      mediaType: 'application/vnd.dev.sigstore.bundle.v0.3+json',
      verificationMaterial: { certificate: { rawBytes: expect.any(String) } },
    });
    await attach(rekor.logged(signed, now));
    const { image } = await gatedPull('ok', `${reg.host}/signed/app:1`, policyFor(keyless()));
    expect(image.signatures?.outcome).toBe('verified');
    expect(image.signatures!.verdicts[0]!.checks.map((c) => `${c.check}:${c.ok}`)).toEqual([
      'authenticity:true',
      'transparency:true',
      'identity:true',
      'integrity:true',
      'identity:true',
    ]);
    expect(image.signatures!.verdicts[0]!.checks[2]!.message).toBe(`certificate of ${EMAIL} issued on ${ISSUER}`);
    expect((await cosignKeyless(`${reg.host}/signed/app:1`)).status).toBe(0);
    const cli = await runCliAsync(['verify', '--signature-policy', policyFor(keyless()), `${reg.host}/signed/app:1`]);
    expect(cli.status, cli.stderr).toBe(0);
    expect(cli.stdout).toContain('ok   transparency');
  });

  it('a wrong email or issuer: SIGNATURE_INVALID (identity); cosign verify refuses too', async () => {
    await attach(rekor.logged(signed, now));
    const email = await failure(gatedPull('email', `${reg.host}/signed/app:1`, policyFor(keyless({ subjectEmail: 'someone@example.com' }))));
    expect(email.code).toBe('SIGNATURE_INVALID');
    expect(first(email).checks[0]).toMatchObject({ check: 'identity', ok: false });
    expect((await cosignKeyless(`${reg.host}/signed/app:1`, 'trusted_root.json', 'someone@example.com')).status).not.toBe(0);
    const issuer = await failure(gatedPull('issuer', `${reg.host}/signed/app:1`, policyFor(keyless({ oidcIssuer: 'https://other-issuer.example.com' }))));
    expect(issuer.code).toBe('SIGNATURE_INVALID');
    expect(first(issuer).checks[0]).toMatchObject({ check: 'identity', ok: false });
    expect((await cosignKeyless(`${reg.host}/signed/app:1`, 'trusted_root.json', EMAIL, 'https://other-issuer.example.com')).status).not.toBe(0);
  });

  it('a certificate of an untrusted CA: SIGNATURE_INVALID (authenticity); cosign verify refuses too; a v0.3 bundle with a chain is refused', async () => {
    await attach(rekor.logged(signed, now));
    const e = await failure(gatedPull('ca', `${reg.host}/signed/app:1`, policyFor(keyless({ caPath: 'other-ca.pem' }))));
    expect(e.code).toBe('SIGNATURE_INVALID');
    expect(first(e).checks[0]).toMatchObject({ check: 'authenticity', ok: false });
    expect(first(e).checks[0]!.message).toContain("does not chain to the policy's Fulcio CA");
    expect((await cosignKeyless(`${reg.host}/signed/app:1`, 'other_ca_root.json')).status).not.toBe(0);
    // cosign sign --certificate-chain writes a v0.3 bundle with a chain, which that format does not allow.
    const chained = await push('signed/chained');
    const sign = await cosign(work.dir, [
      'sign',
      '--key',
      'leaf-cosign.key',
      '--certificate',
      'leaf.pem',
      '--certificate-chain',
      'ca.pem',
      '--use-signing-config=false',
      '--tlog-upload=false',
      '--allow-http-registry',
      '--new-bundle-format=true',
      '-y',
      `${reg.host}/signed/chained@${chained.digest}`,
    ]);
    expect(sign.status, sign.out).toBe(0);
    const bad = await failure(gatedPull('chained', `${reg.host}/signed/chained:1`, policyFor(keyless())));
    expect(first(bad).checks[0]).toMatchObject({
      check: 'authenticity',
      ok: false,
      message: 'not a Sigstore bundle: invalid bundle (verificationMaterial.content.$case)',
    });
  });

  it('logged after the certificate expired, or before it was valid: SIGNATURE_INVALID (authenticity); cosign verify refuses too', async () => {
    for (const [name, at] of [
      ['expired', notAfter + 60],
      ['early', notBefore - 60],
    ] as const) {
      await attach(rekor.logged(signed, at));
      const e = await failure(gatedPull(name, `${reg.host}/signed/app:1`, policyFor(keyless())));
      expect(e.code).toBe('SIGNATURE_INVALID');
      expect(first(e).checks[0]).toMatchObject({ check: 'authenticity', ok: false });
      expect(first(e).checks[0]!.message).toContain('not valid or expired');
      expect((await cosignKeyless(`${reg.host}/signed/app:1`)).status).not.toBe(0);
    }
  });

  it("a log entry signed by another Rekor key, none at all, or another signature's: SIGNATURE_INVALID (transparency); cosign verify refuses too", async () => {
    await attach(otherRekor.logged(signed, now));
    const other = await failure(gatedPull('rekor-other', `${reg.host}/signed/app:1`, policyFor(keyless())));
    expect(other.code).toBe('SIGNATURE_INVALID');
    expect(first(other).checks[0]).toMatchObject({ check: 'transparency', ok: false });
    expect((await cosignKeyless(`${reg.host}/signed/app:1`)).status).not.toBe(0);
    // The same entry is accepted where the policy names that log's key (and cosign's root names it).
    const { image } = await gatedPull('rekor-named', `${reg.host}/signed/app:1`, policyFor(keyless({ rekorPublicKeyPath: 'other-rekor.pub' })));
    expect(image.signatures?.outcome).toBe('verified');
    expect((await cosignKeyless(`${reg.host}/signed/app:1`, 'other_rekor_root.json')).status).toBe(0);

    await attach(signed);
    const none = await failure(gatedPull('rekor-none', `${reg.host}/signed/app:1`, policyFor(keyless())));
    expect(first(none).checks[0]).toMatchObject({ check: 'transparency', ok: false });
    expect((await cosignKeyless(`${reg.host}/signed/app:1`)).status).not.toBe(0);
    // An entry with its inclusion proof but no signed entry timestamp proves no time of signing.
    const logged = rekor.logged(signed, now) as { verificationMaterial: { tlogEntries: Record<string, unknown>[] } };
    const { inclusionPromise: _, ...proofOnly } = logged.verificationMaterial.tlogEntries[0]!;
    await attach({ ...logged, verificationMaterial: { ...logged.verificationMaterial, tlogEntries: [proofOnly] } });
    const untimed = await failure(gatedPull('rekor-untimed', `${reg.host}/signed/app:1`, policyFor(keyless())));
    expect(first(untimed).checks[0]).toMatchObject({ check: 'transparency', ok: false });
    expect(first(untimed).checks[0]!.message).toContain('no verified time of signing');

    // A real entry of another signature (another image's bundle) spliced into this bundle.
    const copy = await push('signed/copy');
    const sign = await cosign(work.dir, [
      'sign',
      '--key',
      'leaf-cosign.key',
      '--certificate',
      'leaf.pem',
      '--use-signing-config=false',
      '--tlog-upload=false',
      '--allow-http-registry',
      '--new-bundle-format=true',
      '-y',
      `${reg.host}/signed/copy@${copy.digest}`,
    ]);
    expect(sign.status, sign.out).toBe(0);
    const theirs = rekor.logged((await bundleReferrers(reg.url, 'signed/copy', copy.digest))[0]!.bundle, now);
    await attach({ ...signed, verificationMaterial: theirs.verificationMaterial });
    const spliced = await failure(gatedPull('rekor-spliced', `${reg.host}/signed/app:1`, policyFor(keyless())));
    expect(first(spliced).checks[0]).toMatchObject({ check: 'transparency', ok: false });
    expect((await cosignKeyless(`${reg.host}/signed/app:1`)).status).not.toBe(0);
    // And this image's logged bundle made a referrer of the other: it names another digest.
    await attach(rekor.logged(signed, now), copy, 'signed/copy');
    const moved = await failure(gatedPull('moved', `${reg.host}/signed/copy:1`, policyFor(keyless())));
    expect(first(moved).checks[0]).toMatchObject({ check: 'integrity', ok: false });
    expect((await cosignKeyless(`${reg.host}/signed/copy:1`)).status).not.toBe(0);
  });

  it('keys with a Rekor key: a key-signed bundle with a log entry verifies, its transparency checked', async () => {
    const img = await push('signed/keyed');
    await cosignSign(work.dir, 'plain.key', `${reg.host}/signed/keyed@${img.digest}`, 'bundle');
    const bundle = (await bundleReferrers(reg.url, 'signed/keyed', img.digest))[0]!.bundle;
    await attach(rekor.logged(bundle, now), img, 'signed/keyed');
    const policy = policyFor({ type: 'sigstoreSigned', keyPath: 'plain.pub', rekorPublicKeyPath: 'rekor.pub', signedIdentity: { type: 'matchRepository' } });
    const { image } = await gatedPull('keyed', `${reg.host}/signed/keyed:1`, policy);
    expect(image.signatures!.verdicts[0]!.checks.map((c) => `${c.check}:${c.ok}`)).toEqual([
      'authenticity:true',
      'transparency:true',
      'integrity:true',
      'identity:true',
    ]);
    const wrong = await failure(
      gatedPull(
        'keyed-other',
        `${reg.host}/signed/keyed:1`,
        policyFor({ type: 'sigstoreSigned', keyPath: 'plain.pub', rekorPublicKeyPath: 'other-rekor.pub' }),
      ),
    );
    expect(first(wrong).checks[0]).toMatchObject({ check: 'transparency', ok: false });
  });
  it("cosign's .sig tag: keyless and key signatures with a Rekor entry in the layer annotation verify; another log's entry or one after expiry is refused; cosign verify agrees", async () => {
    const img = await push('signed/tagged');
    const sign = await cosign(work.dir, [
      'sign',
      '--key',
      'leaf-cosign.key',
      '--certificate',
      'leaf.pem',
      '--use-signing-config=false',
      '--tlog-upload=false',
      '--allow-http-registry',
      '--new-bundle-format=false',
      '-y',
      `${reg.host}/signed/tagged@${img.digest}`,
    ]);
    expect(sign.status, sign.out).toBe(0);
    const tag = `${img.digest.replace(':', '-')}.sig`;
    const sig = await getManifest(reg.url, 'signed/tagged', tag);
    const layer = (sig.layers as { digest: string; annotations: Record<string, string> }[])[0]!;
    const payload = await getBlob(reg.url, 'signed/tagged', layer.digest);
    const cert = layer.annotations['dev.sigstore.cosign/certificate']!;
    const ref = `${reg.host}/signed/tagged:1`;
    /** The tag's signature with `annotation` as its Rekor entry (none: as cosign wrote it). */
    const logged = (annotation?: string) =>
      putManifest(reg.url, 'signed/tagged', tag, {
        ...sig,
        layers: [{ ...layer, annotations: { ...layer.annotations, ...(annotation ? { 'dev.sigstore.cosign/bundle': annotation } : {}) } }],
      });

    const none = await failure(gatedPull('tag-none', ref, policyFor(keyless())));
    expect(first(none).checks[0]).toMatchObject({
      check: 'transparency',
      ok: false,
      message: 'the policy names a Rekor key and the signature carries no dev.sigstore.cosign/bundle annotation',
    });
    expect((await cosignKeyless(ref, 'trusted_root.json', EMAIL, ISSUER, false)).status).not.toBe(0);

    await logged(rekor.annotation(payload, layer.annotations['dev.cosignproject.cosign/signature']!, cert, now));
    const { image } = await gatedPull('tag-ok', ref, policyFor(keyless()));
    expect(image.signatures!.verdicts[0]!.checks.map((c) => `${c.check}:${c.ok}`)).toEqual([
      'authenticity:true',
      'transparency:true',
      'identity:true',
      'integrity:true',
      'identity:true',
    ]);
    expect((await cosignKeyless(ref, 'trusted_root.json', EMAIL, ISSUER, false)).status).toBe(0);
    const who = await failure(gatedPull('tag-email', ref, policyFor(keyless({ subjectEmail: 'someone@example.com' }))));
    expect(first(who).checks[0]).toMatchObject({ check: 'identity', ok: false });

    await logged(otherRekor.annotation(payload, layer.annotations['dev.cosignproject.cosign/signature']!, cert, now));
    const other = await failure(gatedPull('tag-other', ref, policyFor(keyless())));
    expect(first(other).checks[0]).toMatchObject({ check: 'transparency', ok: false });
    expect((await cosignKeyless(ref, 'trusted_root.json', EMAIL, ISSUER, false)).status).not.toBe(0);

    await logged(rekor.annotation(payload, layer.annotations['dev.cosignproject.cosign/signature']!, cert, notAfter + 60));
    const late = await failure(gatedPull('tag-late', ref, policyFor(keyless())));
    expect(first(late).checks[0]).toMatchObject({ check: 'authenticity', ok: false });
    expect((await cosignKeyless(ref, 'trusted_root.json', EMAIL, ISSUER, false)).status).not.toBe(0);

    // With a key: the policy's key and Rekor key.
    const keyed = await push('signed/tagkey');
    await cosignSign(work.dir, 'plain.key', `${reg.host}/signed/tagkey@${keyed.digest}`, 'tag');
    const ktag = `${keyed.digest.replace(':', '-')}.sig`;
    const ksig = await getManifest(reg.url, 'signed/tagkey', ktag);
    const klayer = (ksig.layers as { digest: string; annotations: Record<string, string> }[])[0]!;
    const note = rekor.annotation(
      await getBlob(reg.url, 'signed/tagkey', klayer.digest),
      klayer.annotations['dev.cosignproject.cosign/signature']!,
      readFileSync(join(work.dir, 'plain.pub'), 'utf8'),
      now,
    );
    await putManifest(reg.url, 'signed/tagkey', ktag, {
      ...ksig,
      layers: [{ ...klayer, annotations: { ...klayer.annotations, 'dev.sigstore.cosign/bundle': note } }],
    });
    const k = await gatedPull(
      'tag-key',
      `${reg.host}/signed/tagkey:1`,
      policyFor({ type: 'sigstoreSigned', keyPath: 'plain.pub', rekorPublicKeyPath: 'rekor.pub', signedIdentity: { type: 'matchRepository' } }),
    );
    expect(k.image.signatures!.verdicts[0]!.checks.map((c) => `${c.check}:${c.ok}`)).toEqual([
      'authenticity:true',
      'transparency:true',
      'integrity:true',
      'identity:true',
    ]);
    const kwrong = await failure(
      gatedPull(
        'tag-key-other',
        `${reg.host}/signed/tagkey:1`,
        policyFor({ type: 'sigstoreSigned', keyPath: 'other-rekor.pub', rekorPublicKeyPath: 'rekor.pub', signedIdentity: { type: 'matchRepository' } }),
      ),
    );
    expect(first(kwrong).checks[0]).toMatchObject({ check: 'authenticity', ok: false });
  });
});
