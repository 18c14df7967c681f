// A signature policy through containerd's CRI: fastpulld with `--signature-policy` (a containers
// policy.json requiring a cosign key signature for one repository prefix) as containerd's
// snapshotter, images signed by the real cosign (key pair, tag scheme) in the distribution registry,
// pulled with the pinned crictl. An unsigned image fails PullImage with fastpull's refusal in the
// message kubelet shows (ErrImagePull) and containerd does not fall back to its own pull: no layer of
// it reaches containerd (its content store, the registry's access log) or a committed record. A signed
// image pulls on the fast path, containerd fetching no layer itself; an unsigned image over the
// signed one's lower layers is still refused; an image the policy does not cover pulls as before.
// The same daemon also has `--notation-config` (a trust policy for another repository prefix, its
// trust store holding a root made here): an image signed by notation's own libraries (the
// notation-signer peer, as Notary Project signatures stored as referrers) pulls on the fast path, an
// unsigned one under that scope is refused the same way.
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { chainIDs, type Digest } from '@fastpull/core';
import { type BuiltImage, type DistributionRegistry, findDistributionBinary, lacks, pushImage, startDistribution } from '@fastpull/core/testing';
import { cosignMissing, cosignSign, generateKeyPair } from './cosign.js';
import {
  busyboxImage,
  containerdUnavailable,
  isProbeRecord,
  peersPrefix,
  release,
  run,
  startContainerd,
  waitForSnapshotter,
  type PrivateContainerd,
} from './containerd.js';
import { overlayUnavailable, peerBinary, startDaemon, tempDir, type RunningDaemon } from './helpers.js';
import { snapshotsClient, type SnapshotsClient } from './snapshotter-client.js';

const CRI_NAMESPACE = 'k8s.io';
const crictlBin = join(peersPrefix, 'crictl', 'bin', 'crictl');
const work = tempDir('cri-sig');
const snapSocket = join(work.dir, 'snapshotter.sock');

const notationSigner = peerBinary('notation-signer', 'notation-signer') ?? 'notation-signer';

const reason = containerdUnavailable() ?? overlayUnavailable();
if (reason) console.warn(`skipping the CRI signature tests: ${reason}`);
// The signers, the registry and crictl are required pieces: missing, they fail the file.
if (!reason) {
  const missing =
    (findDistributionBinary() ? undefined : 'docker-registry is not installed') ??
    cosignMissing() ??
    (existsSync(crictlBin) ? undefined : `${crictlBin} not found (bash scripts/peers.sh crictl)`) ??
    (existsSync(notationSigner) ? undefined : `${notationSigner} not found (bash scripts/peers.sh notation-signer)`);
  if (missing) throw new Error(`the CRI signature tests need their peers: ${missing}`);
}

