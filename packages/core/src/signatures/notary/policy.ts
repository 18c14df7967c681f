// Loads a notation configuration directory (trustpolicy.oci.json or trustpolicy.json, version 1.0, and
// the trust store under truststore/x509/) and picks the statement that applies to a repository. A policy
// the specification would reject is refused whole, with INVALID_ARGUMENT and the rule it breaks.
import { lstat, readdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { X509Certificate } from 'node:crypto';
import { FastpullError } from '../../errors.js';
import { isSubsetDN, parseDN, type DistinguishedName } from './dn.js';
import { VALIDATIONS, type Action, type Level, type LevelName, type NotaryConfig, type TrustPolicy, type Validation } from './types.js';

/** The policy files notation reads, the first present wins. */
export const POLICY_FILES = ['trustpolicy.oci.json', 'trustpolicy.json'] as const;
/** A trust policy or certificate file larger than this is not a configuration anyone writes by hand. */
export const MAX_CONFIG_FILE_BYTES = 1024 * 1024;
/** Certificates one named trust store may hold. */
export const MAX_STORE_CERTIFICATES = 256;

const STORE_TYPES = ['ca', 'signingAuthority', 'tsa'] as const;
const STORE_NAME = /^[a-zA-Z0-9_.-]+$/;
const DOMAIN = /^(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])(?:\.(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9]))*(?::[0-9]+)?$/;
const REPOSITORY = /^[a-z0-9]+(?:(?:[._]|__|-*)[a-z0-9]+)*(?:\/[a-z0-9]+(?:(?:[._]|__|-*)[a-z0-9]+)*)*$/;

const LEVELS: Readonly<Record<LevelName, Readonly<Record<Validation, Action>>>> = {
  strict: { integrity: 'enforce', authenticity: 'enforce', authenticTimestamp: 'enforce', expiry: 'enforce', revocation: 'enforce' },
  permissive: { integrity: 'enforce', authenticity: 'enforce', authenticTimestamp: 'log', expiry: 'log', revocation: 'log' },
  audit: { integrity: 'enforce', authenticity: 'log', authenticTimestamp: 'log', expiry: 'log', revocation: 'log' },
  skip: { integrity: 'skip', authenticity: 'skip', authenticTimestamp: 'skip', expiry: 'skip', revocation: 'skip' },
};

function invalid(file: string, message: string): FastpullError {
  return new FastpullError('INVALID_ARGUMENT', `trust policy ${file}: ${message}`, { details: { file } });
}

function stringList(v: unknown, what: string, file: string): string[] {
  if (v === undefined || v === null) return [];
  if (!Array.isArray(v) || v.some((s) => typeof s !== 'string')) throw invalid(file, `${what} must be a list of strings`);
  return v as string[];
}

function resolveLevel(sv: unknown, name: string, file: string): Level {
  if (typeof sv !== 'object' || sv === null) throw invalid(file, `statement "${name}" has no signatureVerification`);
  const { level, override } = sv as { level?: unknown; override?: unknown };
  if (typeof level !== 'string' || !(level in LEVELS))
    throw invalid(file, `statement "${name}" has level ${JSON.stringify(level)}: use strict, permissive, audit or skip`);
  const actions: Record<Validation, Action> = { ...LEVELS[level as LevelName] };
  if (override !== undefined && override !== null) {
    if (typeof override !== 'object' || Array.isArray(override)) throw invalid(file, `statement "${name}": override must be an object`);
    const entries = Object.entries(override as Record<string, unknown>);
    if (entries.length > 0 && level === 'skip') throw invalid(file, `statement "${name}": the skip level cannot be overridden`);
    for (const [key, value] of entries) {
      if (!(VALIDATIONS as readonly string[]).includes(key))
        throw invalid(file, `statement "${name}": override names ${JSON.stringify(key)}, not one of ${VALIDATIONS.join(', ')}`);
      if (value !== 'enforce' && value !== 'log' && value !== 'skip')
        throw invalid(file, `statement "${name}": override ${key} is ${JSON.stringify(value)}: use enforce, log or skip`);
      if (key === 'integrity') throw invalid(file, `statement "${name}": integrity cannot be overridden`);
      if (value === 'skip' && key !== 'revocation') throw invalid(file, `statement "${name}": only revocation can be skipped, not ${key}`);
      actions[key as Validation] = value;
    }
  }
  return { name: level as LevelName, actions };
}

