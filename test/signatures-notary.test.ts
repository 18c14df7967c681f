// Notary Project signatures made by notation's own libraries (the notation-signer peer, over the
// released notation-go module) on the loopback distribution registry, verified by fastpull's verifier
// and by notation's: both must reach the same verdict on every case, valid and hostile. The few cases
// where fastpull is stricter than notation on purpose say so and assert both sides.
import { createHash, sign as cryptoSign, X509Certificate } from 'node:crypto';
import { spawnSync } from 'node:child_process';
import { createServer, type AddressInfo } from 'node:net';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { encode, Token, Type } from 'cborg';
import { parseReference, validateDigest } from '@fastpull/core';
import { RegistryClient } from '@fastpull/core/registry';
import { lacksRegistry, pushImage, sampleImage, startDistribution, type DistributionRegistry } from '@fastpull/core/testing';
import { fetchNotarySignatures, loadNotaryConfig, verifyNotary, type NotaryVerdict } from '../packages/core/src/signatures/notary/index.js';
import { peerBinary, runCliAsync, tempDir } from './helpers.js';

const signer = peerBinary('notation-signer', 'notation-signer');
const REPO = 'signed/app';
const DAY = 24 * 3600 * 1000;

function run(args: string[]): { status: number | null; stdout: string; stderr: string } {
  const r = spawnSync(signer!, args, { encoding: 'utf8' });
  return { status: r.status, stdout: r.stdout, stderr: r.stderr };
}
function must(args: string[]): string {
  const r = run(args);
  if (r.status !== 0) throw new Error(`notation-signer ${args.join(' ')}: ${r.stderr}`);
  return r.stdout.trim();
}

interface NotationReport {
  verified: boolean;
  level?: string;
  error?: string;
  results: { type: string; action: string; error?: string }[][];
}

