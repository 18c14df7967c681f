// The real cosign (built by scripts/peers.sh from its released module) run offline against the
// loopback distribution registry, and small pushes of hand-made signature artifacts (hostile cases).
import { execFile } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { peersPrefix } from './containerd.js';

const run = promisify(execFile);

/** The peers' cosign binary; a missing one fails the tests that need it (it is a required piece). */
export const cosignBin = join(peersPrefix, 'cosign', 'bin', 'cosign');

/** Why cosign cannot run here, or undefined. */
export function cosignMissing(): string | undefined {
  return existsSync(cosignBin) ? undefined : `cosign is not built at ${cosignBin}: run scripts/peers.sh (or set FASTPULL_PEERS)`;
}

/** The password of the test key pairs (cosign encrypts private keys with it). */
export const COSIGN_PASSWORD = 'fastpull-test';

/** Runs cosign in `dir` with the key password and no network beyond loopback; never throws, returns its status and output. */
export async function cosign(dir: string, args: string[]): Promise<{ status: number; out: string }> {
  try {
    const r = await run(cosignBin, args, {
      cwd: dir,
      env: { ...process.env, COSIGN_PASSWORD, COSIGN_EXPERIMENTAL: '0', TUF_ROOT: join(dir, '.sigstore') },
      timeout: 120_000,
      maxBuffer: 8 << 20,
    });
    return { status: 0, out: r.stdout + r.stderr };
  } catch (e) {
    const x = e as { code?: number; stdout?: string; stderr?: string; message: string };
    return { status: typeof x.code === 'number' ? x.code : -1, out: `${x.stdout ?? ''}${x.stderr ?? ''}${x.message}` };
  }
}

/** Makes `<name>.key` and `<name>.pub` in `dir`. */
export async function generateKeyPair(dir: string, name: string): Promise<void> {
  const r = await cosign(dir, ['generate-key-pair', '--output-key-prefix', name]);
  if (r.status !== 0) throw new Error(`cosign generate-key-pair: ${r.out}`);
}

/** Signs `image` (host/repo@digest) with a key, offline: the tag scheme (`sha256-<hex>.sig`) or a Sigstore bundle referrer. */
export async function cosignSign(dir: string, key: string, image: string, format: 'tag' | 'bundle'): Promise<void> {
  const common = ['sign', '--key', key, '--use-signing-config=false', '--tlog-upload=false', '--allow-http-registry', '-y'];
  const args = format === 'tag' ? [...common, '--new-bundle-format=false', image] : [...common, '--new-bundle-format=true', image];
  const r = await cosign(dir, args);
  if (r.status !== 0) throw new Error(`cosign sign ${image}: ${r.out}`);
}

/** `cosign verify` with a key and no transparency log: status 0 when cosign accepts the image. */
export async function cosignVerify(dir: string, pub: string, image: string, format: 'tag' | 'bundle' = 'tag'): Promise<{ status: number; out: string }> {
  return cosign(dir, [
    'verify',
    '--key',
    pub,
    '--insecure-ignore-tlog=true',
    '--allow-http-registry',
    ...(format === 'bundle' ? ['--new-bundle-format=true'] : ['--new-bundle-format=false']),
    image,
  ]);
}

function sha256(b: Buffer): string {
  return `sha256:${createHash('sha256').update(b).digest('hex')}`;
}

/** Pushes a blob (monolithic upload); returns its descriptor fields. */
export async function putBlob(url: string, repo: string, bytes: Buffer): Promise<{ digest: string; size: number }> {
  const digest = sha256(bytes);
  const start = await fetch(`${url}/v2/${repo}/blobs/uploads/`, { method: 'POST' });
  if (start.status !== 202) throw new Error(`start upload: HTTP ${start.status}`);
  const location = new URL(start.headers.get('location')!, url);
  location.searchParams.set('digest', digest);
  const put = await fetch(location, { method: 'PUT', headers: { 'content-type': 'application/octet-stream' }, body: bytes });
  if (put.status !== 201) throw new Error(`finish upload: HTTP ${put.status} ${await put.text()}`);
  return { digest, size: bytes.length };
}