function parseIdentities(list: string[], name: string, file: string): TrustPolicy['trustedIdentities'] {
  if (list.includes('*')) {
    if (list.length > 1) throw invalid(file, `statement "${name}": the wildcard identity "*" cannot be combined with others`);
    return '*';
  }
  const dns: DistinguishedName[] = [];
  for (const identity of list) {
    const colon = identity.indexOf(':');
    if (colon < 0) throw invalid(file, `statement "${name}": trusted identity ${JSON.stringify(identity)} has no TYPE: prefix`);
    const type = identity.slice(0, colon);
    const value = identity.slice(colon + 1);
    // Identities of other types are for verification plugins, which fastpull does not run.
    if (type !== 'x509.subject') continue;
    if (value.trim() === '') throw invalid(file, `statement "${name}": trusted identity ${JSON.stringify(identity)} has no value`);
    try {
      dns.push(parseDN(value));
    } catch (e) {
      throw invalid(file, `statement "${name}": ${(e as Error).message}`);
    }
  }
  for (const [i, a] of dns.entries()) {
    for (const [j, b] of dns.entries())
      if (i !== j && isSubsetDN(a, b)) throw invalid(file, `statement "${name}": trusted identities overlap (${list[i]} and ${list[j]})`);
  }
  return dns;
}

function checkScopes(policies: TrustPolicy[], file: string): void {
  const seen = new Set<string>();
  for (const p of policies) {
    if (p.registryScopes.length === 0) throw invalid(file, `statement "${p.name}" has no registryScopes`);
    if (p.registryScopes.includes('*') && p.registryScopes.length > 1)
      throw invalid(file, `statement "${p.name}": the wildcard scope "*" cannot be combined with others`);
    for (const scope of p.registryScopes) {
      if (scope !== '*') {
        const slash = scope.indexOf('/');
        if (slash < 0 || !DOMAIN.test(scope.slice(0, slash)) || !REPOSITORY.test(scope.slice(slash + 1))) {
          throw invalid(file, `registry scope ${JSON.stringify(scope)} is not HOST/REPOSITORY (no scheme, tag or wildcard)`);
        }
      }
      if (seen.has(scope)) throw invalid(file, `registry scope ${JSON.stringify(scope)} is in more than one statement`);
      seen.add(scope);
    }
  }
}

function parseStatement(raw: unknown, file: string): TrustPolicy {
  if (typeof raw !== 'object' || raw === null) throw invalid(file, 'each trustPolicies entry must be an object');
  const s = raw as Record<string, unknown>;
  if (typeof s.name !== 'string' || s.name === '') throw invalid(file, 'a statement has no name');
  const name = s.name;
  const level = resolveLevel(s.signatureVerification, name, file);
  const verifyTimestamp = (s.signatureVerification as { verifyTimestamp?: unknown }).verifyTimestamp ?? 'always';
  if (verifyTimestamp !== 'always' && verifyTimestamp !== 'afterCertExpiry')
    throw invalid(file, `statement "${name}": verifyTimestamp must be always or afterCertExpiry`);
  const trustStores = stringList(s.trustStores, `statement "${name}" trustStores`, file);
  const identities = stringList(s.trustedIdentities, `statement "${name}" trustedIdentities`, file);
  if (level.name === 'skip') {
    if (trustStores.length > 0 || identities.length > 0) throw invalid(file, `statement "${name}" skips verification but names trust stores or identities`);
  } else if (trustStores.length === 0 || identities.length === 0) {
    throw invalid(file, `statement "${name}" needs both trustStores and trustedIdentities`);
  }
  for (const store of trustStores) {
    const [type, storeName, extra] = store.split(':');
    if (extra !== undefined || !(STORE_TYPES as readonly string[]).includes(type ?? '') || !STORE_NAME.test(storeName ?? '')) {
      throw invalid(file, `statement "${name}": trust store ${JSON.stringify(store)} is not TYPE:NAME with TYPE ca, signingAuthority or tsa`);
    }
  }
  const registryScopes = stringList(s.registryScopes, `statement "${name}" registryScopes`, file);
  return { name, registryScopes, level, verifyTimestamp, trustStores, trustedIdentities: parseIdentities(identities, name, file) };
}

/** Parses and validates a trust policy document (the JSON text of trustpolicy.json). */
export function parseTrustPolicy(text: string, file: string): TrustPolicy[] {
  let doc: unknown;
  try {
    doc = JSON.parse(text);
  } catch (e) {
    throw invalid(file, `not JSON: ${(e as Error).message}`);
  }
  if (typeof doc !== 'object' || doc === null) throw invalid(file, 'not a JSON object');
  const { version, trustPolicies } = doc as { version?: unknown; trustPolicies?: unknown };
  if (version !== '1.0') throw invalid(file, `version is ${JSON.stringify(version)}: only "1.0" is supported`);
  if (!Array.isArray(trustPolicies) || trustPolicies.length === 0) throw invalid(file, 'trustPolicies must list at least one statement');
  const policies = trustPolicies.map((p) => parseStatement(p, file));
  const names = new Set<string>();
  for (const p of policies) {
    if (names.has(p.name)) throw invalid(file, `two statements are named "${p.name}"`);
    names.add(p.name);
  }
  checkScopes(policies, file);
  return policies;
}

