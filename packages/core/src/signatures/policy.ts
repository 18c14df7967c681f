// containers' policy.json (containers-policy.json(5)), the file podman, CRI-O and skopeo read: which
// requirements apply to an image of the `docker` transport, by the most specific scope that names
// it. Parsing and scope lookup only; the files a requirement names (keys, CAs) are read here too,
// once, when the policy loads, so that a pull never meets a policy it cannot use.
import { readFileSync } from 'node:fs';
import { createPublicKey, X509Certificate, type KeyObject } from 'node:crypto';
import { dirname, isAbsolute, resolve } from 'node:path';
import { FastpullError } from '../errors.js';
import type { Reference } from '../oci/reference.js';

/** How the signed identity must relate to the reference pulled (policy.json's `signedIdentity`). */
export type SignedIdentity =
  | { readonly type: 'matchExact' }
  | { readonly type: 'matchRepoDigestOrExact' }
  | { readonly type: 'matchRepository' }
  | { readonly type: 'exactReference'; readonly dockerReference: string }
  | { readonly type: 'exactRepository'; readonly dockerRepository: string }
  | { readonly type: 'remapIdentity'; readonly prefix: string; readonly signedPrefix: string };

/** A Fulcio (keyless) requirement: the CA certificates and the identity the certificate must carry. */
export interface FulcioRequirement {
  readonly ca: readonly X509Certificate[];
  readonly oidcIssuer: string;
  readonly subjectEmail: string;
}

/** A `sigstoreSigned` requirement with its keys loaded. */
export interface SigstoreRequirement {
  readonly type: 'sigstoreSigned';
  /** Public keys, any of which may have made the signature; empty when `fulcio` is given. */
  readonly keys: readonly KeyObject[];
  readonly fulcio?: FulcioRequirement;
  /** Rekor's public keys: when given, a signature must carry proof of its inclusion in the log. */
  readonly rekorKeys: readonly KeyObject[];
  readonly signedIdentity: SignedIdentity;
}

/** One requirement of a scope: all of a scope's requirements must be met. */
export type PolicyRequirement = { readonly type: 'insecureAcceptAnything' } | { readonly type: 'reject' } | { readonly type: 'signedBy' } | SigstoreRequirement;

/** A loaded policy: the default requirements and the docker transport's scopes. */
export interface ContainersPolicy {
  /** The file it was read from, for messages. */
  readonly path: string;
  readonly default: readonly PolicyRequirement[];
  readonly docker: ReadonlyMap<string, readonly PolicyRequirement[]>;
}

/** The requirements that apply to a reference, and the scope they came from (undefined: `default`). */
export interface AppliedPolicy {
  readonly scope: string | undefined;
  readonly requirements: readonly PolicyRequirement[];
}

function bad(path: string, what: string): FastpullError {
  return new FastpullError('INVALID_ARGUMENT', `signature policy ${path}: ${what}`);
}

/**
 * Reads and checks a containers policy.json, loading every key and CA it names (paths relative to the
 * policy file's directory). INVALID_ARGUMENT naming the file and the entry for anything it cannot use.
 */
export function loadContainersPolicy(path: string): ContainersPolicy {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (e) {
    throw new FastpullError('INVALID_ARGUMENT', `signature policy ${path}: ${(e as Error).message}`, { cause: e });
  }
  return parseContainersPolicy(text, path);
}

/** {@link loadContainersPolicy} of text already read. */
export function parseContainersPolicy(text: string, path: string): ContainersPolicy {
  let doc: unknown;
  try {
    doc = JSON.parse(text);
  } catch (e) {
    throw bad(path, `not JSON: ${(e as Error).message}`);
  }
  if (typeof doc !== 'object' || doc === null || Array.isArray(doc)) throw bad(path, 'want a JSON object');
  const o = doc as Record<string, unknown>;
  const files = new FileReader(path);
  const def = requirements(o.default, 'default', files);
  const docker = new Map<string, readonly PolicyRequirement[]>();
  const transports = o.transports;
  if (transports !== undefined) {
    if (typeof transports !== 'object' || transports === null) throw bad(path, 'transports: want an object');
    const scopes = (transports as Record<string, unknown>).docker;
    if (scopes !== undefined) {
      if (typeof scopes !== 'object' || scopes === null) throw bad(path, 'transports.docker: want an object');
      for (const [scope, reqs] of Object.entries(scopes)) docker.set(scope, requirements(reqs, `transports.docker[${JSON.stringify(scope)}]`, files));
    }
  }
  return { path, default: def, docker };
}

