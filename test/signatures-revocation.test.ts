// Revocation of Notary Project signing certificates, checked for real: a test CA made with openssl,
// its OCSP answers made by `openssl ocsp` (one answer per request, from the CA's index, served on
// loopback: openssl's own responder listens on every interface), its CRLs made by `openssl ca
// -gencrl` and served on loopback; signatures made by notation's libraries (the notation-signer
// peer). fastpull's verdict is compared with notation's wherever notation can give one.
import { execFile, spawnSync } from 'node:child_process';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { createServer as createNetServer, type AddressInfo } from 'node:net';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseReference, validateDigest } from '@fastpull/core';
import { RegistryClient } from '@fastpull/core/registry';
import { lacksRegistry, pushImage, sampleImage, startDistribution, type DistributionRegistry } from '@fastpull/core/testing';
import { fetchNotarySignatures, loadNotaryConfig, verifyNotary, type NotaryVerdict } from '../packages/core/src/signatures/notary/index.js';
import { CrlCache, RevocationChecker } from '../packages/core/src/signatures/notary/revocation/index.js';
import { peerBinary, runCliAsync, tempDir } from './helpers.js';

const run = promisify(execFile);
const signer = peerBinary('notation-signer', 'notation-signer');
const REPO = 'signed/revocable';
const DAY = 24 * 3600 * 1000;

/** openssl's short and long time forms: YYMMDDHHMMSSZ (the CA index) and YYYYMMDDHHMMSSZ. */
const shortTime = (d: Date) => `${d.toISOString().replace(/[-:T]/g, '').slice(2, 14)}Z`;
const longTime = (d: Date) => `${d.toISOString().replace(/[-:T]/g, '').slice(0, 14)}Z`;

interface Leaf {
  readonly serial: string;
  readonly ocsp?: string;
  readonly crl?: string;
  /** `R` lines of the CA index: revoked at this time, for this reason, with an invalidity date. */
  readonly revoked?: { at: Date; reason: string; invalidity?: Date };
}