describe.skipIf(lacks('containerd', reason))(`a signature policy through CRI (containerd ${release.name})`, () => {
  let registry: DistributionRegistry;
  let daemon: RunningDaemon;
  let containerd: PrivateContainerd;
  let client: SnapshotsClient;
  let signed: BuiltImage;
  let unsigned: BuiltImage;
  let signedDigest: Digest;
  const crictlConfig = join(work.dir, 'crictl.yaml');

  /** crictl's status and output; never throws. */
  const crictl = (args: string[]) => run(crictlBin, ['--config', crictlConfig, ...args]);
  const ctr = async (args: string[]): Promise<string> => {
    const r = await containerd.ctr(args, { namespace: CRI_NAMESPACE });
    if (r.status !== 0) throw new Error(`ctr ${args.join(' ')} exited ${r.status}: ${r.stderr}`);
    return r.stdout;
  };
  /** Blob GETs the registry served to containerd (its User-Agent), by digest. */
  const containerdBlobGets = (): string[] =>
    registry
      .accessLog()
      .filter((l) => /"GET \/v2\/[^ ]+\/blobs\/sha256:[0-9a-f]{64} /.test(l) && /"containerd\//.test(l))
      .map((l) => /blobs\/(sha256:[0-9a-f]{64})/.exec(l)![1]!);
  const layerGets = (image: BuiltImage, from: readonly string[]): string[] => from.filter((d) => image.layers.some((l) => l.digest === d));
  /** notation-signer's output; a failure fails the setup with its message. */
  const notation = (args: string[]): string => {
    const r = spawnSync(notationSigner, args, { encoding: 'utf8' });
    if (r.status !== 0) throw new Error(`notation-signer ${args.join(' ')}: ${r.stderr}`);
    return r.stdout;
  };
  let notarySigned: BuiltImage;
  let notaryUnsigned: BuiltImage;
  let notaryDigest: Digest;

  /** A notation configuration directory whose one statement requires signatures under `scope`, from `root`. */
  const notationConfig = (scope: string, root: string): string => {
    const dir = join(work.dir, 'notation');
    const store = join(dir, 'truststore', 'x509', 'ca', 'cri');
    mkdirSync(store, { recursive: true });
    writeFileSync(join(store, 'root.crt'), readFileSync(`${root}.crt`));
    const statement = { name: 'cri', registryScopes: [scope], signatureVerification: { level: 'strict' }, trustStores: ['ca:cri'], trustedIdentities: ['*'] };
    writeFileSync(join(dir, 'trustpolicy.json'), JSON.stringify({ version: '1.0', trustPolicies: [statement] }));
    return dir;
  };

  beforeAll(async () => {
    registry = await startDistribution({ dir: join(work.dir, 'registry'), accessLog: true });
    signed = await busyboxImage();
    unsigned = await busyboxImage({ variant: 'unsigned\n' });
    signedDigest = await pushImage(registry.url, 'sig/signed', 'v1', signed);
    await pushImage(registry.url, 'sig/unsigned', 'v1', unsigned);
    await pushImage(registry.url, 'open/unsigned', 'v1', await busyboxImage({ variant: 'open\n' }));
    await generateKeyPair(work.dir, 'good');
    await cosignSign(work.dir, 'good.key', `${registry.host}/sig/signed@${signedDigest}`, 'tag');
    // Notary Project: a root and a code-signing leaf, one image signed by notation's libraries.
    notarySigned = await busyboxImage({ variant: 'notary signed\n' });
    notaryUnsigned = await busyboxImage({ variant: 'notary unsigned\n' });
    notaryDigest = await pushImage(registry.url, 'notary/signed', 'v1', notarySigned);
    const pki = join(work.dir, 'pki');
    mkdirSync(pki);
    notation(['cert', '-out', join(pki, 'root'), '-is-ca', '-subject', 'CN=root,O=fastpull,ST=WA,C=US']);
    notation(['cert', '-out', join(pki, 'leaf'), '-ca', join(pki, 'root'), '-subject', 'CN=signer,O=fastpull,ST=WA,C=US']);
    notation(['sign', '-ref', `${registry.host}/notary/signed@${notaryDigest}`, '-key', join(pki, 'leaf.key'), '-cert', join(pki, 'leaf.crt')]);
    const notationDir = notationConfig(`${registry.host}/notary/signed`, join(pki, 'root'));
    const policy = join(work.dir, 'policy.json');
    writeFileSync(
      policy,
      JSON.stringify({
        default: [{ type: 'insecureAcceptAnything' }],
        transports: {
          docker: { [`${registry.host}/sig`]: [{ type: 'sigstoreSigned', keyPath: join(work.dir, 'good.pub'), signedIdentity: { type: 'matchRepository' } }] },
        },
      }),
    );
    daemon = startDaemon([
      '--socket',
      join(work.dir, 'fastpulld.sock'),
      '--snapshotter-socket',
      snapSocket,
      '--root',
      join(work.dir, 'fastpull-root'),
      '--signature-policy',
      policy,
      '--notation-config',
      notationDir,
      '--log-level',
      'debug',
    ]);
    await daemon.waitLog((l) => l.msg === 'fastpulld serving');
    containerd = await startContainerd(join(work.dir, 'containerd'), snapSocket, { snapshotter: 'fastpull', disableSnapshotAnnotations: false });
    await waitForSnapshotter(containerd);
    const endpoint = `unix://${containerd.address}`;
    writeFileSync(crictlConfig, `runtime-endpoint: ${endpoint}\nimage-endpoint: ${endpoint}\ntimeout: 120\n`);
    client = snapshotsClient(snapSocket);
  });
  afterAll(async () => {
    client?.close();
    await containerd?.stop();
    if (daemon && daemon.proc.exitCode === null) {
      daemon.proc.kill('SIGTERM');
      await daemon.exited;
    }
    await registry?.stop();
    work.cleanup();
  });

  it('an unsigned image under the policy: crictl pull fails with the refusal, and containerd does not pull it itself', async () => {
    const ref = `${registry.host}/sig/unsigned:v1`;
    const r = await crictl(['pull', ref]);
    expect(r.status).not.toBe(0);
    expect(r.stderr).toMatch(/fastpull: signature check of .*sig\/unsigned:v1 \(sha256:[0-9a-f]{64}\) refused it: sigstore: no cosign signature/);
    const refusal = await daemon.waitLog((l) => l.msg === 'fast path failed under a signature policy; the Prepare fails');
    expect(refusal).toMatchObject({ code: 'SIGNATURE_MISSING', image: ref });
    await daemon.waitLog((l) => l.method === 'Snapshots.Prepare' && l.code === 'SIGNATURE_MISSING');
    expect(daemon.logs.filter((l) => l.msg === 'fast path failed; containerd unpacks the layer itself')).toEqual([]);
    expect(daemon.logs.filter((l) => l.msg === 'layer recorded for containerd')).toEqual([]);
    // Nothing of it in containerd: no image, no layer in its content store or fetched by it, no snapshot.
    expect((await crictl(['inspecti', ref])).status).not.toBe(0);
    const content = await ctr(['content', 'ls', '-q']);
    for (const l of unsigned.layers) expect(content).not.toContain(l.digest);
    expect(layerGets(unsigned, containerdBlobGets())).toEqual([]);
    expect((await client.list(['kind==committed'])).filter((s) => !isProbeRecord(s.name))).toEqual([]);
  });

  it('a signed image pulls on the fast path, containerd fetching no layer itself', async () => {
    const ref = `${registry.host}/sig/signed:v1`;
    const r = await crictl(['pull', ref]);
    expect(r.status, r.stderr).toBe(0);
    expect(r.stdout).toContain(signed.configDigest);
    const chains = chainIDs(signed.layers.map((l) => l.diffID));
    const recorded = await Promise.all(chains.map((c) => daemon.waitLog((l) => l.msg === 'layer recorded for containerd' && l.target === c)));
    expect(recorded.map((l) => l.how)).toEqual(['verified', 'verified', 'verified']);
    const pulled = await daemon.waitLog((l) => l.event === 'pull' && l.result === 'ok' && l.image === ref);
    expect(pulled.manifest).toBe(signedDigest);
    // One pull (and one verification, logged once) answered every layer's Prepare.
    expect(daemon.logs.filter((l) => l.event === 'pull' && l.image === ref)).toHaveLength(1);
    expect(daemon.logs.filter((l) => l.event === 'signature' && l.image === ref)).toEqual([
      expect.objectContaining({ outcome: 'verified', manifest: signedDigest }),
    ]);
    const content = await ctr(['content', 'ls', '-q']);
    expect(content).toContain(signed.configDigest);
    for (const l of signed.layers) expect(content).not.toContain(l.digest);
    expect(layerGets(signed, containerdBlobGets())).toEqual([]);
    // containerd's own fetches are in the log (the config), so the filter above sees them.
    expect(containerdBlobGets()).toContain(signed.configDigest);
    // The registry served the layers, to fastpull.
    const fastpullGets = registry.accessLog().filter((l) => /"fastpull\//.test(l));
    for (const l of signed.layers) expect(fastpullGets.some((g) => g.includes(l.digest))).toBe(true);
  });

  it("an unsigned image over the signed one's layers is still refused: its own top layer's Prepare waits for its verdict", async () => {
    const ref = `${registry.host}/sig/unsigned:v1`;
    const before = daemon.logs.length;
    const r = await crictl(['pull', ref]);
    expect(r.status).not.toBe(0);
    expect(r.stderr).toContain('refused it: sigstore: no cosign signature');
    await daemon.waitLog((l) => l.method === 'Snapshots.Prepare' && l.code === 'SIGNATURE_MISSING' && daemon.logs.indexOf(l) >= before);
    const top = chainIDs(unsigned.layers.map((l) => l.diffID)).at(-1)!;
    expect((await client.list(['kind==committed'])).some((s) => s.labels['containerd.io/snapshot.ref'] === top)).toBe(false);
    expect(layerGets(unsigned, containerdBlobGets())).toEqual([]);
  });

  it('an image no scope of the policy covers pulls as before (unverified)', async () => {
    const ref = `${registry.host}/open/unsigned:v1`;
    const r = await crictl(['pull', ref]);
    expect(r.status, r.stderr).toBe(0);
    const pulled = await daemon.waitLog(
      (l) => l.event === 'pull' && l.result === 'ok' && typeof l.image === 'string' && l.image.startsWith(`${registry.host}/open/unsigned@`),
    );
    expect(pulled.image).toContain('@sha256:');
  });
  it('Notary Project: an image signed by notation pulls on the fast path, verified, containerd fetching no layer itself', async () => {
    const ref = `${registry.host}/notary/signed:v1`;
    const r = await crictl(['pull', ref]);
    expect(r.status, r.stderr).toBe(0);
    const pulled = await daemon.waitLog((l) => l.event === 'pull' && l.result === 'ok' && l.image === ref);
    expect(pulled.manifest).toBe(notaryDigest);
    expect(daemon.logs.filter((l) => l.event === 'signature' && l.image === ref)).toEqual([
      expect.objectContaining({ outcome: 'verified', manifest: notaryDigest }),
    ]);
    const content = await ctr(['content', 'ls', '-q']);
    for (const l of notarySigned.layers) expect(content).not.toContain(l.digest);
    expect(layerGets(notarySigned, containerdBlobGets())).toEqual([]);
  });

  it("Notary Project: an unsigned image under the trust policy's scope is refused, and containerd does not pull it itself", async () => {
    // Pushed under the signed one's repository with another tag: in scope, with no signature.
    const digest = await pushImage(registry.url, 'notary/signed', 'unsigned', notaryUnsigned);
    expect(digest).not.toBe(notaryDigest);
    const ref = `${registry.host}/notary/signed:unsigned`;
    const before = daemon.logs.length;
    const r = await crictl(['pull', ref]);
    expect(r.status).not.toBe(0);
    expect(r.stderr).toMatch(new RegExp(`fastpull: signature check of .*notary/signed:unsigned \\(${digest}\\) refused it: notation`));
    await daemon.waitLog((l) => l.method === 'Snapshots.Prepare' && l.code === 'SIGNATURE_MISSING' && daemon.logs.indexOf(l) >= before);
    const top = chainIDs(notaryUnsigned.layers.map((l) => l.diffID)).at(-1)!;
    expect((await client.list(['kind==committed'])).some((s) => s.labels['containerd.io/snapshot.ref'] === top)).toBe(false);
    expect((await crictl(['inspecti', ref])).status).not.toBe(0);
  });
});