/** Reads the files a policy names, relative to its directory, each named in errors by its entry. */
class FileReader {
  constructor(readonly path: string) {}
  read(file: string, what: string): string {
    const full = isAbsolute(file) ? file : resolve(dirname(this.path), file);
    try {
      return readFileSync(full, 'utf8');
    } catch (e) {
      throw bad(this.path, `${what} ${full}: ${(e as Error).message}`);
    }
  }
}

function requirements(v: unknown, what: string, files: FileReader): PolicyRequirement[] {
  if (!Array.isArray(v) || v.length === 0) throw bad(files.path, `${what}: want a non-empty list of requirements`);
  return v.map((r, i) => requirement(r, `${what}[${i}]`, files));
}

function requirement(v: unknown, what: string, files: FileReader): PolicyRequirement {
  if (typeof v !== 'object' || v === null) throw bad(files.path, `${what}: want an object`);
  const r = v as Record<string, unknown>;
  switch (r.type) {
    case 'insecureAcceptAnything':
    case 'reject':
    case 'signedBy':
      return { type: r.type };
    case 'sigstoreSigned':
      return sigstoreRequirement(r, what, files);
    default:
      throw bad(files.path, `${what}: unknown requirement type ${JSON.stringify(r.type)}`);
  }
}

function sigstoreRequirement(r: Record<string, unknown>, what: string, files: FileReader): SigstoreRequirement {
  const pems = [
    ...strings(r.keyPath, `${what}.keyPath`, files).map((p) => files.read(p, `${what}.keyPath`)),
    ...strings(r.keyPaths, `${what}.keyPaths`, files, true).map((p) => files.read(p, `${what}.keyPaths`)),
    ...strings(r.keyData, `${what}.keyData`, files).map((d) => base64Text(d, `${what}.keyData`, files)),
    ...strings(r.keyDatas, `${what}.keyDatas`, files, true).map((d) => base64Text(d, `${what}.keyDatas`, files)),
  ];
  const fulcio = r.fulcio === undefined ? undefined : fulcioRequirement(r.fulcio, `${what}.fulcio`, files);
  if (pems.length > 0 === (fulcio !== undefined)) throw bad(files.path, `${what}: want exactly one of keyPath, keyPaths, keyData, keyDatas or fulcio`);
  const rekor = [
    ...strings(r.rekorPublicKeyPath, `${what}.rekorPublicKeyPath`, files).map((p) => files.read(p, `${what}.rekorPublicKeyPath`)),
    ...strings(r.rekorPublicKeyPaths, `${what}.rekorPublicKeyPaths`, files, true).map((p) => files.read(p, `${what}.rekorPublicKeyPaths`)),
    ...strings(r.rekorPublicKeyData, `${what}.rekorPublicKeyData`, files).map((d) => base64Text(d, `${what}.rekorPublicKeyData`, files)),
    ...strings(r.rekorPublicKeyDatas, `${what}.rekorPublicKeyDatas`, files, true).map((d) => base64Text(d, `${what}.rekorPublicKeyDatas`, files)),
  ];
  if (fulcio && rekor.length === 0) throw bad(files.path, `${what}: fulcio needs a rekorPublicKeyPath or rekorPublicKeyData (as containers/image asks)`);
  return {
    type: 'sigstoreSigned',
    keys: pems.map((p) => publicKey(p, `${what} key`, files)),
    ...(fulcio ? { fulcio } : {}),
    rekorKeys: rekor.map((p) => publicKey(p, `${what} Rekor key`, files)),
    signedIdentity: signedIdentity(r.signedIdentity, `${what}.signedIdentity`, files),
  };
}