async function readRegular(path: string, what: string): Promise<Buffer> {
  const st = await lstat(path).catch((e: NodeJS.ErrnoException) => {
    throw new FastpullError('INVALID_ARGUMENT', `${what} ${path}: ${e.code === 'ENOENT' ? 'does not exist' : e.message}`, { cause: e });
  });
  if (!st.isFile()) throw new FastpullError('INVALID_ARGUMENT', `${what} ${path} is not a regular file (symbolic links are not followed)`);
  if (st.size > MAX_CONFIG_FILE_BYTES) throw new FastpullError('INVALID_ARGUMENT', `${what} ${path} is ${st.size} bytes, more than ${MAX_CONFIG_FILE_BYTES}`);
  return readFile(path);
}

/** The DER certificates of a PEM (one or more CERTIFICATE blocks) or DER file. */
export function parseCertificateFile(data: Buffer, path: string): Uint8Array[] {
  const text = data.toString('latin1');
  const blocks = [...text.matchAll(/-----BEGIN CERTIFICATE-----([A-Za-z0-9+/=\s]+)-----END CERTIFICATE-----/g)];
  const ders = blocks.length > 0 ? blocks.map((m) => Buffer.from(m[1]!.replace(/\s+/g, ''), 'base64')) : [data];
  for (const der of ders) {
    try {
      new X509Certificate(der);
    } catch (e) {
      throw new FastpullError('INVALID_ARGUMENT', `trust store certificate ${path} is not a PEM or DER certificate: ${(e as Error).message}`, { cause: e });
    }
  }
  return ders;
}

async function loadStore(dir: string, store: string): Promise<Uint8Array[]> {
  const [type, name] = store.split(':') as [string, string];
  const storeDir = join(dir, 'truststore', 'x509', type, name);
  const st = await lstat(storeDir).catch(() => undefined);
  if (!st?.isDirectory()) throw new FastpullError('INVALID_ARGUMENT', `trust store ${store}: ${storeDir} is not a directory`);
  const certs: Uint8Array[] = [];
  for (const entry of (await readdir(storeDir)).sort()) {
    certs.push(...parseCertificateFile(await readRegular(join(storeDir, entry), `trust store ${store} file`), join(storeDir, entry)));
    if (certs.length > MAX_STORE_CERTIFICATES)
      throw new FastpullError('INVALID_ARGUMENT', `trust store ${store} holds more than ${MAX_STORE_CERTIFICATES} certificates`);
  }
  if (certs.length === 0) throw new FastpullError('INVALID_ARGUMENT', `trust store ${store} (${storeDir}) holds no certificate`);
  return certs;
}

/**
 * Loads a notation configuration directory: its trust policy and every trust store a statement names.
 * @example
 * const config = await loadNotaryConfig('/etc/notation');
 * const verdict = await verifyNotary(config, { repository: 'registry.example/app', target, signatures });
 */
export async function loadNotaryConfig(dir: string): Promise<NotaryConfig> {
  let file: string | undefined;
  for (const name of POLICY_FILES) {
    if (
      await lstat(join(dir, name)).then(
        () => true,
        () => false,
      )
    ) {
      file = join(dir, name);
      break;
    }
  }
  if (file === undefined)
    throw new FastpullError('INVALID_ARGUMENT', `notation configuration ${dir} has neither ${POLICY_FILES.join(' nor ')}`, { details: { dir } });
  const policies = parseTrustPolicy((await readRegular(file, 'trust policy')).toString('utf8'), file);
  const stores = new Map<string, Uint8Array[]>();
  for (const store of new Set(policies.flatMap((p) => p.trustStores))) stores.set(store, await loadStore(dir, store));
  return { dir, file, policies, stores };
}

/** The statement for a repository (`HOST/PATH`): the one naming it, else the wildcard one, else none. */
export function applicablePolicy(config: Pick<NotaryConfig, 'policies'>, repository: string): TrustPolicy | undefined {
  return config.policies.find((p) => p.registryScopes.includes(repository)) ?? config.policies.find((p) => p.registryScopes.includes('*'));
}