/** Pushes a manifest under `reference` (a tag or its digest); returns its digest. */
export async function putManifest(
  url: string,
  repo: string,
  reference: string,
  doc: unknown,
  mediaType = 'application/vnd.oci.image.manifest.v1+json',
): Promise<string> {
  const bytes = Buffer.from(JSON.stringify(doc));
  const res = await fetch(`${url}/v2/${repo}/manifests/${reference}`, { method: 'PUT', headers: { 'content-type': mediaType }, body: bytes });
  if (res.status !== 201) throw new Error(`push manifest ${repo}:${reference}: HTTP ${res.status} ${await res.text()}`);
  return sha256(bytes);
}

/** Reads a manifest (as JSON) and a blob of the registry. */
export async function getManifest(url: string, repo: string, reference: string): Promise<Record<string, unknown>> {
  const res = await fetch(`${url}/v2/${repo}/manifests/${reference}`, {
    headers: { accept: 'application/vnd.oci.image.manifest.v1+json, application/vnd.oci.image.index.v1+json' },
  });
  if (res.status !== 200) throw new Error(`manifest ${repo}:${reference}: HTTP ${res.status}`);
  return (await res.json()) as Record<string, unknown>;
}

export async function getBlob(url: string, repo: string, digest: string): Promise<Buffer> {
  const res = await fetch(`${url}/v2/${repo}/blobs/${digest}`);
  if (res.status !== 200) throw new Error(`blob ${digest}: HTTP ${res.status}`);
  return Buffer.from(await res.arrayBuffer());
}

/** Bundle media type (the referrer's artifactType and its one layer's media type). */
export const BUNDLE_TYPE = 'application/vnd.dev.sigstore.bundle.v0.3+json';

/** The Sigstore bundle referrers of `digest` as the referrers tag schema lists them (the loopback registry lacks the referrers API). */
export async function bundleReferrers(
  url: string,
  repo: string,
  digest: string,
): Promise<{ manifestDigest: string; manifest: Record<string, unknown>; bundle: Record<string, unknown> }[]> {
  const index = await getManifest(url, repo, digest.replace(':', '-'));
  const out = [];
  for (const d of index.manifests as { digest: string; artifactType?: string }[]) {
    if (d.artifactType !== BUNDLE_TYPE) continue;
    const manifest = await getManifest(url, repo, d.digest);
    const layer = (manifest.layers as { digest: string }[])[0]!;
    out.push({ manifestDigest: d.digest, manifest, bundle: JSON.parse((await getBlob(url, repo, layer.digest)).toString()) as Record<string, unknown> });
  }
  return out;
}

/**
 * Pushes `bundle` as a Sigstore bundle referrer of `subject` laid out as cosign lays it (empty
 * config, one bundle layer), and lists it in the subject's referrers tag (`only`: as its one
 * referrer, the others unlisted); returns its manifest digest.
 */
export async function putBundleReferrer(
  url: string,
  repo: string,
  subject: { digest: string; size: number; mediaType: string },
  bundle: unknown,
  only = false,
): Promise<string> {
  const empty = await putBlob(url, repo, Buffer.from('{}'));
  const layer = await putBlob(url, repo, Buffer.from(JSON.stringify(bundle)));
  const manifest = {
    schemaVersion: 2,
    mediaType: 'application/vnd.oci.image.manifest.v1+json',
    artifactType: BUNDLE_TYPE,
    config: { mediaType: 'application/vnd.oci.empty.v1+json', ...empty },
    layers: [{ mediaType: BUNDLE_TYPE, ...layer }],
    subject,
  };
  const digest = await putManifest(url, repo, sha256(Buffer.from(JSON.stringify(manifest))), manifest);
  const tag = subject.digest.replace(':', '-');
  const listed = only ? undefined : await getManifest(url, repo, tag).catch(() => undefined); // none yet: the tag is made here
  const manifests = (listed?.manifests as object[] | undefined) ?? [];
  const entry = { mediaType: manifest.mediaType, digest, size: Buffer.byteLength(JSON.stringify(manifest)), artifactType: BUNDLE_TYPE };
  await putManifest(
    url,
    repo,
    tag,
    { schemaVersion: 2, mediaType: 'application/vnd.oci.image.index.v1+json', manifests: [...manifests, entry] },
    'application/vnd.oci.image.index.v1+json',
  );
  return digest;
}