function fulcioRequirement(v: unknown, what: string, files: FileReader): FulcioRequirement {
  if (typeof v !== 'object' || v === null) throw bad(files.path, `${what}: want an object`);
  const f = v as Record<string, unknown>;
  const pem = [
    ...strings(f.caPath, `${what}.caPath`, files).map((p) => files.read(p, `${what}.caPath`)),
    ...strings(f.caData, `${what}.caData`, files).map((d) => base64Text(d, `${what}.caData`, files)),
  ];
  if (pem.length !== 1) throw bad(files.path, `${what}: want exactly one of caPath or caData`);
  const ca = pemBlocks(pem[0]!, 'CERTIFICATE').map((b) => {
    try {
      return new X509Certificate(b);
    } catch (e) {
      throw bad(files.path, `${what}: a CA certificate does not parse: ${(e as Error).message}`);
    }
  });
  if (ca.length === 0) throw bad(files.path, `${what}: no PEM certificate in the CA`);
  if (typeof f.oidcIssuer !== 'string' || f.oidcIssuer === '') throw bad(files.path, `${what}.oidcIssuer: want the OIDC issuer URL`);
  if (typeof f.subjectEmail !== 'string' || f.subjectEmail === '') throw bad(files.path, `${what}.subjectEmail: want the signer's email`);
  return { ca, oidcIssuer: f.oidcIssuer, subjectEmail: f.subjectEmail };
}

function signedIdentity(v: unknown, what: string, files: FileReader): SignedIdentity {
  // containers/image's default for sigstoreSigned.
  if (v === undefined) return { type: 'matchRepoDigestOrExact' };
  if (typeof v !== 'object' || v === null) throw bad(files.path, `${what}: want an object`);
  const s = v as Record<string, unknown>;
  const str = (k: string): string => {
    if (typeof s[k] !== 'string' || s[k] === '') throw bad(files.path, `${what}.${k}: want a string`);
    return s[k];
  };
  switch (s.type) {
    case 'matchExact':
    case 'matchRepoDigestOrExact':
    case 'matchRepository':
      return { type: s.type };
    case 'exactReference':
      return { type: 'exactReference', dockerReference: str('dockerReference') };
    case 'exactRepository':
      return { type: 'exactRepository', dockerRepository: str('dockerRepository') };
    case 'remapIdentity':
      return { type: 'remapIdentity', prefix: str('prefix'), signedPrefix: str('signedPrefix') };
    default:
      throw bad(files.path, `${what}: unknown type ${JSON.stringify(s.type)}`);
  }
}

function strings(v: unknown, what: string, files: FileReader, list = false): string[] {
  if (v === undefined) return [];
  if (!list && typeof v === 'string' && v !== '') return [v];
  if (list && Array.isArray(v) && v.length > 0 && v.every((x) => typeof x === 'string' && x !== '')) return v as string[];
  throw bad(files.path, `${what}: want ${list ? 'a non-empty list of strings' : 'a string'}`);
}

function base64Text(v: string, what: string, files: FileReader): string {
  if (!/^[A-Za-z0-9+/=\s]+$/.test(v)) throw bad(files.path, `${what}: want base64`);
  return Buffer.from(v, 'base64').toString('utf8');
}

function publicKey(pem: string, what: string, files: FileReader): KeyObject {
  try {
    return createPublicKey(pem);
  } catch (e) {
    throw bad(files.path, `${what}: not a PEM public key: ${(e as Error).message}`);
  }
}

/** The PEM blocks of one label in a text. */
export function pemBlocks(text: string, label: string): string[] {
  const re = new RegExp(`-----BEGIN ${label}-----[\\s\\S]*?-----END ${label}-----`, 'g');
  return text.match(re) ?? [];
}

/**
 * The scopes of a reference, most specific first, as containers/image's docker transport lists them:
 * `host/repo:tag` or `host/repo@digest`, `host/repo`, each parent namespace, `host`, then
 * `*.domain` wildcards of the host's parent domains.
 */
export function policyScopes(ref: Reference): string[] {
  const repo = `${ref.registry}/${ref.repository}`;
  const out: string[] = [];
  if (ref.digest) out.push(`${repo}@${ref.digest}`);
  if (ref.tag) out.push(`${repo}:${ref.tag}`);
  const parts = repo.split('/');
  for (let n = parts.length; n >= 1; n--) out.push(parts.slice(0, n).join('/'));
  const host = ref.registry.replace(/:\d+$/, '');
  if (!/^[\d.]+$/.test(host) && !host.startsWith('[')) {
    const labels = host.split('.');
    for (let i = 1; i < labels.length; i++) out.push(`*.${labels.slice(i).join('.')}`);
  }
  return out;
}

/** The requirements for `ref`: the most specific docker scope naming it, else the transport's "" scope, else `default`. */
export function containersPolicyFor(policy: ContainersPolicy, ref: Reference): AppliedPolicy {
  for (const scope of [...policyScopes(ref), '']) {
    const found = policy.docker.get(scope);
    if (found) return { scope, requirements: found };
  }
  return { scope: undefined, requirements: policy.default };
}
