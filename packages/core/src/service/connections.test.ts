// LocalService as a long-lived puller (what fastpulld runs): its pulls share registry connections
// and, for the service's own credentials, tokens; a pull with credentials of its own keeps its
// tokens to itself.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sampleImage, startLoopbackRegistry, type LoopbackRegistry } from '../testing/index.js';
import type { CredentialsProvider } from '../registry/auth.js';
import { LocalService } from './local.js';

describe('LocalService keeps registry connections and tokens between pulls', () => {
  let registry: LoopbackRegistry;
  let dir = '';
  const user: CredentialsProvider = () => ({ username: 'u', password: 'p' });

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'fastpull-service-connections-'));
    registry = await startLoopbackRegistry({ auth: { type: 'bearer', username: 'u', password: 'p' } });
    // One layer each: every pull makes its requests one after another, so the connections the
    // first opened are all a second needs.
    registry.addImage('app', 'a', await sampleImage(81, { layers: 1 }));
    registry.addImage('app', 'b', await sampleImage(82, { layers: 1 }));
    registry.addImage('app', 'c', await sampleImage(83, { layers: 1 }));
  });
  afterAll(async () => {
    await registry?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('a second pull of the repository connects no more and asks for no token; one with its own credentials does', async () => {
    const service = new LocalService({ root: join(dir, 'root'), credentials: user, env: {} });
    try {
      await service.pull(`${registry.host}/app:a`);
      const { connections, tokensIssued } = registry.stats;
      expect(tokensIssued).toBeGreaterThan(0);

      await service.pull(`${registry.host}/app:b`);
      expect(registry.stats.tokensIssued).toBe(tokensIssued);
      expect(registry.stats.connections).toBe(connections);

      // A caller's own credentials: a token of its own, and none left for the service's pulls.
      await service.pull(`${registry.host}/app:c`, { credentials: { username: 'u', password: 'p' } });
      expect(registry.stats.tokensIssued).toBe(tokensIssued + 1);
      await service.pull(`${registry.host}/app:a`);
      expect(registry.stats.tokensIssued).toBe(tokensIssued + 1);
    } finally {
      await service.close();
    }
  });
});
