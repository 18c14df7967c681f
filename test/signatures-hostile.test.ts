// A registry that fights signature verification: thousands of signature referrers, a referrers list
// that names the signed manifest itself, and a signature that never finishes arriving. Each ends in
// a refusal with a stable code after bounded work, and a refused pull commits nothing.
import { spawnSync } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseReference, sha256Digest, type Digest } from '@fastpull/core';
import { RegistryClient } from '@fastpull/core/registry';
import { sampleImage, startLoopbackRegistry, type BuiltImage, type LoopbackRegistry } from '@fastpull/core/testing';
import {
  checkSignatures,
  DEFAULT_MAX_SIGNATURES,
  loadSignatureVerifiers,
  NOTARY_SIGNATURE,
  type SignatureGate,
  type SignatureSubject,
} from '../packages/core/src/signatures/index.js';
import { failure, runCliAsync, tempDir } from './helpers.js';

const OCI_MANIFEST = 'application/vnd.oci.image.manifest.v1+json';
const EMPTY = Buffer.from('{}');
const JWS = Buffer.from('{"payload":"e30","protected":"e30","header":{"x5c":[]},"signature":"AA"}');
const REPO = 'hostile/app';

/** A signature manifest of `subject`, told apart from its siblings by `n`. */
function signatureManifest(subject: BuiltImage, n: number): Buffer {
  return Buffer.from(
    JSON.stringify({
      schemaVersion: 2,
      mediaType: OCI_MANIFEST,
      artifactType: NOTARY_SIGNATURE,
      config: { mediaType: 'application/vnd.oci.empty.v1+json', digest: sha256Digest(EMPTY), size: EMPTY.length },
      layers: [{ mediaType: 'application/jose+json', digest: sha256Digest(JWS), size: JWS.length }],
      subject: { mediaType: subject.manifestMediaType, digest: subject.manifestDigest, size: subject.manifest.length },
      annotations: { 'io.cncf.notary.x509chain.thumbprint#S256': '[]', n: String(n) },
    }),
  );
}

/** Stores `count` signatures of `image` in `repository`: their manifest digests, in order. */
function addSignatures(reg: LoopbackRegistry, repository: string, image: BuiltImage, count: number): Digest[] {
  reg.addBlob(repository, sha256Digest(EMPTY), EMPTY);
  reg.addBlob(repository, sha256Digest(JWS), JWS);
  return Array.from({ length: count }, (_, n) => {
    const bytes = signatureManifest(image, n);
    const digest = sha256Digest(bytes);
    reg.addManifest(repository, digest, bytes, OCI_MANIFEST);
    return digest;
  });
}