describe.skipIf(lacksRegistry())('Notary Project signatures: fastpull and notation agree', () => {
  const work = tempDir('notary');
  const pki = join(work.dir, 'pki');
  let registry: DistributionRegistry;
  let client: RegistryClient;
  let seed = 100;

  beforeAll(async () => {
    // The signer is a peer scripts/peers.sh builds, as test/peers.test.ts requires: missing, it fails.
    expect(signer && existsSync(signer), 'notation-signer is built (bash scripts/peers.sh notation-signer)').toBe(true);
    registry = await startDistribution({ dir: join(work.dir, 'registry') });
    client = new RegistryClient({ plainHttp: true });
    mkdirSync(pki);
    const p = (n: string) => join(pki, n);
    const now = Date.now();
    const since = (days: number) => ['-not-before', new Date(now - days * DAY).toISOString()];
    must(['cert', '-out', p('root'), '-is-ca', '-subject', 'CN=root,O=fastpull,ST=WA,C=US', ...since(30)]);
    must(['cert', '-out', p('leaf'), '-ca', p('root'), '-subject', 'CN=signer,O=fastpull,ST=WA,C=US', ...since(2)]);
    must(['cert', '-out', p('rsa'), '-ca', p('root'), '-key', 'rsa2048', '-subject', 'CN=rsa,O=fastpull,ST=WA,C=US']);
    must([
      'cert',
      '-out',
      p('expired'),
      '-ca',
      p('root'),
      '-subject',
      'CN=expired,O=fastpull,ST=WA,C=US',
      '-not-before',
      new Date(now - 10 * DAY).toISOString(),
      '-not-after',
      new Date(now - DAY).toISOString(),
    ]);
    must(['cert', '-out', p('server'), '-ca', p('root'), '-eku', 'serverAuth', '-subject', 'CN=server,O=fastpull,ST=WA,C=US']);
    // A certificate naming an OCSP responder and a CRL that nobody serves (a port just closed).
    const closed = await new Promise<number>((resolve) => {
      const server = createServer().listen(0, '127.0.0.1', () => {
        const { port } = server.address() as AddressInfo;
        server.close(() => resolve(port));
      });
    });
    must([
      'cert',
      '-out',
      p('revocable'),
      '-ca',
      p('root'),
      '-subject',
      'CN=revocable,O=fastpull,ST=WA,C=US',
      '-ocsp',
      `http://127.0.0.1:${closed}/ocsp`,
      '-crl',
      `http://127.0.0.1:${closed}/root.crl`,
    ]);
    must(['cert', '-out', p('other-root'), '-is-ca', '-subject', 'CN=other,O=elsewhere,ST=WA,C=US']);
    must(['cert', '-out', p('stranger'), '-ca', p('other-root'), '-subject', 'CN=stranger,O=elsewhere,ST=WA,C=US']);
    // A chain longer than fastpull accepts: root, ten intermediates, leaf.
    let parent = p('root');
    for (let i = 0; i < 10; i++) {
      must(['cert', '-out', p(`int${i}`), '-ca', parent, '-is-ca', '-subject', `CN=int${i},O=fastpull,ST=WA,C=US`]);
      parent = p(`int${i}`);
    }
    must(['cert', '-out', p('deep'), '-ca', parent, '-subject', 'CN=deep,O=fastpull,ST=WA,C=US']);
  });
  afterAll(async () => {
    await client?.close();
    await registry?.stop();
    work.cleanup();
  });

  /** A notation configuration directory with one wildcard statement. */
  function config(name: string, statement: Record<string, unknown>): string {
    const dir = join(work.dir, `config-${name}`);
    mkdirSync(join(dir, 'truststore', 'x509', 'ca', 'test'), { recursive: true });
    mkdirSync(join(dir, 'truststore', 'x509', 'signingAuthority', 'test'), { recursive: true });
    for (const type of ['ca', 'signingAuthority'])
      writeFileSync(join(dir, 'truststore', 'x509', type, 'test', 'root.crt'), readFileSync(join(pki, 'root.crt')));
    const policy = { name: 'p', registryScopes: ['*'], trustStores: ['ca:test'], trustedIdentities: ['*'], ...statement };
    writeFileSync(join(dir, 'trustpolicy.json'), JSON.stringify({ version: '1.0', trustPolicies: [policy] }));
    return dir;
  }

  /** A fresh image in the registry: its digest reference. */
  async function image(): Promise<string> {
    const digest = await pushImage(registry.url, REPO, `t${seed}`, await sampleImage(seed++));
    return `${registry.host}/${REPO}@${digest}`;
  }

  async function fastpull(ref: string, dir: string): Promise<NotaryVerdict> {
    const parsed = parseReference(ref);
    const digest = validateDigest(parsed.digest!);
    const manifest = await client.fetchManifest(parsed, digest);
    const target = { mediaType: manifest.mediaType!, digest, size: manifest.bytes.length };
    const { signatures, unreadable } = await fetchNotarySignatures(client, parsed, digest);
    return verifyNotary(await loadNotaryConfig(dir), { repository: `${registry.host}/${REPO}`, target, signatures, unreadable });
  }

  function notation(ref: string, dir: string): NotationReport {
    const r = run(['verify', '-ref', ref, '-config', dir]);
    expect([0, 1], r.stderr).toContain(r.status);
    return JSON.parse(r.stdout) as NotationReport;
  }

  /** Both verifiers' verdicts, asserted to agree on whether the image may be used. */
  async function both(ref: string, dir: string): Promise<{ ours: NotaryVerdict; theirs: NotationReport }> {
    const ours = await fastpull(ref, dir);
    const theirs = notation(ref, dir);
    expect(ours.trusted, `fastpull: ${ours.outcome} ${ours.reason ?? ''}; notation: ${theirs.error ?? 'verified'}`).toBe(theirs.verified);
    return { ours, theirs };
  }

  const sign = (ref: string, cert: string, ...extra: string[]) =>
    must(['sign', '-ref', ref, '-key', join(pki, `${cert}.key`), '-cert', join(pki, `${cert}.crt`), ...extra]);
  const failed = (v: NotaryVerdict) => v.signatures.flatMap((s) => s.checks.filter((c) => !c.ok).map((c) => c.validation));

  it('through the CLI: pull --notation-config refuses an unsigned image (SIGNATURE_MISSING) and pulls a signed one, verify --json says why, FASTPULL_NOTATION_CONFIG turns it on', async () => {
    const dir = config('cli', { signatureVerification: { level: 'strict' } });
    const signed = await image();
    sign(signed, 'leaf', '-envelope', 'jws');
    const bare = await image();
    const root = join(work.dir, 'cli-root');
    const refused = await runCliAsync(['pull', '--root', root, '--notation-config', dir, bare]);
    expect(refused.status).toBe(1);
    expect(refused.stderr.trim().split('\n').at(-1)).toMatch(/signature check of .* refused it: notation: .*\(SIGNATURE_MISSING\)$/);
    const pulled = await runCliAsync(['pull', '--root', root, signed], { FASTPULL_NOTATION_CONFIG: dir });
    expect(pulled.status, pulled.stderr).toBe(0);
    expect(pulled.stdout).toMatch(/signature: notation verified by sha256:[0-9a-f]{64}/);
    const listed = JSON.parse((await runCliAsync(['images', '--root', root, '--json'])).stdout) as unknown[];
    expect(listed).toHaveLength(1);
    expect(JSON.stringify(listed)).toContain('"outcome":"verified"');
    const json = await runCliAsync(['verify', '--json', '--notation-config', dir, bare]);
    expect(json.status).toBe(1);
    expect(JSON.parse(json.stdout)).toMatchObject({
      outcome: 'refused',
      verdicts: [{ kind: 'notation', outcome: 'missing', level: 'strict' }],
      error: { code: 'SIGNATURE_MISSING' },
    });
    const broken = join(work.dir, 'config-broken');
    mkdirSync(broken);
    writeFileSync(join(broken, 'trustpolicy.json'), '{"version": "2.0"}');
    const invalid = await runCliAsync(['verify', '--notation-config', broken, signed]);
    expect(invalid.status).toBe(1);
    expect(invalid.stderr).toContain('(INVALID_ARGUMENT)');
  });

  it.each(['jws', 'cose'])('a %s signature by a trusted leaf is verified (strict)', async (envelope) => {
    const ref = await image();
    sign(ref, 'leaf', '-envelope', envelope, '-expiry', '24h');
    const { ours } = await both(ref, config('strict', { signatureVerification: { level: 'strict' } }));
    expect(ours).toMatchObject({ outcome: 'verified', level: 'strict', policy: 'p' });
  });

  it('an RSA (PS256) signature is verified; the trusted identity by subject matches it', async () => {
    const ref = await image();
    sign(ref, 'rsa', '-envelope', 'cose');
    const { ours } = await both(
      ref,
      config('identity', { signatureVerification: { level: 'strict' }, trustedIdentities: ['x509.subject: C=US, ST=WA, O=fastpull'] }),
    );
    expect(ours.outcome).toBe('verified');
  });

  it('a wrong identity is refused under strict and logged under audit', async () => {
    const ref = await image();
    sign(ref, 'leaf');
    const identity = { trustedIdentities: ['x509.subject: C=US, ST=WA, O=someone else'] };
    const strict = await both(ref, config('wrong-id', { signatureVerification: { level: 'strict' }, ...identity }));
    expect(strict.ours.outcome).toBe('invalid');
    expect(failed(strict.ours)).toEqual(['authenticity']);
    const audit = await both(ref, config('wrong-id-audit', { signatureVerification: { level: 'audit' }, ...identity }));
    expect(audit.ours.outcome).toBe('logged');
  });

  it('a chain to an untrusted root fails authenticity: refused (strict, permissive), logged (audit)', async () => {
    const ref = await image();
    sign(ref, 'stranger', '-envelope', 'cose');
    for (const level of ['strict', 'permissive', 'audit']) {
      const { ours, theirs } = await both(ref, config(`untrusted-${level}`, { signatureVerification: { level } }));
      expect(ours.outcome).toBe(level === 'audit' ? 'logged' : 'invalid');
      expect(failed(ours)).toContain('authenticity');
      // notation reports the results of an accepted signature; a refused one only in its error.
      if (theirs.verified) expect(theirs.results.flat().find((r) => r.error)?.type).toBe('authenticity');
      else expect(theirs.error).toMatch(new RegExp(`signature with digest ${ours.signatures[0]!.digest}.*does not contain any trusted certificate`));
    }
  });

  it('an expired certificate fails the authentic timestamp: refused (strict), logged (permissive)', async () => {
    const ref = await image();
    sign(ref, 'expired', '-signing-time', new Date(Date.now() - 5 * DAY).toISOString());
    const strict = await both(ref, config('expired', { signatureVerification: { level: 'strict' } }));
    expect(strict.ours.outcome).toBe('invalid');
    expect(failed(strict.ours)).toEqual(['authenticTimestamp']);
    const permissive = await both(ref, config('expired-permissive', { signatureVerification: { level: 'permissive' } }));
    expect(permissive.ours.outcome).toBe('logged');
  });

  it('an expired signature is refused under strict and under an override that enforces expiry, logged under permissive', async () => {
    const ref = await image();
    sign(ref, 'leaf', '-envelope', 'cose', '-signing-time', new Date(Date.now() - 3600_000).toISOString(), '-expiry', '1m');
    expect((await both(ref, config('sig-expired', { signatureVerification: { level: 'strict' } }))).ours.outcome).toBe('invalid');
    expect((await both(ref, config('sig-expired-p', { signatureVerification: { level: 'permissive' } }))).ours.outcome).toBe('logged');
    const custom = await both(ref, config('sig-expired-o', { signatureVerification: { level: 'permissive', override: { expiry: 'enforce' } } }));
    expect(failed(custom.ours)).toEqual(['expiry']);
    expect(custom.ours.outcome).toBe('invalid');
  });

  it('a certificate whose revocation status cannot be learnt: refused (strict), logged (permissive), accepted where revocation is skipped', async () => {
    const ref = await image();
    sign(ref, 'revocable', '-envelope', 'cose');
    const strict = await both(ref, config('revocation', { signatureVerification: { level: 'strict' } }));
    expect(strict.ours.outcome).toBe('invalid');
    expect(failed(strict.ours)).toEqual(['revocation']);
    expect(strict.theirs.error).toMatch(/revocation status is unknown/);
    const permissive = await both(ref, config('revocation-p', { signatureVerification: { level: 'permissive' } }));
    expect(permissive.ours.outcome).toBe('logged');
    const skipped = await both(ref, config('revocation-s', { signatureVerification: { level: 'strict', override: { revocation: 'skip' } } }));
    expect(skipped.ours.outcome).toBe('verified');
  });

  it('a signature of another manifest, attached to this one, is refused at every level but skip', async () => {
    const signed = await image();
    sign(signed, 'leaf');
    const parsed = parseReference(signed);
    const [sig] = (await fetchNotarySignatures(client, parsed, validateDigest(parsed.digest!))).signatures;
    const file = join(work.dir, 'other-digest.jws');
    writeFileSync(file, sig!.envelope);
    const ref = await image();
    must(['attach', '-ref', ref, '-file', file, '-media-type', 'application/jose+json']);
    for (const level of ['strict', 'audit']) {
      const { ours } = await both(ref, config(`other-${level}`, { signatureVerification: { level } }));
      expect(ours.outcome).toBe('invalid');
      expect(ours.reason).toContain(parsed.digest);
    }
  });

  it('a tampered JWS payload and a tampered COSE signature fail integrity', async () => {
    for (const envelope of ['jws', 'cose'] as const) {
      const signed = await image();
      sign(signed, 'leaf', '-envelope', envelope);
      const parsed = parseReference(signed);
      const [sig] = (await fetchNotarySignatures(client, parsed, validateDigest(parsed.digest!))).signatures;
      const bytes = Buffer.from(sig!.envelope);
      let tampered: Buffer;
      if (envelope === 'jws') {
        const env = JSON.parse(bytes.toString()) as { payload: string };
        const payload = JSON.parse(Buffer.from(env.payload, 'base64url').toString()) as { targetArtifact: { size: number } };
        payload.targetArtifact.size += 1;
        env.payload = Buffer.from(JSON.stringify(payload)).toString('base64url');
        tampered = Buffer.from(JSON.stringify(env));
      } else {
        tampered = Buffer.from(bytes);
        tampered[tampered.length - 1]! ^= 0xff;
      }
      const ref = await image();
      const file = join(work.dir, `tampered.${envelope}`);
      writeFileSync(file, tampered);
      must(['attach', '-ref', ref, '-file', file, '-media-type', envelope === 'jws' ? 'application/jose+json' : 'application/cose']);
      const { ours, theirs } = await both(ref, config(`tampered-${envelope}`, { signatureVerification: { level: 'audit' } }));
      expect(ours.outcome).toBe('invalid');
      expect(failed(ours)).toEqual(['integrity']);
      expect(theirs.verified).toBe(false);
    }
  });

  describe('envelopes notation would not sign, made here', () => {
    const key = (name: string) => readFileSync(join(pki, `${name}.key`), 'utf8');
    const ders = (name: string) =>
      [...readFileSync(join(pki, `${name}.crt`), 'utf8').matchAll(/-----BEGIN CERTIFICATE-----[^-]+-----END CERTIFICATE-----/g)].map(
        (m) => new X509Certificate(m[0]).raw,
      );

    /** A JWS as notation writes it, with the protected header and signing key open to change. */
    function jws(target: object, cert: string, header: Record<string, unknown> = {}, options: { hash?: string } = {}): Buffer {
      const protectedHeader = {
        alg: 'ES256',
        cty: 'application/vnd.cncf.notary.payload.v1+json',
        crit: ['io.cncf.notary.signingScheme'],
        'io.cncf.notary.signingScheme': 'notary.x509',
        'io.cncf.notary.signingTime': new Date().toISOString().replace(/\.\d+Z$/, 'Z'),
        ...header,
      };
      const p = Buffer.from(JSON.stringify(protectedHeader)).toString('base64url');
      const payload = Buffer.from(JSON.stringify({ targetArtifact: target })).toString('base64url');
      const signature = cryptoSign(options.hash ?? 'sha256', Buffer.from(`${p}.${payload}`), { key: key(cert), dsaEncoding: 'ieee-p1363' });
      return Buffer.from(
        JSON.stringify({
          payload,
          protected: p,
          header: { x5c: ders(cert).map((d) => d.toString('base64')), 'io.cncf.notary.signingAgent': 'fastpull-test' },
          signature: signature.toString('base64url'),
        }),
      );
    }

    /** A COSE_Sign1 as notation writes it, with extra protected attributes. */
    function cose(target: object, cert: string, extra: [string, unknown][] = [], crit: string[] = []): Buffer {
      const protectedMap = new Map<unknown, unknown>([
        [1, -7],
        [2, ['io.cncf.notary.signingScheme', ...crit]],
        [3, 'application/vnd.cncf.notary.payload.v1+json'],
        ['io.cncf.notary.signingScheme', 'notary.x509'],
        ['io.cncf.notary.signingTime', new Date()],
        ...extra,
      ]);
      // Times are CBOR tag 1 (epoch seconds), as notation writes them.
      const protectedBytes = encode(protectedMap, {
        typeEncoders: { Date: (d: Date) => [new Token(Type.tag, 1), new Token(Type.uint, Math.floor(d.getTime() / 1000))] },
      });
      const payload = Buffer.from(JSON.stringify({ targetArtifact: target }));
      const toSign = encode(['Signature1', protectedBytes, new Uint8Array(0), payload]);
      const signature = cryptoSign('sha256', toSign, { key: key(cert), dsaEncoding: 'ieee-p1363' });
      return Buffer.from(encode([protectedBytes, new Map([[33, ders(cert)]]), payload, signature]));
    }

    async function attached(make: (target: object) => Buffer, mediaType = 'application/jose+json'): Promise<string> {
      const ref = await image();
      const parsed = parseReference(ref);
      const manifest = await client.fetchManifest(parsed, parsed.digest!);
      const target = { mediaType: manifest.mediaType, digest: parsed.digest, size: manifest.bytes.length };
      const file = join(work.dir, `crafted-${createHash('sha256').update(ref).digest('hex').slice(0, 8)}`);
      writeFileSync(file, make(target));
      must(['attach', '-ref', ref, '-file', file, '-media-type', mediaType]);
      return ref;
    }

    const strict = () => config('crafted-strict', { signatureVerification: { level: 'strict' } });

    it('the crafted JWS itself is valid: both verify it (the cases below differ from it in one thing)', async () => {
      const { ours } = await both(await attached((t) => jws(t, 'leaf')), strict());
      expect(ours.outcome).toBe('verified');
    });

    it('a leaf with the server authentication EKU fails integrity, even under audit', async () => {
      const ref = await attached((t) => jws(t, 'server'));
      const { ours } = await both(ref, config('eku-audit', { signatureVerification: { level: 'audit' } }));
      expect(ours.outcome).toBe('invalid');
      expect(ours.reason).toMatch(/server authentication/);
    });

    it('an algorithm that does not match the key (ES384 on a P-256 key) fails integrity', async () => {
      const { ours } = await both(await attached((t) => jws(t, 'leaf', { alg: 'ES384' }, { hash: 'sha384' })), strict());
      expect(ours.outcome).toBe('invalid');
      expect(ours.reason).toMatch(/ES384.*ES256/);
    });

    it('an attribute marked critical but absent fails integrity (JWS and COSE)', async () => {
      const j = await both(await attached((t) => jws(t, 'leaf', { crit: ['io.cncf.notary.signingScheme', 'io.cncf.notary.expiry'] })), strict());
      expect(j.ours.reason).toMatch(/marked critical but not present/);
      const c = await both(await attached((t) => cose(t, 'leaf', [], ['io.cncf.notary.expiry']), 'application/cose'), strict());
      expect(c.ours.outcome).toBe('invalid');
    });

    it('a signing time outside the certificate validity fails the authentic timestamp (signing authority scheme)', async () => {
      const leafNotBefore = new Date(new X509Certificate(ders('leaf')[0]!).validFrom);
      const before = new Date(leafNotBefore.getTime() - DAY).toISOString().replace(/\.\d+Z$/, 'Z');
      const ref = await attached((t) =>
        jws(t, 'leaf', {
          crit: ['io.cncf.notary.signingScheme', 'io.cncf.notary.authenticSigningTime'],
          'io.cncf.notary.signingScheme': 'notary.x509.signingAuthority',
          'io.cncf.notary.signingTime': undefined,
          'io.cncf.notary.authenticSigningTime': before,
        }),
      );
      const dir = config('sa', { signatureVerification: { level: 'strict' }, trustStores: ['signingAuthority:test'] });
      const { ours } = await both(ref, dir);
      expect(ours.outcome).toBe('invalid');
      expect(failed(ours)).toEqual(['authenticTimestamp']);
    });
  });

  it('an envelope larger than notation reads (32 MiB) is refused by both, and fastpull never fetches it', async () => {
    const ref = await image();
    const file = join(work.dir, 'huge.jws');
    writeFileSync(file, Buffer.alloc(33 * 1024 * 1024, 0x20));
    must(['attach', '-ref', ref, '-file', file, '-media-type', 'application/jose+json']);
    const { ours } = await both(ref, config('huge', { signatureVerification: { level: 'strict' } }));
    expect(ours.outcome).toBe('invalid');
    expect(ours.reason).toMatch(/more than 262144/);
  });

  it('a missing signature: refused under strict by both; under audit fastpull logs it (the level enforces integrity only where a signature is present) while notation refuses', async () => {
    const ref = await image();
    const strict = await both(ref, config('missing', { signatureVerification: { level: 'strict' } }));
    expect(strict.ours.outcome).toBe('missing');
    const audit = await fastpull(ref, config('missing-audit', { signatureVerification: { level: 'audit' } }));
    expect(audit).toMatchObject({ outcome: 'logged', trusted: true });
    expect(notation(ref, config('missing-audit', { signatureVerification: { level: 'audit' } })).verified).toBe(false);
  });

  it('a skip statement skips: both accept an unsigned image', async () => {
    const ref = await image();
    const dir = config('skip', {
      registryScopes: [`${registry.host}/${REPO}`],
      signatureVerification: { level: 'skip' },
      trustStores: [],
      trustedIdentities: [],
    });
    const { ours } = await both(ref, dir);
    expect(ours.outcome).toBe('skipped');
  });

  it('stricter than notation on purpose: an unknown critical attribute, and a chain of more than 10 certificates', async () => {
    const dir = config('stricter', { signatureVerification: { level: 'strict' } });
    const crit = await image();
    sign(crit, 'leaf', '-attr', 'com.example.unknown=yes!');
    expect((await fastpull(crit, dir)).reason).toMatch(/critical attribute com.example.unknown is not understood/);
    expect(notation(crit, dir).verified).toBe(true);
    const deep = await image();
    sign(deep, 'deep');
    expect((await fastpull(deep, dir)).reason).toMatch(/12 certificates, more than 10/);
    expect(notation(deep, dir).verified).toBe(true);
  });
});
