// Trust policy documents as the Notary Project specification defines them: what is accepted, and a
// clear INVALID_ARGUMENT naming the rule for each document it rejects; the statement a repository gets.
import { mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { FastpullError } from '../../errors.js';
import { applicablePolicy, loadNotaryConfig, parseTrustPolicy } from './policy.js';

const statement = (over: Record<string, unknown> = {}) => ({
  name: 'p',
  registryScopes: ['registry.example/app'],
  signatureVerification: { level: 'strict' },
  trustStores: ['ca:acme'],
  trustedIdentities: ['*'],
  ...over,
});
const doc = (...statements: object[]) => JSON.stringify({ version: '1.0', trustPolicies: statements });

function rejects(text: string, message: RegExp): void {
  let thrown: unknown;
  try {
    parseTrustPolicy(text, 'trustpolicy.json');
  } catch (e) {
    thrown = e;
  }
  expect(thrown).toBeInstanceOf(FastpullError);
  expect((thrown as FastpullError).code).toBe('INVALID_ARGUMENT');
  expect((thrown as FastpullError).message).toMatch(message);
}

describe('trust policy documents', () => {
  it('resolves each level to the actions of the specification table, with overrides', () => {
    const [strict, permissive, audit, custom] = parseTrustPolicy(
      doc(
        statement({ name: 'a', registryScopes: ['r.example/a'] }),
        statement({ name: 'b', registryScopes: ['r.example/b'], signatureVerification: { level: 'permissive' } }),
        statement({ name: 'c', registryScopes: ['r.example/c'], signatureVerification: { level: 'audit' } }),
        statement({ name: 'd', registryScopes: ['*'], signatureVerification: { level: 'strict', override: { revocation: 'skip', expiry: 'log' } } }),
      ),
      'f',
    );
    expect(strict!.level.actions).toEqual({
      integrity: 'enforce',
      authenticity: 'enforce',
      authenticTimestamp: 'enforce',
      expiry: 'enforce',
      revocation: 'enforce',
    });
    expect(permissive!.level.actions).toEqual({ integrity: 'enforce', authenticity: 'enforce', authenticTimestamp: 'log', expiry: 'log', revocation: 'log' });
    expect(audit!.level.actions).toEqual({ integrity: 'enforce', authenticity: 'log', authenticTimestamp: 'log', expiry: 'log', revocation: 'log' });
    expect(custom!.level.actions).toEqual({ integrity: 'enforce', authenticity: 'enforce', authenticTimestamp: 'enforce', expiry: 'log', revocation: 'skip' });
  });

  it('parses x509.subject identities (escapes, S for ST) and picks the exact scope before the wildcard', () => {
    const policies = parseTrustPolicy(
      doc(
        statement({ trustedIdentities: ['x509.subject: C=US, S=WA, O=Acme\\, Inc., OU=build'] }),
        statement({ name: 'all', registryScopes: ['*'], signatureVerification: { level: 'audit' } }),
      ),
      'f',
    );
    const ids = policies[0]!.trustedIdentities as ReadonlyMap<string, string>[];
    expect([...ids[0]!]).toEqual([
      ['C', 'US'],
      ['ST', 'WA'],
      ['O', 'Acme, Inc.'],
      ['OU', 'build'],
    ]);
    expect(applicablePolicy({ policies }, 'registry.example/app')?.name).toBe('p');
    expect(applicablePolicy({ policies }, 'registry.example/other')?.name).toBe('all');
    expect(applicablePolicy({ policies: policies.slice(0, 1) }, 'registry.example/other')).toBeUndefined();
  });

  it.each([
    ['not JSON', '{', /not JSON/],
    ['another version', JSON.stringify({ version: '2.0', trustPolicies: [statement()] }), /only "1.0"/],
    ['no statements', doc(), /at least one statement/],
    ['an unknown level', doc(statement({ signatureVerification: { level: 'lenient' } })), /level "lenient"/],
    ['integrity overridden', doc(statement({ signatureVerification: { level: 'strict', override: { integrity: 'log' } } })), /integrity cannot be overridden/],
    [
      'authenticity skipped',
      doc(statement({ signatureVerification: { level: 'strict', override: { authenticity: 'skip' } } })),
      /only revocation can be skipped/,
    ],
    [
      'skip overridden',
      doc(statement({ signatureVerification: { level: 'skip', override: { revocation: 'log' } }, trustStores: [], trustedIdentities: [] })),
      /skip level cannot be overridden/,
    ],
    ['skip with a trust store', doc(statement({ signatureVerification: { level: 'skip' } })), /skips verification but names trust stores/],
    ['no trust store', doc(statement({ trustStores: [] })), /needs both trustStores and trustedIdentities/],
    ['a bad trust store type', doc(statement({ trustStores: ['x509:acme'] })), /TYPE:NAME/],
    ['a trust store name with a slash', doc(statement({ trustStores: ['ca:../etc'] })), /TYPE:NAME/],
    ['a wildcard scope with others', doc(statement({ registryScopes: ['*', 'r.example/a'] })), /wildcard scope/],
    ['a scope with a tag', doc(statement({ registryScopes: ['r.example/app:1.0'] })), /not HOST\/REPOSITORY/],
    ['a scope in two statements', doc(statement(), statement({ name: 'q' })), /in more than one statement/],
    ['two statements of one name', doc(statement(), statement({ registryScopes: ['r.example/b'] })), /two statements are named "p"/],
    ['an identity without C, ST and O', doc(statement({ trustedIdentities: ['x509.subject: CN=me, O=Acme'] })), /no C attribute/],
    [
      'overlapping identities',
      doc(statement({ trustedIdentities: ['x509.subject: C=US, ST=WA, O=Acme', 'x509.subject: C=US, ST=WA, O=Acme, OU=x'] })),
      /overlap/,
    ],
    ['a wildcard identity with others', doc(statement({ trustedIdentities: ['*', 'x509.subject: C=US, ST=WA, O=Acme'] })), /wildcard identity/],
    ['a multi-valued RDN', doc(statement({ trustedIdentities: ['x509.subject: C=US+ST=WA, O=Acme'] })), /multi-valued/],
  ])('rejects %s', (_what, text, message) => rejects(text, message));
});

describe('notation configuration directories', () => {
  const root = mkdtempSync(join(tmpdir(), 'fastpull-notary-policy-'));
  afterAll(() => rmSync(root, { recursive: true, force: true }));
  let n = 0;
  const dir = (policy: string | undefined, file = 'trustpolicy.json') => {
    const d = join(root, String(n++));
    mkdirSync(d);
    if (policy !== undefined) writeFileSync(join(d, file), policy);
    return d;
  };

  it('names the directory when it holds no policy, and the store when a statement names one that is not there', async () => {
    await expect(loadNotaryConfig(dir(undefined))).rejects.toMatchObject({
      code: 'INVALID_ARGUMENT',
      message: expect.stringMatching(/neither trustpolicy.oci.json nor trustpolicy.json/),
    });
    await expect(loadNotaryConfig(dir(doc(statement())))).rejects.toMatchObject({
      code: 'INVALID_ARGUMENT',
      message: expect.stringMatching(/trust store ca:acme: .* is not a directory/),
    });
  });

  it('refuses a store file that is no certificate, and a policy that is a symbolic link', async () => {
    const d = dir(doc(statement()), 'trustpolicy.oci.json');
    mkdirSync(join(d, 'truststore', 'x509', 'ca', 'acme'), { recursive: true });
    writeFileSync(join(d, 'truststore', 'x509', 'ca', 'acme', 'root.pem'), 'not a certificate');
    await expect(loadNotaryConfig(d)).rejects.toMatchObject({
      code: 'INVALID_ARGUMENT',
      message: expect.stringMatching(/root.pem is not a PEM or DER certificate/),
    });
    const linked = dir(undefined);
    symlinkSync(join(d, 'trustpolicy.oci.json'), join(linked, 'trustpolicy.json'));
    await expect(loadNotaryConfig(linked)).rejects.toMatchObject({ code: 'INVALID_ARGUMENT', message: expect.stringMatching(/not a regular file/) });
  });
});