// openssl is required (scripts/bootstrap.sh installs it): without it the root cannot be made, and the file fails.
describe('a registry hostile to signature verification', () => {
  const work = tempDir('sig-hostile');
  const config = join(work.dir, 'notation');
  let reg: LoopbackRegistry;
  let client: RegistryClient;
  let gate: SignatureGate;

  beforeAll(async () => {
    // A strict policy for every image, trusting a root that signed none of what the registry serves.
    const store = join(config, 'truststore', 'x509', 'ca', 'test');
    mkdirSync(store, { recursive: true });
    const made = spawnSync(
      'openssl',
      [
        'req',
        '-x509',
        '-newkey',
        'ec',
        '-pkeyopt',
        'ec_paramgen_curve:P-256',
        '-nodes',
        '-keyout',
        join(work.dir, 'root.key'),
        '-out',
        join(store, 'root.crt'),
        '-days',
        '30',
        '-subj',
        '/CN=root/O=fastpull',
      ],
      { encoding: 'utf8' },
    );
    expect(made.status, made.stderr).toBe(0);
    const policy = { name: 'all', registryScopes: ['*'], signatureVerification: { level: 'strict' }, trustStores: ['ca:test'], trustedIdentities: ['*'] };
    writeFileSync(join(config, 'trustpolicy.json'), JSON.stringify({ version: '1.0', trustPolicies: [policy] }));
    gate = { verifiers: await loadSignatureVerifiers({ notationConfig: config }) };
    reg = await startLoopbackRegistry({ referrers: true });
    client = new RegistryClient({ plainHttp: true });
  });
  afterAll(async () => {
    await client?.close();
    await reg?.close();
    work.cleanup();
  });

  const subjectOf = (repository: string, image: BuiltImage): SignatureSubject => ({
    reference: parseReference(`${reg.host}/${repository}@${image.manifestDigest}`),
    digest: image.manifestDigest,
    mediaType: image.manifestMediaType,
    size: image.manifest.length,
  });

  /** How many times the registry was asked for one of `digests`' manifests. */
  const manifestGets = (digests: readonly Digest[]): number => {
    const wanted = new Set(digests.map((d) => `/manifests/${d}`));
    return reg.stats.requests.filter((r) => [...wanted].some((w) => r.path.endsWith(w))).length;
  };

  it('reads at most its limit of thousands of signature referrers, refuses the image, and says how many it left unread', async () => {
    const image = await sampleImage(7101, { layers: 1 });
    const repository = `${REPO}-many`;
    reg.addImage(repository, '1', image);
    const signatures = addSignatures(reg, repository, image, 3000);
    reg.stats.reset();
    const e = await failure(checkSignatures(client, subjectOf(repository, image), gate));
    expect(e.code).toMatch(/^SIGNATURE_(INVALID|MISSING)$/);
    // One referrers list, and no more signature manifests than the limit: the 2,984 others are never fetched.
    expect(reg.stats.requests.filter((r) => r.path.includes('/referrers/')).length).toBe(1);
    const fetched = manifestGets(signatures);
    expect(fetched).toBeGreaterThan(0);
    expect(fetched).toBeLessThanOrEqual(DEFAULT_MAX_SIGNATURES);
    expect(JSON.stringify(e.details)).toContain(String(3000 - DEFAULT_MAX_SIGNATURES));
  });

  it('refuses the same image pulled through the CLI, and records nothing', async () => {
    const image = await sampleImage(7102, { layers: 1 });
    const repository = `${REPO}-cli`;
    reg.addImage(repository, '1', image);
    addSignatures(reg, repository, image, 2000);
    const root = join(work.dir, 'cli-root');
    const r = await runCliAsync(['pull', '--notation-config', config, '--root', root, `${reg.host}/${repository}:1`]);
    expect(r.status, r.stderr).not.toBe(0);
    expect(r.stderr).toMatch(/SIGNATURE_(INVALID|MISSING)/);
    const images = await runCliAsync(['images', '--json', '--root', root]);
    expect(images.status, images.stderr).toBe(0);
    expect(JSON.parse(images.stdout)).toEqual([]);
  });

  it('never fetches a referrer that is the signed manifest itself', async () => {
    const image = await sampleImage(7103, { layers: 1 });
    const repository = `${REPO}-self`;
    reg.addImage(repository, '1', image);
    // The referrers tag schema lets a registry list anything: here, the image as its own signature.
    const list = Buffer.from(
      JSON.stringify({
        schemaVersion: 2,
        mediaType: 'application/vnd.oci.image.index.v1+json',
        manifests: [{ mediaType: image.manifestMediaType, digest: image.manifestDigest, size: image.manifest.length, artifactType: NOTARY_SIGNATURE }],
      }),
    );
    const own = new Set([`/v2/${repository}/manifests/${image.manifestDigest}`]);
    const loop = await startLoopbackRegistry({ referrers: false });
    try {
      loop.addImage(repository, '1', image);
      loop.addManifest(repository, image.manifestDigest.replace(':', '-'), list, 'application/vnd.oci.image.index.v1+json');
      const subject = { ...subjectOf(repository, image), reference: parseReference(`${loop.host}/${repository}@${image.manifestDigest}`) };
      const e = await failure(checkSignatures(client, subject, gate));
      expect(e.code).toBe('SIGNATURE_MISSING');
      // The list was read (through the tag schema), and the image it named was not fetched as a signature.
      expect(loop.stats.requests.some((r) => r.path === `/v2/${repository}/manifests/${image.manifestDigest.replace(':', '-')}`)).toBe(true);
      expect(loop.stats.requests.filter((r) => own.has(r.path))).toEqual([]);
    } finally {
      await loop.close();
    }
  });

  it('refuses an image whose signature never finishes arriving once the verification time is up', async () => {
    const image = await sampleImage(7104, { layers: 1 });
    const repository = `${REPO}-slow`;
    reg.addImage(repository, '1', image);
    const [signature] = addSignatures(reg, repository, image, 1);
    let release!: () => void;
    reg.faults.hold = { path: new RegExp(`/manifests/${signature!}$`), until: new Promise<void>((r) => (release = r)) };
    try {
      const e = await failure(checkSignatures(client, subjectOf(repository, image), { ...gate, limits: { timeoutMs: 2_000 } }));
      expect(e.code).toBe('SIGNATURE_INVALID');
      expect(e.details).toMatchObject({ check: 'time', timeoutMs: 2_000 });
    } finally {
      release();
      delete reg.faults.hold;
    }
  });
});
