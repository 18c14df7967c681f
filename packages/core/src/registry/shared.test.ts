// Registry connections shared by clients (RegistryConnections): what a second client saves (no new
// connection, no new token), what it must not share (tokens got with another caller's credentials),
// and the bound on the tokens one caller can make a long-lived puller keep.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildImage, startLoopbackRegistry, type LoopbackRegistry } from '../testing/index.js';
import { parseReference } from '../oci/reference.js';
import { MAX_CACHED_AUTHORIZATIONS, type CredentialsProvider } from './auth.js';
import { RegistryClient } from './client.js';
import { RegistryConnections } from './shared.js';

describe('shared registry connections', () => {
  let registry: LoopbackRegistry;
  const user: CredentialsProvider = () => ({ username: 'u', password: 'p' });

  beforeAll(async () => {
    registry = await startLoopbackRegistry({ auth: { type: 'bearer', username: 'u', password: 'p' } });
    const image = await buildImage({ layers: [[{ type: 'file', path: 'a.txt', content: 'a' }]] });
    registry.addImage('app', 'a', image);
    registry.addImage('app', 'b', image);
    registry.addImage('other', 'a', image);
  });
  afterAll(async () => {
    await registry?.close();
  });

  const resolve = (client: RegistryClient, ref: string) => client.resolve(parseReference(`${registry.host}/${ref}`));

  it('a second client on the same connections and credentials opens no connection and asks for no token', async () => {
    const shared = new RegistryConnections();
    try {
      const first = new RegistryClient({ connections: shared, credentials: user });
      await resolve(first, 'app:a');
      await first.close();
      const { connections, tokensIssued } = registry.stats;
      expect(tokensIssued).toBeGreaterThan(0);
      const second = new RegistryClient({ connections: shared, credentials: user });
      await resolve(second, 'app:b');
      await second.close();
      expect(registry.stats.tokensIssued).toBe(tokensIssued);
      expect(registry.stats.connections).toBe(connections);
    } finally {
      await shared.close();
    }
  });

  it('control: clients of their own each connect and ask for a token', async () => {
    const before = registry.stats.tokensIssued;
    const connections = registry.stats.connections;
    for (const tag of ['a', 'b']) {
      const own = new RegistryClient({ credentials: user });
      await resolve(own, `app:${tag}`);
      await own.close();
    }
    expect(registry.stats.tokensIssued).toBe(before + 2);
    expect(registry.stats.connections).toBeGreaterThanOrEqual(connections + 2);
  });

  it('a client with credentials of its own neither uses nor leaves behind the others tokens', async () => {
    const shared = new RegistryConnections();
    try {
      const service = new RegistryClient({ connections: shared, credentials: user });
      await resolve(service, 'app:a');
      const after = registry.stats.tokensIssued;
      // Same user and password, another provider: another caller, who gets a token of its own.
      const caller: CredentialsProvider = () => ({ username: 'u', password: 'p' });
      const theirs = new RegistryClient({ connections: shared, credentials: caller });
      await resolve(theirs, 'app:b');
      expect(registry.stats.tokensIssued).toBe(after + 1);
      // Anonymous callers are a caller of their own too: the token endpoint refuses them here.
      const anonymous = new RegistryClient({ connections: shared });
      await expect(resolve(anonymous, 'app:a')).rejects.toMatchObject({ code: 'UNAUTHORIZED' });
      // The service's token is still its own and still there.
      await resolve(service, 'app:b');
      expect(registry.stats.tokensIssued).toBe(after + 1);
      await Promise.all([service.close(), theirs.close(), anonymous.close()]);
    } finally {
      await shared.close();
    }
  });

  it('closing a client leaves the shared connections usable; closing them ends the clients', async () => {
    const shared = new RegistryConnections();
    const a = new RegistryClient({ connections: shared, credentials: user });
    await resolve(a, 'other:a');
    await a.close();
    const b = new RegistryClient({ connections: shared, credentials: user });
    await resolve(b, 'other:a');
    await shared.close();
    await expect(resolve(b, 'app:a')).rejects.toThrow();
  });

  it('takes shared connections or a dispatcher, not both', async () => {
    const shared = new RegistryConnections();
    try {
      expect(() => new RegistryClient({ connections: shared, dispatcher: shared.pool as never })).toThrow(
        expect.objectContaining({ code: 'INVALID_ARGUMENT' }),
      );
    } finally {
      await shared.close();
    }
  });

  it(`keeps at most ${MAX_CACHED_AUTHORIZATIONS} tokens, the newest among them`, async () => {
    const shared = new RegistryConnections();
    try {
      const auth = shared.authorizer(user);
      const origin = registry.url;
      const challenge = `Bearer realm="${registry.url}/token",service="fastpull-test"`;
      const count = MAX_CACHED_AUTHORIZATIONS + 20;
      for (let i = 0; i < count; i++) expect(await auth.challenge(registry.host, origin, `repository:r${i}:pull`, challenge)).toBe(true);
      expect(auth.cachedTokens).toBe(MAX_CACHED_AUTHORIZATIONS);
      expect(await auth.header(registry.host, origin, `repository:r${count - 1}:pull`)).toMatch(/^Bearer /);
      expect(await auth.header(registry.host, origin, 'repository:r0:pull')).toBeUndefined();
    } finally {
      await shared.close();
    }
  });
});