describe.skipIf(lacksRegistry())('Notary Project revocation by OCSP and CRL on loopback: fastpull and notation agree', () => {
  const work = tempDir('revocation');
  const pki = join(work.dir, 'pki');
  const p = (n: string) => join(pki, n);
  const hits = new Map<string, number>();
  const crls = new Map<string, Buffer>();
  let registry: DistributionRegistry;
  let client: RegistryClient;
  let server: Server;
  let base: string;
  let closed: string;
  let seed = 300;

  const openssl = (...args: string[]) => run('openssl', args, { cwd: pki });
  const signerRun = (...args: string[]) => run(signer!, args);

  /** Responders: which certificate signs the answers. */
  const responders: Record<string, string> = { root: 'root', delegated: 'responder', stranger: 'stranger', noeku: 'noeku' };

  async function answer(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const path = new URL(req.url ?? '/', 'http://x').pathname;
    const counted = path.split('/').slice(0, 3).join('/');
    hits.set(counted, (hits.get(counted) ?? 0) + 1);
    const [, kind, name, encoded] = path.split('/');
    if (path === '/crl/moved') {
      res.writeHead(302, { location: '/crl/main' }).end();
      return;
    }
    if (path === '/crl/huge') {
      // No content-length: the reader must count what arrives.
      res.writeHead(200, { 'content-type': 'application/pkix-crl' });
      for (let i = 0; i < 11; i++) res.write(Buffer.alloc(1024 * 1024, 0x30));
      res.end();
      return;
    }
    if (kind === 'crl' && name && crls.has(name)) {
      res.writeHead(200, { 'content-type': 'application/pkix-crl' }).end(crls.get(name));
      return;
    }
    const signerName = kind === 'ocsp' && name ? responders[name] : undefined;
    if (!signerName || (req.method === 'GET') !== (encoded !== undefined)) {
      res.writeHead(404).end();
      return;
    }
    // RFC 6960 A.1: a GET carries the request base64 in the path (notation's way), a POST in the body.
    const chunks: Buffer[] = encoded !== undefined ? [Buffer.from(decodeURIComponent(encoded), 'base64')] : [];
    for await (const c of req) chunks.push(c as Buffer);
    const id = `${name}-${hits.get(counted)}`;
    writeFileSync(p(`${id}.req`), Buffer.concat(chunks));
    await openssl(
      'ocsp',
      '-index',
      'index.txt',
      '-CA',
      'root.crt',
      '-rsigner',
      `${signerName}.crt`,
      '-rkey',
      `${signerName}.key`,
      '-reqin',
      `${id}.req`,
      '-respout',
      `${id}.resp`,
      '-nmin',
      '60',
    );
    res.writeHead(200, { 'content-type': 'application/ocsp-response' }).end(readFileSync(p(`${id}.resp`)));
  }

  const leaves: Record<string, Leaf> = {};

  beforeAll(async () => {
    expect(signer && existsSync(signer), 'notation-signer is built (bash scripts/peers.sh notation-signer)').toBe(true);
    expect(spawnSync('openssl', ['version']).status, 'openssl is installed').toBe(0);
    registry = await startDistribution({ dir: join(work.dir, 'registry') });
    client = new RegistryClient({ plainHttp: true });
    server = createServer((req, res) => void answer(req, res).catch((e: Error) => res.writeHead(500).end(e.message)));
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    closed = await new Promise<string>((resolve) => {
      const s = createNetServer().listen(0, '127.0.0.1', () => {
        const { port } = s.address() as AddressInfo;
        s.close(() => resolve(`http://127.0.0.1:${port}`));
      });
    });
    mkdirSync(pki);
    const now = new Date();
    Object.assign(leaves, {
      'ocsp-good': { serial: '1001', ocsp: `${base}/ocsp/root` },
      'ocsp-revoked': { serial: '1002', ocsp: `${base}/ocsp/root`, revoked: { at: new Date(now.getTime() - 60_000), reason: 'keyCompromise' } },
      'ocsp-delegated': { serial: '1003', ocsp: `${base}/ocsp/delegated` },
      'ocsp-stranger': { serial: '1004', ocsp: `${base}/ocsp/stranger` },
      'ocsp-noeku': { serial: '1005', ocsp: `${base}/ocsp/noeku` },
      'crl-good': { serial: '1006', crl: `${base}/crl/main` },
      'crl-revoked': { serial: '1007', crl: `${base}/crl/main`, revoked: { at: new Date(now.getTime() - 60_000), reason: 'superseded' } },
      'crl-tampered': { serial: '1008', crl: `${base}/crl/tampered` },
      'crl-stale': { serial: '1009', crl: `${base}/crl/stale` },
      fallback: { serial: '100A', ocsp: `${closed}/ocsp`, crl: `${base}/crl/main` },
      down: { serial: '100B', ocsp: `${closed}/ocsp`, crl: `${closed}/root.crl` },
      'crl-huge': { serial: '100D', crl: `${base}/crl/huge` },
      'crl-moved': { serial: '100E', crl: `${base}/crl/moved` },
      'crl-long': { serial: '1012', crl: `${base}/crl/long`, revoked: { at: new Date(now.getTime() - 60_000), reason: 'cessationOfOperation' } },
      'crl-copy': { serial: '100F', crl: `${base}/crl/copy` },
      // Compromised an hour after the signatures below are made: the invalidity date is later.
      'ocsp-later': {
        serial: '1010',
        ocsp: `${base}/ocsp/root`,
        revoked: { at: new Date(now.getTime() - 60_000), reason: 'keyCompromise', invalidity: new Date(now.getTime() + 3600_000) },
      },
      'crl-later': {
        serial: '1011',
        crl: `${base}/crl/main`,
        revoked: { at: new Date(now.getTime() - 60_000), reason: 'keyCompromise', invalidity: new Date(now.getTime() + 3600_000) },
      },
      'crl-hold': { serial: '100C', crl: `${base}/crl/main`, revoked: { at: new Date(now.getTime() - 60_000), reason: 'certificateHold' } },
    } satisfies Record<string, Leaf>);
    const sections = Object.entries(leaves).map(([name, l]) =>
      [
        `[${name}]`,
        'basicConstraints = CA:false',
        'keyUsage = critical, digitalSignature',
        'extendedKeyUsage = codeSigning',
        ...(l.ocsp ? [`authorityInfoAccess = OCSP;URI:${l.ocsp}`] : []),
        ...(l.crl ? [`crlDistributionPoints = URI:${l.crl}`] : []),
      ].join('\n'),
    );
    writeFileSync(
      p('x509.cnf'),
      [
        '[req]\ndistinguished_name = dn\nprompt = no\n[dn]\nCN = x',
        '[root]\nbasicConstraints = critical, CA:true\nkeyUsage = critical, keyCertSign, cRLSign\nsubjectKeyIdentifier = hash',
        '[responder]\nbasicConstraints = CA:false\nkeyUsage = critical, digitalSignature\nextendedKeyUsage = OCSPSigning',
        '[noeku]\nbasicConstraints = CA:false\nkeyUsage = critical, digitalSignature',
        ...sections,
      ].join('\n'),
    );
    writeFileSync(p('ca.cnf'), '[ca]\ndefault_ca = d\n[d]\ndatabase = index.txt\ndefault_md = sha256\ndefault_crl_days = 1\n');
    const ec = ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes'];
    const subject = (cn: string) => `/C=US/ST=WA/O=fastpull/CN=${cn}`;
    await openssl(
      'req',
      '-x509',
      '-config',
      'x509.cnf',
      '-extensions',
      'root',
      ...ec,
      '-keyout',
      'root.key',
      '-out',
      'root.crt',
      '-days',
      '30',
      '-subj',
      subject('revocation root'),
    );
    await openssl(
      'req',
      '-x509',
      '-config',
      'x509.cnf',
      '-extensions',
      'root',
      ...ec,
      '-keyout',
      'stranger.key',
      '-out',
      'stranger.crt',
      '-days',
      '30',
      '-subj',
      subject('stranger'),
    );
    const issue = async (name: string, serial: string) => {
      await openssl('req', '-new', '-config', 'x509.cnf', ...ec, '-keyout', `${name}.key`, '-out', `${name}.csr`, '-subj', subject(name));
      await openssl(
        'x509',
        '-req',
        '-in',
        `${name}.csr`,
        '-CA',
        'root.crt',
        '-CAkey',
        'root.key',
        '-set_serial',
        `0x${serial}`,
        '-days',
        '10',
        '-extfile',
        'x509.cnf',
        '-extensions',
        name,
        '-out',
        `${name}.pem`,
      );
      writeFileSync(p(`${name}.crt`), Buffer.concat([readFileSync(p(`${name}.pem`)), readFileSync(p('root.crt'))]));
    };
    await issue('responder', '2001');
    await issue('noeku', '2002');
    const index: string[] = [];
    const expiry = shortTime(new Date(now.getTime() + 10 * DAY));
    for (const [name, leaf] of Object.entries(leaves)) {
      await issue(name, leaf.serial);
      const r = leaf.revoked;
      // The index spells "keyCompromise with an invalidity date" as the pseudo reason keyTime.
      const revocation = r ? `${shortTime(r.at)},${r.invalidity ? `keyTime,${longTime(r.invalidity)}` : r.reason}` : '';
      index.push([r ? 'R' : 'V', expiry, revocation, leaf.serial, 'unknown', subject(name)].join('\t'));
    }
    writeFileSync(p('index.txt'), `${index.join('\n')}\n`);
    const gencrl = async (out: string, ...extra: string[]) => {
      await openssl('ca', '-config', 'ca.cnf', '-gencrl', '-keyfile', 'root.key', '-cert', 'root.crt', '-out', out, ...extra);
      await openssl('crl', '-in', out, '-outform', 'DER', '-out', `${out}.der`);
      return readFileSync(p(`${out}.der`));
    };
    crls.set('main', await gencrl('main.crl'));
    crls.set('copy', crls.get('main')!);
    // A CRL of 20,000 more entries, the certificate's last: more than the ASN.1 parser takes whole by default.
    const filler = Array.from({ length: 20_000 }, (_, i) =>
      ['R', expiry, `${shortTime(now)},superseded`, (0x100000 + i).toString(16).toUpperCase(), 'unknown', subject(`filler${i}`)].join('\t'),
    );
    writeFileSync(p('long.txt'), `${[...filler, ...index].join('\n')}\n`);
    writeFileSync(p('long.cnf'), readFileSync(p('ca.cnf'), 'utf8').replace('index.txt', 'long.txt'));
    await openssl('ca', '-config', 'long.cnf', '-gencrl', '-keyfile', 'root.key', '-cert', 'root.crt', '-out', 'long.crl');
    await openssl('crl', '-in', 'long.crl', '-outform', 'DER', '-out', 'long.der');
    crls.set('long', readFileSync(p('long.der')));
    const tampered = Buffer.from(crls.get('main')!);
    tampered[tampered.length - 1]! ^= 0x01;
    crls.set('tampered', tampered);
    crls.set(
      'stale',
      await gencrl('stale.crl', '-crl_lastupdate', longTime(new Date(now.getTime() - 3 * DAY)), '-crl_nextupdate', longTime(new Date(now.getTime() - DAY))),
    );
  });
  afterAll(async () => {
    await client?.close();
    await registry?.stop();
    await new Promise((resolve) => (server ? server.close(resolve) : resolve(undefined)));
    work.cleanup();
  });

  function config(name: string, level: string, override?: Record<string, string>, store = 'ca'): string {
    const dir = join(work.dir, `config-${name}-${level}`);
    mkdirSync(join(dir, 'truststore', 'x509', store, 'test'), { recursive: true });
    writeFileSync(join(dir, 'truststore', 'x509', store, 'test', 'root.crt'), readFileSync(p('root.crt')));
    const policy = {
      name: 'p',
      registryScopes: ['*'],
      signatureVerification: { level, ...(override && { override }) },
      trustStores: [`${store}:test`],
      trustedIdentities: ['*'],
    };
    writeFileSync(join(dir, 'trustpolicy.json'), JSON.stringify({ version: '1.0', trustPolicies: [policy] }));
    return dir;
  }

  /** A fresh image signed by the leaf `name`: its digest reference. */
  async function signed(name: string, ...extra: string[]): Promise<string> {
    const digest = await pushImage(registry.url, REPO, `t${seed}`, await sampleImage(seed++));
    const ref = `${registry.host}/${REPO}@${digest}`;
    await signerRun('sign', '-ref', ref, '-key', p(`${name}.key`), '-cert', p(`${name}.crt`), '-envelope', 'cose', ...extra);
    return ref;
  }

  async function fastpull(ref: string, dir: string, options: { now?: Date; revocation?: RevocationChecker } = {}): Promise<NotaryVerdict> {
    const parsed = parseReference(ref);
    const digest = validateDigest(parsed.digest!);
    const manifest = await client.fetchManifest(parsed, digest);
    const target = { mediaType: manifest.mediaType!, digest, size: manifest.bytes.length };
    const { signatures, unreadable } = await fetchNotarySignatures(client, parsed, digest);
    // A checker of its own per call unless given: no CRL cached by an earlier case decides this one.
    const revocation = options.revocation ?? new RevocationChecker();
    return verifyNotary(await loadNotaryConfig(dir), {
      repository: `${registry.host}/${REPO}`,
      target,
      signatures,
      unreadable,
      revocation,
      ...(options.now && { now: options.now }),
    });
  }

  /** notation's verdict; run without blocking, since the responder and the CRLs are served from this process. */
  async function notation(ref: string, dir: string): Promise<{ verified: boolean; error?: string }> {
    const r = await signerRun('verify', '-ref', ref, '-config', dir).catch((e: { code?: number; stdout?: string; stderr?: string }) => {
      expect(e.code, e.stderr).toBe(1);
      return { stdout: e.stdout ?? '' };
    });
    return JSON.parse(r.stdout) as { verified: boolean; error?: string };
  }

  async function both(ref: string, dir: string): Promise<{ ours: NotaryVerdict; theirs: { verified: boolean; error?: string } }> {
    const ours = await fastpull(ref, dir);
    const theirs = await notation(ref, dir);
    expect(ours.trusted, `fastpull: ${ours.outcome} ${ours.reason ?? ''}; notation: ${theirs.error ?? 'verified'}`).toBe(theirs.verified);
    return { ours, theirs };
  }

  const revocationCheck = (v: NotaryVerdict) => v.signatures.flatMap((s) => s.checks.filter((c) => c.validation === 'revocation'))[0];

  it.each([
    ['ocsp-good', 'OCSP, answered by the issuer'],
    ['ocsp-delegated', 'OCSP, answered by a responder the issuer delegated to (id-kp-OCSPSigning)'],
    ['crl-good', 'the CRL, which does not list it'],
    ['fallback', 'the CRL, after the OCSP responder it names refuses connections'],
  ])('%s: a certificate that %s says is good is verified (strict)', async (name) => {
    const { ours } = await both(await signed(name), config(name, 'strict'));
    expect(ours.outcome, ours.reason).toBe('verified');
    expect(revocationCheck(ours)).toMatchObject({ ok: true, action: 'enforce' });
  });

  it.each([
    ['ocsp-revoked', /is revoked: OCSP http:\/\/127\.0\.0\.1:\d+\/ocsp\/root: revoked at .* \(keyCompromise\)/],
    ['crl-revoked', /is revoked: CRL http:\/\/127\.0\.0\.1:\d+\/crl\/main: revoked at .* \(superseded\)/],
    ['crl-hold', /is revoked: CRL .*\(certificateHold\)/],
    ['crl-long', /is revoked: CRL .*\/crl\/long: revoked at .* \(cessationOfOperation\)/],
  ])('%s: a revoked certificate is refused under strict and logged under permissive, as the specification and notation do', async (name, message) => {
    const ref = await signed(name);
    const strict = await both(ref, config(name, 'strict'));
    expect(strict.ours.outcome).toBe('invalid');
    expect(revocationCheck(strict.ours)).toMatchObject({ ok: false, action: 'enforce' });
    expect(strict.ours.reason).toMatch(message);
    expect(strict.theirs.error).toMatch(/is revoked/);
    const permissive = await both(ref, config(name, 'permissive'));
    expect(permissive.ours.outcome).toBe('logged');
    expect(permissive.ours.reason).toMatch(message);
  });

  it.each([
    ['ocsp-stranger', /OCSP .*: the answer is not authentic/],
    ['crl-tampered', /CRL .*: the CRL's signature does not verify with the key of .*revocation root/],
    ['crl-stale', /CRL .*: it is stale: its nextUpdate .* is past/],
    ['down', /OCSP http:\/\/127\.0\.0\.1:\d+\/ocsp: .*ECONNREFUSED.*; CRL http:\/\/127\.0\.0\.1:\d+\/root\.crl: .*ECONNREFUSED/],
  ])('%s: no authentic answer leaves the status unknown: refused (strict), logged (permissive)', async (name, message) => {
    const ref = await signed(name);
    const strict = await both(ref, config(name, 'strict'));
    expect(strict.ours.outcome).toBe('invalid');
    expect(strict.ours.reason).toMatch(/revocation status of certificate .* is unknown/);
    expect(strict.ours.reason).toMatch(message);
    expect(strict.theirs.error).toMatch(/revocation status is unknown/);
    const permissive = await both(ref, config(name, 'permissive'));
    expect(permissive.ours.outcome).toBe('logged');
  });

  it('through the CLI: fastpull verify refuses a revoked certificate with SIGNATURE_INVALID and the revocation check in the verdict, and pulls a good one with --notation-config', async () => {
    const revoked = await signed('ocsp-revoked');
    const refused = await runCliAsync(['verify', '--json', '--notation-config', config('cli-revoked', 'strict'), revoked]);
    expect(refused.status, refused.stderr).toBe(1);
    const json = JSON.parse(refused.stdout) as {
      outcome: string;
      error: { code: string };
      verdicts: { checks: { check: string; ok: boolean; message: string }[] }[];
    };
    expect(json).toMatchObject({ outcome: 'refused', error: { code: 'SIGNATURE_INVALID' } });
    expect(json.verdicts[0]!.checks.find((c) => !c.ok)).toMatchObject({
      check: 'revocation',
      message: expect.stringMatching(/CN=ocsp-revoked,.* is revoked: OCSP .*\(keyCompromise\)/) as unknown,
    });
    const good = await signed('crl-good');
    const pulled = await runCliAsync(['pull', '--root', join(work.dir, 'cli-root'), '--notation-config', config('cli-good', 'strict'), good]);
    expect(pulled.status, pulled.stderr).toBe(0);
    expect(pulled.stdout).toMatch(/signature: notation verified by sha256:[0-9a-f]{64}/);
  });

  it('a stale OCSP answer (nextUpdate past) does not count: the status is unknown', async () => {
    const ref = await signed('ocsp-good');
    // The responder's answers are good for 60 minutes: verified two hours on, each is stale.
    const later = await fastpull(ref, config('ocsp-stale', 'strict'), { now: new Date(Date.now() + 2 * 3600_000) });
    expect(later.outcome).toBe('invalid');
    expect(later.reason).toMatch(/OCSP .*: the answer is stale: its nextUpdate .* is past/);
  });

  it('bounds: a CRL over 10 MiB is cut off (status unknown, as notation, which fails to parse it)', async () => {
    const { ours } = await both(await signed('crl-huge'), config('crl-huge', 'strict'));
    expect(ours.outcome).toBe('invalid');
    expect(ours.reason).toMatch(/CRL .*\/crl\/huge: the answer is more than 10485760 bytes/);
  });

  it('stricter than notation on purpose: a redirect from a distribution point is not followed (status unknown); notation follows it', async () => {
    const ref = await signed('crl-moved');
    const dir = config('crl-moved', 'strict');
    const before = hits.get('/crl/main') ?? 0;
    const ours = await fastpull(ref, dir);
    expect(ours.outcome).toBe('invalid');
    expect(ours.reason).toMatch(/CRL .*\/crl\/moved: HTTP status 302 \(a redirect to \/crl\/main, not followed\)/);
    expect(hits.get('/crl/main') ?? 0).toBe(before);
    expect((await notation(ref, dir)).verified).toBe(true);
  });

  it('stricter than notation on purpose: an OCSP answer signed by a certificate the issuer did not delegate OCSP signing to does not count', async () => {
    const ref = await signed('ocsp-noeku');
    const dir = config('ocsp-noeku', 'strict');
    const ours = await fastpull(ref, dir);
    expect(ours.outcome).toBe('invalid');
    expect(ours.reason).toMatch(/responder certificate CN=noeku,.* lacks the OCSP signing extended key usage/);
    expect((await notation(ref, dir)).verified).toBe(true);
  });

  it('a CRL is fetched once and kept until its nextUpdate: a second verification with the same checker does not fetch it again', async () => {
    const ref = await signed('crl-good');
    const dir = config('crl-cache', 'strict');
    const checker = new RevocationChecker();
    const before = hits.get('/crl/main') ?? 0;
    expect((await fastpull(ref, dir, { revocation: checker })).outcome).toBe('verified');
    expect((await fastpull(ref, dir, { revocation: checker })).outcome).toBe('verified');
    expect(hits.get('/crl/main')).toBe(before + 1);
    expect(checker.crls.size).toBe(1);
    // Past the CRL's nextUpdate (a day), the cached one is dropped and a fresh one fetched.
    const later = await fastpull(ref, dir, { revocation: checker, now: new Date(Date.now() + 2 * DAY) });
    expect(hits.get('/crl/main')).toBe(before + 2);
    expect(later.reason).toMatch(/CRL .*: it is stale/);
  });

  it.each(['ocsp-later', 'crl-later'])(
    '%s: a key compromised after the authentic signing time (signing authority scheme) does not revoke the signature; without an authentic time it does',
    async (name) => {
      const authentic = await signed(name, '-scheme', 'notary.x509.signingAuthority');
      const sa = await both(authentic, config(`${name}-sa`, 'strict', undefined, 'signingAuthority'));
      expect(sa.ours.outcome, sa.ours.reason).toBe('verified');
      const plain = await both(await signed(name), config(name, 'strict'));
      expect(plain.ours.outcome).toBe('invalid');
      expect(plain.ours.reason).toMatch(/is revoked: .*\(keyCompromise\)/);
    },
  );

  it('the CRL cache is bounded in entries: with room for one, a second distribution point pushes the first out', async () => {
    const checker = new RevocationChecker({ crls: new CrlCache(1) });
    const main = hits.get('/crl/main') ?? 0;
    const good = await signed('crl-good');
    const dir = config('crl-bound', 'strict');
    expect((await fastpull(good, dir, { revocation: checker })).outcome).toBe('verified');
    expect((await fastpull(await signed('crl-copy'), dir, { revocation: checker })).outcome).toBe('verified');
    expect(checker.crls.size).toBe(1);
    expect((await fastpull(good, dir, { revocation: checker })).outcome).toBe('verified');
    expect(hits.get('/crl/main')).toBe(main + 2);
  });

  it('where revocation is skipped, nothing is asked', async () => {
    const ref = await signed('ocsp-revoked');
    const before = hits.get('/ocsp/root') ?? 0;
    const { ours } = await both(ref, config('skip', 'strict', { revocation: 'skip' }));
    expect(ours.outcome).toBe('verified');
    // notation-signer's own verify asked nothing either: the override reaches both.
    expect(hits.get('/ocsp/root') ?? 0).toBe(before);
  });
});
